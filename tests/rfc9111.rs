//! RFC 9111 shared-cache behaviour over real sockets, written spec-first: each test
//! names the section of RFC 9111 (or RFC 9110 / RFC 9211 / RFC 5861) it checks.
//!
//! Every test starts its own scripted origin and proxy on 127.0.0.1:0, with admission
//! `always` unless it says otherwise, so that a storable response is stored on first
//! sight. Responses are made stale with `Age` or `max-age=0` rather than by sleeping.
//!
//! Run one area with e.g. `cargo test --test rfc9111 vary::`.

mod support;

#[path = "rfc9111/common.rs"]
mod common;

#[path = "rfc9111/cache_status.rs"]
mod cache_status;
#[path = "rfc9111/disconnected.rs"]
mod disconnected;
#[path = "rfc9111/freshness.rs"]
mod freshness;
#[path = "rfc9111/head_range.rs"]
mod head_range;
#[path = "rfc9111/invalidation.rs"]
mod invalidation;
#[path = "rfc9111/request_directives.rs"]
mod request_directives;
#[path = "rfc9111/response_directives.rs"]
mod response_directives;
#[path = "rfc9111/status_codes.rs"]
mod status_codes;
#[path = "rfc9111/validation.rs"]
mod validation;
#[path = "rfc9111/vary.rs"]
mod vary;
