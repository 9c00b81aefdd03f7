//! The tee: one origin body streamed to the client and, at the same time, to disk.
//!
//! [`TeeBody`] forwards every frame to the client as it arrives; for an admitted
//! fill it also hands a clone of each data frame (a `Bytes` clone is a reference
//! count, not a copy) to a writer task that appends it to the [`EntryWriter`].
//!
//! The hand-off is bounded in *bytes* by a semaphore of [`FILL_BUFFER_BYTES`]
//! permits: a frame takes permits for its length and gives them back once written.
//! When the disk falls behind and the permits run out, the fill is dropped — the
//! client is never slowed down to let the disk catch up (`docs/design.md`, "Known
//! traps"). The fill commits only if the origin body ended cleanly: the writer task
//! calls [`EntryWriter::finish`] only after the tee signalled the end; an origin
//! error, a dropped fill or a client that goes away abandons the writer, which deletes
//! its temp file and counts the fill as dropped, by its [`FillDrop`] reason. Only the
//! drops an operator should hear about are logged above debug
//! ([`FillDrop::is_expected`]): a client that leaves is routine.
//!
//! A tee can also count the body bytes it streams into one of the [`Metrics`] byte
//! counters ([`TeeBody::counting`]): how the proxy measures what admission kept off the
//! disk, whatever the body's framing.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::metrics::{ByteCounter, Metrics};
use crate::store::{EntryWriter, FillDrop, StoreError};

/// Bytes that may wait between the client stream and the disk writer of one fill.
///
/// On loopback an origin can outrun a page-cache write for a few milliseconds; 16 MiB
/// lets a fill ride out such bursts (a 5 MiB body from a local origin is stored, not
/// dropped) while bounding what one lagging fill can hold in memory.
pub const FILL_BUFFER_BYTES: usize = 16 * 1024 * 1024;

/// Frames already queued are written together up to this many bytes.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// How the tee's side of a fill ended, sent to the writer task. A feed dropped without
/// sending one means the response body itself was dropped: the client went away.
type FillEnd = Result<(), FillDrop>;

/// The sending half of a fill: data frames with their buffer permits, and the end signal.
struct FillFeed {
    frames: mpsc::UnboundedSender<(Bytes, OwnedSemaphorePermit)>,
    /// Bounds the bytes queued in `frames` (an unbounded channel bounded by permits, so
    /// the bound is in bytes rather than in frames of unknown size).
    buffer: Arc<Semaphore>,
    /// Sent once the origin body ended cleanly, or with the reason the tee gave up.
    end: oneshot::Sender<FillEnd>,
}

impl FillFeed {
    /// Queues a copy of `data` for the writer; false when the fill must be dropped: the
    /// buffer is full (the disk is behind), or the writer already gave up (and counted
    /// why, so the end signal it no longer reads changes nothing).
    fn offer(&self, data: &Bytes) -> bool {
        // A frame larger than the whole buffer takes all of it.
        let wanted = u32::try_from(data.len().min(FILL_BUFFER_BYTES)).unwrap_or(u32::MAX);
        match self.buffer.clone().try_acquire_many_owned(wanted) {
            Ok(permit) => self.frames.send((data.clone(), permit)).is_ok(),
            Err(_) => false,
        }
    }
}

/// A response body that streams `inner` to the client and, when a fill is attached, to disk.
pub struct TeeBody<B> {
    inner: B,
    fill: Option<FillFeed>,
    /// Where the streamed data bytes are counted, if anywhere.
    counted: Option<(Arc<Metrics>, ByteCounter)>,
}

impl<B> TeeBody<B> {
    /// A body that only streams to the client.
    pub fn passthrough(inner: B) -> TeeBody<B> {
        TeeBody {
            inner,
            fill: None,
            counted: None,
        }
    }

    /// This body, adding the length of every data frame it streams to `counter`.
    #[must_use]
    pub fn counting(mut self, metrics: Arc<Metrics>, counter: ByteCounter) -> TeeBody<B> {
        self.counted = Some((metrics, counter));
        self
    }

    /// A body that also writes what it streams to `writer`, committing it when the body ends cleanly.
    pub fn with_fill(inner: B, writer: EntryWriter, key: &str) -> TeeBody<B> {
        let (frames, receiver) = mpsc::unbounded_channel();
        let (end, ended) = oneshot::channel();
        tokio::spawn(write_fill(writer, receiver, ended, Arc::from(key)));
        let buffer = Arc::new(Semaphore::new(FILL_BUFFER_BYTES));
        TeeBody {
            inner,
            fill: Some(FillFeed {
                frames,
                buffer,
                end,
            }),
            counted: None,
        }
    }

    /// Tells the writer how the tee's side ended (`Ok`: the body is complete) and
    /// detaches the fill.
    fn end_fill(&mut self, end: FillEnd) {
        if let Some(feed) = self.fill.take() {
            // The writer may already have given up (disk error): nothing to signal then.
            let _ = feed.end.send(end);
        }
    }
}

impl<B> Body for TeeBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some((metrics, counter))) = (frame.data_ref(), &this.counted) {
                    metrics.add_bytes(*counter, data.len() as u64);
                }
                if let (Some(data), Some(feed)) = (frame.data_ref(), this.fill.as_ref())
                    && !feed.offer(data)
                {
                    this.end_fill(Err(FillDrop::DiskBehind));
                }
                // hyper stops polling once `is_end_stream` says so (e.g. Content-Length
                // reached), so the end may be visible only here, never as `Ready(None)`.
                if this.inner.is_end_stream() {
                    this.end_fill(Ok(()));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.end_fill(Err(FillDrop::OriginError));
                Poll::Ready(Some(Err(error)))
            }
            Poll::Ready(None) => {
                this.end_fill(Ok(()));
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The writer task of one fill: appends frames, then commits if and only if the body
/// completed; otherwise abandons the fill with the reason it ended.
async fn write_fill(
    mut writer: EntryWriter,
    mut frames: mpsc::UnboundedReceiver<(Bytes, OwnedSemaphorePermit)>,
    ended: oneshot::Receiver<FillEnd>,
    key: Arc<str>,
) {
    while let Some((first, first_permit)) = frames.recv().await {
        // Coalesce what is already queued into one write: each write is a trip to the
        // blocking pool, which costs more than copying the frames together.
        let mut queued = vec![first];
        let mut permits = vec![first_permit];
        let mut queued_len = queued[0].len();
        while queued_len < WRITE_BATCH_BYTES {
            let Ok((more, permit)) = frames.try_recv() else {
                break;
            };
            queued_len += more.len();
            queued.push(more);
            permits.push(permit);
        }
        let data = if queued.len() == 1 {
            queued.swap_remove(0)
        } else {
            let mut joined = BytesMut::with_capacity(queued_len);
            queued
                .iter()
                .for_each(|frame| joined.extend_from_slice(frame));
            joined.freeze()
        };
        if let Err(error) = writer.write(&data).await {
            // Returning drops the receivers too, which tells the tee.
            abandon(writer, FillDrop::of(&error), &key, Some(&error));
            return;
        }
        drop(permits);
    }
    // The tee signals the end before it drops the frame sender, so by now the signal
    // is either there or will never come.
    let reason = match ended.await {
        Ok(Ok(())) => {
            // A failed commit is counted by `finish` itself.
            match writer.finish().await {
                Ok(()) => tracing::debug!(key = %key, "fill committed"),
                Err(error) => tracing::warn!(key = %key, %error, "fill not committed"),
            }
            return;
        }
        Ok(Err(reason)) => reason,
        Err(_) => FillDrop::ClientGone,
    };
    abandon(writer, reason, &key, None);
}

/// Abandons a fill for `reason` (the store counts it), logging it at warn unless the
/// reason is expected.
fn abandon(writer: EntryWriter, reason: FillDrop, key: &str, error: Option<&StoreError>) {
    let error = error.map(tracing::field::display);
    if reason.is_expected() {
        tracing::debug!(key, reason = reason.as_str(), error, "fill dropped");
    } else {
        tracing::warn!(key, reason = reason.as_str(), error, "fill dropped");
    }
    writer.abandon(reason);
}
