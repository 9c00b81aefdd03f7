//! A waker for what a connection's task polls besides its main work, so that the task can
//! tell whether one of those woke it and skip polling them when not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Wake;

use futures_util::task::AtomicWaker;

/// A waker that records that it was woken, then wakes the connection's task: the idle
/// timer and the signals of `connection::drive` are polled with one, and so is the
/// socket's read side while the lean path waits on an answer (`lean`).
pub(super) struct SideWaker {
    /// Set when woken; true at first, so that the first poll registers them all.
    pub(super) woken: AtomicBool,
    /// The connection's task.
    pub(super) task: AtomicWaker,
}

impl SideWaker {
    /// A side waker marked as woken, so that the first poll registers what it wakes for.
    pub(super) fn new() -> Arc<SideWaker> {
        Arc::new(SideWaker {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        })
    }
}

impl Wake for SideWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}
