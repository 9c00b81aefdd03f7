//! What became of a request, as the values the proxy decides it in; `Cache-Status`, the
//! metrics and the access log render them.

/// What went wrong, for `secondhit_errors_total{kind}`: the request failures
/// [`error_response`] answers, and the cache failures the proxy survives by proxying
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
