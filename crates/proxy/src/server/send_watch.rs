//! Whether a connection's client is taking the response bytes it is sent
//! (`server.send_timeout`, like nginx's `send_timeout`).
//!
//! A client can stop reading and so hold its connection, and a slot of
//! `server.max_connections`, for as long as it likes: over HTTP/1 by leaving its socket's
//! receive buffer full (the proxy's writes then wait), over HTTP/2 by granting no
//! flow-control window (hyper then never asks the response body for more, while PINGs
//! and their answers keep the socket busy). [`SendProgress`] tells the two apart from a
//! slow origin, which is not the client's fault:
//! - *waiting on the client*: a socket write is pending ([`Watched`] saw it return
//!   `Pending`), or a response body handed hyper a frame and hyper has not asked it for
//!   the next one yet (the body itself waiting for its origin is not this);
//! - *progress*: a pending socket write completed, or hyper asked a body for its next
//!   frame.
//!
//! The connection's timer (`connection::drive`) looks at both on each tick; a connection
//! that waited on its client with no progress for `send_timeout` is dropped, and one that
//! waited for a tick or more is reaped like an idle one when `max_connections` is reached.
//! On the request path this costs a few uncontended atomic operations per frame and per
//! write, and no clock read.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One connection's send progress (see the module docs).
#[derive(Debug, Default)]
pub(super) struct SendProgress {
    /// Response bodies that handed out a frame and were not asked for the next one yet.
    bodies_waiting: AtomicU32,
    /// The last socket write returned `Pending` and none has completed since.
    write_pending: AtomicBool,
    /// Progress was made since the timer last looked.
    progressed: AtomicBool,
}

impl SendProgress {
    /// Whether something waits on the client now, and whether any progress was made since
    /// the last call (which it resets).
    pub(super) fn look(&self) -> (bool, bool) {
        let progressed = self.progressed.swap(false, Ordering::Relaxed);
        let waiting = self.write_pending.load(Ordering::Relaxed)
            || self.bodies_waiting.load(Ordering::Relaxed) > 0;
        (waiting, progressed)
    }

    /// A body handed out a frame: it now waits for hyper to take it on.
    pub(super) fn frame_handed_out(&self) {
        self.bodies_waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// Hyper asked a body that had handed out a frame for the next one (`asked`), or
    /// dropped it (`!asked`): it no longer waits on the client.
    pub(super) fn frame_taken(&self, asked: bool) {
        self.bodies_waiting.fetch_sub(1, Ordering::Relaxed);
        if asked {
            self.progressed.store(true, Ordering::Relaxed);
        }
    }

    /// What a socket write returned.
    fn wrote<T>(&self, result: &Poll<io::Result<T>>) {
        match result {
            Poll::Pending => self.write_pending.store(true, Ordering::Relaxed),
            Poll::Ready(_) => {
                // Only a write that had to wait counts as progress: a PING's answer
                // written at once says nothing about the response the client stalls.
                if self.write_pending.swap(false, Ordering::Relaxed) {
                    self.progressed.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// A client stream whose writes are reported to its connection's [`SendProgress`].
pub(super) struct Watched<IO> {
    io: IO,
    progress: Arc<SendProgress>,
}

impl<IO> Watched<IO> {
    /// `io`, reporting its writes to `progress`.
    pub(super) fn new(io: IO, progress: Arc<SendProgress>) -> Watched<IO> {
        Watched { io, progress }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write(cx, data);
        this.progress.wrote(&result);
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.progress.wrote(&result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    // Not watched: a TCP flush is a no-op that is always ready, which would pass for
    // progress; TLS flushes go through `poll_write` of the socket below.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_not_taken_waits_on_the_client_until_hyper_asks_again() {
        let progress = SendProgress::default();
        assert_eq!(progress.look(), (false, false));
        progress.frame_handed_out();
        assert_eq!(progress.look(), (true, false));
        progress.frame_taken(true);
        assert_eq!(progress.look(), (false, true));
        assert_eq!(progress.look(), (false, false), "progress is reported once");
        progress.frame_handed_out();
        progress.frame_taken(false);
        assert_eq!(
            progress.look(),
            (false, false),
            "a dropped body is no progress"
        );
    }

    #[test]
    fn only_a_write_that_had_to_wait_counts_as_progress() {
        let progress = SendProgress::default();
        progress.wrote::<usize>(&Poll::Ready(Ok(10)));
        assert_eq!(progress.look(), (false, false));
        progress.wrote::<usize>(&Poll::Pending);
        assert_eq!(progress.look(), (true, false));
        progress.wrote::<usize>(&Poll::Pending);
        assert_eq!(progress.look(), (true, false));
        progress.wrote::<usize>(&Poll::Ready(Ok(4096)));
        assert_eq!(progress.look(), (false, true));
    }
}
