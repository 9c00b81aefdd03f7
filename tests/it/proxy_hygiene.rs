//! Proxy hygiene over real sockets: hop-by-hop fields, `Via`,
//! `X-Forwarded-*`, request framing and `Host` rules, head limits, and `Max-Forwards`.
//! Each test names the RFC section it checks. Malformed requests are written with a raw
//! `TcpStream`.
//!
//! Run one area with e.g. `cargo test --test it proxy_hygiene::framing::`.

// Also used by `origin_limits` for its raw uploads.
pub(crate) mod common;

mod bad_input;
mod forwarding;
mod framing;
mod hop_by_hop;
mod http2;
mod limits;
mod max_forwards;
mod one_connection;
mod request_body;
