//! `Cache-Status` response header values (RFC 9211).
//!
//! Every response secondhit sends carries one entry naming this cache:
//! `secondhit; hit` for a response served from disk, `secondhit; fwd=uri-miss; stored`
//! for a miss that is being written to disk, `secondhit; fwd=uri-miss; detail=first-sight`
//! for a miss the admission filter kept off the disk, and so on. `detail` carries the
//! short reason a response was not stored (the same words the access log uses).
//! `fwd-status` is the origin's status for a forwarded request (a revalidation answered
//! 304 reads `fwd=stale; fwd-status=304`), and `ttl` the remaining freshness of a
//! stored response served or refreshed, negative when it is served stale. Every `detail`
//! is a [`Detail`], whose tokens are listed in `detail`.
//!
//! `collapsed` marks a miss that waited for another request's fetch of the same key
//! (request collapsing, `proxy::collapse`) and is answered from what that fetch stored:
//! `secondhit; fwd=uri-miss; ttl=60; collapsed`. RFC 9211 §2.6 defines the parameter for
//! exactly this ("collapsed together with one or more other forward requests"), and the
//! request did need the origin, so it is reported as the miss it was rather than as a
//! `hit` (which the metrics would count as served from storage alone); a follower that
//! had to fetch for itself after all carries no `collapsed` (the RFC omits it when false).

mod detail;

use http::HeaderValue;

pub use detail::Detail;

/// The name of this cache in `Cache-Status` (RFC 9211 §2: a cache identifies itself).
pub const CACHE_NAME: &str = "secondhit";

pub use crate::header_names::CACHE_STATUS;

/// Why a request went forward to the origin (RFC 9211 §2.2 `fwd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forward {
    /// No stored response for the URI.
    UriMiss,
    /// A stored response was found but was stale (or `no-cache`): revalidated.
    Stale,
    /// Stored variants of the URI exist, but none matches the request's `Vary` fields.
    VaryMiss,
    /// The request's own directives (`no-cache`, `max-age`, `min-fresh`) asked for a
    /// newer response than the stored one.
    Request,
    /// The method is not one this cache serves from storage.
    Method,
    /// A site's cache rule keeps this request away from storage (`bypass = true`).
    Bypass,
}

impl Forward {
    /// The RFC 9211 token.
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::UriMiss => "uri-miss",
            Forward::Stale => "stale",
            Forward::VaryMiss => "vary-miss",
            Forward::Request => "request",
            Forward::Method => "method",
            Forward::Bypass => "bypass",
        }
    }
}

/// One `Cache-Status` entry describing what this cache did with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheStatus {
    /// Served from storage without contacting the origin.
    hit: bool,
    /// Why the request went to the origin, when it did.
    forward: Option<Forward>,
    /// The origin's status for a forwarded request.
    fwd_status: Option<u16>,
    /// Remaining freshness in seconds (negative: stale).
    ttl: Option<i64>,
    /// The response is being written to storage.
    stored: bool,
    /// The request was collapsed with another one's forward request, whose stored
    /// response answers it (RFC 9211 §2.6).
    collapsed: bool,
    /// The machine-readable reason, e.g. `first-sight`.
    detail: Option<Detail>,
}

impl CacheStatus {
    /// A response served from storage.
    pub fn hit() -> CacheStatus {
        CacheStatus {
            hit: true,
            forward: None,
            fwd_status: None,
            ttl: None,
            stored: false,
            collapsed: false,
            detail: None,
        }
    }

    /// A request forwarded to the origin for `reason`.
    pub fn forward(reason: Forward) -> CacheStatus {
        CacheStatus {
            hit: false,
            forward: Some(reason),
            fwd_status: None,
            ttl: None,
            stored: false,
            collapsed: false,
            detail: None,
        }
    }

    /// A response the proxy made itself, neither from storage nor from the origin: because
    /// the request failed, or because the proxy is its final recipient (`detail` names why).
    pub fn own(detail: Detail) -> CacheStatus {
        CacheStatus {
            hit: false,
            forward: None,
            fwd_status: None,
            ttl: None,
            stored: false,
            collapsed: false,
            detail: Some(detail),
        }
    }

    /// Adds the origin's status for the forwarded request (`fwd-status`).
    #[must_use]
    pub fn fwd_status(mut self, status: http::StatusCode) -> CacheStatus {
        self.fwd_status = Some(status.as_u16());
        self
    }

    /// Adds the remaining freshness in seconds (`ttl`, negative when stale).
    #[must_use]
    pub fn ttl(mut self, seconds: i64) -> CacheStatus {
        self.ttl = Some(seconds);
        self
    }

    /// Marks the response as being written to storage.
    #[must_use]
    pub fn stored(mut self) -> CacheStatus {
        self.stored = true;
        self
    }

    /// Marks a request that waited for another request's fetch of its key and is answered
    /// with what that fetch stored (`collapsed`).
    #[must_use]
    pub fn collapsed(mut self) -> CacheStatus {
        self.collapsed = true;
        self
    }

    /// Adds the `detail` reason.
    #[must_use]
    pub fn detail(mut self, detail: Detail) -> CacheStatus {
        self.detail = Some(detail);
        self
    }

    /// The header value, e.g. `secondhit; fwd=uri-miss; stored`.
    pub fn to_header_value(&self) -> HeaderValue {
        use std::fmt::Write;
        // One allocation: the numbers are written in place, and the text becomes the
        // value's bytes without a copy.
        let mut text = String::with_capacity(64);
        text.push_str(CACHE_NAME);
        if self.hit {
            text.push_str("; hit");
        }
        if let Some(forward) = self.forward {
            text.push_str("; fwd=");
            text.push_str(forward.as_str());
        }
        if let Some(status) = self.fwd_status {
            // Writing to a String cannot fail.
            let _ = write!(text, "; fwd-status={status}");
        }
        if let Some(ttl) = self.ttl {
            let _ = write!(text, "; ttl={ttl}");
        }
        if self.stored {
            text.push_str("; stored");
        }
        if self.collapsed {
            text.push_str("; collapsed");
        }
        if let Some(detail) = self.detail {
            text.push_str("; detail=");
            text.push_str(detail.as_str());
        }
        // Only static tokens and integers are ever appended, all visible ASCII.
        HeaderValue::from_maybe_shared(bytes::Bytes::from(text))
            .unwrap_or_else(|_| HeaderValue::from_static(CACHE_NAME))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::RejectReason;

    #[test]
    fn values_follow_rfc_9211_syntax() {
        assert_eq!(CacheStatus::hit().to_header_value(), "secondhit; hit");
        assert_eq!(
            CacheStatus::forward(Forward::UriMiss)
                .stored()
                .to_header_value(),
            "secondhit; fwd=uri-miss; stored"
        );
        assert_eq!(
            CacheStatus::forward(Forward::UriMiss)
                .detail(Detail::Admission(RejectReason::FirstSight))
                .to_header_value(),
            "secondhit; fwd=uri-miss; detail=first-sight"
        );
        assert_eq!(
            CacheStatus::forward(Forward::UriMiss)
                .ttl(60)
                .collapsed()
                .to_header_value(),
            "secondhit; fwd=uri-miss; ttl=60; collapsed"
        );
        assert_eq!(
            CacheStatus::forward(Forward::Method).to_header_value(),
            "secondhit; fwd=method"
        );
    }

    /// RFC 9211 §2: the field is an RFC 8941 List; every parameter this cache can send,
    /// with every detail, parses as one, its detail as a token.
    #[test]
    fn every_detail_makes_a_structured_field_list() {
        for detail in Detail::ALL {
            let status = CacheStatus::forward(Forward::Stale)
                .fwd_status(http::StatusCode::BAD_GATEWAY)
                .ttl(-30)
                .stored()
                .collapsed()
                .detail(detail);
            let value = status.to_header_value();
            let list: sfv::List = sfv::Parser::new(value.as_bytes())
                .parse()
                .unwrap_or_else(|e| panic!("{value:?} is not an sf-list: {e}"));
            let Some(sfv::ListEntry::Item(item)) = list.first() else {
                panic!("{value:?} holds no item");
            };
            let sent = item.params.get("detail").and_then(|d| d.as_token());
            assert_eq!(sent.map(|t| t.as_str()), Some(detail.as_str()), "{value:?}");
        }
    }
}
