//! RFC 9111 decisions: may a response be stored, and is a stored one still fresh?
//!
//! The rules themselves come from `http-cache-semantics` in shared-cache mode; this
//! module adds what that crate leaves to its caller (ARCHITECTURE.md, "Known traps"):
//! - only GET responses are stored (it calls HEAD and some POST responses storable,
//!   and a HEAD fill would blank the stored body);
//! - only a *positive* freshness lifetime is stored (it calls `Set-Cookie` and
//!   `no-cache` responses storable with a zero lifetime);
//! - the policy's request is built from the normalised cache key, never from the raw
//!   request: `before_request` compares the full URI and the `Host` header, and the
//!   HTTP/1.1 and HTTP/2 forms of one request differ in both;
//! - no request header is ever handed to the store, so credentials never reach disk.
//!
//! Not handled yet, and therefore never stored: responses with `Vary` (variants need
//! their own entries) and partial (206) responses.

use std::time::SystemTime;

use http::header::{CACHE_CONTROL, HOST, SET_COOKIE, VARY};
use http::{HeaderValue, Method, StatusCode, request, response};
use http_cache_semantics::{BeforeRequest, CacheOptions, CachePolicy};

use crate::key::CacheKey;
use crate::store::entry::EntryMeta;

/// Why a response is not written to disk; `as_str` is the `Cache-Status` `detail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStored {
    /// The request was not a GET (HEAD responses have no body to store).
    Method,
    /// `Cache-Control: no-store`.
    NoStore,
    /// `Cache-Control: private` (this is a shared cache).
    Private,
    /// The response sets a cookie: it is meant for one client.
    SetCookie,
    /// The response names `Vary`; variants are not stored yet.
    Vary,
    /// A partial (206) response is not the whole object.
    Partial,
    /// The request asked for a range; the answer is partial or passed through.
    Range,
    /// Not storable under RFC 9111 for another reason (status, directives).
    NotCacheable,
    /// Storable, but its freshness lifetime is zero: it would be stale on arrival.
    NoLifetime,
    /// The body has no length framing: a cut connection would look complete.
    NoLength,
    /// Larger than `cache.max_object_size`.
    TooLarge,
}

impl NotStored {
    /// The `Cache-Status` `detail` token and access-log word.
    pub fn as_str(self) -> &'static str {
        match self {
            NotStored::Method => "method",
            NotStored::NoStore => "no-store",
            NotStored::Private => "private",
            NotStored::SetCookie => "set-cookie",
            NotStored::Vary => "vary",
            NotStored::Partial => "partial",
            NotStored::Range => "range",
            NotStored::NotCacheable => "not-cacheable",
            NotStored::NoLifetime => "no-lifetime",
            NotStored::NoLength => "no-length",
            NotStored::TooLarge => "too-large",
        }
    }
}

/// Whether a stored entry may be served as it is.
pub enum Freshness {
    /// Fresh: serve it with these response headers (hop-by-hop removed, `Age` set).
    Fresh(response::Parts),
    /// Stale: fetch it again.
    Stale,
}

/// Options for `http-cache-semantics`: a shared cache, defaults otherwise.
fn cache_options() -> CacheOptions {
    CacheOptions {
        shared: true,
        ..CacheOptions::default()
    }
}

/// The request the policy sees: a GET of the key's path with the key's host, nothing else.
fn policy_request(key: &CacheKey) -> request::Parts {
    let mut parts = http::Request::new(()).into_parts().0;
    parts.method = Method::GET;
    // A key's path and query passed http's URI parser when the request arrived, and
    // normalisation only decodes unreserved characters, so this cannot fail in practice;
    // if it did, "/" only makes the policy's URI comparison fail, i.e. a miss.
    parts.uri = key
        .path_and_query()
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    if let Ok(host) = HeaderValue::from_str(key.authority()) {
        parts.headers.insert(HOST, host);
    }
    parts
}

/// Decides whether `response`, the origin's answer to a GET of `key`, may be stored.
pub fn storability(
    key: &CacheKey,
    response: &response::Parts,
    response_time: SystemTime,
) -> Result<(), NotStored> {
    if response.status == StatusCode::PARTIAL_CONTENT {
        return Err(NotStored::Partial);
    }
    if response.headers.contains_key(SET_COOKIE) {
        return Err(NotStored::SetCookie);
    }
    if response.headers.contains_key(VARY) {
        return Err(NotStored::Vary);
    }
    let directives = cache_control_directives(response);
    if directives.iter().any(|d| d == "no-store") {
        return Err(NotStored::NoStore);
    }
    if directives.iter().any(|d| d == "private") {
        return Err(NotStored::Private);
    }
    let policy = CachePolicy::new_options(
        &policy_request(key),
        response,
        response_time,
        cache_options(),
    );
    if !policy.is_storable() {
        return Err(NotStored::NotCacheable);
    }
    if policy.time_to_live(response_time).is_zero() {
        return Err(NotStored::NoLifetime);
    }
    Ok(())
}

/// Decides whether the entry stored for `key` may be served at `now`.
pub fn freshness(key: &CacheKey, meta: &EntryMeta, now: SystemTime) -> Freshness {
    let mut stored = http::Response::new(()).into_parts().0;
    stored.status = meta.status;
    stored.headers = meta.response_headers.clone();
    let request = policy_request(key);
    let policy = CachePolicy::new_options(&request, &stored, meta.response_time, cache_options());
    match policy.before_request(&request, now) {
        BeforeRequest::Fresh(parts) => Freshness::Fresh(parts),
        BeforeRequest::Stale { .. } => Freshness::Stale,
    }
}

/// The lower-cased directive names of every `Cache-Control` field of `response`.
fn cache_control_directives(response: &response::Parts) -> Vec<String> {
    response
        .headers
        .get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|directive| {
            directive
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key() -> CacheKey {
        let (parts, ()) = http::Request::builder()
            .uri("/obj?x=1")
            .header("host", "example.com")
            .body(())
            .expect("test request")
            .into_parts();
        CacheKey::from_request(&parts).expect("valid key")
    }

    fn response(status: u16, headers: &[(&str, &str)]) -> response::Parts {
        let mut builder = http::Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("test response").into_parts().0
    }

    fn meta(headers: &[(&str, &str)], response_time: SystemTime) -> EntryMeta {
        let parts = response(200, headers);
        EntryMeta {
            request_time: response_time,
            response_time,
            status: parts.status,
            response_headers: parts.headers,
            request_headers: http::HeaderMap::new(),
        }
    }

    #[test]
    fn positive_lifetime_is_storable() {
        let now = SystemTime::now();
        assert_eq!(
            storability(
                &key(),
                &response(200, &[("cache-control", "max-age=60")]),
                now
            ),
            Ok(())
        );
    }

    #[test]
    fn each_refusal_names_its_reason() {
        let now = SystemTime::now();
        type Case = (u16, &'static [(&'static str, &'static str)], NotStored);
        let cases: [Case; 8] = [
            (
                200,
                &[("cache-control", "no-store, max-age=60")],
                NotStored::NoStore,
            ),
            (
                200,
                &[("cache-control", "private, max-age=60")],
                NotStored::Private,
            ),
            (
                200,
                &[("cache-control", "max-age=60"), ("set-cookie", "a=b")],
                NotStored::SetCookie,
            ),
            (
                200,
                &[("cache-control", "max-age=60"), ("vary", "accept")],
                NotStored::Vary,
            ),
            (206, &[("cache-control", "max-age=60")], NotStored::Partial),
            (
                200,
                &[("cache-control", "no-cache, max-age=60")],
                NotStored::NoLifetime,
            ),
            (
                200,
                &[("cache-control", "max-age=0")],
                NotStored::NoLifetime,
            ),
            (500, &[], NotStored::NotCacheable),
        ];
        for (status, headers, expected) in cases {
            assert_eq!(
                storability(&key(), &response(status, headers), now),
                Err(expected),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn stored_entry_is_fresh_then_stale_with_age() {
        let stored_at = SystemTime::now();
        let entry = meta(&[("cache-control", "max-age=100")], stored_at);
        match freshness(&key(), &entry, stored_at + Duration::from_secs(30)) {
            Freshness::Fresh(parts) => assert_eq!(
                parts.headers.get("age").map(|v| v.as_bytes()),
                Some(&b"30"[..])
            ),
            Freshness::Stale => panic!("entry should be fresh after 30s of 100s"),
        }
        assert!(matches!(
            freshness(&key(), &entry, stored_at + Duration::from_secs(101)),
            Freshness::Stale
        ));
    }
}
