//! The store's settings that the config file names: `cache.fsync`, `cache.max_object_size`
//! and what a tag costs in `tags.max_memory`. The config layer parses the file into them.

use std::time::Duration;

use serde::Serialize;

pub use crate::object_size::{AUTO_DIVISOR, AUTO_LEAST, AUTO_MOST, MaxObjectSize};

/// Bytes each tag of each entry counts in `tags.max_memory` besides twice its length:
/// the entry's place in the tag's set and the string headers.
pub const TAG_OVERHEAD: u64 = 64;

/// `cache.fsync`: when the store makes committed fills durable. Whichever it is, a fill
/// is renamed into place only when whole and checksummed, so a crash can lose entries
/// but never leaves one that serves wrong bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fsync {
    /// `true`: each fill's file and its directory are fsynced before it counts as stored.
    EachFill,
    /// A duration: the cache's filesystem is synced (`syncfs`) at most this often, when
    /// fills were committed since the last sync; a crash loses at most that much of them.
    Every(Duration),
    /// `false`: the kernel writes fills back when it chooses.
    Off,
}

impl Fsync {
    /// Whether each file and directory change is fsynced as it is made.
    pub fn each_change(self) -> bool {
        self == Fsync::EachFill
    }
}
