//! Validation (RFC 9111 §4.3): asking the origin whether a stored response is still
//! good, folding its 304 into the stored headers, and answering a client's own
//! conditional request from a fresh entry (RFC 9110 §13.2.2).

use std::time::SystemTime;

use headers::{ETag, HeaderMapExt, IfModifiedSince, IfNoneMatch};
use http::header::{
    CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, DATE, ETAG, IF_MATCH, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, RANGE, SET_COOKIE,
    TRANSFER_ENCODING,
};
use http::{HeaderMap, HeaderName, HeaderValue, response};

use super::freshness::parse_date;
use crate::fields;
use crate::header_names::{CACHE_STATUS, length_bit, length_mask};
use crate::store::EntryMeta;

/// True if the stored response has a validator the origin can be asked about.
pub(crate) fn has_validator(headers: &HeaderMap) -> bool {
    fields::has(headers, &ETAG) || fields::has(headers, &LAST_MODIFIED)
}

/// Whether `name` is one of the client's fields that would make the origin's answer
/// other than the whole object, which a request for the whole object (to store)
/// leaves out: its conditionals and its range.
pub(crate) fn is_not_whole(name: &HeaderName) -> bool {
    // The lengths first, comparing standard names by tag after: most names are none of
    // these.
    static LENGTHS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| length_mask(&NOT_WHOLE));
    *LENGTHS & length_bit(name) != 0 && NOT_WHOLE.contains(name)
}

/// The conditionals that ask the origin whether `stored` (a stored response's fields)
/// is still current (RFC 9111 §4.3.1): `If-None-Match` with its `ETag`,
/// `If-Modified-Since` with its `Last-Modified`.
pub(crate) fn stored_validators(
    stored: &HeaderMap,
) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
    let [if_none_match, if_modified_since] = &VALIDATOR_NAMES;
    let etag = fields::first(stored, &ETAG).map(|etag| (if_none_match, etag));
    let modified =
        fields::first(stored, &LAST_MODIFIED).map(|modified| (if_modified_since, modified));
    etag.into_iter().chain(modified)
}

/// The names of [`stored_validators`].
static VALIDATOR_NAMES: [HeaderName; 2] = [IF_NONE_MATCH, IF_MODIFIED_SINCE];

/// The client's fields that would make the origin's answer other than the whole object:
/// its conditionals and its range.
static NOT_WHOLE: [HeaderName; 6] = [
    IF_NONE_MATCH,
    IF_MODIFIED_SINCE,
    IF_MATCH,
    IF_UNMODIFIED_SINCE,
    IF_RANGE,
    RANGE,
];

/// True if the request has preconditions this cache does not evaluate (`If-Match`,
/// `If-Unmodified-Since`): such requests go to the origin, which owns the state.
pub(crate) fn has_origin_preconditions(request: &HeaderMap) -> bool {
    fields::has(request, &IF_MATCH) || fields::has(request, &IF_UNMODIFIED_SINCE)
}

/// True if the client's `If-None-Match` / `If-Modified-Since` is satisfied by the
/// stored response, so a GET or HEAD is answered 304 (RFC 9110 §13.1.2, §13.1.3,
/// evaluated in the order of §13.2.2: `If-Modified-Since` only without `If-None-Match`,
/// against `Last-Modified`, else `Date`, as RFC 9111 §4.3.2 has a cache do).
pub(crate) fn client_not_modified(request: &HeaderMap, stored: &HeaderMap) -> bool {
    if fields::has(request, &IF_NONE_MATCH) {
        let Some(condition) = request.typed_get::<IfNoneMatch>() else {
            return false;
        };
        return match stored.typed_get::<ETag>() {
            // Weak comparison: W/"a" matches "a" (§13.1.2).
            Some(etag) => !condition.precondition_passes(&etag),
            None => false,
        };
    }
    // The stored date is parsed only when the client asks: most requests are unconditional.
    if !fields::has(request, &IF_MODIFIED_SINCE) {
        return false;
    }
    let Some(since) = request.typed_get::<IfModifiedSince>() else {
        return false;
    };
    // Without Last-Modified, the stored Date (RFC 9111 §4.3.2): the response was current
    // then, so the representation has not changed since an earlier client date.
    let stored_date = fields::first(stored, &LAST_MODIFIED)
        .or_else(|| fields::first(stored, &DATE))
        .and_then(parse_date);
    match stored_date {
        Some(modified) => !since.is_modified(modified),
        None => false,
    }
}

/// The head of a 304 answering a client's conditional from `fresh` (a 200's head):
/// the same fields, which include the validators and caching fields §15.4.5 requires,
/// minus those describing a body.
pub(crate) fn not_modified_head(mut fresh: response::Parts) -> response::Parts {
    fresh.status = http::StatusCode::NOT_MODIFIED;
    for name in [CONTENT_LENGTH, CONTENT_RANGE, TRANSFER_ENCODING] {
        fresh.headers.remove(name);
    }
    fresh
}

/// Fields a 304 does not update (RFC 9111 §3.2): framing describes the 304 itself, and
/// Cache-Status is about another cache.
static NOT_UPDATED: [HeaderName; 4] = [
    CONTENT_LENGTH,
    CONTENT_RANGE,
    TRANSFER_ENCODING,
    CACHE_STATUS,
];

/// The stored metadata after a 304, split by who may see it.
#[derive(Debug)]
pub(crate) struct Refreshed {
    /// What the entry holds from now on: the stored fields updated by the 304's, less
    /// the 304's `Set-Cookie`.
    pub stored: EntryMeta,
    /// The 304's `Set-Cookie` fields: they answer the request that revalidated, and only
    /// it, since that request's `Cookie` went to the origin with it.
    pub set_cookie: Vec<HeaderValue>,
}

impl Refreshed {
    /// The metadata to answer the request that revalidated: the stored fields and the
    /// 304's `Set-Cookie`.
    pub(crate) fn for_this_request(&self) -> EntryMeta {
        let mut meta = self.stored.clone();
        for cookie in &self.set_cookie {
            meta.response_headers.append(SET_COOKIE, cookie.clone());
        }
        meta
    }
}

/// Folds the origin's 304 into the stored metadata (RFC 9111 §3.2, §4.3.4), or `None`
/// if the 304 names a different representation (its strong `ETag` or its
/// `Last-Modified` differs from the stored one's): then the stored body must not be used.
/// The 304's `Set-Cookie` is kept apart ([`Refreshed::set_cookie`]); whether the updated
/// fields still allow storing the response is the caller's to judge.
pub(crate) fn freshen(
    stored: &EntryMeta,
    not_modified: &response::Parts,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Option<Refreshed> {
    let new = &not_modified.headers;
    let old = &stored.response_headers;
    // The stored body is coded as the stored field says: a 304 naming another coding
    // describes another representation.
    if new.contains_key(CONTENT_ENCODING)
        && !new
            .get_all(CONTENT_ENCODING)
            .iter()
            .eq(old.get_all(CONTENT_ENCODING).iter())
    {
        return None;
    }
    if let Some(etag) = new.get(ETAG) {
        if old.get(ETAG) != Some(etag) {
            return None;
        }
    } else if let Some(modified) = new.get(LAST_MODIFIED)
        && old.get(LAST_MODIFIED) != Some(modified)
    {
        return None;
    }
    let mut headers = old.clone();
    for name in new.keys() {
        if NOT_UPDATED.contains(name) {
            continue;
        }
        headers.remove(name);
        for value in new.get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    // The stored Age described the old copy; a 304 without Age means a new one.
    if !new.contains_key(http::header::AGE) {
        headers.remove(http::header::AGE);
    }
    let set_cookie = new.get_all(SET_COOKIE).iter().cloned().collect();
    headers.remove(SET_COOKIE);
    let stored = EntryMeta {
        request_time,
        response_time,
        status: stored.status,
        response_headers: headers,
        request_headers: stored.request_headers.clone(),
        // The tags are the fill's; a revalidation ends a soft purge.
        tags: stored.tags.clone(),
        purged: None,
    };
    Some(Refreshed { stored, set_cookie })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn client_conditionals_use_weak_comparison_and_dates() {
        let stored = map(&[
            ("etag", "\"a\""),
            ("last-modified", "Sun, 01 Nov 2026 00:00:00 GMT"),
        ]);
        assert!(client_not_modified(
            &map(&[("if-none-match", "W/\"a\"")]),
            &stored
        ));
        assert!(client_not_modified(
            &map(&[("if-none-match", "\"x\", \"a\"")]),
            &stored
        ));
        assert!(!client_not_modified(
            &map(&[("if-none-match", "\"b\"")]),
            &stored
        ));
        let since = |d| map(&[("if-modified-since", d)]);
        assert!(client_not_modified(
            &since("Sun, 01 Nov 2026 00:00:00 GMT"),
            &stored
        ));
        assert!(!client_not_modified(
            &since("Sat, 31 Oct 2026 00:00:00 GMT"),
            &stored
        ));
        // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
        let both = map(&[
            ("if-none-match", "\"b\""),
            ("if-modified-since", "Sun, 01 Nov 2026 00:00:00 GMT"),
        ]);
        assert!(!client_not_modified(&both, &stored));
        // Without Last-Modified, the stored Date stands in for it (RFC 9111 §4.3.2); with
        // neither, If-Modified-Since cannot be evaluated.
        let dated = map(&[("date", "Sun, 01 Nov 2026 00:00:00 GMT")]);
        assert!(client_not_modified(
            &since("Sun, 01 Nov 2026 00:00:00 GMT"),
            &dated
        ));
        assert!(!client_not_modified(
            &since("Sat, 31 Oct 2026 00:00:00 GMT"),
            &dated
        ));
        let last_modified_first = map(&[
            ("date", "Sun, 01 Nov 2026 00:00:00 GMT"),
            ("last-modified", "Mon, 02 Nov 2026 00:00:00 GMT"),
        ]);
        assert!(!client_not_modified(
            &since("Sun, 01 Nov 2026 00:00:00 GMT"),
            &last_modified_first
        ));
        assert!(!client_not_modified(
            &since("Sun, 01 Nov 2026 00:00:00 GMT"),
            &map(&[])
        ));
    }

    #[test]
    fn a_304_updates_headers_but_not_framing_and_must_match() {
        let now = SystemTime::now();
        let stored = EntryMeta {
            request_time: now,
            response_time: now,
            status: http::StatusCode::OK,
            response_headers: map(&[("etag", "\"a\""), ("content-length", "10"), ("x-rev", "1")]),
            request_headers: HeaderMap::new(),
            tags: Vec::new(),
            purged: None,
        };
        let mut head = http::Response::new(()).into_parts().0;
        head.status = http::StatusCode::NOT_MODIFIED;
        head.headers = map(&[("etag", "\"a\""), ("x-rev", "2"), ("content-length", "0")]);
        let fresh = freshen(&stored, &head, now, now).expect("same etag").stored;
        assert_eq!(
            fresh.response_headers.get("x-rev").map(|v| v.as_bytes()),
            Some(&b"2"[..])
        );
        assert_eq!(
            fresh
                .response_headers
                .get("content-length")
                .map(|v| v.as_bytes()),
            Some(&b"10"[..])
        );
        head.headers = map(&[("etag", "\"b\"")]);
        assert!(freshen(&stored, &head, now, now).is_none());
        head.headers = map(&[("etag", "\"a\""), ("content-encoding", "gzip")]);
        assert!(
            freshen(&stored, &head, now, now).is_none(),
            "a 304 naming another coding than the stored body's"
        );
    }

    #[test]
    fn a_304_set_cookie_answers_its_request_and_is_never_stored() {
        let now = SystemTime::now();
        let stored = EntryMeta {
            request_time: now,
            response_time: now,
            status: http::StatusCode::OK,
            response_headers: map(&[("etag", "\"a\""), ("cache-control", "max-age=9")]),
            request_headers: HeaderMap::new(),
            tags: Vec::new(),
            purged: None,
        };
        let mut head = http::Response::new(()).into_parts().0;
        head.status = http::StatusCode::NOT_MODIFIED;
        head.headers = map(&[
            ("etag", "\"a\""),
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
        ]);
        let refreshed = freshen(&stored, &head, now, now).expect("same etag");
        assert!(!refreshed.stored.response_headers.contains_key(SET_COOKIE));
        let answer = refreshed.for_this_request();
        let cookies: Vec<_> = answer.response_headers.get_all(SET_COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
    }
}
