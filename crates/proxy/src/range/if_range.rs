//! `If-Range` (RFC 9110 §13.1.5): whether a range request may be answered with a part.
//!
//! The condition holds only when the field is one valid validator that matches the stored
//! representation *strongly*:
//!
//! - an entity tag: not weak, and byte for byte the stored `ETag`, which must be strong
//!   too (§8.8.3.2, strong comparison);
//! - an HTTP-date: exactly the stored `Last-Modified`, and that date must be a strong
//!   validator. For a cache comparing with its stored entry, §8.8.2.2 makes it one only
//!   when the entry's `Date` is at least 60 seconds after it: within the same second two
//!   versions can share a modification time.
//!
//! Anything else — a weak tag, a date that is earlier or later, a date too close to the
//! response's `Date`, a value that is neither a tag nor a date, or several field lines —
//! means the condition fails, and the whole representation is sent (§13.1.5: "the
//! recipient ... MUST ignore the Range header field"). Ignoring an invalid `If-Range`
//! instead would let a resumed download splice bytes of two versions.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::{DATE, ETAG, IF_RANGE, LAST_MODIFIED};

/// How much older than the response's `Date` a `Last-Modified` must be to count as a
/// strong validator for an intermediate cache (RFC 9110 §8.8.2.2).
const STRONG_DATE_MARGIN: Duration = Duration::from_secs(60);

/// Whether the request's `If-Range` lets a range be served from the representation whose
/// response fields are `stored`. `None`: the request has no `If-Range`.
pub(super) fn holds(request: &HeaderMap, stored: &HeaderMap) -> Option<bool> {
    let mut fields = crate::fields::all(request, &IF_RANGE);
    let field = fields.next()?;
    if fields.next().is_some() {
        return Some(false);
    }
    let Ok(text) = field.to_str() else {
        return Some(false);
    };
    let text = text.trim();
    if text.starts_with('"') {
        return Some(is_entity_tag(text) && strong_etag(stored) == Some(text));
    }
    if text.starts_with("W/") {
        // A weak tag never matches strongly; clients must not send one (§13.1.5).
        return Some(false);
    }
    let Ok(asked) = httpdate::parse_http_date(text) else {
        return Some(false);
    };
    Some(strong_last_modified(stored) == Some(asked))
}

/// `"` *etagc `"`, etagc = %x21 / %x23-7E / obs-text (RFC 9110 §8.8.3).
fn is_entity_tag(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 2
        && bytes[0] == b'"'
        && bytes[bytes.len() - 1] == b'"'
        && bytes[1..bytes.len() - 1]
            .iter()
            .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
}

/// The stored `ETag` when it is one strong entity tag.
fn strong_etag(stored: &HeaderMap) -> Option<&str> {
    let mut tags = crate::fields::all(stored, &ETAG);
    let tag = tags.next()?.to_str().ok()?.trim();
    (tags.next().is_none() && is_entity_tag(tag)).then_some(tag)
}

/// The stored `Last-Modified` when the stored `Date` makes it a strong validator.
fn strong_last_modified(stored: &HeaderMap) -> Option<SystemTime> {
    let date = |name| {
        let value = stored.get(name)?.to_str().ok()?;
        httpdate::parse_http_date(value.trim()).ok()
    };
    let modified = date(LAST_MODIFIED)?;
    let sent = date(DATE)?;
    (modified + STRONG_DATE_MARGIN <= sent).then_some(modified)
}
