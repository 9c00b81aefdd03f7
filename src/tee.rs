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
//! error or a dropped fill abandons the writer, which deletes its temp file and counts
//! the fill as dropped, by its [`FillDrop`] reason. Each drop is logged at debug with
//! its key, and one line per reason per ten seconds at info (a client that left, a body
//! that outgrew its limit) or warn (the rest), with the number held back
//! (`logging::throttle`): a drop can come with every request.
//!
//! A fill outlives its client: when the response body is dropped before the origin's
//! body ended (the client went away, or had all of the range it asked for), the tee's
//! [`Drop`] hands the origin body and the fill to an *orphan* task that reads it to its
//! end at the disk's pace, if fewer than `cache.max_orphan_fills` orphans run
//! ([`Fills`]); otherwise the fill is dropped (`client-gone`). The fill's own byte
//! limit and the origin's read timeout bound each orphan. Every writer and orphan task
//! is tracked by [`Fills`], so a graceful shutdown can wait for them.
//!
//! A tee can also count the body bytes it streams into one of the [`Metrics`] byte
//! counters ([`TeeBody::counting`]): how the proxy measures what admission kept off the
//! disk, whatever the body's framing.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio_util::task::TaskTracker;

use crate::logging::throttle::Throttle;
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

/// The fills of one server: every writer and orphan task, which a graceful shutdown
/// waits for ([`Fills::wait`]), and the bound on fills running on without their client.
#[derive(Clone)]
pub struct Fills {
    tasks: TaskTracker,
    /// One permit per orphan fill (`cache.max_orphan_fills`).
    orphans: Arc<Semaphore>,
}

impl Fills {
    /// The fills of a server that lets at most `max_orphans` fills outlive their client.
    pub fn new(max_orphans: usize) -> Fills {
        Fills {
            tasks: TaskTracker::new(),
            orphans: Arc::new(Semaphore::new(max_orphans)),
        }
    }

    /// Waits until every fill in flight has ended, committed or dropped; fills started
    /// meanwhile are waited for too.
    pub async fn wait(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        // Open again, for a caller that stopped waiting and serves on.
        self.tasks.reopen();
    }
}

/// The sending half of a fill: data frames with their buffer permits, and the end signal.
struct FillFeed {
    frames: mpsc::UnboundedSender<(Bytes, OwnedSemaphorePermit)>,
    /// Bounds the bytes queued in `frames` (an unbounded channel bounded by permits, so
    /// the bound is in bytes rather than in frames of unknown size).
    buffer: Arc<Semaphore>,
    /// Sent once the origin body ended cleanly, or with the reason the tee gave up.
    end: oneshot::Sender<FillEnd>,
    /// Where an orphan task of this fill is tracked.
    tasks: TaskTracker,
}

impl FillFeed {
    /// Queues a copy of `data` for the writer; false when the fill must be dropped: the
    /// buffer is full (the disk is behind), or the writer already gave up (and counted
    /// why, so the end signal it no longer reads changes nothing).
    fn offer(&self, data: &Bytes) -> bool {
        match self
            .buffer
            .clone()
            .try_acquire_many_owned(permits_for(data))
        {
            Ok(permit) => self.frames.send((data.clone(), permit)).is_ok(),
            Err(_) => false,
        }
    }

    /// Like [`FillFeed::offer`], but waits for room in the buffer: an orphan fill has no
    /// client to keep up with, so the disk sets the pace. False when the writer gave up.
    async fn offer_waiting(&self, data: &Bytes) -> bool {
        match self
            .buffer
            .clone()
            .acquire_many_owned(permits_for(data))
            .await
        {
            Ok(permit) => self.frames.send((data.clone(), permit)).is_ok(),
            // The semaphore is never closed.
            Err(_) => false,
        }
    }
}

/// The buffer permits a frame takes: its length, or all of them for a frame larger than
/// the whole buffer.
fn permits_for(data: &Bytes) -> u32 {
    u32::try_from(data.len().min(FILL_BUFFER_BYTES)).unwrap_or(u32::MAX)
}

/// Where a body's streamed data bytes are counted.
type Counted = Option<(Arc<Metrics>, ByteCounter)>;

/// What the tee's `Drop` calls to let a fill run on without its client: spawns
/// [`run_orphan`] for the body type, which `Drop` (without the bounds that needs) cannot
/// name itself.
type RunOrphan<B> = fn(B, FillFeed, OwnedSemaphorePermit, Counted);

/// A response body that streams `inner` to the client and, when a fill is attached, to disk.
pub struct TeeBody<B> {
    /// `None` only after `Drop` handed it to an orphan fill.
    inner: Option<B>,
    fill: Option<FillFeed>,
    /// Set with a fill: how `Drop` lets it run on, and the orphan permits.
    orphan: Option<(RunOrphan<B>, Arc<Semaphore>)>,
    /// Where the streamed data bytes are counted, if anywhere.
    counted: Counted,
}

impl<B> TeeBody<B> {
    /// A body that only streams to the client.
    pub fn passthrough(inner: B) -> TeeBody<B> {
        TeeBody {
            inner: Some(inner),
            fill: None,
            orphan: None,
            counted: None,
        }
    }

    /// This body, adding the length of every data frame it streams (or an orphan fill
    /// reads on) to `counter`.
    #[must_use]
    pub fn counting(mut self, metrics: Arc<Metrics>, counter: ByteCounter) -> TeeBody<B> {
        self.counted = Some((metrics, counter));
        self
    }

    /// A body that also writes what it streams to `writer`, committing it when the body
    /// ends cleanly, as one of `fills`. `ended` is called once the fill has ended, with
    /// `None` when it was committed and the reason when it was dropped: the proxy frees
    /// the key's collapse slot then, so that the requests waiting for this fill look
    /// again once its entry exists, or all fetch at once when it never will.
    pub fn with_fill(
        inner: B,
        writer: EntryWriter,
        key: &str,
        fills: &Fills,
        ended: impl FnOnce(Option<FillDrop>) + Send + 'static,
    ) -> TeeBody<B>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Send,
    {
        let (frames, receiver) = mpsc::unbounded_channel();
        let (end, end_signal) = oneshot::channel();
        let key = Arc::from(key);
        fills.tasks.spawn(async move {
            let dropped = write_fill(writer, receiver, end_signal, key).await;
            ended(dropped);
        });
        let buffer = Arc::new(Semaphore::new(FILL_BUFFER_BYTES));
        let run: RunOrphan<B> = |inner, feed, permit, counted| {
            let tasks = feed.tasks.clone();
            tasks.spawn(run_orphan(inner, feed, permit, counted));
        };
        TeeBody {
            inner: Some(inner),
            fill: Some(FillFeed {
                frames,
                buffer,
                end,
                tasks: fills.tasks.clone(),
            }),
            orphan: Some((run, fills.orphans.clone())),
            counted: None,
        }
    }
}

/// Tells the writer how the tee's side ended (`Ok`: the body is complete) and detaches
/// the fill. A free function over the field, so that it can run while the body is
/// borrowed.
fn end_fill(fill: &mut Option<FillFeed>, end: FillEnd) {
    if let Some(feed) = fill.take() {
        // The writer may already have given up (disk error): nothing to signal then.
        let _ = feed.end.send(end);
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
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some((metrics, counter))) = (frame.data_ref(), &this.counted) {
                    metrics.add_bytes(*counter, data.len() as u64);
                }
                if let (Some(data), Some(feed)) = (frame.data_ref(), this.fill.as_ref())
                    && !feed.offer(data)
                {
                    end_fill(&mut this.fill, Err(FillDrop::DiskBehind));
                }
                // hyper stops polling once `is_end_stream` says so (e.g. Content-Length
                // reached), so the end may be visible only here, never as `Ready(None)`.
                if inner.is_end_stream() {
                    end_fill(&mut this.fill, Ok(()));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                end_fill(&mut this.fill, Err(FillDrop::OriginError));
                Poll::Ready(Some(Err(error)))
            }
            Poll::Ready(None) => {
                end_fill(&mut this.fill, Ok(()));
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B> Drop for TeeBody<B> {
    /// A fill still attached means the body is dropped before its end: the client went
    /// away (or had all it asked for). The fill runs on as an orphan if there is room for
    /// one; otherwise the feed drops with the body and the writer abandons the fill.
    fn drop(&mut self) {
        let (Some(feed), Some((run, orphans))) = (self.fill.take(), self.orphan.take()) else {
            return;
        };
        let Some(inner) = self.inner.take() else {
            return;
        };
        if let Ok(permit) = orphans.try_acquire_owned() {
            run(inner, feed, permit, self.counted.take());
        }
    }
}

/// An orphan fill: reads the rest of the origin's body into the fill at the disk's pace,
/// holding one of the `cache.max_orphan_fills` permits until it ends.
async fn run_orphan<B>(
    mut inner: B,
    feed: FillFeed,
    _permit: OwnedSemaphorePermit,
    counted: Counted,
) where
    B: Body<Data = Bytes> + Unpin,
{
    let end = loop {
        match inner.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    if let Some((metrics, counter)) = &counted {
                        metrics.add_bytes(*counter, data.len() as u64);
                    }
                    if !feed.offer_waiting(data).await {
                        // The writer gave up (and counted why).
                        return;
                    }
                }
                if inner.is_end_stream() {
                    break Ok(());
                }
            }
            Some(Err(_)) => break Err(FillDrop::OriginError),
            None => break Ok(()),
        }
    };
    // The writer may already have given up: nothing to signal then.
    let _ = feed.end.send(end);
}

/// The writer task of one fill: appends frames, then commits if and only if the body
/// completed; otherwise abandons the fill with the reason it ended, which it returns
/// (`None`: committed).
async fn write_fill(
    mut writer: EntryWriter,
    mut frames: mpsc::UnboundedReceiver<(Bytes, OwnedSemaphorePermit)>,
    ended: oneshot::Receiver<FillEnd>,
    key: Arc<str>,
) -> Option<FillDrop> {
    while let Some(first) = frames.recv().await {
        let (data, permits) = coalesce(first, &mut frames);
        if let Err(error) = writer.write(&data).await {
            // Returning drops the receivers too, which tells the tee.
            let reason = FillDrop::of(&error);
            abandon(writer, reason, &key, Some(&error));
            return Some(reason);
        }
        drop(permits);
    }
    // The tee signals the end before it drops the frame sender, so by now the signal
    // is either there or will never come.
    let reason = match ended.await {
        Ok(Ok(())) => return commit(writer, &key).await,
        Ok(Err(reason)) => reason,
        Err(_) => FillDrop::ClientGone,
    };
    abandon(writer, reason, &key, None);
    Some(reason)
}

/// Joins `first` and the frames already queued behind it (up to [`WRITE_BATCH_BYTES`])
/// into one write, with their permits, which are to be dropped once it is written: each
/// write is a trip to the blocking pool, which costs more than copying the frames
/// together.
fn coalesce(
    first: (Bytes, OwnedSemaphorePermit),
    frames: &mut mpsc::UnboundedReceiver<(Bytes, OwnedSemaphorePermit)>,
) -> (Bytes, Vec<OwnedSemaphorePermit>) {
    let (first, first_permit) = first;
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
    (data, permits)
}

/// Commits the whole body written to `writer`; `None` when it is in place, else why the
/// fill was dropped.
async fn commit(writer: EntryWriter, key: &str) -> Option<FillDrop> {
    // A failed commit is counted by `finish` itself.
    let error = match writer.finish().await {
        Ok(()) => {
            tracing::debug!(key = %key, "fill committed");
            return None;
        }
        Err(error) => error,
    };
    // The store logs disk trouble once per back-off period, not per fill.
    if error.trouble().is_some() {
        tracing::debug!(key = %key, %error, "fill not committed");
    } else {
        tracing::warn!(key = %key, %error, "fill not committed");
    }
    Some(FillDrop::of(&error))
}

/// One log line per drop reason per `throttle::EVERY`, indexed like [`FillDrop::ALL`].
static DROP_LOG: [Throttle; FillDrop::ALL.len()] = [const { Throttle::new() }; FillDrop::ALL.len()];

/// Abandons a fill for `reason` (the store counts it), logging it at debug, and at
/// info (an expected reason) or warn as the throttle allows; a drop for disk trouble
/// only at debug, as the store logs that once per back-off period.
fn abandon(writer: EntryWriter, reason: FillDrop, key: &str, error: Option<&StoreError>) {
    let disk_trouble = error.is_some_and(|e| e.trouble().is_some());
    let error = error.map(tracing::field::display);
    let why = reason.as_str();
    tracing::debug!(key, reason = why, error, "fill dropped");
    if disk_trouble {
        writer.abandon(reason);
        return;
    }
    if let Some(held_back) = DROP_LOG[reason as usize].admit() {
        if reason.is_expected() {
            tracing::info!(
                key,
                reason = why,
                error,
                held_back,
                "fill dropped; not stored"
            );
        } else {
            tracing::warn!(
                key,
                reason = why,
                error,
                held_back,
                "fill dropped; not stored"
            );
        }
    }
    writer.abandon(reason);
}
