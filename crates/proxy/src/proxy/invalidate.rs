//! Invalidation after unsafe requests (RFC 9111 §4.4): which stored URLs a response
//! to POST, PUT, DELETE, PATCH or an unknown method makes stale.

use http::header::{CONTENT_LOCATION, HOST, LOCATION};
use http::{HeaderMap, HeaderValue, Method, StatusCode, request};

use crate::key::{CacheKey, ClientScheme, KeyShape};

/// True if `method` is not known to be safe (RFC 9110 §9.2.1): its non-error
/// responses invalidate the target URI.
pub(super) fn is_unsafe(method: &Method) -> bool {
    ![Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method)
}

/// True for the statuses that invalidate: 2xx and 3xx ("non-error", §4.4).
pub(super) fn invalidates(status: StatusCode) -> bool {
    status.is_success() || status.is_redirection()
}

/// The keys to invalidate: the request's target (received over `scheme`), and the
/// `Location` and `Content-Location` of the response when they name the same origin
/// (§4.4: a cache must not invalidate other origins' URLs on one origin's say-so). Each key
/// is shaped as a GET of its path would be: `shape_of` gives the site's key shape for a
/// path.
pub(super) fn targets<'a>(
    request: &request::Parts,
    scheme: ClientScheme,
    response: &HeaderMap,
    shape_of: impl Fn(&str) -> Option<&'a KeyShape>,
) -> Vec<CacheKey> {
    let Ok(target) = CacheKey::shaped(request, scheme, shape_of(request.uri.path())) else {
        return Vec::new();
    };
    let mut keys = Vec::with_capacity(3);
    for name in [LOCATION, CONTENT_LOCATION] {
        let Some(reference) = response.get(name).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        if let Some(key) = same_origin(&target, request.uri.path(), reference, &shape_of) {
            keys.push(key);
        }
    }
    keys.push(target);
    keys
}

/// The key of `reference` (absolute, absolute-path or relative to `base_path`) if it
/// is on the same origin as `target`.
fn same_origin<'a>(
    target: &CacheKey,
    base_path: &str,
    reference: &str,
    shape_of: impl Fn(&str) -> Option<&'a KeyShape>,
) -> Option<CacheKey> {
    let reference = reference.trim();
    let mut parts = http::Request::new(()).into_parts().0;
    let scheme = reference.split_once("://").map(|(scheme, _)| scheme);
    if let Some(scheme) = scheme
        && !scheme.contains('/')
    {
        // Absolute: only the target's own scheme can be the same origin.
        if !scheme.eq_ignore_ascii_case(target.scheme().as_str()) {
            return None;
        }
        parts.uri = reference.parse().ok()?;
    } else {
        let resolved = if let Some(authority_and_path) = reference.strip_prefix("//") {
            // A network-path reference names another authority: make it absolute.
            let scheme = target.scheme().as_str();
            parts.uri = format!("{scheme}://{authority_and_path}").parse().ok()?;
            None
        } else if reference.starts_with('/') {
            Some(reference.to_owned())
        } else {
            // A relative path replaces the last segment of the base (RFC 3986 §5.2.3).
            let directory = &base_path[..base_path.rfind('/').map_or(0, |at| at + 1)];
            Some(format!("{directory}{reference}"))
        };
        if let Some(path) = resolved {
            parts.uri = path.parse().ok()?;
            parts
                .headers
                .insert(HOST, HeaderValue::from_str(target.authority()).ok()?);
        }
    }
    let key = CacheKey::shaped(&parts, target.scheme(), shape_of(parts.uri.path())).ok()?;
    (key.authority() == target.authority()).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target_over(scheme: ClientScheme) -> CacheKey {
        let (parts, ()) = http::Request::builder()
            .uri("/a/b")
            .header("host", "example.com")
            .body(())
            .expect("request")
            .into_parts();
        CacheKey::from_request(&parts, scheme).expect("key")
    }

    fn target() -> CacheKey {
        target_over(ClientScheme::Http)
    }

    #[test]
    fn same_origin_references_resolve_and_others_do_not() {
        let unshaped = |_: &str| None;
        let key = |r| same_origin(&target(), "/a/b", r, unshaped).map(|k| k.as_str().to_owned());
        assert_eq!(key("/c").as_deref(), Some("http://example.com/c"));
        assert_eq!(key("c?x=1").as_deref(), Some("http://example.com/a/c?x=1"));
        assert_eq!(
            key("http://EXAMPLE.com:80/d").as_deref(),
            Some("http://example.com/d")
        );
        assert_eq!(key("http://other.example/d"), None);
        assert_eq!(key("https://example.com/d"), None);
        assert_eq!(
            key("//example.com/e").as_deref(),
            Some("http://example.com/e")
        );
        assert_eq!(key("//elsewhere.example/e"), None);
    }

    #[test]
    fn over_tls_only_https_references_are_the_same_origin() {
        let target = target_over(ClientScheme::Https);
        let unshaped = |_: &str| None;
        let key = |r| same_origin(&target, "/a/b", r, unshaped).map(|k| k.as_str().to_owned());
        assert_eq!(key("/c").as_deref(), Some("https://example.com/c"));
        assert_eq!(
            key("https://example.com:443/d").as_deref(),
            Some("https://example.com/d")
        );
        assert_eq!(key("http://example.com/d"), None);
        assert_eq!(
            key("//example.com/e").as_deref(),
            Some("https://example.com/e")
        );
    }

    #[test]
    fn only_unsafe_methods_with_non_error_statuses_invalidate() {
        assert!(is_unsafe(&Method::POST));
        assert!(is_unsafe(&Method::from_bytes(b"PURGEX").expect("method")));
        assert!(!is_unsafe(&Method::OPTIONS));
        assert!(invalidates(StatusCode::SEE_OTHER));
        assert!(!invalidates(StatusCode::NOT_FOUND));
    }
}
