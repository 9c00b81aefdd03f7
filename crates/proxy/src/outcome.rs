//! What became of a request, typed from where the proxy decides it to where it is
//! rendered: the `Cache-Status` header (`cache_status`), the request counters
//! ([`Outcome::result`]) and the access log each render an [`Outcome`], once.
//!
//! An outcome is one of three: served from storage ([`Outcome::Hit`], stale or not),
//! forwarded to the origin ([`Outcome::Forwarded`]: why, what the origin answered,
//! whether it is being stored, or collapsed with another request's fetch, or why not), or
//! answered by the proxy itself ([`Outcome::Own`]: a rejection, an error, `Max-Forwards`).
//!
//! # Which result a request counts as
//!
//! `secondhit_requests_total{result}` is [`Outcome::result`]:
//!
//! - `hit`: served from storage, fresh — including a 304 to the client's conditional, a
//!   206 range and a HEAD answered from storage.
//! - `stale`: served from storage while stale (`max-stale`, `stale-while-revalidate`,
//!   `stale-if-error`, `stale-if-unreachable`).
//! - `miss`: a GET/HEAD that went to the origin because storage could not answer it:
//!   `fwd=uri-miss`, `fwd=vary-miss`, and `fwd=stale` (a revalidation, whether the origin
//!   answered 304 or a new response).
//! - `pass`: everything else — methods other than GET and HEAD (`fwd=method`), requests
//!   whose own directives or conditions decided the cache's answer could not be used
//!   (`fwd=request`: `no-cache`, `no-store`, `max-age=0`, `If-Match`, credentials on a
//!   response not shareable), and answers the proxy made itself (400 rejections,
//!   502/504 errors, `only-if-cached` misses, `Max-Forwards: 0`).
//!
//! So `hit / (hit + stale + miss)` is the hit ratio of the requests the cache was allowed
//! to answer, and the sum of all four is every request.

mod detail;

use http::StatusCode;

pub use detail::Detail;

use crate::policy::freshness::RuleLifetime;

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Served from storage without contacting the origin.
    Hit {
        /// Remaining freshness in seconds (negative: stale).
        ttl: Option<i64>,
        /// Why a stale response could be served (`max-stale`, `stale-while-revalidate`,
        /// ...), or the site rule lifetime that keeps a fresh one (`default-ttl`,
        /// `rule-ttl`); `None`: it was fresh by the origin's word.
        stale: Option<Detail>,
    },
    /// Went to the origin.
    Forwarded(Forwarded),
    /// Answered by the proxy itself, for the reason given: neither from storage nor from
    /// the origin.
    Own(Detail),
}

/// A request that went to the origin, and what came of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// Why it went forward.
    pub why: Forward,
    /// The origin's status, once its answer arrived.
    pub origin_status: Option<StatusCode>,
    /// Remaining freshness in seconds of the stored response that answers it.
    pub ttl: Option<i64>,
    /// The response is being written to storage.
    pub stored: bool,
    /// It waited for another request's fetch of its key and is answered with what that
    /// fetch stored (RFC 9211 §2.6).
    pub collapsed: bool,
    /// Why it was not stored, or what else the cache has to say about it.
    pub detail: Option<Detail>,
}

/// What a request counted as (see the module docs for the exact mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestResult {
    /// Served fresh from storage.
    Hit,
    /// Served stale from storage.
    Stale,
    /// Went to the origin because storage could not answer.
    Miss,
    /// Proxied (or answered) without the cache's involvement.
    Pass,
}

impl RequestResult {
    /// Every result, in counter order.
    pub const ALL: [RequestResult; 4] = [
        RequestResult::Hit,
        RequestResult::Stale,
        RequestResult::Miss,
        RequestResult::Pass,
    ];

    /// The metric label: "hit" | "stale" | "miss" | "pass".
    pub fn as_str(self) -> &'static str {
        match self {
            RequestResult::Hit => "hit",
            RequestResult::Stale => "stale",
            RequestResult::Miss => "miss",
            RequestResult::Pass => "pass",
        }
    }
}

impl Outcome {
    /// Served from storage, fresh.
    pub fn hit() -> Outcome {
        Outcome::Hit {
            ttl: None,
            stale: None,
        }
    }

    /// Forwarded to the origin for `why`.
    pub fn forward(why: Forward) -> Outcome {
        Outcome::Forwarded(Forwarded {
            why,
            origin_status: None,
            ttl: None,
            stored: false,
            collapsed: false,
            detail: None,
        })
    }

    /// Answered by the proxy itself, because of `detail`.
    pub fn own(detail: Detail) -> Outcome {
        Outcome::Own(detail)
    }

    /// Adds the origin's status of a forwarded request; nothing on another outcome.
    #[must_use]
    pub fn fwd_status(mut self, status: StatusCode) -> Outcome {
        if let Outcome::Forwarded(forwarded) = &mut self {
            forwarded.origin_status = Some(status);
        }
        self
    }

    /// Adds the remaining freshness in seconds (negative when stale) of the stored
    /// response that answers; nothing on the proxy's own answers.
    #[must_use]
    pub fn ttl(mut self, seconds: i64) -> Outcome {
        match &mut self {
            Outcome::Hit { ttl, .. } => *ttl = Some(seconds),
            Outcome::Forwarded(forwarded) => forwarded.ttl = Some(seconds),
            Outcome::Own(_) => {}
        }
        self
    }

    /// Marks a forwarded response as being written to storage.
    #[must_use]
    pub fn stored(mut self) -> Outcome {
        if let Outcome::Forwarded(forwarded) = &mut self {
            forwarded.stored = true;
        }
        self
    }

    /// Marks a forwarded request answered from another request's fetch of its key.
    #[must_use]
    pub fn collapsed(mut self) -> Outcome {
        if let Outcome::Forwarded(forwarded) = &mut self {
            forwarded.collapsed = true;
        }
        self
    }

    /// Adds the reason: on a hit, why a stale response was served; on a forwarded
    /// request, why it was not stored; on the proxy's own answer, it replaces the reason.
    #[must_use]
    pub fn detail(mut self, detail: Detail) -> Outcome {
        match &mut self {
            Outcome::Hit { stale, .. } => *stale = Some(detail),
            Outcome::Forwarded(forwarded) => forwarded.detail = Some(detail),
            Outcome::Own(own) => *own = detail,
        }
        self
    }

    /// What the request counts as in `secondhit_requests_total{result}`.
    pub fn result(&self) -> RequestResult {
        match self {
            Outcome::Hit {
                stale: None | Some(Detail::Rule(RuleLifetime::DefaultTtl | RuleLifetime::StatusTtl)),
                ..
            } => RequestResult::Hit,
            Outcome::Hit { stale: Some(_), .. } => RequestResult::Stale,
            Outcome::Forwarded(Forwarded {
                why: Forward::UriMiss | Forward::VaryMiss | Forward::Stale,
                ..
            }) => RequestResult::Miss,
            Outcome::Forwarded(_) | Outcome::Own(_) => RequestResult::Pass,
        }
    }
}

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
    /// Every reason, so a token can be read back into one (`cache_status::parse`).
    pub const ALL: [Forward; 6] = [
        Forward::UriMiss,
        Forward::Stale,
        Forward::VaryMiss,
        Forward::Request,
        Forward::Method,
        Forward::Bypass,
    ];

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

/// What went wrong, for `secondhit_errors_total{kind}`: the request failures
/// `proxy::error::error_response` answers, and the cache failures the proxy survives by proxying
/// uncached. (The store's own damage and dropped-fill counters are read from its stats at
/// scrape time.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A request that names no usable cache key or host (400).
    BadRequest,
    /// A request that breaks an RFC 9110/9112 rule (400).
    Rejected,
    /// The origin did not answer in time (504).
    OriginTimeout,
    /// The origin could not be reached (502).
    OriginUnreachable,
    /// The origin's answer could not be used (502).
    OriginError,
    /// `only-if-cached` with nothing servable stored (504).
    OnlyIfCached,
    /// A stale response that must be revalidated, and the origin failed (504).
    MustRevalidate,
    /// Every origin permit stayed taken for `origin.queue_timeout` (503).
    OriginBusy,
    /// The client's request body stalled for `origin.body_read_timeout`, or averaged less
    /// than `origin.body_min_rate` over it (408).
    RequestBodyTimeout,
    /// A store lookup failed; the request was proxied uncached.
    StoreLookup,
    /// A fill of a storable, admitted response could not start (no room, disk error).
    FillNotStarted,
}

impl ErrorKind {
    /// Every kind, in counter order.
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::BadRequest,
        ErrorKind::Rejected,
        ErrorKind::OriginTimeout,
        ErrorKind::OriginUnreachable,
        ErrorKind::OriginError,
        ErrorKind::OnlyIfCached,
        ErrorKind::MustRevalidate,
        ErrorKind::OriginBusy,
        ErrorKind::RequestBodyTimeout,
        ErrorKind::StoreLookup,
        ErrorKind::FillNotStarted,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad-request",
            ErrorKind::Rejected => "rejected",
            ErrorKind::OriginTimeout => "origin-timeout",
            ErrorKind::OriginUnreachable => "origin-unreachable",
            ErrorKind::OriginError => "origin-error",
            ErrorKind::OnlyIfCached => "only-if-cached",
            ErrorKind::MustRevalidate => "must-revalidate",
            ErrorKind::OriginBusy => "origin-busy",
            ErrorKind::RequestBodyTimeout => "request-body-timeout",
            ErrorKind::StoreLookup => "store-lookup",
            ErrorKind::FillNotStarted => "fill-not-started",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::RejectReason;
    use crate::policy::NotStored;

    #[test]
    fn results_follow_the_outcome() {
        use RequestResult::*;
        let ok = StatusCode::OK;
        let cases = [
            (Outcome::hit().ttl(30), Hit),
            (Outcome::hit().ttl(-3).detail(Detail::MaxStale), Stale),
            (Outcome::hit().detail(Detail::StaleWhileRevalidate), Stale),
            (Outcome::hit().detail(Detail::StaleIfError), Stale),
            (
                Outcome::hit().detail(Detail::Rule(RuleLifetime::DefaultTtl)),
                Hit,
            ),
            (
                Outcome::hit().detail(Detail::Rule(RuleLifetime::GraceIfError)),
                Stale,
            ),
            (
                Outcome::forward(Forward::UriMiss).fwd_status(ok).stored(),
                Miss,
            ),
            (
                Outcome::forward(Forward::UriMiss)
                    .fwd_status(ok)
                    .detail(Detail::Admission(RejectReason::FirstSight)),
                Miss,
            ),
            (Outcome::forward(Forward::VaryMiss).fwd_status(ok), Miss),
            (
                Outcome::forward(Forward::Stale)
                    .fwd_status(StatusCode::NOT_MODIFIED)
                    .ttl(60),
                Miss,
            ),
            (
                Outcome::forward(Forward::Request)
                    .fwd_status(ok)
                    .detail(Detail::NotStored(NotStored::NoStore)),
                Pass,
            ),
            (Outcome::forward(Forward::Method).fwd_status(ok), Pass),
            (Outcome::own(Detail::OriginUnreachable), Pass),
            (Outcome::own(Detail::MaxForwards), Pass),
        ];
        for (outcome, result) in cases {
            assert_eq!(outcome.result(), result, "{outcome:?}");
        }
    }
}
