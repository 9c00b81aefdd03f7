//! `origin.max_in_flight`: how many requests may wait for a response head at once, with
//! the requests past it served first come, first served.
//!
//! Every origin request takes a permit and gives it back, from every worker. tokio's
//! semaphore gives a permit back under its wait queue's mutex even when nobody waits,
//! so each request wrote two cache lines that every core shares. Here, while nobody
//! waits, taking and giving back are one compare-and-swap each on one count; the queue's
//! mutex is taken only while permits are out and requests wait. A waiting request is
//! handed its permit directly, in arrival order, and no request that arrives meanwhile
//! can take one before it.

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

/// Set in the count while requests wait: the free permits are then zero, and a permit
/// given back goes to the first of them.
const QUEUED: usize = 1 << (usize::BITS - 1);

/// The permits of one origin, shared by every worker.
#[derive(Debug)]
pub(super) struct InFlight {
    /// Free permits, or [`QUEUED`].
    count: AtomicUsize,
    /// The waiting requests, oldest first; non-empty exactly while the count is
    /// [`QUEUED`]. A request that gave up leaves its closed sender behind, skipped when
    /// its turn comes.
    queue: Mutex<VecDeque<oneshot::Sender<Handoff>>>,
}

/// A permit; dropping it gives it back.
#[derive(Debug)]
pub(super) struct Permit<'a>(&'a Arc<InFlight>);

/// A permit on its way to a waiting request; given back if that request is gone before
/// it takes it.
#[derive(Debug)]
struct Handoff(Option<Arc<InFlight>>);

/// Waited past the timeout for a permit.
#[derive(Debug)]
pub(super) struct Busy;

impl InFlight {
    /// `permits` permits (at least one).
    pub(super) fn new(permits: usize) -> InFlight {
        InFlight {
            count: AtomicUsize::new(permits.clamp(1, QUEUED - 1)),
            queue: Mutex::new(VecDeque::new()),
        }
    }

    /// A permit, waiting up to `timeout` behind the requests that wait already.
    pub(super) async fn acquire(self: &Arc<Self>, timeout: Duration) -> Result<Permit<'_>, Busy> {
        if let Some(permit) = self.try_acquire() {
            return Ok(permit);
        }
        let handed = {
            let mut queue = self.lock();
            // Under the lock nobody else queues or hands out, but permits given back
            // without waiters may still turn up.
            let mut count = self.count.load(Acquire);
            loop {
                let next = match count {
                    QUEUED => break,
                    0 => QUEUED,
                    free => free - 1,
                };
                match self.count.compare_exchange(count, next, AcqRel, Acquire) {
                    Ok(_) if next == QUEUED => break,
                    Ok(_) => return Ok(Permit(self)),
                    Err(now) => count = now,
                }
            }
            let (send, handed) = oneshot::channel();
            queue.push_back(send);
            handed
        };
        match tokio::time::timeout(timeout, handed).await {
            Ok(Ok(mut handoff)) => {
                // Taken: no longer to be given back by the handoff, but by the permit.
                handoff.0 = None;
                Ok(Permit(self))
            }
            // The sender went without a permit: only if the whole origin was dropped.
            Ok(Err(_)) | Err(_) => Err(Busy),
        }
    }

    /// A permit if one is free and nobody waits.
    fn try_acquire(self: &Arc<Self>) -> Option<Permit<'_>> {
        let mut count = self.count.load(Acquire);
        while count != 0 && count != QUEUED {
            match self
                .count
                .compare_exchange_weak(count, count - 1, AcqRel, Acquire)
            {
                Ok(_) => return Some(Permit(self)),
                Err(now) => count = now,
            }
        }
        None
    }

    /// Gives one permit back: to the first request still waiting, else to the count.
    fn release(self: &Arc<Self>) {
        loop {
            let mut count = self.count.load(Acquire);
            while count != QUEUED {
                match self
                    .count
                    .compare_exchange_weak(count, count + 1, AcqRel, Acquire)
                {
                    Ok(_) => return,
                    Err(now) => count = now,
                }
            }
            let first = {
                let mut queue = self.lock();
                if self.count.load(Acquire) != QUEUED {
                    // The last waiter was served meanwhile.
                    continue;
                }
                let first = queue.pop_front();
                if queue.is_empty() {
                    // The permit is this call's until it is handed over.
                    self.count.store(0, Release);
                }
                first
            };
            // Sent without the lock: a handoff its taker dropped meanwhile gives itself
            // back as it drops, which takes the lock.
            let Some(first) = first else { continue };
            match first.send(Handoff(Some(Arc::clone(self)))) {
                Ok(()) => return,
                // It gave up waiting: the permit is still this call's to give.
                Err(mut back) => back.0 = None,
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<oneshot::Sender<Handoff>>> {
        // Each critical section leaves the queue and the count consistent.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Free permits now (none while requests wait).
    #[cfg(test)]
    fn free(&self) -> usize {
        match self.count.load(Acquire) {
            QUEUED => 0,
            free => free,
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        if let Some(in_flight) = self.0.take() {
            in_flight.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn permits_run_out_and_come_back() {
        let limit = Arc::new(InFlight::new(2));
        let first = limit.acquire(LONG).await.expect("free");
        let second = limit.acquire(LONG).await.expect("free");
        assert!(limit.try_acquire().is_none(), "both taken");
        drop(first);
        assert_eq!(limit.free(), 1);
        let third = limit.try_acquire().expect("given back");
        drop((second, third));
        assert_eq!(limit.free(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_requests_are_served_in_arrival_order_and_before_newcomers() {
        let limit = Arc::new(InFlight::new(1));
        let held = limit.acquire(LONG).await.expect("free");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for n in 0..3 {
            let (limit, order) = (limit.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let permit = limit.acquire(LONG).await.expect("served");
                order.lock().expect("order").push(n);
                // Held across a yield, so the next one must wait for it.
                tokio::task::yield_now().await;
                drop(permit);
            }));
            // Each queues before the next is spawned.
            tokio::task::yield_now().await;
        }
        drop(held);
        assert!(
            limit.try_acquire().is_none(),
            "a newcomer does not take the permit a waiting request was handed"
        );
        for task in waiting {
            task.await.expect("waiter");
        }
        assert_eq!(*order.lock().expect("order"), [0, 1, 2]);
        assert_eq!(limit.free(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_gave_up_waiting_takes_no_permit_with_it() {
        let limit = Arc::new(InFlight::new(1));
        let held = limit.acquire(LONG).await.expect("free");
        assert!(
            limit.acquire(Duration::from_secs(5)).await.is_err(),
            "times out while the permit is held"
        );
        let later = tokio::spawn({
            let limit = limit.clone();
            async move { limit.acquire(LONG).await.is_ok() }
        });
        tokio::task::yield_now().await;
        drop(held);
        assert!(later.await.expect("waiter"), "the gone waiter is skipped");
        assert_eq!(limit.free(), 1);
    }

    #[test]
    fn a_handoff_dropped_before_it_was_taken_gives_the_permit_back() {
        let limit = Arc::new(InFlight::new(1));
        let held = limit.try_acquire().expect("free");
        let (send, handed) = oneshot::channel();
        {
            let mut queue = limit.lock();
            limit.count.store(QUEUED, Release);
            queue.push_back(send);
        }
        drop(held);
        // The permit now sits in the channel; the waiter goes without taking it.
        drop(handed);
        assert_eq!(limit.free(), 1);
    }

    #[test]
    fn many_threads_never_hold_more_than_the_limit_and_lose_no_permit() {
        const LIMIT: usize = 3;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .build()
            .expect("runtime");
        let limit = Arc::new(InFlight::new(LIMIT));
        let holding = Arc::new(AtomicUsize::new(0));
        let over = Arc::new(AtomicBool::new(false));
        runtime.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|n| {
                    let (limit, holding, over) = (limit.clone(), holding.clone(), over.clone());
                    tokio::spawn(async move {
                        for round in 0..200 {
                            // Some give up at once, so waiters leave the queue too.
                            let patience = match (n + round) % 5 {
                                0 => Duration::ZERO,
                                _ => LONG,
                            };
                            let Ok(permit) = limit.acquire(patience).await else {
                                continue;
                            };
                            if holding.fetch_add(1, AcqRel) >= LIMIT {
                                over.store(true, Release);
                            }
                            tokio::task::yield_now().await;
                            holding.fetch_sub(1, AcqRel);
                            drop(permit);
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("task");
            }
        });
        assert!(!over.load(Acquire), "more than {LIMIT} held at once");
        assert_eq!(limit.free(), LIMIT, "every permit came back");
    }
}
