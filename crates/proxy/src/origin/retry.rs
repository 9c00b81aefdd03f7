//! Sending a request that failed on one server of a pool to the next (`origin.retry`),
//! as nginx's `proxy_next_upstream` and `proxy_next_upstream_tries` do.
//!
//! A request nothing of which was sent (no connection could be opened) always goes on,
//! whatever its method: the server never saw it. One that was sent may have reached the
//! server, so it goes on only after a failure that `retry.on` names and that came before
//! any response byte (so the client has seen nothing), only while `retry.tries` allows,
//! only if its method is idempotent (RFC 9110 §9.2.2) unless `retry.non_idempotent`, and
//! only if its whole body is in hand: a body that streamed to the server cannot be sent
//! twice. Each server is tried at most once.

use http::{HeaderMap, Method, Request, Uri};

use super::RequestBody;
use super::upload;
use crate::config::{Retry, RetryReason};

/// `origin.retry`, ready to ask.
#[derive(Clone, Copy, Debug)]
pub(super) struct Policy {
    /// The most servers a sent request goes to.
    tries: u32,
    /// The reasons `on` names, one bit each by position in [`RetryReason::ALL`].
    on: u8,
    non_idempotent: bool,
}

impl Policy {
    pub(super) fn new(config: &Retry) -> Policy {
        Policy {
            tries: config.tries,
            on: (config.on.iter()).fold(0, |on, reason| on | 1 << *reason as u8),
            non_idempotent: config.non_idempotent,
        }
    }

    /// Whether a `method` request to a pool of `servers` could ever be sent twice, so
    /// that a copy of it is worth keeping.
    pub(super) fn may_resend(&self, method: &Method, servers: usize) -> bool {
        self.tries > 1 && servers > 1 && (method.is_idempotent() || self.non_idempotent)
    }

    /// Whether a request sent to `sent` servers so far, the last failing with `reason`,
    /// goes to another one.
    pub(super) fn allows(&self, reason: RetryReason, sent: u32) -> bool {
        sent < self.tries && self.on & (1 << reason as u8) != 0
    }
}

/// What it takes to send a request again: its head, and its body as read ahead.
pub(super) struct Replay {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Vec<http_body::Frame<bytes::Bytes>>,
}

impl Replay {
    /// A copy of `request`, whose body's frames are `body`.
    pub(super) fn of(
        request: &Request<RequestBody>,
        body: Vec<http_body::Frame<bytes::Bytes>>,
    ) -> Replay {
        Replay {
            method: request.method().clone(),
            uri: request.uri().clone(),
            headers: request.headers().clone(),
            body,
        }
    }

    /// The request again, as it was first sent.
    pub(super) fn request(&self) -> Request<RequestBody> {
        let mut request = Request::new(upload::replay(&self.body));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_resend_an_idempotent_request_once_after_an_error_or_a_timeout() {
        let policy = Policy::new(&Retry::default());
        for method in [Method::GET, Method::HEAD, Method::PUT, Method::DELETE] {
            assert!(policy.may_resend(&method, 3), "{method}");
        }
        assert!(!policy.may_resend(&Method::POST, 3));
        assert!(!policy.may_resend(&Method::PATCH, 3));
        assert!(!policy.may_resend(&Method::GET, 1), "no other server");
        assert!(policy.allows(RetryReason::Error, 1));
        assert!(policy.allows(RetryReason::Timeout, 1));
        assert!(!policy.allows(RetryReason::InvalidHeader, 1));
        assert!(!policy.allows(RetryReason::Error, 2), "two tries in all");
        let opted_in = Policy::new(&Retry {
            tries: 1,
            on: vec![RetryReason::InvalidHeader],
            non_idempotent: true,
        });
        assert!(
            !opted_in.may_resend(&Method::POST, 3),
            "one try: never twice"
        );
        let opted_in = Policy {
            tries: 3,
            ..opted_in
        };
        assert!(opted_in.may_resend(&Method::POST, 3));
        assert!(opted_in.allows(RetryReason::InvalidHeader, 2));
        assert!(!opted_in.allows(RetryReason::Timeout, 1));
    }
}
