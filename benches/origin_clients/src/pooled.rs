//! The response body the hyper and lean candidates hand on: the origin's body, and what
//! it holds of its connection until the body ends, when the connection goes back to the
//! idle list (if it can take another request); a body dropped halfway, or one that
//! failed, drops its connection, which closes it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::idle::Idle;
use crate::origin::BoxError;

/// What a body holds of its connection while it is read.
pub(crate) trait Lease<B>: Sized {
    /// What the idle list keeps.
    type Idle;

    /// Lets the connection do its I/O with the body's waker, where the body's reads need
    /// that; whether it did (the body is then polled again).
    fn drive(&mut self, cx: &mut Context<'_>) -> bool;

    /// What to pool, now that `body` has ended cleanly, if the connection can take
    /// another request.
    fn reusable(self, body: &mut B) -> Option<Self::Idle>;
}

/// A response body holding its connection (see the module doc).
pub(crate) struct Pooled<B: Body, L: Lease<B>> {
    body: B,
    /// `None` once given back, or the body broke.
    lease: Option<L>,
    idle: Idle<L::Idle>,
}

impl<B: Body, L: Lease<B>> Pooled<B, L> {
    /// `body`, holding `lease` until it ends, then giving it back to `idle`.
    pub(crate) fn new(body: B, lease: L, idle: Idle<L::Idle>) -> Self {
        Pooled {
            body,
            lease: Some(lease),
            idle,
        }
    }

    fn release(&mut self) {
        if let Some(lease) = self.lease.take()
            && let Some(connection) = lease.reusable(&mut self.body)
        {
            self.idle.put(connection);
        }
    }
}

impl<B, L> Body for Pooled<B, L>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
    L: Lease<B> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        // The body first: when it has nothing, it may ask its connection for more, which
        // driving the connection then reads and the second poll takes.
        let mut frame = Pin::new(&mut this.body).poll_frame(cx);
        if frame.is_pending() && this.lease.as_mut().is_some_and(|lease| lease.drive(cx)) {
            frame = Pin::new(&mut this.body).poll_frame(cx);
        }
        match frame {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(None) => {
                this.release();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(error))) => {
                this.lease = None;
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B: Body, L: Lease<B>> Drop for Pooled<B, L> {
    /// A body read to its last byte by a server that then stopped polling it (hyper's
    /// does, once the length is reached), or one that had none (`HEAD`, 204, 304), still
    /// frees its connection.
    fn drop(&mut self) {
        if self.body.is_end_stream() {
            self.release();
        }
    }
}
