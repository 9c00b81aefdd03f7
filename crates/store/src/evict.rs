//! Eviction to make room for a fill's reservation: the victims one shortfall takes are
//! popped from the index together and their files unlinked in one file call, on the
//! worker while `inline_io`'s gate is open, as the fills' own file calls are.
//!
//! Each unlink used to be a hop to the blocking pool and back, awaited before the next
//! victim was chosen, and a stored miss answers its client only once its fill has begun:
//! a fill that needed a dozen victims waited for a dozen hand-offs to a blocking thread
//! and back before its client saw a byte (`benches/RESULTS.md`, "evictions in one file
//! call").

use std::path::PathBuf;
use std::time::Instant;

use super::index::Fill;
use super::{Inner, StoreError, disk};
use crate::StoreHash;

/// The most victims unlinked on the worker in one call: a larger batch (a large fill in a
/// cache of small entries) goes to the blocking pool whole, so that it never stalls the
/// worker's other connections.
const INLINE_VICTIMS: usize = 16;

/// Victims taken out of the index whose bytes are not yet given back: given back when
/// dropped, once their files are unlinked, or if the reservation waiting for them is
/// dropped first (its client left), so that the budget never keeps bytes of files gone.
struct Evicted<'a> {
    inner: &'a Inner,
    victims: Vec<(StoreHash, Fill)>,
    /// Directories removed with each victim's file, once known.
    dirs: Vec<u64>,
}

impl Drop for Evicted<'_> {
    fn drop(&mut self) {
        for (at, (key_hash, fill)) in self.victims.iter().enumerate() {
            self.inner
                .forget_leaf_dir(*key_hash, self.dirs.get(at).copied().unwrap_or(0));
            self.inner.index.release_object(fill.size);
        }
    }
}

impl Inner {
    /// Reserves `bytes` of the budget, evicting entries in the index's order (the files
    /// of each batch unlinked before their bytes count as free) until they fit.
    pub(super) async fn reserve_budget(&self, bytes: u64) -> Result<(), StoreError> {
        while !self.index.try_reserve(bytes) {
            let (victims, refused) = self.victims_for(bytes);
            if victims.is_empty() && refused.is_none() {
                // Room came free between the two looks (another worker's fill ended):
                // look again, after letting the rest of this worker run.
                tokio::task::yield_now().await;
                continue;
            }
            if !victims.is_empty() {
                self.unlink_victims(victims).await;
            }
            if let Some(refused) = refused {
                return Err(refused);
            }
        }
        Ok(())
    }

    /// Victims enough to free the budget's shortfall for `bytes` as it stands now, and
    /// the refusal if the index ran out of them first (or evicting cannot help).
    fn victims_for(&self, bytes: u64) -> (Vec<(StoreHash, Fill)>, Option<StoreError>) {
        let shortfall = self.index.shortfall(bytes);
        let (mut victims, mut freed) = (Vec::new(), 0);
        while freed < shortfall {
            let Some((key_hash, fill)) = self.victim_for(bytes) else {
                let refused = StoreError::NoSpace {
                    needed: bytes,
                    max_size: self.index.max_bytes(),
                };
                return (victims, Some(refused));
            };
            freed += fill.size;
            victims.push((key_hash, fill));
        }
        (victims, None)
    }

    /// Unlinks the files of `victims`, already out of the index, in one file call, and
    /// then gives their bytes back.
    async fn unlink_victims(&self, victims: Vec<(StoreHash, Fill)>) {
        let paths: Vec<PathBuf> = (victims.iter())
            .map(|&(key, fill)| self.forget_fill(key, fill))
            .collect();
        let inline = victims.len() <= INLINE_VICTIMS;
        let mut evicted = Evicted {
            inner: self,
            victims,
            dirs: Vec::new(),
        };
        let dirs = self.space.inodes_scarce();
        let remove = move || -> Vec<u64> {
            let remove_one = |path: &PathBuf| disk::remove_entry_quietly_sync(path, dirs);
            paths.iter().map(remove_one).collect()
        };
        let began = Instant::now();
        evicted.dirs = match inline && self.inline_io.open_at(began) {
            true => self.inline_io.timed(began, remove),
            // A panicked job removed what it removed; the next start-up scan finds the rest.
            false => tokio::task::spawn_blocking(remove)
                .await
                .unwrap_or_default(),
        };
    }
}
