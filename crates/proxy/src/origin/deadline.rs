//! One timer for the response heads a list's exchanges wait for
//! (`origin.first_byte_timeout`).
//!
//! A `tokio::time::Sleep` per request took a place in the runtime's timer wheel, under its
//! lock, at the exchange's first wait and gave it back at the answer, a cost the
//! pass-through's profile showed (`benches/RESULTS.md`, "one timer for the response
//! heads"). Here a deadline is a slot on a [`Board`] and a clone of its task's
//! waker, and one task per board, its watcher, sleeps toward the earliest deadline. The
//! watcher is re-armed when it wakes, or when a deadline comes before the one it sleeps
//! toward. Deadlines a fixed timeout after each request's start come after those before
//! them, so a new request's deadline does not re-arm the watcher while an earlier one
//! is armed, answered or not.

use std::future::Future as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use slab::Slab;
use tokio::time::{Instant, Sleep};

/// The deadlines of the exchanges on one list of connections, and their watcher.
#[derive(Default)]
pub(super) struct Board {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    slots: Slab<Slot>,
    /// When the watcher looks next: the earliest deadline not passed at its last look, or
    /// one set since that comes before it; `None` when there was none.
    armed: Option<Instant>,
    /// The watcher's waker, between its looks.
    watcher: Option<Waker>,
    /// Whether a watcher task runs; it clears this when dropped (with its runtime).
    watching: bool,
}

struct Slot {
    at: Instant,
    /// The task waiting for the exchange, woken when `at` passes.
    waker: Waker,
    passed: bool,
}

impl Board {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A deadline at `at` for the task of `waker`. The first deadline set on a board (or
    /// the first since its watcher's runtime ended) starts the watcher on the runtime
    /// this runs on.
    pub(super) fn set<'b>(self: &'b Arc<Board>, at: Instant, waker: &Waker) -> Deadline<'b> {
        let mut inner = self.lock();
        let key = inner.slots.insert(Slot {
            at,
            waker: waker.clone(),
            passed: false,
        });
        let earlier = inner.armed.is_none_or(|armed| at < armed);
        if earlier {
            inner.armed = Some(at);
        }
        let poke = earlier.then(|| inner.watcher.take()).flatten();
        self.watch_if_unwatched(inner);
        if let Some(watcher) = poke {
            watcher.wake();
        }
        Deadline { board: self, key }
    }

    /// Starts a watcher on this runtime when none runs, and lets go of `inner`.
    fn watch_if_unwatched(self: &Arc<Board>, mut inner: MutexGuard<'_, Inner>) {
        let start = !inner.watching;
        inner.watching = true;
        drop(inner);
        if start {
            // The guard is made here, not in the task: a task dropped before its first
            // poll (its runtime shutting down) still marks the board unwatched.
            tokio::spawn(watch(Watching(Arc::downgrade(self))));
        }
    }

    /// The watcher's look at `now`: marks the deadlines that passed and wakes their
    /// tasks, keeps the watcher's `waker`, and returns the earliest deadline left.
    fn look(&self, now: Instant, waker: &Waker) -> Option<Instant> {
        let mut inner = self.lock();
        let mut earliest: Option<Instant> = None;
        for (_, slot) in inner.slots.iter_mut().filter(|(_, slot)| !slot.passed) {
            if slot.at <= now {
                slot.passed = true;
                slot.waker.wake_by_ref();
            } else if earliest.is_none_or(|earliest| slot.at < earliest) {
                earliest = Some(slot.at);
            }
        }
        inner.armed = earliest;
        match &mut inner.watcher {
            Some(kept) => kept.clone_from(waker),
            none => *none = Some(waker.clone()),
        }
        earliest
    }

    /// The watcher has ended (its runtime is shutting down). The tasks still waiting are
    /// woken: the first of them polled on a live runtime starts another watcher there
    /// ([`Deadline::poll_passed`]), as will the next deadline set.
    fn unwatched(&self) {
        let mut inner = self.lock();
        inner.watching = false;
        inner.watcher = None;
        inner.armed = None;
        for (_, slot) in inner.slots.iter().filter(|(_, slot)| !slot.passed) {
            slot.waker.wake_by_ref();
        }
    }
}

impl Drop for Board {
    /// Ends the watcher, which may be waiting with nothing to watch.
    fn drop(&mut self) {
        let watcher = (self.inner.get_mut())
            .unwrap_or_else(PoisonError::into_inner)
            .watcher
            .take();
        if let Some(watcher) = watcher {
            watcher.wake();
        }
    }
}

/// A deadline on a [`Board`]; dropped, it leaves the board.
pub(super) struct Deadline<'b> {
    board: &'b Arc<Board>,
    key: usize,
}

impl Deadline<'_> {
    /// Ready once the deadline has passed; until then, the task of `cx` is the one woken.
    /// A board left without a watcher (its runtime ended while this one runs) gets one
    /// on this runtime.
    pub(super) fn poll_passed(&mut self, cx: &Context<'_>) -> Poll<()> {
        let mut inner = self.board.lock();
        let Some(slot) = inner.slots.get_mut(self.key) else {
            return Poll::Ready(());
        };
        if slot.passed {
            return Poll::Ready(());
        }
        slot.waker.clone_from(cx.waker());
        if !inner.watching {
            inner.armed = None;
            self.board.watch_if_unwatched(inner);
        }
        Poll::Pending
    }
}

impl Drop for Deadline<'_> {
    fn drop(&mut self) {
        self.board.lock().slots.try_remove(self.key);
    }
}

/// The watcher: looks at the board at its earliest deadline, and whenever a deadline comes
/// before that; ends when the board is dropped.
async fn watch(watching: Watching) {
    let board = &watching.0;
    let mut sleep: Option<std::pin::Pin<Box<Sleep>>> = None;
    std::future::poll_fn(|cx| {
        loop {
            let Some(board) = board.upgrade() else {
                return Poll::Ready(());
            };
            let Some(at) = board.look(Instant::now(), cx.waker()) else {
                return Poll::Pending;
            };
            drop(board);
            let sleep = match &mut sleep {
                Some(sleep) => {
                    if sleep.deadline() != at {
                        sleep.as_mut().reset(at);
                    }
                    sleep
                }
                none => none.insert(Box::pin(tokio::time::sleep_until(at))),
            };
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    })
    .await
}

/// Marks the board unwatched when the watcher is dropped.
struct Watching(Weak<Board>);

impl Drop for Watching {
    fn drop(&mut self) {
        if let Some(board) = self.0.upgrade() {
            board.unwatched();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::time::Duration;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(2);

    /// Waits on a deadline at `at` on `board`, as an exchange does.
    async fn passes(board: &Arc<Board>, at: Instant) {
        let mut deadline = None;
        poll_fn(|cx| {
            let deadline = deadline.get_or_insert_with(|| board.set(at, cx.waker()));
            deadline.poll_passed(cx)
        })
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_passes_at_its_time_and_not_before() {
        let board = Arc::new(Board::default());
        let start = Instant::now();
        passes(&board, start + TIMEOUT).await;
        assert_eq!(start.elapsed(), TIMEOUT);
        assert!(board.lock().slots.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_set_after_a_later_one_passes_first() {
        let board = Arc::new(Board::default());
        let start = Instant::now();
        let late = passes(&board, start + TIMEOUT * 3);
        let early = async {
            // Set once the watcher sleeps toward the later one.
            tokio::time::sleep(TIMEOUT / 2).await;
            passes(&board, start + TIMEOUT).await;
            start.elapsed()
        };
        let mut late = std::pin::pin!(late);
        tokio::select! {
            () = &mut late => panic!("the later deadline passed first"),
            early = early => assert_eq!(early, TIMEOUT),
        }
        late.await;
        assert_eq!(start.elapsed(), TIMEOUT * 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_deadline_leaves_the_board_and_wakes_nobody() {
        let board = Arc::new(Board::default());
        let start = Instant::now();
        let abandoned = tokio::time::timeout(TIMEOUT / 2, passes(&board, start + TIMEOUT));
        assert!(abandoned.await.is_err(), "passed before its time");
        assert!(board.lock().slots.is_empty());
        passes(&board, start + TIMEOUT * 2).await;
        assert_eq!(start.elapsed(), TIMEOUT * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_watcher_ends_with_its_board() {
        let tasks = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        let board = Arc::new(Board::default());
        passes(&board, Instant::now() + TIMEOUT).await;
        assert_eq!(tasks(), 1, "the watcher");
        drop(board);
        tokio::task::yield_now().await;
        assert_eq!(tasks(), 0);
    }

    fn paused_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime")
    }

    /// Waits on a deadline a timeout away on `board`, on a runtime of its own; fails when
    /// nothing watches the board.
    fn passes_on_a_new_runtime(board: &Arc<Board>) {
        paused_runtime().block_on(async {
            let start = Instant::now();
            let passed = tokio::time::timeout(TIMEOUT * 2, passes(board, start + TIMEOUT));
            assert!(passed.await.is_ok(), "the deadline never passed");
            assert_eq!(start.elapsed(), TIMEOUT);
        });
    }

    #[test]
    fn a_board_whose_watcher_went_with_its_runtime_starts_another() {
        let board = Arc::new(Board::default());
        passes_on_a_new_runtime(&board);
        passes_on_a_new_runtime(&board);
    }

    #[test]
    fn a_deadline_waited_for_on_one_runtime_passes_after_its_watcher_went_with_another() {
        let board = Arc::new(Board::default());
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        // The watcher starts on the first runtime, which then stops being driven.
        first.block_on(async {
            let far = board.set(Instant::now() + Duration::from_secs(3600), Waker::noop());
            tokio::task::yield_now().await;
            drop(far);
        });
        let other = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .expect("runtime");
        let shared = Arc::clone(&board);
        let waiting = other.spawn(async move {
            passes(&shared, Instant::now() + Duration::from_millis(100)).await;
        });
        std::thread::sleep(Duration::from_millis(50));
        // Its watcher goes with it, and the task on the other runtime is told.
        drop(first);
        let passed =
            other.block_on(async { tokio::time::timeout(Duration::from_secs(10), waiting).await });
        assert!(matches!(passed, Ok(Ok(()))), "{passed:?}");
    }

    #[test]
    fn a_watcher_dropped_before_it_ever_ran_leaves_the_board_to_another() {
        let board = Arc::new(Board::default());
        let runtime = paused_runtime();
        {
            let _inside = runtime.enter();
            drop(board.set(Instant::now() + TIMEOUT, Waker::noop()));
        }
        // Nothing drove the runtime: its watcher task is dropped unpolled.
        drop(runtime);
        passes_on_a_new_runtime(&board);
    }
}
