//! `cache.max_object_size`: the largest body written to disk, given in bytes or, by
//! default, as a share of the cache (`"auto"`).
//!
//! Why a share of the cache: an object of a large part of the cache pushes out many
//! small ones, each about as likely to be requested again. Why an eighth and not less: in
//! the simulator, a workload of large files (median 2 MiB, mean 8 MiB) lost a third of its
//! byte hits at a cache of 1% of its unique bytes with a 48th, while on the CDN-like
//! workloads of small objects any share from a 16th up changed the byte hit ratio by at
//! most a quarter point; an eighth stores the files an operator expects stored. A fixed
//! cap would cost a larger cache byte hits, so the cap follows the cache. It has a floor of
//! 1 MiB ([`AUTO_LEAST`]) for caches of a few objects. The figures: `benches/RESULTS.md`,
//! "`cache.max_object_size = "auto"`".

/// Share of `cache.max_size` the `"auto"` limit allows one body: `max_size / 8`.
pub const AUTO_DIVISOR: u64 = 8;

/// The least the `"auto"` limit allows (unless the cache is smaller): 1 MiB, so that a
/// cache of a few MiB still stores bodies of ordinary size.
pub const AUTO_LEAST: u64 = 1024 * 1024;

/// The most the `"auto"` limit allows, however large the cache: 256 MiB (the limit before
/// `"auto"`; a larger body rarely pays for the time its fill holds an origin connection).
pub const AUTO_MOST: u64 = 256 * 1024 * 1024;

/// `cache.max_object_size` as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum MaxObjectSize {
    /// `"auto"` (the default): `max_size /` `AUTO_DIVISOR`, at least `AUTO_LEAST` (or
    /// all of `max_size`, when smaller) and at most `AUTO_MOST`.
    Auto,
    /// A size given in the file, in bytes (> 0).
    Bytes(u64),
}

impl MaxObjectSize {
    /// The limit in bytes for a cache of `max_size` bytes (at least 1).
    pub fn resolve(self, max_size: u64) -> u64 {
        match self {
            MaxObjectSize::Auto => (max_size / AUTO_DIVISOR)
                .max(AUTO_LEAST.min(max_size))
                .clamp(1, AUTO_MOST),
            MaxObjectSize::Bytes(bytes) => bytes,
        }
    }

    /// The size given in the file, `None` for `"auto"`.
    pub fn explicit(self) -> Option<u64> {
        match self {
            MaxObjectSize::Auto => None,
            MaxObjectSize::Bytes(bytes) => Some(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_a_share_of_the_cache_up_to_its_most() {
        assert_eq!(MaxObjectSize::Auto.resolve(8 * 3_000_000), 3_000_000);
        // A gibibyte cache stores files of up to 128 MiB.
        assert_eq!(MaxObjectSize::Auto.resolve(1 << 30), 128 << 20);
        // A cache under 8 MiB: the floor, or the whole cache when smaller.
        assert_eq!(MaxObjectSize::Auto.resolve(5 * AUTO_LEAST), AUTO_LEAST);
        assert_eq!(MaxObjectSize::Auto.resolve(5000), 5000);
        assert_eq!(MaxObjectSize::Auto.resolve(0), 1, "never zero");
        let large = 100 * AUTO_MOST;
        assert_eq!(MaxObjectSize::Auto.resolve(large), AUTO_MOST);
        assert_eq!(MaxObjectSize::Bytes(5).resolve(large), 5);
        assert_eq!(MaxObjectSize::Bytes(5).explicit(), Some(5));
        assert_eq!(MaxObjectSize::Auto.explicit(), None);
    }
}
