//! The tee: one origin body streamed to the client and, at the same time, to disk.
//!
//! Without a fill, [`TeeBody`] is the origin's body as it is (optionally counting its
//! bytes). With a fill, a *pump* reads the origin at the origin's pace and hands each
//! data frame (a `Bytes` clone is a reference count, not a copy) to a writer task that
//! appends it to the [`EntryWriter`], and each frame to the client through a second
//! queue. The pump has a task of its own, and the client's body polls it too before it
//! looks at its queue ([`SharedPump`]), so a frame the client is waiting for is read
//! and written in one poll of the client's task. The fill does not wait for the client:
//! a client that is slow, or reads nothing for a while, would otherwise hold the fill,
//! and every request collapsed onto it, to its own pace; the pump's task drives it then.
//!
//! Both queues are bounded in *bytes* by semaphores whose permits a frame takes for its
//! length and gives back once written (to disk) or taken (by the client):
//! - [`FILL_BUFFER_BYTES`] toward the disk. While the client keeps up, a disk that falls
//!   behind drops the fill, never slows the client (`docs/design.md`, "Known traps").
//! - [`CLIENT_LAG_BYTES`] toward the client. A client that falls further behind is
//!   *detached*: it takes the frames queued for it, then reads the rest from the fill's
//!   file ([`FillTail`]) as the writer reports it written, at its own pace, while the
//!   pump reads the origin on at the disk's pace. Memory stays bounded by the two
//!   buffers, however slow the client. The simplest sound choice: the client gets the
//!   same bytes from the same origin response, only from the page cache. Only a fill of
//!   a declared length detaches its client, since it cannot outgrow its reservation; a
//!   detached client's response is cut (like an origin error) only when the fill then
//!   fails, that is on a disk error or an origin error. A client of a body without a
//!   declared length, or when no reader of the file could be opened, is waited for, as
//!   before (then the fill's followers wait at most `cache.collapse_timeout`).
//!
//! The fill commits only if the origin body ended cleanly: the writer task calls
//! [`EntryWriter::finish`] only after the pump signalled the end; an origin error or a
//! dropped fill abandons the writer, which deletes its temp file and counts the fill as
//! dropped, by its [`FillDrop`] reason. Each drop is logged at debug with its key, and one
//! line per reason per ten seconds at info (a client that left, a body that outgrew its
//! limit) or warn (the rest), with the number held back (`logging::throttle`): a drop can
//! come with every request.
//!
//! A fill outlives its client: when the response body is dropped before the origin's
//! body ended (the client went away, or had all of the range it asked for), the pump
//! reads on to the end as an *orphan*, at the disk's pace, if fewer than
//! `cache.max_orphan_fills` orphans run ([`Fills`]); otherwise the fill is dropped
//! (`client-gone`). The fill's own byte limit and the origin's read timeout bound each
//! orphan. Every pump and writer task is tracked by [`Fills`], so a graceful shutdown can
//! wait for them.
//!
//! A tee can also count the body bytes it streams into one of the [`Metrics`] byte
//! counters ([`TeeBody::counting`], or the pump for a fill): how the proxy measures what
//! admission kept off the disk, whatever the body's framing.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, TryLockError};
use std::task::{Context, Poll, Wake, Waker, ready};

use bytes::Bytes;
use futures_util::Stream;
use futures_util::task::AtomicWaker;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TrackedFuture;

use crate::body::BoxError;
use crate::logging::throttle::Throttle;
use crate::metrics::{ByteCounter, Metrics};
use crate::store::{EntryWriter, FillDrop, FillTail, StoreError};

/// Bytes that may wait between the origin and the disk writer of one fill.
///
/// On loopback an origin can outrun a page-cache write for a few milliseconds; 16 MiB
/// lets a fill ride out such bursts (a 5 MiB body from a local origin is stored, not
/// dropped) while bounding what one lagging fill can hold in memory.
pub(crate) const FILL_BUFFER_BYTES: usize = 16 * 1024 * 1024;

/// Bytes that may wait between the origin and the client of one fill before the client
/// is detached and reads on from the fill's file: beyond what the sockets buffer, so a
/// client that keeps up is fed from memory, and small enough that many slow clients at
/// once hold little.
pub(crate) const CLIENT_LAG_BYTES: usize = 4 * 1024 * 1024;

/// The most a detached client reads from the fill's file at once.
const TAIL_READ_BYTES: usize = 256 * 1024;

/// A long queue of frames has the writer's progress published after each this many
/// bytes of it, and a shorter one once it is drained.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// How the pump's side of a fill ended, sent to the writer task. A feed dropped without
/// sending one means the pump gave up without a reason of its own: the client went away.
type FillEnd = Result<(), FillDrop>;

/// The fills of one server: every pump and writer task, which a graceful shutdown waits
/// for ([`Fills::wait`]), and the bound on fills running on without their client.
#[derive(Clone)]
pub(crate) struct Fills {
    tasks: TaskTracker,
    /// One permit per orphan fill (`cache.max_orphan_fills`).
    orphans: Arc<Semaphore>,
}

impl Fills {
    /// The fills of a server that lets at most `max_orphans` fills outlive their client.
    pub(crate) fn new(max_orphans: usize) -> Fills {
        Fills {
            tasks: TaskTracker::new(),
            orphans: Arc::new(Semaphore::new(max_orphans)),
        }
    }

    /// Runs `fill`, the work of a fill outside a tee (a whole body stored in one call),
    /// as one of these fills, in the task that awaits it: a graceful shutdown waits for
    /// it too, and if the awaiting future is dropped first (its client left), the rest
    /// of `fill` runs on in a task of its own, never cut short. Not a task from the
    /// start: the spawn and the wake back would each wait for the other tasks of the
    /// scheduler pass, with the client's answer waiting behind them.
    pub(crate) fn run_here<F>(&self, fill: F) -> RunHere<F>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        RunHere {
            fill: Some(Box::pin(self.tasks.track_future(fill))),
            tasks: self.tasks.clone(),
        }
    }

    /// Waits until every fill in flight has ended, committed or dropped; fills started
    /// meanwhile are waited for too.
    pub(crate) async fn wait(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        // Open again, for a caller that stopped waiting and serves on.
        self.tasks.reopen();
    }
}

/// The future of [`Fills::run_here`].
pub(crate) struct RunHere<F: Future + Send + 'static>
where
    F::Output: Send + 'static,
{
    /// `None` once it ended.
    fill: Option<Pin<Box<TrackedFuture<F>>>>,
    /// Where the rest goes when this is dropped before the end.
    tasks: TaskTracker,
}

impl<F: Future + Send + 'static> Future for RunHere<F>
where
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(fill) = self.fill.as_mut() else {
            // Polled after its end: as a fused future, it waits for ever.
            return Poll::Pending;
        };
        let done = ready!(fill.as_mut().poll(cx));
        self.fill = None;
        Poll::Ready(done)
    }
}

impl<F: Future + Send + 'static> Drop for RunHere<F>
where
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        // Still tracked, so a graceful shutdown waits for it. Without a runtime (it is
        // shutting down) it is dropped, as a task of its own would be.
        if let Some(fill) = self.fill.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            drop(self.tasks.spawn(fill));
        }
    }
}

/// The sending half of a fill: data frames with their buffer permits, and the end signal.
struct FillFeed {
    frames: mpsc::UnboundedSender<(Bytes, OwnedSemaphorePermit)>,
    /// Bounds the bytes queued in `frames` (an unbounded channel bounded by permits, so
    /// the bound is in bytes rather than in frames of unknown size).
    buffer: Arc<Semaphore>,
    /// Sent once the origin body ended cleanly, or with the reason the pump gave up.
    end: oneshot::Sender<FillEnd>,
}

impl FillFeed {
    /// Queues a copy of `data` for the writer; false when the fill must be dropped: the
    /// buffer is full (the disk is behind), or the writer already gave up (and counted
    /// why, so the end signal it no longer reads changes nothing).
    fn offer(&self, data: &Bytes) -> bool {
        match self
            .buffer
            .clone()
            .try_acquire_many_owned(permits_for(data.len(), FILL_BUFFER_BYTES))
        {
            Ok(permit) => self.frames.send((data.clone(), permit)).is_ok(),
            Err(_) => false,
        }
    }

    /// Like [`FillFeed::offer`], but waits for room in the buffer: with no client fed
    /// from memory, the disk sets the pace. False when the writer gave up.
    async fn offer_waiting(&self, data: &Bytes) -> bool {
        match self
            .buffer
            .clone()
            .acquire_many_owned(permits_for(data.len(), FILL_BUFFER_BYTES))
            .await
        {
            Ok(permit) => self.frames.send((data.clone(), permit)).is_ok(),
            // The semaphore is never closed.
            Err(_) => false,
        }
    }
}

/// The permits a frame of `len` bytes takes from a buffer of `bound`: its length, or
/// all of them for a frame larger than the whole buffer.
fn permits_for(len: usize, bound: usize) -> u32 {
    u32::try_from(len.min(bound)).unwrap_or(u32::MAX)
}

/// Where a body's streamed data bytes are counted.
type Counted = Option<(Arc<Metrics>, ByteCounter)>;

/// How far a fill's writer got, for a detached client reading the file behind it: body
/// bytes on the file, and whether more will come.
#[derive(Clone, Copy, Debug)]
enum Written {
    /// More may come.
    Writing(u64),
    /// The whole body is on the file.
    Committed(u64),
    /// The fill was dropped: nothing more will come.
    Dropped(u64),
}

/// What the pump hands the client while the client keeps up.
enum Piece {
    /// A frame, with the lag permits it holds until the client takes it.
    Frame(Frame<Bytes>, OwnedSemaphorePermit),
    /// The origin's body failed.
    Failed(BoxError),
    /// The client fell [`CLIENT_LAG_BYTES`] behind: the rest of the body is on the fill's
    /// file, from the end of the frames before this one.
    Detached,
    /// The origin's body ended cleanly.
    End,
}

/// The pump's end of a client fed from memory.
struct ClientFeed {
    pieces: mpsc::UnboundedSender<Piece>,
    /// Bounds the bytes queued in `pieces`.
    lag: Arc<Semaphore>,
    /// Whether the client may be detached: its fill has a declared length and a reader
    /// of its file.
    detachable: bool,
}

/// The client as the pump sees it.
enum Client {
    /// Fed from memory.
    Attached(ClientFeed),
    /// Reading the fill's file; the sender only tells whether it is still there.
    Detached(mpsc::UnboundedSender<Piece>),
    /// Gone: the fill, if any, runs on as an orphan.
    Gone,
}

/// How a frame offered to the client went.
enum Sent {
    Queued,
    Detached,
    Gone,
}

impl ClientFeed {
    /// Queues `frame` for the client; when the client lags and `may_detach`, detaches it
    /// instead, else waits for it to take what is queued.
    async fn send(&self, frame: Frame<Bytes>, may_detach: bool) -> Sent {
        let len = frame.data_ref().map_or(0, Bytes::len);
        let permits = permits_for(len, CLIENT_LAG_BYTES);
        let permit = match self.lag.clone().try_acquire_many_owned(permits) {
            Ok(permit) => permit,
            Err(_) if may_detach && self.detachable => {
                return match self.pieces.send(Piece::Detached) {
                    Ok(()) => Sent::Detached,
                    Err(_) => Sent::Gone,
                };
            }
            Err(_) => tokio::select! {
                permit = self.lag.clone().acquire_many_owned(permits) => match permit {
                    Ok(permit) => permit,
                    // The semaphore is never closed.
                    Err(_) => return Sent::Gone,
                },
                () = self.pieces.closed() => return Sent::Gone,
            },
        };
        match self.pieces.send(Piece::Frame(frame, permit)) {
            Ok(()) => Sent::Queued,
            Err(_) => Sent::Gone,
        }
    }
}

/// The task that reads a fill's origin body: into the fill, and to its client.
struct Pump {
    /// `None` once the fill ended (or was dropped).
    fill: Option<FillFeed>,
    client: Client,
    /// The orphan permits, and the one this pump holds once its client is gone.
    orphans: Arc<Semaphore>,
    orphan: Option<OwnedSemaphorePermit>,
    counted: Counted,
}

impl Pump {
    /// Reads `origin` to its end, or until neither the fill nor the client wants more.
    async fn run<B>(mut self, mut origin: B)
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        let end = loop {
            if !self.still_wanted() {
                return;
            }
            // A client that leaves while the origin is silent is noticed at once: with no
            // room for an orphan, its fill ends now rather than at the origin's timeout.
            let next = tokio::select! {
                frame = origin.frame() => Some(frame.map(|r| r.map_err(Into::<BoxError>::into))),
                () = self.client_left() => None,
            };
            let Some(next) = next else {
                if self.client_gone() {
                    continue;
                }
                return;
            };
            let frame = match next {
                None => break Ok(()),
                Some(Err(error)) => {
                    self.tell_client(Piece::Failed(error));
                    break Err(FillDrop::OriginError);
                }
                Some(Ok(frame)) => frame,
            };
            if let Some(data) = frame.data_ref() {
                if let Some((metrics, counter)) = &self.counted {
                    metrics.add_bytes(*counter, data.len() as u64);
                }
                if !self.feed_fill(data).await {
                    return;
                }
            }
            if !self.feed_client(frame).await {
                return;
            }
            // The end may be visible only here (a `Content-Length` reached), never as `None`.
            if origin.is_end_stream() {
                break Ok(());
            }
        };
        if end.is_ok() {
            self.tell_client(Piece::End);
        }
        end_fill(&mut self.fill, end);
    }

    /// Resolves when the client, fed from memory or from the file, has gone away; never
    /// once it is known gone.
    async fn client_left(&self) {
        match &self.client {
            Client::Attached(feed) => feed.pieces.closed().await,
            Client::Detached(pieces) => pieces.closed().await,
            Client::Gone => std::future::pending().await,
        }
    }

    /// False when a detached client left and its fill may not run on as an orphan.
    fn still_wanted(&mut self) -> bool {
        match &self.client {
            Client::Detached(pieces) if pieces.is_closed() => self.client_gone(),
            _ => true,
        }
    }

    /// Offers `data` to the fill; false when the fill is gone and no client is fed
    /// from memory (nobody wants more).
    async fn feed_fill(&mut self, data: &Bytes) -> bool {
        let attached = matches!(self.client, Client::Attached(_));
        let Some(feed) = &self.fill else {
            return attached;
        };
        let offered = match attached {
            // A client fed from memory is never slowed for the disk.
            true => feed.offer(data),
            false => feed.offer_waiting(data).await,
        };
        if !offered {
            // Ignored by a writer that already gave up (and counted why).
            end_fill(&mut self.fill, Err(FillDrop::DiskBehind));
            return attached;
        }
        true
    }

    /// Hands `frame` to a client fed from memory; false when it is gone and its fill
    /// may not run on without it.
    async fn feed_client(&mut self, frame: Frame<Bytes>) -> bool {
        let Client::Attached(feed) = &self.client else {
            return true;
        };
        match feed.send(frame, self.fill.is_some()).await {
            Sent::Queued => true,
            Sent::Detached => {
                self.client = Client::Detached(feed.pieces.clone());
                true
            }
            Sent::Gone => self.client_gone(),
        }
    }

    /// Sends `piece` to a client fed from memory, if it is still there.
    fn tell_client(&self, piece: Piece) {
        if let Client::Attached(feed) = &self.client {
            let _ = feed.pieces.send(piece);
        }
    }

    /// The client went away: the fill runs on as an orphan if there is room for one;
    /// otherwise it is dropped (false: stop reading).
    fn client_gone(&mut self) -> bool {
        self.client = Client::Gone;
        if self.fill.is_none() {
            return false;
        }
        match self.orphans.clone().try_acquire_owned() {
            Ok(permit) => {
                self.orphan = Some(permit);
                true
            }
            Err(_) => {
                end_fill(&mut self.fill, Err(FillDrop::ClientGone));
                false
            }
        }
    }
}

/// A fill's pump, polled by whichever comes first of its own task ([`PumpTask`]) and
/// the client's body ([`TeeBody`]), each woken by whatever wakes the pump.
///
/// When the origin sends a frame, the client's task is woken first and reads the frame
/// through the pump in the same poll that writes it to the client. With the pump in a
/// task alone, the frame waited for the pump's task and then for the client's, each
/// behind the other tasks of the scheduler pass. The pump's own task still drives it
/// whenever the client does not poll (its socket is full, it was detached, or it left),
/// so the fill never waits for the client.
struct SharedPump {
    /// The pump's future; `None` once it ended.
    pump: Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    /// The pump's own task.
    task: AtomicWaker,
    /// The client's task, while its body is there to poll the pump.
    client: AtomicWaker,
}

impl SharedPump {
    fn new(pump: impl Future<Output = ()> + Send + 'static) -> Arc<SharedPump> {
        Arc::new(SharedPump {
            pump: Mutex::new(Some(Box::pin(pump))),
            task: AtomicWaker::new(),
            client: AtomicWaker::new(),
        })
    }

    /// Polls the pump unless another poll of it is under way; true once it has ended.
    fn poll_once(self: &Arc<Self>) -> bool {
        let mut slot = match self.pump.try_lock() {
            Ok(slot) => slot,
            // The other poller is at it, and will be woken with this one.
            Err(TryLockError::WouldBlock) => return false,
            // A panic escaped a poll of the pump (each poll catches its own): what is
            // left of it is dropped, which abandons the fill as a pump that gave up would.
            Err(TryLockError::Poisoned(poisoned)) => {
                *poisoned.into_inner() = None;
                return true;
            }
        };
        let Some(pump) = slot.as_mut() else {
            return true;
        };
        let waker = Waker::from(Arc::clone(self));
        let mut cx = Context::from_waker(&waker);
        // Caught, so that a panic in the pump ends the fill, not the connection of the
        // client whose body polled it: the pump is dropped at once (nothing of it is
        // polled again), and the client's queue ends without its last frame, as when the
        // pump had a task of its own.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| pump.as_mut().poll(&mut cx)));
        match polled {
            Ok(Poll::Pending) => return false,
            Ok(Poll::Ready(())) => {}
            Err(_) => tracing::error!("a fill's pump panicked: the fill is abandoned"),
        }
        *slot = None;
        true
    }

    /// The client's poll of the pump, to be woken by it; true once the pump has ended,
    /// after which the client needs it no more.
    fn poll_for_client(self: &Arc<Self>, client: &Waker) -> bool {
        self.client.register(client);
        let ended = self.poll_once();
        if ended {
            self.client.take();
            // The pump's task ends once it sees the end.
            self.task.wake();
        }
        ended
    }
}

impl Wake for SharedPump {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// The client first, so that it reads what woke the pump as it arrives.
    fn wake_by_ref(self: &Arc<Self>) {
        self.client.wake();
        self.task.wake();
    }
}

/// The task that drives a [`SharedPump`] whenever its client does not, to the pump's end.
struct PumpTask(Arc<SharedPump>);

impl Future for PumpTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.task.register(cx.waker());
        match self.0.poll_once() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

impl Drop for PumpTask {
    /// A task dropped before the pump ended (its runtime shut down) drops the pump too:
    /// what it holds registered wakes this pump, so it would otherwise keep itself.
    fn drop(&mut self) {
        let pump = match self.0.pump.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(pump);
    }
}

/// The client body's hold on its fill's [`SharedPump`]: once the body is dropped, the
/// pump wakes only its own task.
struct ClientsPump(Arc<SharedPump>);

impl Drop for ClientsPump {
    fn drop(&mut self) {
        self.0.client.take();
    }
}

/// The client's view of a fill: the frames queued for it, then, once detached, the
/// fill's file.
enum Reading {
    Memory {
        pieces: mpsc::UnboundedReceiver<Piece>,
        /// The fill's file and its writer's progress; `None`: never detached.
        file: Option<(FillTail, watch::Receiver<Written>)>,
        /// Data bytes taken so far.
        at: u64,
    },
    File(FileReading),
    Done,
}

/// A detached client reading the fill's file.
struct FileReading {
    tail: FillTail,
    written: watch::Receiver<Written>,
    /// Body offset of the next byte to read.
    at: u64,
    /// Held so that the pump sees the client is still there.
    _pieces: mpsc::UnboundedReceiver<Piece>,
}

/// The error a detached client's body ends with when its fill was dropped.
#[derive(Debug, thiserror::Error)]
#[error("the fill this response was read from was dropped")]
struct FillDropped;

/// The client's frames, from `pieces` and then, once detached, from `file`.
fn client_frames(
    pieces: mpsc::UnboundedReceiver<Piece>,
    file: Option<(FillTail, watch::Receiver<Written>)>,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send {
    let reading = Reading::Memory {
        pieces,
        file,
        at: 0,
    };
    futures_util::stream::unfold(reading, next_frame)
}

/// The client's next frame, and where the one after it comes from.
async fn next_frame(reading: Reading) -> Option<(Result<Frame<Bytes>, BoxError>, Reading)> {
    let Reading::Memory {
        mut pieces,
        file,
        at,
    } = reading
    else {
        return match reading {
            Reading::File(reading) => from_file(reading).await,
            _ => None,
        };
    };
    match pieces.recv().await {
        Some(Piece::Frame(frame, _taken)) => {
            let at = at + frame.data_ref().map_or(0, |data| data.len() as u64);
            Some((Ok(frame), Reading::Memory { pieces, file, at }))
        }
        Some(Piece::Failed(error)) => Some((Err(error), Reading::Done)),
        Some(Piece::End) => None,
        Some(Piece::Detached) => {
            let (tail, written) = file?;
            let _pieces = pieces;
            (from_file(FileReading {
                tail,
                written,
                at,
                _pieces,
            }))
            .await
        }
        // The pump ended without saying how: not a complete body.
        None => Some((Err(FillDropped.into()), Reading::Done)),
    }
}

/// The next frame of a detached client: what the writer has put on the file past
/// `reading.at`, waiting for it when there is none yet.
async fn from_file(mut reading: FileReading) -> Option<(Result<Frame<Bytes>, BoxError>, Reading)> {
    loop {
        let written = *reading.written.borrow_and_update();
        let on_file = written.on_file();
        if reading.at < on_file {
            let len = usize::try_from(on_file - reading.at).unwrap_or(usize::MAX);
            let read = reading
                .tail
                .read(reading.at, len.min(TAIL_READ_BYTES))
                .await;
            return Some(match read {
                Ok(bytes) => {
                    reading.at += bytes.len() as u64;
                    (Ok(Frame::data(bytes)), Reading::File(reading))
                }
                Err(error) => (Err(error.into()), Reading::Done),
            });
        }
        match written {
            Written::Committed(_) => return None,
            Written::Dropped(_) => return Some((Err(FillDropped.into()), Reading::Done)),
            Written::Writing(_) => {}
        }
        if reading.written.changed().await.is_err() {
            return Some((Err(FillDropped.into()), Reading::Done));
        }
    }
}

/// A response body that streams an origin body to the client and, when a fill is
/// attached, to disk.
pub(crate) struct TeeBody<B> {
    source: Source<B>,
    /// Where the streamed data bytes are counted, if anywhere (the pump counts a fill's).
    counted: Counted,
}

/// Where a [`TeeBody`]'s frames come from.
enum Source<B> {
    /// The origin's body itself: no fill.
    Origin(B),
    /// A fill's pump, through [`client_frames`].
    Fill {
        frames: Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, BoxError>> + Send>>,
        /// The fill's pump, polled before `frames` while it runs; `None` once it ended.
        pump: Option<ClientsPump>,
        /// The origin body's size hint.
        hint: SizeHint,
        ended: bool,
    },
}

impl<B> TeeBody<B> {
    /// A body that only streams to the client.
    pub(crate) fn passthrough(inner: B) -> TeeBody<B> {
        TeeBody {
            source: Source::Origin(inner),
            counted: None,
        }
    }

    /// This body without a fill, adding the length of every data frame it streams to
    /// `counter` (a fill's pump counts what it reads instead: [`TeeBody::with_fill`]).
    #[must_use]
    pub(crate) fn counting(mut self, metrics: Arc<Metrics>, counter: ByteCounter) -> TeeBody<B> {
        if matches!(self.source, Source::Origin(_)) {
            self.counted = Some((metrics, counter));
        }
        self
    }

    /// A body that also writes `inner` to `writer`, committing it when the body ends
    /// cleanly, as one of `fills`; the data bytes read are added to `counted`, if any.
    /// `ended` is called once the fill has ended, with `None` when it was committed and
    /// the reason when it was dropped: the proxy frees the key's collapse slot then, so
    /// that the requests waiting for this fill look again once its entry exists, or all
    /// fetch at once when it never will.
    pub(crate) fn with_fill(
        inner: B,
        writer: EntryWriter,
        key: &str,
        fills: &Fills,
        ended: impl FnOnce(Option<FillDrop>) + Send + 'static,
        counted: Option<(Arc<Metrics>, ByteCounter)>,
    ) -> TeeBody<B>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let hint = inner.size_hint();
        // Only a body of declared length: one without could outgrow the fill after its
        // client was detached, and the client would be cut with it.
        let file = (hint.exact().is_some()).then(|| writer.tail()).flatten();
        let (progress, written) = watch::channel(Written::Writing(0));
        let (frames, receiver) = mpsc::unbounded_channel();
        let (end, end_signal) = oneshot::channel();
        let key = Arc::from(key);
        fills.tasks.spawn(async move {
            let dropped = write_fill(writer, receiver, end_signal, key, progress).await;
            ended(dropped);
        });
        let (pieces, client) = mpsc::unbounded_channel();
        let pump = Pump {
            fill: Some(FillFeed {
                frames,
                buffer: Arc::new(Semaphore::new(FILL_BUFFER_BYTES)),
                end,
            }),
            client: Client::Attached(ClientFeed {
                pieces,
                lag: Arc::new(Semaphore::new(CLIENT_LAG_BYTES)),
                detachable: file.is_some(),
            }),
            orphans: fills.orphans.clone(),
            orphan: None,
            counted,
        };
        let pump = SharedPump::new(pump.run(inner));
        fills.tasks.spawn(PumpTask(pump.clone()));
        let file = file.map(|tail| (tail, written));
        TeeBody {
            source: Source::Fill {
                frames: Box::pin(client_frames(client, file)),
                pump: Some(ClientsPump(pump)),
                hint,
                ended: false,
            },
            counted: None,
        }
    }
}

/// Tells the writer how the pump's side ended (`Ok`: the body is complete) and detaches
/// the fill.
fn end_fill(fill: &mut Option<FillFeed>, end: FillEnd) {
    if let Some(feed) = fill.take() {
        // The writer may already have given up (disk error): nothing to signal then.
        let _ = feed.end.send(end);
    }
}

impl<B> Body for TeeBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled = match &mut this.source {
            Source::Origin(inner) => {
                let polled = ready!(Pin::new(inner).poll_frame(cx));
                polled.map(|frame| frame.map_err(Into::into))
            }
            Source::Fill { ended: true, .. } => None,
            Source::Fill {
                frames,
                pump,
                ended,
                ..
            } => {
                if let Some(ClientsPump(shared)) = pump
                    && shared.poll_for_client(cx.waker())
                {
                    *pump = None;
                }
                let polled = ready!(frames.as_mut().poll_next(cx));
                *ended = polled.is_none();
                polled
            }
        };
        if let (Some(Ok(frame)), Some((metrics, counter))) = (&polled, &this.counted)
            && let Some(data) = frame.data_ref()
        {
            metrics.add_bytes(*counter, data.len() as u64);
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Origin(inner) => inner.is_end_stream(),
            Source::Fill { ended, .. } => *ended,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            Source::Origin(inner) => inner.size_hint(),
            Source::Fill { hint, .. } => *hint,
        }
    }
}

/// The writer task of one fill: appends frames, publishing how much of the body is on
/// the file, then commits if and only if the body completed; otherwise abandons the fill
/// with the reason it ended, which it returns (`None`: committed).
async fn write_fill(
    mut writer: EntryWriter,
    mut frames: mpsc::UnboundedReceiver<(Bytes, OwnedSemaphorePermit)>,
    ended: oneshot::Receiver<FillEnd>,
    key: Arc<str>,
    progress: watch::Sender<Written>,
) -> Option<FillDrop> {
    let (mut given, mut unpublished) = (0u64, 0usize);
    // Frame by frame: the writer gathers what it is given into batches of its own, so
    // joining the frames first would only copy every byte once more.
    while let Some((data, permit)) = frames.recv().await {
        if let Err(error) = writer.write(&data).await {
            // Returning drops the receivers too, which tells the pump.
            let reason = FillDrop::of(&error);
            let on_file = progress.borrow().on_file();
            progress.send_replace(Written::Dropped(on_file));
            abandon(writer, reason, &key, Some(&error));
            return Some(reason);
        }
        drop(permit);
        given += data.len() as u64;
        unpublished += data.len();
        if frames.is_empty() || unpublished >= WRITE_BATCH_BYTES {
            progress.send_replace(Written::Writing(writer.written()));
            unpublished = 0;
        }
    }
    // The pump signals the end before it drops the frame sender, so by now the signal
    // is either there or will never come.
    let reason = match ended.await {
        Ok(Ok(())) => {
            let dropped = commit(writer, &key).await;
            let on_file = progress.borrow().on_file();
            let written = match dropped {
                None => Written::Committed(given),
                Some(_) => Written::Dropped(on_file),
            };
            progress.send_replace(written);
            return dropped;
        }
        Ok(Err(reason)) => reason,
        Err(_) => FillDrop::ClientGone,
    };
    let on_file = progress.borrow().on_file();
    progress.send_replace(Written::Dropped(on_file));
    abandon(writer, reason, &key, None);
    Some(reason)
}

impl Written {
    /// Body bytes on the file.
    fn on_file(self) -> u64 {
        match self {
            Written::Writing(n) | Written::Committed(n) | Written::Dropped(n) => n,
        }
    }
}

/// Commits the whole body written to `writer`; `None` when it is in place, else why the
/// fill was dropped.
async fn commit(writer: EntryWriter, key: &str) -> Option<FillDrop> {
    // A failed commit is counted by `finish` itself.
    committed(key, writer.finish().await)
}

/// Logs how the commit of the fill of `key` went (the store counted it); `None` when it
/// is in place, else why the fill was dropped.
pub(crate) fn committed(key: &str, commit: Result<(), StoreError>) -> Option<FillDrop> {
    let error = match commit {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use futures_util::FutureExt;
    use tokio::sync::oneshot;

    use super::{Fills, PumpTask, SharedPump, TeeBody};
    use crate::config::Fsync;
    use crate::store::{EntryMeta, Store, StoreOptions};

    use bytes::Bytes;
    use http::{HeaderMap, StatusCode};
    use http_body::Frame;
    use http_body_util::{BodyExt, StreamBody};
    use std::convert::Infallible;
    use std::time::SystemTime;
    use tokio::sync::mpsc;

    /// A store in `dir` with room to spare, and nothing that runs beside the fills.
    fn store_in(dir: &std::path::Path) -> Store {
        let options = StoreOptions {
            dir: dir.to_path_buf(),
            fsync: Fsync::Off,
            max_size: 64 << 20,
            lock_timeout: Duration::ZERO,
            verify_whole_below: 0,
            memory_size: 0,
            memory_max_object_size: 0,
            open_files: 0,
            min_free: 0,
            tag_memory: 1 << 20,
            max_write_rate: 0,
        };
        Store::open(options).expect("the store opens")
    }

    /// A body whose frames the test sends one by one, and that ends when the sender is
    /// dropped.
    fn origin() -> (
        mpsc::UnboundedSender<Bytes>,
        StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin>,
    ) {
        let (frames, receiver) = mpsc::unbounded_channel::<Bytes>();
        let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let data = receiver.recv().await?;
            Some((Ok(Frame::data(data)), receiver))
        });
        (frames, StreamBody::new(Box::pin(stream)))
    }

    /// A fill of `key` in `store`, teed from `body`, counted in `fills`.
    async fn teed<B>(store: &Store, fills: &Fills, key: &str, body: B) -> TeeBody<B>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<crate::body::BoxError>,
    {
        let now = SystemTime::now();
        let meta = EntryMeta {
            request_time: now,
            response_time: now,
            status: StatusCode::OK,
            response_headers: HeaderMap::new(),
            request_headers: HeaderMap::new(),
            tags: Vec::new(),
            purged: None,
        };
        let hash = Store::key_hash(key);
        let writer = store.begin_fill(key, hash, &meta, None, 1 << 20, store.fill_ticket());
        let writer = writer.await.expect("the fill begins");
        TeeBody::with_fill(body, writer, key, fills, |_| {}, None)
    }

    #[tokio::test]
    async fn a_fill_hands_its_client_a_frame_in_the_poll_that_reads_it_from_the_origin() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, fills) = (store_in(dir.path()), Fills::new(1));
        let (frames, body) = origin();
        let mut body = teed(&store, &fills, "k", body).await;
        assert!(frames.send(Bytes::from_static(b"first")).is_ok());
        // No yield in between: the pump's own task has not run.
        let first = body.frame().now_or_never();
        let data = first.and_then(|f| f?.ok()?.into_data().ok());
        assert_eq!(data.as_deref(), Some(&b"first"[..]));
        assert!(body.frame().now_or_never().is_none(), "nothing more yet");
        assert!(frames.send(Bytes::from_static(b"second")).is_ok());
        let second = body.frame().now_or_never();
        let data = second.and_then(|f| f?.ok()?.into_data().ok());
        assert_eq!(data.as_deref(), Some(&b"second"[..]));
        drop(frames);
        assert!(
            body.frame().await.is_none(),
            "the body ends with the origin's"
        );
        fills.wait().await;
        assert_eq!(store.stats().committed_fills, 1);
    }

    #[tokio::test]
    async fn a_pump_that_panics_ends_its_client_body_with_an_error_and_commits_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, fills) = (store_in(dir.path()), Fills::new(1));
        let (frames, body) = origin();
        let body = body.map_frame(|frame| {
            assert!(frame.data_ref().is_none_or(|data| &data[..] != b"boom"));
            frame
        });
        let mut body = teed(&store, &fills, "k", body).await;
        assert!(frames.send(Bytes::from_static(b"first")).is_ok());
        assert!(body.frame().now_or_never().is_some());
        // The client's own poll reads this one through the pump, which panics.
        assert!(frames.send(Bytes::from_static(b"boom")).is_ok());
        let next = body.frame().now_or_never();
        assert!(
            matches!(next, Some(Some(Err(_)))),
            "the body ends with an error"
        );
        fills.wait().await;
        assert_eq!(store.stats().committed_fills, 0);
    }

    #[tokio::test]
    async fn a_fill_whose_client_stops_polling_is_read_to_its_end_by_its_own_task() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, fills) = (store_in(dir.path()), Fills::new(1));
        let (frames, body) = origin();
        let mut body = teed(&store, &fills, "k", body).await;
        assert!(frames.send(Bytes::from_static(b"first")).is_ok());
        assert!(body.frame().now_or_never().is_some());
        // The client is still there but polls no more (its socket is full).
        assert!(frames.send(Bytes::from_static(b"second")).is_ok());
        drop(frames);
        fills.wait().await;
        assert_eq!(store.stats().committed_fills, 1);
        assert_eq!(store.stats().committed_bytes, 11);
        drop(body);
    }

    #[test]
    fn a_pump_task_dropped_before_the_pump_ended_drops_the_pump() {
        let held = Arc::new(());
        let pump = {
            let held = Arc::clone(&held);
            async move {
                let _held = held;
                std::future::pending::<()>().await;
            }
        };
        let task = PumpTask(SharedPump::new(pump));
        assert_eq!(Arc::strong_count(&held), 2);
        drop(task);
        assert_eq!(Arc::strong_count(&held), 1, "the pump was dropped");
    }

    #[tokio::test]
    async fn a_fill_run_here_that_is_ready_answers_in_the_first_poll() {
        let fills = Fills::new(1);
        assert_eq!(fills.run_here(async { 7 }).now_or_never(), Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fill_run_here_runs_on_to_its_end_when_its_waiter_is_dropped() {
        let fills = Fills::new(1);
        let (go, gate) = oneshot::channel::<()>();
        let ended = Arc::new(AtomicBool::new(false));
        let fill = {
            let ended = Arc::clone(&ended);
            async move {
                let _ = gate.await;
                ended.store(true, Ordering::SeqCst);
            }
        };
        let mut waiting = Box::pin(fills.run_here(fill));
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        // The client leaves: its future is dropped with the fill half done.
        drop(waiting);
        assert!(go.send(()).is_ok(), "the fill still waits for its signal");
        fills.wait().await;
        assert!(ended.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn a_graceful_shutdown_waits_for_a_fill_run_here() {
        let fills = Fills::new(1);
        let (go, gate) = oneshot::channel::<()>();
        let waiter = tokio::spawn(fills.run_here(async move { gate.await.is_ok() }));
        tokio::task::yield_now().await;
        let early = tokio::time::timeout(Duration::from_secs(60), fills.wait()).await;
        assert!(early.is_err(), "the shutdown did not wait for the fill");
        assert!(go.send(()).is_ok());
        fills.wait().await;
        assert!(matches!(waiter.await, Ok(true)));
    }
}
