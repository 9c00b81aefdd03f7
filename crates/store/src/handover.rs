//! Closing the store for a hand-over of the cache directory to another process, while
//! this one goes on serving what it already streams.
//!
//! Every piece of work that writes or unlinks a file of the cache directory — a fill's
//! file calls, an eviction, a metadata update, a removal or purge, a discard of a damaged
//! file, the start-up scan, a sync — runs as a *step*, holding a shared guard of the
//! [`Gate`]. [`Store::close_for_handover`] then:
//! 1. marks the store closing: lookups miss, and no fill, update, removal, purge, discard,
//!    scan step or periodic sync starts (a fill is refused with [`StoreError::Closed`]);
//! 2. gives the fills in progress up to its grace to commit (their steps still run);
//! 3. takes the gate exclusively, for good, once the steps in flight ended: a fill still
//!    open can no longer write, commit or unlink anything (its next call fails with
//!    [`StoreError::Closed`], and dropping it leaves the file system alone);
//! 4. empties `tmp/` (the temp files of the fills it gave up on), syncs the cache's
//!    filesystem, and releases the directory's lock.
//!
//! A body stream of an entry file already open reads on afterwards: reads of an open
//! descriptor are safe even after the next owner unlinks the file. A damaged block then
//! only ends the stream; the file is left for the next owner, which verifies every block
//! it serves.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use tracing::{info, warn};

use super::{Store, StoreError, disk, lock};

/// A running step: while any is held, the store cannot close.
pub(crate) type Step = Arc<OwnedRwLockReadGuard<()>>;

/// Whether the store may still write, and the steps and fills that stop it from closing.
#[derive(Debug)]
pub(crate) struct Gate {
    /// Set when closing begins (see the module docs, step 1). Read with Acquire on every
    /// lookup: a flag written once, so its cache line stays shared between workers.
    closing: AtomicBool,
    /// Each step holds a read guard; closing takes the write guard and keeps it.
    steps: Arc<RwLock<()>>,
    /// The write guard, once closed.
    closed: Mutex<Option<OwnedRwLockWriteGuard<()>>>,
    /// Fills begun and not yet finished or dropped.
    fills: AtomicUsize,
    /// Woken when `fills` drops to zero.
    no_fills: Notify,
    /// The directory's lock, until the store closes (or drops).
    lock: Mutex<Option<lock::DirLock>>,
}

/// A fill counted open by the gate until dropped.
#[derive(Debug)]
pub(crate) struct OpenFill(Arc<super::Inner>);

impl Drop for OpenFill {
    fn drop(&mut self) {
        let gate = &self.0.gate;
        if gate.fills.fetch_sub(1, Ordering::AcqRel) == 1 {
            gate.no_fills.notify_waiters();
        }
    }
}

impl Gate {
    /// A gate holding the directory's `lock`.
    pub(crate) fn new(lock: lock::DirLock) -> Gate {
        Gate {
            closing: AtomicBool::new(false),
            steps: Arc::new(RwLock::new(())),
            closed: Mutex::new(None),
            fills: AtomicUsize::new(0),
            no_fills: Notify::new(),
            lock: Mutex::new(Some(lock)),
        }
    }

    /// True once closing began: lookups miss, and nothing new starts.
    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// A step of work that is not part of a fill; `None` once closing began.
    pub(crate) fn step(&self) -> Option<Step> {
        if self.closing() {
            return None;
        }
        self.fill_step()
    }

    /// A step of a fill already open: allowed during the grace, `None` once closed.
    pub(crate) fn fill_step(&self) -> Option<Step> {
        Arc::clone(&self.steps).try_read_owned().ok().map(Arc::new)
    }

    /// Whether a step is under way (a test's view: closing would wait for it).
    #[cfg(test)]
    pub(crate) fn stepped(&self) -> bool {
        self.steps.try_write().is_err()
    }

    /// Counts a new fill open; `None` once closing began.
    pub(crate) fn open_fill(inner: &Arc<super::Inner>) -> Option<OpenFill> {
        let gate = &inner.gate;
        gate.fills.fetch_add(1, Ordering::SeqCst);
        let open = OpenFill(Arc::clone(inner));
        // Checked after counting (both SeqCst, as closing sets the flag and then counts),
        // so that closing either waits for this fill or this fill sees it closing.
        (!gate.closing.load(Ordering::SeqCst)).then_some(open)
    }

    /// Waits up to `grace` for the open fills to end; returns how many are still open.
    async fn fills_done(&self, grace: Duration) -> usize {
        let wait = async {
            loop {
                let notified = self.no_fills.notified();
                if self.fills.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(grace, wait).await;
        self.fills.load(Ordering::SeqCst)
    }
}

impl Store {
    /// Hands the cache directory over: returns once this store writes nothing more and
    /// its lock is released, so another process may open the directory while this one
    /// serves on (see the module docs for the steps). Fills in progress get up to
    /// `fill_grace` to commit; those still running then are dropped and their temp files
    /// removed. From then on lookups miss, fills are refused ([`StoreError::Closed`]),
    /// updates are skipped, removals and purges fail, and body streams of entries already
    /// looked up read on. Closing twice does nothing more; errors only when the final
    /// sync fails (the lock is released all the same).
    pub async fn close_for_handover(&self, fill_grace: Duration) -> Result<(), StoreError> {
        let gate = &self.inner.gate;
        if gate.closing.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let open = gate.fills_done(fill_grace).await;
        let exclusive = Arc::clone(&gate.steps).write_owned().await;
        *gate.closed.lock().unwrap_or_else(PoisonError::into_inner) = Some(exclusive);
        let tmp = self.inner.tmp.clone();
        let cleared = super::blocking(&tmp, {
            let tmp = tmp.clone();
            move || disk::clear_dir(&tmp)
        })
        .await;
        if let Err(error) = &cleared {
            warn!(%error, "cannot empty tmp/ at the hand-over; the next owner does at open");
        }
        let synced = self.sync_unguarded().await;
        let released = gate
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(released);
        info!(
            dropped_fills = open,
            "cache directory handed over: this process writes nothing more to it"
        );
        synced.map(drop)
    }
}
