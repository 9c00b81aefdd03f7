//! Key shaping by a site's cache rule ([`KeyShape`]): which query parameters count, in
//! which order, and whether the port does.

use super::push_percent_normalised;
use crate::config::rules::KeyShape;

/// Removes the port from the normalised authority that ends `text`, after its scheme
/// prefix of `prefix_len` bytes (an IPv6 literal's colons are inside its brackets, so
/// only a colon after the host counts).
pub(super) fn strip_port(text: &mut String, prefix_len: usize) {
    let authority = &text[prefix_len..];
    let host_end = authority.rfind(']').map_or(0, |bracket| bracket + 1);
    if let Some(colon) = authority[host_end..].find(':') {
        text.truncate(prefix_len + host_end + colon);
    }
}

/// Appends `query` as `shape` says: percent-normalised, without the parameters it
/// leaves out, sorted when asked; nothing at all (not even the `?`) when no parameter
/// is left, so `/a?utm_source=x` with that parameter dropped shares `/a`'s key.
pub(super) fn push_query(out: &mut String, query: &str, shape: &KeyShape) {
    let mut normalised = String::with_capacity(query.len());
    push_percent_normalised(&mut normalised, query);
    let mut params: Vec<&str> = normalised
        .split('&')
        .filter(|param| shape.query.keeps(param_name(param)))
        .collect();
    if shape.sort_query {
        // By name, then by the whole parameter: a stable order whatever the client sent.
        params.sort_unstable_by(|a, b| param_name(a).cmp(param_name(b)).then_with(|| a.cmp(b)));
    }
    if params.is_empty() {
        return;
    }
    out.push('?');
    out.push_str(&params.join("&"));
}

/// The name of a query parameter: what comes before its `=`, or all of it.
fn param_name(param: &str) -> &str {
    param.split_once('=').map_or(param, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rules::QueryParams;
    use crate::key::{CacheKey, ClientScheme};

    fn shaped_text(uri: &str, host: &str, shape: &KeyShape) -> String {
        let (parts, ()) = http::Request::builder()
            .uri(uri)
            .header("host", host)
            .body(())
            .expect("test request")
            .into_parts();
        let key = CacheKey::shaped(&parts, ClientScheme::Http, Some(shape)).expect("valid key");
        key.as_str().to_owned()
    }

    #[test]
    fn a_shape_drops_keeps_and_sorts_query_parameters() {
        let drop = KeyShape {
            query: QueryParams::Drop(vec!["utm_source".to_owned(), "ref".to_owned()]),
            ..KeyShape::default()
        };
        assert_eq!(
            shaped_text("/a?b=1&utm_source=x&ref&a=%7e", "h", &drop),
            "http://h/a?b=1&a=~"
        );
        assert_eq!(shaped_text("/a?utm_source=x", "h", &drop), "http://h/a");
        let keep = KeyShape {
            query: QueryParams::Keep(vec!["id".to_owned()]),
            sort_query: true,
            ..KeyShape::default()
        };
        assert_eq!(
            shaped_text("/a?z=1&id=2&id=1&x", "h", &keep),
            "http://h/a?id=1&id=2"
        );
        let sort = KeyShape {
            sort_query: true,
            ..KeyShape::default()
        };
        assert_eq!(
            shaped_text("/a?b=2&a=1&a", "h", &sort),
            "http://h/a?a&a=1&b=2"
        );
    }

    #[test]
    fn a_shape_may_leave_the_port_out() {
        let shape = KeyShape {
            ignore_port: true,
            ..KeyShape::default()
        };
        assert_eq!(
            shaped_text("/a", "Example.com:8080", &shape),
            "http://example.com/a"
        );
        assert_eq!(shaped_text("/a?q", "h:81", &shape), "http://h/a?q");
        assert_eq!(shaped_text("/a", "[::1]:8080", &shape), "http://[::1]/a");
        assert_eq!(shaped_text("/a", "[::1]", &shape), "http://[::1]/a");
        // Without a shape the port stays, and an unshaped query is kept as sent.
        let none = KeyShape::default();
        assert_eq!(shaped_text("/a?b&a", "h:81", &none), "http://h:81/a?b&a");
    }
}
