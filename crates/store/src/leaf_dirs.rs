//! Which `objects/a/bc/` directories this run knows to exist, so that a fill asks the
//! filesystem about its directory only the first time one is used, not on every fill.
//! One bit per directory: 4,096 of them, 512 bytes.
//!
//! On a filesystem short of inodes, an eviction removes a directory it leaves empty (its
//! inode is worth having back there) and forgets its bit; a fill's commit makes a directory
//! again when its rename finds it gone (`disk::commit`), whoever removed it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::StoreHash;

/// Directories under `objects/`: the first three hex digits of a key hash name them.
pub(crate) const LEAVES: usize = 1 << 12;

/// One bit per `objects/a/bc/`, set once it is known to exist.
#[derive(Debug)]
pub(super) struct LeafDirs {
    bits: Box<[AtomicU64]>,
}

impl LeafDirs {
    /// None known yet.
    pub(super) fn new() -> LeafDirs {
        LeafDirs {
            bits: (0..LEAVES / 64).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Whether the directory of `key_hash`'s entries is known to exist.
    pub(super) fn known(&self, key_hash: StoreHash) -> bool {
        let (word, bit) = slot(key_hash);
        // Relaxed: a stale miss only costs one check on disk.
        self.bits[word].load(Ordering::Relaxed) & bit != 0
    }

    /// Notes that the directory of `key_hash`'s entries exists.
    pub(super) fn learn(&self, key_hash: StoreHash) {
        let (word, bit) = slot(key_hash);
        self.bits[word].fetch_or(bit, Ordering::Relaxed);
    }
}

impl LeafDirs {
    /// Notes that the directory of `key_hash`'s entries was removed.
    pub(super) fn forget(&self, key_hash: StoreHash) {
        let (word, bit) = slot(key_hash);
        self.bits[word].fetch_and(!bit, Ordering::Relaxed);
    }
}

/// The word and bit of `key_hash`'s directory: its top 12 bits, which are the first
/// three hex digits of its file name.
fn slot(key_hash: StoreHash) -> (usize, u64) {
    let leaf = (key_hash.0 >> 116) as usize;
    (leaf / 64, 1 << (leaf % 64))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{FillId, FillRef, disk};

    #[test]
    fn a_bit_stands_for_the_directory_the_entry_path_names() {
        let dirs = LeafDirs::new();
        let hash = 0xabc0_0000_0000_0000_0000_0000_0000_0042_u128;
        let same_dir = 0xabcf_ffff_0000_0000_0000_0000_0000_0000_u128;
        let next_dir = 0xabd0_0000_0000_0000_0000_0000_0000_0042_u128;
        let parent = |key| {
            let fill = FillRef {
                key,
                fill: FillId(1),
            };
            let path = disk::object_path(Path::new("/o"), fill);
            path.parent().map(Path::to_path_buf)
        };
        assert_eq!(parent(StoreHash(hash)), parent(StoreHash(same_dir)));
        assert_ne!(parent(StoreHash(hash)), parent(StoreHash(next_dir)));
        assert!(!dirs.known(StoreHash(hash)));
        dirs.learn(StoreHash(hash));
        assert!(dirs.known(StoreHash(same_dir)));
        assert!(!dirs.known(StoreHash(next_dir)));
        dirs.forget(StoreHash(same_dir));
        assert!(!dirs.known(StoreHash(hash)));
    }
}
