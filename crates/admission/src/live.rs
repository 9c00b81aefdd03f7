//! [`LiveAdmission`]: the admission in use — policy, keyed hasher and snapshots, as
//! [`super::assemble`] built them — replaceable as one while the server runs.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use arc_swap::{ArcSwap, Guard};
use tokio::sync::watch;

use super::Assembled;

/// The admission the proxy consults, swapped whole by a reload.
///
/// The proxy loads it once per request (lock-free, like the settings) and uses the policy
/// and hasher of that one load, so a request never mixes an old hasher with a new policy.
/// Saving snapshots goes through here too (`LiveAdmission::save`,
/// [`LiveAdmission::run_periodic`]): each save takes the policy current *when it runs*,
/// under one lock, so a replaced pair can never overwrite the snapshot of the pair that
/// replaced it.
pub struct LiveAdmission {
    /// arc-swap: see `live::Live` for why.
    current: ArcSwap<Assembled>,
    /// Bumped by every [`LiveAdmission::replace`], so the periodic task follows the new
    /// pair's `snapshot_every` (and starts or stops with its snapshots).
    replaced: watch::Sender<()>,
    /// Serialises saves, which share one temp file and one snapshot path.
    saving: Mutex<()>,
}

impl LiveAdmission {
    /// Holds `assembled` as the admission in use.
    pub fn new(assembled: Assembled) -> LiveAdmission {
        LiveAdmission {
            current: ArcSwap::from_pointee(assembled),
            replaced: watch::Sender::new(()),
            saving: Mutex::new(()),
        }
    }

    /// The admission in use, for one request (the guard is not meant to be held across an
    /// `.await`).
    pub fn load(&self) -> Guard<Arc<Assembled>> {
        self.current.load()
    }

    /// The admission in use, to keep (a live snapshot holds it for its requests).
    pub fn current(&self) -> Arc<Assembled> {
        self.current.load_full()
    }

    /// Swaps in `next` for every later request and save. Requests in flight finish with
    /// the policy they loaded.
    pub fn replace(&self, next: Assembled) {
        self.current.store(Arc::new(next));
        self.replaced.send_replace(());
    }

    /// Saves the snapshot of the policy in use, if it keeps one (blocking: call it off the
    /// async runtime's worker threads). Returns the outcome, with the file's path.
    fn save(&self) -> Option<(std::io::Result<()>, std::path::PathBuf)> {
        let _saving = self.saving.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.current.load_full();
        let snapshots = current.snapshots.as_ref()?;
        Some((snapshots.save(), snapshots.path().to_owned()))
    }

    /// Saves on a blocking thread; logs the outcome (debug when saved, warn when not) and
    /// returns whether a snapshot was written.
    pub async fn save_in_background(self: &Arc<Self>) -> bool {
        let live = self.clone();
        let started = Instant::now();
        match tokio::task::spawn_blocking(move || live.save()).await {
            Ok(None) => false,
            Ok(Some((Ok(()), path))) => {
                let millis = started.elapsed().as_millis() as u64;
                tracing::debug!(path = %path.display(), millis, "filter snapshot saved");
                true
            }
            Ok(Some((Err(error), path))) => {
                tracing::warn!(path = %path.display(), %error, "cannot save the filter snapshot");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "filter snapshot task failed");
                false
            }
        }
    }

    /// Saves every `admission.snapshot_every` of the policy in use, following replacements,
    /// until the task is dropped or aborted.
    pub async fn run_periodic(self: Arc<Self>) {
        let mut replaced = self.replaced.subscribe();
        loop {
            let every = self.load().snapshots.as_ref().map(|s| s.every());
            match every {
                Some(every) => tokio::select! {
                    () = tokio::time::sleep(every) => {
                        self.save_in_background().await;
                    }
                    // A new pair: start its period afresh.
                    _ = replaced.changed() => {}
                },
                // Nothing to save until a replacement brings filters.
                None => {
                    if replaced.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}
