//! `log.access_format` given as a template of nginx-style variables, e.g.
//! `'$remote_addr $host "$request" $status $body_bytes_sent $upstream_addr'`: parsed once
//! at load into literal text and fields, so that the writer thread only fills them in and
//! an unknown variable is an error naming it, never an empty column.

use serde::Serialize;

/// A value a template can show, named as nginx names its variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Field {
    /// `$remote_addr`: the client; behind a proxy in `log.trusted_proxies`, the address
    /// it names in `X-Forwarded-For`.
    RemoteAddr,
    /// `$realip_remote_addr`: the address the connection came from.
    RealipRemoteAddr,
    /// `$host`: the host the client named (`Host`, or HTTP/2's `:authority`), without its port.
    Host,
    /// `$request`: the request line, `GET /path HTTP/1.1`.
    Request,
    /// `$request_method`.
    RequestMethod,
    /// `$request_uri`: the target as the client sent it.
    RequestUri,
    /// `$server_protocol`: `HTTP/1.1`, `HTTP/2.0`.
    ServerProtocol,
    /// `$status`: the response status.
    Status,
    /// `$body_bytes_sent`: body bytes sent to the client.
    BodyBytesSent,
    /// `$request_time`: seconds from the request's arrival to its last byte sent.
    RequestTime,
    /// `$time_local`: `10/Oct/2026:13:55:36 +0000` (always UTC).
    TimeLocal,
    /// `$time_iso8601`: `2026-10-10T13:55:36Z`.
    TimeIso8601,
    /// `$http_referer`.
    HttpReferer,
    /// `$http_user_agent`.
    HttpUserAgent,
    /// `$cache_status`: the `Cache-Status` sent.
    CacheStatus,
    /// `$upstream_addr`: the origin server asked (`host:port` of its URL), `-` when none.
    UpstreamAddr,
    /// `$upstream_status`: the status the origin answered, `-` when none was asked.
    UpstreamStatus,
    /// `$upstream_header_time`: seconds from sending the request to the origin's response
    /// head, `-` when none was asked.
    UpstreamHeaderTime,
}

/// Every variable a template may use.
pub const FIELDS: [(&str, Field); 18] = [
    ("remote_addr", Field::RemoteAddr),
    ("realip_remote_addr", Field::RealipRemoteAddr),
    ("host", Field::Host),
    ("request", Field::Request),
    ("request_method", Field::RequestMethod),
    ("request_uri", Field::RequestUri),
    ("server_protocol", Field::ServerProtocol),
    ("status", Field::Status),
    ("body_bytes_sent", Field::BodyBytesSent),
    ("request_time", Field::RequestTime),
    ("time_local", Field::TimeLocal),
    ("time_iso8601", Field::TimeIso8601),
    ("http_referer", Field::HttpReferer),
    ("http_user_agent", Field::HttpUserAgent),
    ("cache_status", Field::CacheStatus),
    ("upstream_addr", Field::UpstreamAddr),
    ("upstream_status", Field::UpstreamStatus),
    ("upstream_header_time", Field::UpstreamHeaderTime),
];

/// One piece of a template: text written as it is, or a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A variable's value.
    Field(Field),
}

/// Parses a template: `$name` or `${name}` is a variable (the longest run of letters,
/// digits and `_` after `$`), everything else is text. `Err`: why not, naming the variable.
pub fn parse(template: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, next) = match after.strip_prefix('{') {
            Some(braced) => {
                let end = braced
                    .find('}')
                    .ok_or_else(|| format!("\"${{\" without its \"}}\" in {template:?}"))?;
                (&braced[..end], &braced[end + 1..])
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        let field = FIELDS
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, field)| *field)
            .ok_or_else(|| unknown(name))?;
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Field(field));
        rest = next;
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

fn unknown(name: &str) -> String {
    let known: Vec<String> = FIELDS.iter().map(|(n, _)| format!("${n}")).collect();
    format!(
        "unknown variable \"${name}\"; the variables are {}",
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_and_text_are_split_once() {
        let pieces = parse(r#"$remote_addr "${host}x" $status-"#).expect("parses");
        assert_eq!(
            pieces,
            vec![
                Piece::Field(Field::RemoteAddr),
                Piece::Text(" \"".to_owned()),
                Piece::Field(Field::Host),
                Piece::Text("x\" ".to_owned()),
                Piece::Field(Field::Status),
                Piece::Text("-".to_owned()),
            ]
        );
        assert_eq!(
            parse("plain").expect("parses"),
            vec![Piece::Text("plain".to_owned())]
        );
    }

    #[test]
    fn every_listed_variable_parses_and_an_unknown_one_is_named() {
        for (name, field) in FIELDS {
            assert_eq!(parse(&format!("${name}")), Ok(vec![Piece::Field(field)]));
        }
        let error = parse("$remote_addr $upstream_time").expect_err("unknown");
        assert!(error.contains("\"$upstream_time\""), "{error}");
        assert!(parse("${host").is_err());
        assert!(parse("$").is_err(), "a lone $ names no variable");
    }
}
