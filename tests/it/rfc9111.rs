//! RFC 9111 shared-cache behaviour over real sockets, written spec-first: each test
//! names the section of RFC 9111 (or RFC 9110 / RFC 9211 / RFC 5861) it checks.
//!
//! Every test starts its own scripted origin and proxy on 127.0.0.1:0, with admission
//! `always` unless it says otherwise, so that a storable response is stored on first
//! sight. Responses are made stale with `Age` or `max-age=0` rather than by sleeping.
//!
//! Run one area with e.g. `cargo test --test it rfc9111::vary::`.

// Shared with the RFC 9213 scenarios.
pub(crate) mod common;

mod cache_status;
mod disconnected;
mod freshness;
mod head_range;
mod invalidation;
mod request_directives;
mod response_directives;
mod status_codes;
mod validation;
mod vary;
