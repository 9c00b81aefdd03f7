//! The names the store gives its entries: the key's [`StoreHash`], distinct in type from
//! the admission filters' keyed hash (`FilterHash` of `secondhit-admission`), so that one
//! can never be passed where the other is meant (see "Two hashes" in `docs/design.md`).

use std::fmt;

use xxhash_rust::xxh3::xxh3_128;

/// The store hash of a cache key: an unkeyed xxh3-128 of the key string, which names the
/// key's entry file and its slot in the index in every run, with every configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreHash(pub u128);

impl StoreHash {
    /// The store hash of `key`.
    pub fn of(key: &str) -> StoreHash {
        StoreHash(xxh3_128(key.as_bytes()))
    }
}

/// As it appears in entry file names: 32 lowercase hex digits with `{:032x}`.
impl fmt::LowerHex for StoreHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// The id of one fill: every fill of a key gets its own, in the order fills begin, so that
/// when two fills of a key race the newer wins wherever it finishes, and removing a
/// loser's (or an evicted) file never touches the winner's. Part of the entry's file name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FillId(pub u64);

/// As it appears in entry file names: 16 lowercase hex digits with `{:016x}`.
impl fmt::LowerHex for FillId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// One fill of one key: what names an entry's file, and what a removal, an unlink or a
/// copy in memory must match so that it never touches another fill of the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FillRef {
    /// The key's store hash.
    pub key: StoreHash,
    /// The fill's id.
    pub fill: FillId,
}
