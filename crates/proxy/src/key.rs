//! Cache keys: which requests share a stored response.
//!
//! A key is the normalised effective request URI — `http://host[:port]/path?query`, or
//! `https://` for a request that came over the TLS listener ([`ClientScheme`]) — built
//! from the scheme, the authority (URI authority for HTTP/2 and absolute-form
//! requests, the `Host` header otherwise), the path and the query. The host is
//! always part of the key, so two virtual hosts behind one origin never share
//! objects. GET and HEAD share a key; the proxy never builds keys for other
//! methods.
//!
//! Normalisation follows RFC 3986 §6.2.2 (syntax-based): host lower-cased with a
//! trailing dot and the scheme's default port (80 or 443) removed, percent-escapes of unreserved
//! characters decoded, remaining escapes upper-cased, dot segments removed, an
//! empty path made `/`. The query keeps its order (origins may depend on it) but
//! gets the same percent normalisation. [`normalise_target`] rewrites a request into
//! that normal form before anything else sees it, so the origin is asked for exactly
//! what the key names.
//!
//! A site's cache rule may shape the key further ([`KeyShape`]): drop or keep listed
//! query parameters, sort them, or leave the port out. Without a shape the key is built
//! as above, with no allocation beyond the key string itself.
//!
//! The key string is hashed once, unkeyed, with xxh3-128 ([`Store::key_hash`]):
//! that hash names the entry on disk forever. The admission filter hashes the
//! same string with its own secret seed (see `admission`).

use std::fmt;

use http::request::Parts;
use http::uri::Authority;

use crate::store::{Store, StoreHash};

mod shape;

pub(crate) use crate::config::rules::KeyShape;
use shape::{push_query, strip_port};

/// Why no cache key could be built for a request (the proxy answers 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyError {
    /// Neither the request URI nor a `Host` header names a host.
    #[error("the request names no host (no Host header and no authority in the URI)")]
    MissingHost,
    /// The host named by the request is not a valid URI authority.
    #[error("the request's host is not a valid authority: {0:?}")]
    InvalidHost(String),
    /// The request target's normal form is not a valid target (it cannot be forwarded).
    #[error("the request target cannot be normalised: {0:?}")]
    InvalidTarget(String),
}

/// The scheme a client used: which listener its connection came in on.
///
/// It starts the cache key, so a URL fetched over TLS and the same URL in cleartext are
/// two objects (as in every shared cache: an origin may answer them differently), and it
/// is the `X-Forwarded-Proto` the origin gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ClientScheme {
    /// The plain listener (`server.listen`).
    Http,
    /// The TLS listener (`server.tls.listen`).
    Https,
}

impl ClientScheme {
    /// `"http"` or `"https"`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ClientScheme::Http => "http",
            ClientScheme::Https => "https",
        }
    }

    /// What a key of this scheme starts with: `"http://"` or `"https://"`.
    fn prefix(self) -> &'static str {
        match self {
            ClientScheme::Http => "http://",
            ClientScheme::Https => "https://",
        }
    }

    /// The port an authority of this scheme may leave out (RFC 9110 §4.2).
    pub(crate) fn default_port(self) -> u16 {
        match self {
            ClientScheme::Http => 80,
            ClientScheme::Https => 443,
        }
    }

    /// The scheme named `name` (case-insensitive), if it is one of the two.
    pub(crate) fn from_name(name: &str) -> Option<ClientScheme> {
        [ClientScheme::Http, ClientScheme::Https]
            .into_iter()
            .find(|scheme| name.eq_ignore_ascii_case(scheme.as_str()))
    }
}

/// A normalised cache key and its stable store hash.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct CacheKey {
    /// `http://authority/path?query` (or `https://`), normalised.
    text: String,
    /// The scheme the key starts with.
    scheme: ClientScheme,
    /// Byte offset in `text` where the path starts (just after the authority).
    path_start: usize,
    /// Unkeyed xxh3-128 of `text`: the entry's name in the store.
    store_hash: StoreHash,
}

impl CacheKey {
    /// Builds the key of a request from its head, received over `scheme`.
    pub(crate) fn from_request(parts: &Parts, scheme: ClientScheme) -> Result<CacheKey, KeyError> {
        CacheKey::shaped(parts, scheme, None)
    }

    /// Builds the key of a request from its head, received over `scheme`, shaped by a
    /// cache rule when one applies.
    pub(crate) fn shaped(
        parts: &Parts,
        scheme: ClientScheme,
        shape: Option<&KeyShape>,
    ) -> Result<CacheKey, KeyError> {
        let raw_authority = match parts.uri.authority() {
            Some(authority) => authority.as_str(),
            None => {
                let host = crate::fields::first(&parts.headers, &http::header::HOST)
                    .ok_or(KeyError::MissingHost)?;
                host.to_str().map_err(|_| {
                    KeyError::InvalidHost(String::from_utf8_lossy(host.as_bytes()).into_owned())
                })?
            }
        };
        let prefix = scheme.prefix();
        let mut text = String::with_capacity(prefix.len() + raw_authority.len() + 64);
        text.push_str(prefix);
        let default_port = scheme.default_port();
        if is_normal_authority(raw_authority, default_port) {
            text.push_str(raw_authority);
        } else {
            text.push_str(&normalise_authority(raw_authority, default_port)?);
        }
        if shape.is_some_and(|shape| shape.ignore_port) {
            strip_port(&mut text, prefix.len());
        }
        let path_start = text.len();
        push_normalised_path(&mut text, parts.uri.path());
        match (parts.uri.query(), shape) {
            (None, _) => {}
            (Some(query), Some(shape)) if shape.shapes_query() => {
                push_query(&mut text, query, shape);
            }
            (Some(query), _) => {
                text.push('?');
                push_percent_normalised(&mut text, query);
            }
        }
        let store_hash = Store::key_hash(&text);
        Ok(CacheKey {
            text,
            scheme,
            path_start,
            store_hash,
        })
    }

    /// The scheme the key starts with.
    pub(crate) fn scheme(&self) -> ClientScheme {
        self.scheme
    }

    /// The whole key string.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The normalised authority (`host` or `host:port`).
    pub(crate) fn authority(&self) -> &str {
        &self.text[self.scheme.prefix().len()..self.path_start]
    }

    /// The key of one stored variant of this URL (RFC 9111 §4.1, see `policy::vary`):
    /// this key, the nonce of the URL's current variant set and the request's selector.
    /// A new nonce (after an invalidation, or a change of the `Vary` fields) makes
    /// every older variant unreachable at once; they then leave by eviction.
    pub(crate) fn variant(&self, nonce: u64, selector: u128) -> CacheKey {
        let text = format!("{} vary={nonce:016x}-{selector:032x}", self.text);
        CacheKey {
            store_hash: Store::key_hash(&text),
            scheme: self.scheme,
            path_start: self.path_start,
            text,
        }
    }

    /// The unkeyed xxh3-128 of the key string that names the entry in the store.
    pub(crate) fn store_hash(&self) -> StoreHash {
        self.store_hash
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CacheKey").field(&self.text).finish()
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Rewrites a request's target and host into the normal form its cache key is built
/// from, so that what is forwarded to the origin is what is keyed: a response fetched
/// for `/evil/../app.js` or `Host: localhost.` is stored under the key of `/app.js` and
/// `localhost`, so the origin must be asked for exactly that, or one client could poison
/// another's URL. Returns the target as the client sent it when it changed (for the
/// access log), `None` when the request was already normal (the usual case: checked
/// without allocating). A site rule's key shape (dropped query parameters, an ignored
/// port) is an operator's choice and is not applied here.
pub(crate) fn normalise_target(
    parts: &mut Parts,
    scheme: ClientScheme,
) -> Result<Option<http::Uri>, KeyError> {
    let default_port = scheme.default_port();
    normalise_host(parts, default_port)?;
    // The authority's normal form, when it differs: the quick check only says it may.
    let normal_authority = match parts.uri.authority().map(Authority::as_str) {
        Some(raw) if !is_normal_authority(raw, default_port) => {
            let normal = normalise_authority(raw, default_port)?;
            (normal != raw).then_some(normal)
        }
        _ => None,
    };
    let authority_is_normal = normal_authority.is_none();
    let query_is_normal = parts.uri.query().is_none_or(|query| !query.contains('%'));
    // `path()` reads an empty path (`http://h?q`, absolute form) as `/`; the target sent
    // on must have it too.
    let sent_target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let path_is_normal = sent_target.starts_with('/') && is_normal_path(parts.uri.path());
    if authority_is_normal && query_is_normal && path_is_normal {
        return Ok(None);
    }
    let mut target = String::with_capacity(parts.uri.path().len() + 16);
    push_normalised_path(&mut target, parts.uri.path());
    if let Some(query) = parts.uri.query() {
        target.push('?');
        push_percent_normalised(&mut target, query);
    }
    // A malformed escape (`%zz`) fails the quick check but is kept as it is.
    if authority_is_normal && target == sent_target {
        return Ok(None);
    }
    let mut uri = http::uri::Parts::from(parts.uri.clone());
    if let Some(normal) = normal_authority {
        uri.authority = Some(normal.parse().map_err(|_| KeyError::InvalidHost(normal))?);
    }
    // The normal form only removes and decodes what was already a valid target.
    uri.path_and_query = Some(
        target
            .parse()
            .map_err(|_| KeyError::InvalidTarget(target.clone()))?,
    );
    let uri =
        http::Uri::from_parts(uri).map_err(|_| KeyError::InvalidTarget(parts.uri.to_string()))?;
    Ok(Some(std::mem::replace(&mut parts.uri, uri)))
}

/// Rewrites `Host` into its normal form. When the target names an authority, `Host` becomes
/// that authority's normal form: the key is built from it (the target's authority wins,
/// RFC 9112 §3.2.2), and a `Host` the check let through as the same (`h:443` beside
/// `https://h`) may still differ in the port this listener's scheme leaves out.
fn normalise_host(parts: &mut Parts, default_port: u16) -> Result<(), KeyError> {
    let Some(host) = crate::fields::first(&parts.headers, &http::header::HOST) else {
        return Ok(());
    };
    let text = match parts.uri.authority() {
        Some(authority) => authority.as_str(),
        None => host.to_str().map_err(|_| {
            KeyError::InvalidHost(String::from_utf8_lossy(host.as_bytes()).into_owned())
        })?,
    };
    if is_normal_authority(text, default_port) && host.as_bytes() == text.as_bytes() {
        return Ok(());
    }
    let normal = normalise_authority(text, default_port)?;
    let value =
        http::HeaderValue::from_str(&normal).map_err(|_| KeyError::InvalidHost(normal.clone()))?;
    parts.headers.insert(http::header::HOST, value);
    Ok(())
}

/// True when `raw` is already what [`normalise_authority`] makes of it, which the common
/// `Host` is: a lower-case name or IPv4 address (`[a-z0-9.-]`, not ending in '.') with no
/// port, or a port written canonically (no leading zero) other than `default_port`.
/// Checked without parsing or allocating, because every request builds a key; anything
/// else takes the general path.
pub(crate) fn is_normal_authority(raw: &str, default_port: u16) -> bool {
    // One pass over the bytes: this runs several times for every request.
    let bytes = raw.as_bytes();
    let host_len = (bytes.iter())
        .position(|&b| !NORMAL_HOST_BYTE[usize::from(b)])
        .unwrap_or(bytes.len());
    let (host, rest) = bytes.split_at(host_len);
    if host.last().is_none_or(|&b| b == b'.') {
        return false;
    }
    match rest.split_first() {
        None => true,
        Some((b':', port)) => is_normal_port(port, default_port),
        Some(_) => false,
    }
}

/// True when `digits` is a port written canonically (a decimal `u16` with no leading
/// zero) other than `default_port`.
fn is_normal_port(digits: &[u8], default_port: u16) -> bool {
    if digits.is_empty() || digits.len() > 5 || digits[0] == b'0' {
        return false;
    }
    let mut port = 0u32;
    for &b in digits {
        if !b.is_ascii_digit() {
            return false;
        }
        port = port * 10 + u32::from(b - b'0');
    }
    u16::try_from(port).is_ok_and(|port| port != default_port)
}

/// The bytes of a normal host, `[a-z0-9.-]`, by value: one load a byte, for every
/// request's `Host` is checked (several times).
static NORMAL_HOST_BYTE: [bool; 256] = {
    let mut normal = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        normal[b] = c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.';
        b += 1;
    }
    normal
};

/// Lower-cases the host, drops a trailing dot and the scheme's `default_port`.
fn normalise_authority(raw: &str, default_port: u16) -> Result<String, KeyError> {
    let invalid = || KeyError::InvalidHost(raw.to_owned());
    let authority: Authority = raw.parse().map_err(|_| invalid())?;
    // Userinfo has no place in a Host header and would split one object into many keys.
    if raw.contains('@') || authority.host().is_empty() {
        return Err(invalid());
    }
    let host = authority.host().trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() {
        return Err(invalid());
    }
    Ok(match authority.port_u16() {
        Some(port) if port != default_port => format!("{host}:{port}"),
        _ => host,
    })
}

/// Appends `path` with percent normalisation and dot segments removed (RFC 3986 §5.2.4).
fn push_normalised_path(out: &mut String, path: &str) {
    if is_normal_path(path) {
        out.push_str(path);
    } else {
        push_path_normalising(out, path);
    }
}

/// True when `path` has neither escapes nor dot segments (which can only follow a '/'):
/// the common path is its own normal form, appended without decoding or splitting it.
fn is_normal_path(path: &str) -> bool {
    // Bytes, not a substring search: its set-up costs more than a short path's scan.
    let bytes = path.as_bytes();
    bytes.first() == Some(&b'/')
        && !bytes.contains(&b'%')
        && !bytes.windows(2).any(|pair| pair == b"/.")
}

/// [`push_normalised_path`]'s general case.
fn push_path_normalising(out: &mut String, path: &str) {
    let mut decoded = String::with_capacity(path.len() + 1);
    push_percent_normalised(&mut decoded, path);
    let mut segments: Vec<&str> = Vec::new();
    let mut rest = decoded.strip_prefix('/').unwrap_or(&decoded);
    // A trailing "." or ".." means the path ends in '/'; set by every pass of the loop.
    let mut ends_with_slash;
    loop {
        let (segment, next) = match rest.find('/') {
            Some(slash) => (&rest[..slash], Some(&rest[slash + 1..])),
            None => (rest, None),
        };
        match segment {
            "." => ends_with_slash = next.is_none(),
            ".." => {
                segments.pop();
                ends_with_slash = next.is_none();
            }
            _ => {
                segments.push(segment);
                ends_with_slash = false;
            }
        }
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    out.push('/');
    out.push_str(&segments.join("/"));
    if ends_with_slash && !segments.is_empty() {
        out.push('/');
    }
}

/// Appends `text`, decoding percent-escapes of unreserved characters and upper-casing the hex
/// digits of the others. A malformed escape is kept as it is (the origin decides what it means).
fn push_percent_normalised(out: &mut String, text: &str) {
    // Without escapes there is nothing to normalise.
    if !text.contains('%') {
        out.push_str(text);
        return;
    }
    let bytes = text.as_bytes();
    // Text between escapes is copied as it is, a run at a time: a target may carry UTF-8
    // sent raw (hyper accepts it), whose bytes must not be read one by one as characters.
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex_value(bytes[i + 1]), hex_value(bytes[i + 2]))
        {
            // `%` and the hex digits are ASCII: both ends are character boundaries.
            out.push_str(&text[copied..i]);
            let decoded = high << 4 | low;
            if is_unreserved(decoded) && !completes_stray_escape(out, decoded) {
                out.push(char::from(decoded));
            } else {
                out.push('%');
                out.push(char::from(bytes[i + 1].to_ascii_uppercase()));
                out.push(char::from(bytes[i + 2].to_ascii_uppercase()));
            }
            i += 3;
            copied = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
}

/// Whether `decoded`, pushed after `out`, would make a stray `%` before it (one not
/// followed by two hex digits in the request) read as an escape: then the escape stays
/// encoded, so normalising the result again changes nothing.
fn completes_stray_escape(out: &str, decoded: u8) -> bool {
    let tail = out.as_bytes();
    decoded.is_ascii_hexdigit()
        && match tail {
            [.., b'%'] => true,
            [.., b'%', digit] => digit.is_ascii_hexdigit(),
            _ => false,
        }
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// RFC 3986 §2.3 unreserved characters.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The allocation-free check never accepts an authority the general path would change.
        #[test]
        fn a_normal_authority_is_its_own_normal_form(raw in "[a-z0-9.-]{0,8}(:(80|080|0|[0-9]{0,6}))?|[a-zA-Z0-9.:@\\[\\]-]{0,12}") {
            for default_port in [80, 443] {
                if is_normal_authority(&raw, default_port) {
                    prop_assert_eq!(normalise_authority(&raw, default_port).ok(), Some(raw.clone()));
                }
            }
        }

        /// The one-pass check answers as the rule reads: a host of `[a-z0-9.-]` not
        /// ending in '.', then nothing or ':' and a canonical port other than the default.
        #[test]
        fn the_authority_check_is_the_rule_as_written(raw in "[a-z0-9.-]{0,8}(:(80|080|0|65535|65536|99999|[0-9]{0,6}))?|[a-zA-Z0-9.:@\\[\\]-]{0,12}") {
            for default_port in [80, 443] {
                let (host, port) = match raw.split_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (raw.as_str(), None),
                };
                let host_is_normal = !host.is_empty()
                    && !host.ends_with('.')
                    && host.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
                let port_is_normal = port.is_none_or(|port| {
                    !port.starts_with('0')
                        && port.bytes().all(|b| b.is_ascii_digit())
                        && port.parse::<u16>().is_ok_and(|port| port != default_port)
                });
                prop_assert_eq!(is_normal_authority(&raw, default_port), host_is_normal && port_is_normal, "{}", raw);
            }
        }

        /// Likewise for paths: a path the check calls normal comes out of the general
        /// normalisation unchanged.
        #[test]
        fn a_normal_path_is_its_own_normal_form(path in "/[a./%2F]{0,12}|[/a.%2F]{0,12}") {
            if is_normal_path(&path) {
                let mut normalised = String::new();
                push_path_normalising(&mut normalised, &path);
                prop_assert_eq!(normalised, path);
            }
        }
    }

    proptest! {
        /// A request rewritten by `normalise_target` has the key it had before, and is
        /// its own normal form: what is forwarded is what is keyed.
        #[test]
        fn a_normalised_request_keeps_its_key_and_is_normal(
            path in "/[a./%2Ee7]{0,14}(\\?[a=%7e3A]{0,6})?",
            host in "[a-zA-Z.]{1,6}\\.?(:(80|080|0|8080|)?)?",
        ) {
            let request = http::Request::builder().uri(path.as_str()).header("host", host.as_str());
            let Ok(request) = request.body(()) else { return Ok(()) };
            let (mut parts, ()) = request.into_parts();
            let Ok(before) = CacheKey::from_request(&parts, ClientScheme::Http) else { return Ok(()) };
            normalise_target(&mut parts, ClientScheme::Http).expect("a keyed request normalises");
            let after = CacheKey::from_request(&parts, ClientScheme::Http).expect("still keyed");
            prop_assert_eq!(&before, &after);
            let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
            let host = parts.headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("");
            prop_assert_eq!(format!("http://{host}{target}"), after.as_str());
            prop_assert_eq!(normalise_target(&mut parts, ClientScheme::Http), Ok(None));
        }
    }

    fn key(uri: &str, host: Option<&str>) -> Result<CacheKey, KeyError> {
        let mut builder = http::Request::builder().uri(uri);
        if let Some(host) = host {
            builder = builder.header("host", host);
        }
        let (parts, ()) = builder.body(()).expect("test request").into_parts();
        CacheKey::from_request(&parts, ClientScheme::Http)
    }

    fn key_text(uri: &str, host: &str) -> String {
        key(uri, Some(host)).expect("valid key").as_str().to_owned()
    }

    #[test]
    fn a_stray_percent_never_becomes_an_escape() {
        // `%33` is `3`, but decoded after a stray `%e` it would read as `%e3`.
        assert_eq!(key_text("/?%e%33", "a"), "http://a/?%e%33");
        assert_eq!(key_text("/%%341", "a"), "http://a/%%341");
        assert_eq!(key_text("/%g%33", "a"), "http://a/%g3");
        for raw in ["/?%e%33", "/%%341", "/%4%31"] {
            let text = key_text(raw, "a");
            let target = text.trim_start_matches("http://a");
            assert_eq!(key_text(target, "a"), text, "{raw}");
        }
    }

    #[test]
    fn raw_utf_8_keeps_its_bytes_beside_a_normalised_escape() {
        assert_eq!(
            key_text("/caf\u{e9}/%41?k\u{f8}=%7e", "h"),
            "http://h/caf\u{e9}/A?k\u{f8}=~"
        );
    }

    #[test]
    fn an_authority_already_normal_is_no_change_even_beyond_the_quick_check() {
        // `$` is valid in a host but not in the quick check's alphabet.
        let request = http::Request::builder().uri("http://$b.example/x");
        let (mut parts, ()) = request.body(()).expect("test request").into_parts();
        assert_eq!(normalise_target(&mut parts, ClientScheme::Http), Ok(None));
        assert_eq!(parts.uri, "http://$b.example/x");
    }

    #[test]
    fn host_is_lowercased_and_default_port_dropped() {
        assert_eq!(key_text("/a", "Example.COM:80"), "http://example.com/a");
        assert_eq!(key_text("/a", "example.com."), "http://example.com/a");
        assert_eq!(
            key_text("/a", "example.com:8080"),
            "http://example.com:8080/a"
        );
    }

    #[test]
    fn an_https_key_drops_port_443_keeps_80_and_differs_from_the_http_key() {
        let https = |host: &str| {
            let request = http::Request::builder().uri("/a").header("host", host);
            let (parts, ()) = request.body(()).expect("test request").into_parts();
            CacheKey::from_request(&parts, ClientScheme::Https).expect("valid key")
        };
        assert_eq!(https("Example.com:443").as_str(), "https://example.com/a");
        assert_eq!(https("example.com:80").as_str(), "https://example.com:80/a");
        let (secure, plain) = (https("example.com"), key("/a", Some("example.com")));
        let plain = plain.expect("valid key");
        assert_eq!(secure.authority(), plain.authority());
        assert_eq!(secure.scheme(), ClientScheme::Https);
        assert_ne!(secure.store_hash(), plain.store_hash());
    }

    #[test]
    fn uri_authority_wins_over_host_header() {
        assert_eq!(
            key_text("http://b.example/x", "a.example"),
            "http://b.example/x"
        );
    }

    #[test]
    fn missing_or_bad_host_is_an_error() {
        assert_eq!(key("/a", None), Err(KeyError::MissingHost));
        assert!(matches!(
            key("/a", Some("user@host")),
            Err(KeyError::InvalidHost(_))
        ));
        assert!(matches!(
            key("/a", Some("bad host")),
            Err(KeyError::InvalidHost(_))
        ));
    }

    #[test]
    fn percent_escapes_are_normalised() {
        assert_eq!(
            key_text("/%7euser/%41%2f%2F", "h"),
            "http://h/~user/A%2F%2F"
        );
        assert_eq!(key_text("/a?q=%7e%3a", "h"), "http://h/a?q=~%3A");
        // Malformed escapes stay as they were.
        assert_eq!(key_text("/a%zz%4", "h"), "http://h/a%zz%4");
    }

    #[test]
    fn dot_segments_are_removed() {
        assert_eq!(key_text("/a/./b/../c", "h"), "http://h/a/c");
        assert_eq!(key_text("/a/b/..", "h"), "http://h/a/");
        assert_eq!(key_text("/../a", "h"), "http://h/a");
        assert_eq!(key_text("/", "h"), "http://h/");
        assert_eq!(key_text("/a//b/", "h"), "http://h/a//b/");
    }

    #[test]
    fn query_order_is_kept_and_distinguishes_keys() {
        assert_eq!(key_text("/a?b=1&a=2", "h"), "http://h/a?b=1&a=2");
        assert_ne!(key_text("/a?x=1", "h"), key_text("/a?x=2", "h"));
        assert_ne!(key_text("/a?", "h"), key_text("/a", "h"));
    }

    #[test]
    fn parts_and_hash_are_consistent() {
        let k = key("/p/q?r=1", Some("Host.example:81")).expect("valid key");
        assert_eq!(k.authority(), "host.example:81");
        assert_eq!(k.as_str(), "http://host.example:81/p/q?r=1");
        assert_eq!(k.store_hash(), Store::key_hash(k.as_str()));
        let same = key("/p/%71?r=1", Some("host.example:81")).expect("valid key");
        assert_eq!(k, same);
    }
}
