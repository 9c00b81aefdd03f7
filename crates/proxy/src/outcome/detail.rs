//! The `detail` parameter of `Cache-Status`: one typed reason, rendered in one place.
//!
//! Every reason the proxy can give is a [`Detail`] variant, including the typed reasons
//! other modules already have ([`NotStored`], the admission's [`RejectReason`], the
//! hygiene [`Rejection`]), which it wraps rather than copies: their own `as_str` stays
//! the one place their words live, since the access log and the connection guard use
//! those words too. [`Detail::ALL`] lists every variant, so a metrics exporter can
//! register one label per detail up front.

use crate::admission::{AdmitReason, Decision, RejectReason};
use crate::hygiene::Rejection;
use crate::policy::freshness::{RuleLifetime, StaleWindow};
use crate::policy::{NotStored, UnindexedTags};

/// Why this cache did what it did, as the `Cache-Status` `detail` token (RFC 9211 §2.8).
///
/// Each variant renders to a distinct RFC 8941 token (a test checks both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// A forwarded response that may not be stored (RFC 9111 §3, plus this cache's rules).
    NotStored(NotStored),
    /// A storable response the admission policy kept off the disk (e.g. `first-sight`).
    Admission(RejectReason),
    /// A storable, admitted response whose fill could not start, or (an empty body)
    /// could not commit; it is proxied uncached.
    StoreError,
    /// A storable, admitted response not written because the cache's disk has no room:
    /// below `cache.min_free` with nothing eviction could free, or fills backing off
    /// after a write ran out of space; it is proxied uncached.
    DiskFull,
    /// A stale stored response served because the client's `max-stale` accepts it.
    MaxStale,
    /// A stale stored response served while one background request refreshes it.
    StaleWhileRevalidate,
    /// A stale stored response served because the origin failed, within `stale-if-error`.
    StaleIfError,
    /// A stale stored response served because the origin could not be reached, within
    /// `cache.stale_if_unreachable`.
    StaleIfUnreachable,
    /// A request answered 400 because it broke an RFC 9110/9112 rule.
    Rejected(Rejection),
    /// A request answered 400 because it names no usable cache key or host.
    BadRequest,
    /// The origin did not answer in time (504).
    OriginTimeout,
    /// The origin could not be reached (502).
    OriginUnreachable,
    /// The origin's answer could not be used (502).
    OriginError,
    /// `only-if-cached` and nothing servable was stored (504).
    OnlyIfCached,
    /// A stored response that must be revalidated, and the origin failed (504).
    MustRevalidate,
    /// A `TRACE` or `OPTIONS` with `Max-Forwards: 0`, answered by this proxy as its last hop.
    MaxForwards,
    /// `OPTIONS *`: a question about the server in general, answered by this proxy (200).
    ServerOptions,
    /// Every `origin.max_in_flight` permit stayed taken for `origin.queue_timeout` (503).
    OriginBusy,
    /// The client's request body stalled for `origin.body_read_timeout`, or averaged less
    /// than `origin.body_min_rate` over it (408).
    RequestBodyTimeout,
    /// A response that reached the end of the request path without a `Cache-Status` of
    /// its own: a bug, labelled rather than sent unlabelled.
    Internal,
    /// A site's cache rule says `bypass = true`: no lookup, no store (`fwd=bypass`).
    Bypass,
    /// The request's host matches no `[[site]]`, and `server.unknown_host` answers such
    /// requests itself (421 or 404).
    UnknownHost,
    /// A stored response that a soft purge marked stale, revalidated with the origin
    /// (`fwd=stale`).
    Purged,
    /// A `PURGE` from a network `purge.allow` names, carried out by this proxy.
    Purge,
    /// A `PURGE` from anywhere else, or with `purge.allow` empty: 405, never forwarded.
    PurgeRefused,
    /// A GET or HEAD with a body, which the key does not name: passed through, neither
    /// stored nor served from storage (`fwd=request`).
    RequestBody,
    /// A stored response served under a site rule's lifetimes: fresh for its
    /// `default_ttl` or `ttl_by_status`, or stale within its `grace`.
    Rule(RuleLifetime),
    /// Admitted, but the minute's write budget (`admission.max_write_rate`) had no room
    /// for the fill: served from the origin, not stored.
    WriteBudget,
    /// Requested before a purge or removal that selects it and answered after: served
    /// to this client, not stored (the answer may predate the purge).
    PurgedInFlight,
    /// A storable, admitted response not written because this process handed the cache
    /// directory over to the process a binary upgrade started: proxied uncached.
    Handover,
    /// A first sight stored because `admission.policy = "auto"` runs `always` now.
    AutoAlways,
    /// Stored under `admission.policy = "auto"` because the key was requested before.
    AutoSeenBefore,
}

impl Detail {
    /// Every detail, for a fixed set of metric labels and for tests.
    pub const ALL: [Detail; 62] = [
        Detail::NotStored(NotStored::Method),
        Detail::NotStored(NotStored::NoStore),
        Detail::NotStored(NotStored::Private),
        Detail::NotStored(NotStored::Authorization),
        Detail::NotStored(NotStored::SetCookie),
        Detail::NotStored(NotStored::VaryStar),
        Detail::NotStored(NotStored::Partial),
        Detail::NotStored(NotStored::Range),
        Detail::NotStored(NotStored::NotCacheable),
        Detail::NotStored(NotStored::NoLifetime),
        Detail::NotStored(NotStored::NoLength),
        Detail::NotStored(NotStored::TooLarge),
        Detail::NotStored(NotStored::CollapseTimeout),
        Detail::Admission(RejectReason::FirstSight),
        Detail::Admission(RejectReason::Rule),
        Detail::StoreError,
        Detail::MaxStale,
        Detail::StaleWhileRevalidate,
        Detail::StaleIfError,
        Detail::StaleIfUnreachable,
        Detail::Rejected(Rejection::SeveralHosts),
        Detail::Rejected(Rejection::MissingHost),
        Detail::Rejected(Rejection::InvalidHost),
        Detail::Rejected(Rejection::HostMismatch),
        Detail::Rejected(Rejection::LengthWithTransferEncoding),
        Detail::Rejected(Rejection::ConflictingLength),
        Detail::Rejected(Rejection::InvalidLength),
        Detail::Rejected(Rejection::InvalidMaxForwards),
        Detail::Rejected(Rejection::AsteriskForm),
        Detail::Rejected(Rejection::Connect),
        Detail::BadRequest,
        Detail::OriginTimeout,
        Detail::OriginUnreachable,
        Detail::OriginError,
        Detail::OnlyIfCached,
        Detail::MustRevalidate,
        Detail::MaxForwards,
        Detail::ServerOptions,
        Detail::OriginBusy,
        Detail::RequestBodyTimeout,
        Detail::Internal,
        Detail::DiskFull,
        Detail::Bypass,
        Detail::UnknownHost,
        Detail::Purged,
        Detail::Purge,
        Detail::PurgeRefused,
        Detail::NotStored(NotStored::Tags(UnindexedTags::TooMany)),
        Detail::NotStored(NotStored::Tags(UnindexedTags::TooLong)),
        Detail::NotStored(NotStored::Tags(UnindexedTags::Unreadable)),
        Detail::NotStored(NotStored::Tags(UnindexedTags::MemoryFull)),
        Detail::RequestBody,
        Detail::Rule(RuleLifetime::ALL[0]),
        Detail::Rule(RuleLifetime::ALL[1]),
        Detail::Rule(RuleLifetime::ALL[2]),
        Detail::Rule(RuleLifetime::ALL[3]),
        Detail::WriteBudget,
        Detail::PurgedInFlight,
        Detail::Handover,
        Detail::Admission(RejectReason::AutoFirstSight),
        Detail::AutoAlways,
        Detail::AutoSeenBefore,
    ];

    /// The detail of a stored response admitted under `decision`: `policy = "auto"` names
    /// the mode that stored it; other policies say nothing on a stored response.
    pub fn of_admitted(decision: Decision) -> Option<Detail> {
        match decision {
            Decision::Admit(AdmitReason::AutoAlways) => Some(Detail::AutoAlways),
            Decision::Admit(AdmitReason::AutoSeenBefore) => Some(Detail::AutoSeenBefore),
            _ => None,
        }
    }

    /// The detail of a stale response served while it is revalidated, by the window
    /// that allowed it.
    pub fn stale_while_revalidate(window: StaleWindow) -> Detail {
        match window {
            StaleWindow::Directive => Detail::StaleWhileRevalidate,
            StaleWindow::Grace => Detail::Rule(RuleLifetime::GraceWhileRevalidate),
        }
    }

    /// The detail of a stale response served because the origin failed, by the window
    /// that allowed it.
    pub fn stale_if_error(window: StaleWindow) -> Detail {
        match window {
            StaleWindow::Directive => Detail::StaleIfError,
            StaleWindow::Grace => Detail::Rule(RuleLifetime::GraceIfError),
        }
    }

    /// The token sent as `detail=<token>`, also the access log's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::NotStored(reason) => reason.as_str(),
            Detail::Admission(reason) => Decision::Reject(reason).as_str(),
            Detail::Rejected(rejection) => rejection.as_str(),
            Detail::StoreError => "store-error",
            Detail::DiskFull => "disk-full",
            Detail::MaxStale => "max-stale",
            Detail::StaleWhileRevalidate => "stale-while-revalidate",
            Detail::StaleIfError => "stale-if-error",
            Detail::StaleIfUnreachable => "stale-if-unreachable",
            Detail::BadRequest => "bad-request",
            Detail::OriginTimeout => "origin-timeout",
            Detail::OriginUnreachable => "origin-unreachable",
            Detail::OriginError => "origin-error",
            Detail::OnlyIfCached => "only-if-cached",
            Detail::MustRevalidate => "must-revalidate",
            Detail::MaxForwards => "max-forwards",
            Detail::ServerOptions => "server-options",
            Detail::OriginBusy => "origin-busy",
            Detail::RequestBodyTimeout => "request-body-timeout",
            Detail::Internal => "internal",
            Detail::Bypass => "bypass",
            Detail::UnknownHost => "unknown-host",
            Detail::Purged => "purged",
            Detail::Purge => "purge",
            Detail::PurgeRefused => "purge-refused",
            Detail::RequestBody => "request-body",
            Detail::Rule(lifetime) => lifetime.as_str(),
            Detail::WriteBudget => "write-budget",
            Detail::PurgedInFlight => "purged-in-flight",
            Detail::Handover => "handover",
            Detail::AutoAlways => Decision::Admit(AdmitReason::AutoAlways).as_str(),
            Detail::AutoSeenBefore => Decision::Admit(AdmitReason::AutoSeenBefore).as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Marks the slot of `detail` in `seen`: one arm, and one slot, per variant (nested
    /// ones included), with no wildcard. A new variant does not compile until it gets an
    /// arm here; a new slot index does not compile (`unconditional_panic`) until `seen`
    /// grows; and then `all_lists_every_variant` fails until `Detail::ALL` holds it.
    fn mark(detail: Detail, seen: &mut [bool; 62]) {
        match detail {
            Detail::NotStored(NotStored::Method) => seen[0] = true,
            Detail::NotStored(NotStored::NoStore) => seen[1] = true,
            Detail::NotStored(NotStored::Private) => seen[2] = true,
            Detail::NotStored(NotStored::Authorization) => seen[3] = true,
            Detail::NotStored(NotStored::SetCookie) => seen[4] = true,
            Detail::NotStored(NotStored::VaryStar) => seen[5] = true,
            Detail::NotStored(NotStored::Partial) => seen[6] = true,
            Detail::NotStored(NotStored::Range) => seen[7] = true,
            Detail::NotStored(NotStored::NotCacheable) => seen[8] = true,
            Detail::NotStored(NotStored::NoLifetime) => seen[9] = true,
            Detail::NotStored(NotStored::NoLength) => seen[10] = true,
            Detail::NotStored(NotStored::TooLarge) => seen[11] = true,
            Detail::Admission(RejectReason::FirstSight) => seen[12] = true,
            Detail::StoreError => seen[13] = true,
            Detail::MaxStale => seen[14] = true,
            Detail::StaleWhileRevalidate => seen[15] = true,
            Detail::StaleIfError => seen[16] = true,
            Detail::StaleIfUnreachable => seen[17] = true,
            Detail::Rejected(Rejection::SeveralHosts) => seen[18] = true,
            Detail::Rejected(Rejection::MissingHost) => seen[19] = true,
            Detail::Rejected(Rejection::InvalidHost) => seen[20] = true,
            Detail::Rejected(Rejection::HostMismatch) => seen[21] = true,
            Detail::Rejected(Rejection::LengthWithTransferEncoding) => seen[22] = true,
            Detail::Rejected(Rejection::ConflictingLength) => seen[23] = true,
            Detail::Rejected(Rejection::InvalidLength) => seen[24] = true,
            Detail::Rejected(Rejection::InvalidMaxForwards) => seen[25] = true,
            Detail::BadRequest => seen[26] = true,
            Detail::OriginTimeout => seen[27] = true,
            Detail::OriginUnreachable => seen[28] = true,
            Detail::OriginError => seen[29] = true,
            Detail::OnlyIfCached => seen[30] = true,
            Detail::MustRevalidate => seen[31] = true,
            Detail::MaxForwards => seen[32] = true,
            Detail::Internal => seen[33] = true,
            Detail::Rejected(Rejection::AsteriskForm) => seen[34] = true,
            Detail::Rejected(Rejection::Connect) => seen[35] = true,
            Detail::ServerOptions => seen[36] = true,
            Detail::OriginBusy => seen[37] = true,
            Detail::RequestBodyTimeout => seen[38] = true,
            Detail::NotStored(NotStored::CollapseTimeout) => seen[39] = true,
            Detail::DiskFull => seen[40] = true,
            Detail::Admission(RejectReason::Rule) => seen[41] = true,
            Detail::Bypass => seen[42] = true,
            Detail::UnknownHost => seen[43] = true,
            Detail::Purged => seen[44] = true,
            Detail::Purge => seen[45] = true,
            Detail::PurgeRefused => seen[46] = true,
            Detail::NotStored(NotStored::Tags(UnindexedTags::TooMany)) => seen[47] = true,
            Detail::NotStored(NotStored::Tags(UnindexedTags::TooLong)) => seen[48] = true,
            Detail::NotStored(NotStored::Tags(UnindexedTags::Unreadable)) => seen[49] = true,
            Detail::NotStored(NotStored::Tags(UnindexedTags::MemoryFull)) => seen[50] = true,
            Detail::RequestBody => seen[51] = true,
            Detail::Rule(RuleLifetime::DefaultTtl) => seen[52] = true,
            Detail::Rule(RuleLifetime::StatusTtl) => seen[53] = true,
            Detail::Rule(RuleLifetime::GraceWhileRevalidate) => seen[54] = true,
            Detail::Rule(RuleLifetime::GraceIfError) => seen[55] = true,
            Detail::WriteBudget => seen[56] = true,
            Detail::PurgedInFlight => seen[57] = true,
            Detail::Handover => seen[58] = true,
            Detail::Admission(RejectReason::AutoFirstSight) => seen[59] = true,
            Detail::AutoAlways => seen[60] = true,
            Detail::AutoSeenBefore => seen[61] = true,
        }
    }

    #[test]
    fn all_lists_every_variant() {
        let mut seen = [false; 62];
        for detail in Detail::ALL {
            mark(detail, &mut seen);
        }
        let missing: Vec<usize> = (0..seen.len()).filter(|&slot| !seen[slot]).collect();
        assert!(missing.is_empty(), "slots not in Detail::ALL: {missing:?}");
        assert_eq!(
            Detail::ALL.len(),
            seen.len(),
            "Detail::ALL lists a variant twice"
        );
    }

    /// RFC 8941 §3.3.4: sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" ).
    #[test]
    fn every_detail_is_a_distinct_rfc_8941_token() {
        let mut tokens = HashSet::new();
        for detail in Detail::ALL {
            let token = detail.as_str();
            assert!(
                sfv::TokenRef::from_str(token).is_ok(),
                "{detail:?} renders {token:?}, not an sf-token"
            );
            // No two details share a token: the header and the metric labels tell them apart.
            assert!(
                tokens.insert(token),
                "{detail:?} repeats the token {token:?}"
            );
        }
    }
}
