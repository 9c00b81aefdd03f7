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
