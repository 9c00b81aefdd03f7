//! A lean HTTP/1.1 client connection, for a proxy talking to its origin.
//!
//! A [`Connection`] wraps a stream that is already connected (TCP, or TLS over it) and
//! takes one request at a time: [`Connection::send`] writes the request head and streams
//! its body while it reads the response head (so an answer that comes before the upload
//! ends is seen), and returns a [`ResponseBody`] that reads the rest of the response from
//! the stream. All of it runs in the task that polls it: no task per connection, no
//! channel between the request and the socket. The read buffer is the connection's, kept
//! across requests, and body frames are slices of it, not copies. A connection remembers
//! the field names of its last response head ([`NameMemo`]), so a name that comes again at
//! the same place, as the same bytes, is not parsed again; [`server::read_request`] takes
//! one for the heads of a client's connection.
//!
//! Framing follows RFC 9112 §6.3: no body for a HEAD request or a 1xx, 204 or 304 answer;
//! chunked when `chunked` is the last transfer coding (its trailers become a trailers
//! frame); `Content-Length` otherwise, all of its values equal; else until the server
//! closes. A response with both `Transfer-Encoding` and `Content-Length` is read as chunked
//! and its connection is not used again. Interim answers (100, 103) are skipped.
//!
//! A response head comes back with its end-to-end fields only: the hop-by-hop ones (RFC
//! 9110 §7.6.1: `Connection`, the fields it names, `Keep-Alive`, `Proxy-Connection`, `TE`,
//! `Trailer`, `Transfer-Encoding`, `Upgrade`) and a `Content-Length` that a transfer
//! coding overrode are read for the framing and persistence, and not passed on;
//! [`ResponseBody::delimit`] says how the body was framed.
//!
//! When a body has ended cleanly and its connection can take another request (the
//! response persists, RFC 9112 §9.3; the request went out whole; nothing came past the
//! body), [`ResponseBody::take_connection`] hands it back; pooling it is the caller's
//! business, and [`Connection::is_open`] says whether an idle one was closed meanwhile.
//!
//! What it deliberately does not do: HTTP/2 or HTTP/1.0 requests (it writes HTTP/1.1),
//! pipelining (one request at a time per connection), upgrades and `CONNECT` (a 101 is an
//! error), proxies (absolute-form targets), `Expect: 100-continue` waiting, connecting,
//! TLS, pooling and timeouts (the caller's: it wraps the stream and the futures).

// Top-down: each module uses only those below it.
pub mod server;
mod send;
mod body;
mod head;
mod conn;
mod names;
mod error;

pub use body::ResponseBody;
pub use conn::{Connection, Limits, MAX_HEADERS};
pub use error::{BoxError, Error, Framing, SendError};
pub use head::{AddFields, Delimit, FieldLines, FieldWriter};
pub use names::NameMemo;

#[cfg(test)]
mod tests;
