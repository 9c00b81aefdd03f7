//! How the connections speak HTTP/1.1 and HTTP/2: hyper's limits and timers, set once
//! from `[server]` for every connection.

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;

use crate::config::ServerConfig;

/// hyper's HTTP/1 `max_headers` when none is set (`DEFAULT_MAX_HEADERS` in its `role.rs`).
const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

/// Streams an HTTP/2 client may open and reset before this side accepted them; more end
/// the connection with GOAWAY (ENHANCE_YOUR_CALM). The rapid-reset attack
/// (CVE-2023-44487) opens and cancels streams in a loop, so each costs the server work
/// but never counts against `max_concurrent_streams`. 20 is h2's own default, named here
/// so that it is a decision rather than an accident of a dependency.
pub(super) const H2_MAX_PENDING_ACCEPT_RESETS: usize = 20;

/// Streams this side may reset for the client's protocol errors on one connection before
/// it sends GOAWAY: the same attack, provoking resets instead of sending them (h2's default).
pub(super) const H2_MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// The connection builder for `config`: the head limits for HTTP/1 (its head timer is
/// the head guard's), the header-list, stream and reset limits and keep-alive pings for
/// HTTP/2.
///
/// hyper's other HTTP/1 options keep their defaults: `writev` (auto: vectored on TCP),
/// `pipeline_flush`, `half_close`, `auto_date_header`, and serving HTTP/1 only instead
/// of detecting HTTP/2, measured one by one on a pass-through, changed the instructions
/// per request by no more than the runs' own spread (`benches/RESULTS.md`, "the client
/// side trimmed by profile"), and each but `writev` would change what the proxy does.
pub(super) fn builder(config: &ServerConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        // No header_read_timeout: the head guard enforces `server.header_read_timeout`
        // (see `head_guard`), and hyper's would arm a timer for every request.
        .header_read_timeout(None)
        .max_buf_size(config.max_header_bytes);
    // hyper keeps its default of 100 fields on the stack; any explicit value moves
    // them to the heap for every request (about 5% slower, its docs say).
    if config.max_headers != HYPER_DEFAULT_MAX_HEADERS {
        builder.http1().max_headers(config.max_headers);
    }
    // Config validation keeps the value far below u32::MAX.
    let header_list = u32::try_from(config.max_header_bytes).unwrap_or(u32::MAX);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(header_list)
        .max_concurrent_streams(config.max_concurrent_streams)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(H2_MAX_LOCAL_ERROR_RESETS)
        // Pings find a vanished peer of a connection with a long stream open; an idle
        // one is closed by the idle timer instead.
        .keep_alive_interval(config.idle_timeout)
        .keep_alive_timeout(config.header_read_timeout);
    builder
}
