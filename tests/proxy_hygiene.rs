//! Proxy hygiene over real sockets (issue 6, item 9): hop-by-hop fields, `Via`,
//! `X-Forwarded-*`, request framing and `Host` rules, head limits, and `Max-Forwards`.
//! Each test names the RFC section it checks. Malformed requests are written with a raw
//! `TcpStream`.
//!
//! Run one area with e.g. `cargo test --test proxy_hygiene framing::`.

mod support;

#[path = "proxy_hygiene/common.rs"]
mod common;

#[path = "proxy_hygiene/forwarding.rs"]
mod forwarding;
#[path = "proxy_hygiene/framing.rs"]
mod framing;
#[path = "proxy_hygiene/hop_by_hop.rs"]
mod hop_by_hop;
#[path = "proxy_hygiene/http2.rs"]
mod http2;
#[path = "proxy_hygiene/limits.rs"]
mod limits;
#[path = "proxy_hygiene/max_forwards.rs"]
mod max_forwards;
