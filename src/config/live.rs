//! [`SettingsHandle`]: the running server's [`Config`], replaceable while it serves.

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

use super::Config;

/// The settings a running server reads, shared by all its parts and replaced as a whole.
///
/// [`crate::server::Server::bind`] makes one from its `Config`; the proxy and its cache
/// keep a clone and read the values below from it where they use them, one lock-free
/// [`SettingsHandle::load`] per step, never a copy made at bind.
/// [`SettingsHandle::replace`] swaps in a new `Config`: a reload (SIGHUP, a later issue)
/// validates the file and calls it.
///
/// # What a swap changes
///
/// Read per request, so a swap applies from the next read on — the next request, and the
/// steps of a request in flight that have not read the value yet (no step relies on two
/// reads agreeing):
///
/// - `cache.max_object_size`: whether a response may be stored (its declared length), the
///   limit a fill without a declared length may grow to (passed to the store per fill),
///   and whether a range miss fetches the whole object.
/// - `cache.heuristic_max_age`: the cap on heuristic freshness, when a response is judged
///   for storage and when a stored one is judged for reuse.
/// - `cache.stale_if_unreachable`: how stale an entry may be served while the origin
///   cannot be reached.
/// - `log.access_log`: whether a request's `access` event is emitted. The event reaches
///   stdout only if the log filter lets it through, so turning it on under a quieter
///   `log.level` also needs the filter reloaded ([`crate::logging::LogReload::apply`] with
///   the same `[log]` section).
///
/// The others shape a resource built once, so a swap does **not** change them; they take
/// effect only when that resource is built again (today: on restart). A reload has to
/// apply or refuse them:
///
/// - `[server]` (`listen`, `max_connections`, the head limits and timeout,
///   `shutdown_timeout`): the listener and connection builder, set up by `Server::bind` and
///   `Server::run` from the section as it was at bind.
/// - `[origin]`: the pooled client (`origin::Origin`), its URL, `Host` rule, timeouts and
///   in-flight limit; a rebuilt client would take them.
/// - `[admission]`: the filter pair's size, false-positive rate, rotation, seed and
///   snapshot period, and the policy itself.
/// - `cache.dir`, `cache.max_size` (the store's budget), `cache.fsync`,
///   `cache.lock_timeout`, `cache.verify_whole_below`, `cache.memory_size`,
///   `cache.memory_max_object_size`: the store's `StoreOptions`, fixed when it opened.
/// - `log.level` and `log.format`: the level goes through the log filter's own reload
///   handle ([`crate::logging::LogReload::apply`]), not through this one; the format is
///   fixed when the subscriber is installed.
#[derive(Clone, Debug)]
pub struct SettingsHandle {
    /// arc-swap: loads are lock-free and cheap (no reference-count write on the fast path);
    /// a `replace` is visible to every load that starts after it returns, and a load that
    /// began before it keeps the `Config` it got until its guard drops.
    current: Arc<ArcSwap<Config>>,
}

impl SettingsHandle {
    /// A handle holding `config`.
    pub fn new(config: Config) -> SettingsHandle {
        SettingsHandle {
            current: Arc::new(ArcSwap::from_pointee(config)),
        }
    }

    /// The current settings, for a short read: the guard is not meant to be held across an
    /// `.await` or for long (arc-swap has a few fast slots per thread; beyond them a load
    /// falls back to a slower path).
    pub fn load(&self) -> Guard<Arc<Config>> {
        self.current.load()
    }

    /// Swaps in `config` for every later read, and returns the settings it replaced. A
    /// reload compares the sections a swap does not change (see above) with [`Self::load`]
    /// before it calls this.
    pub fn replace(&self, config: Config) -> Arc<Config> {
        self.current.swap(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replace_is_seen_by_every_clone_and_returns_the_old_settings() {
        let handle = SettingsHandle::new(Config::default());
        let clone = handle.clone();
        let before = handle.load().cache.max_object_size;
        let mut next = Config::default();
        next.cache.max_object_size = before / 2;
        let old = handle.replace(next);
        assert_eq!(old.cache.max_object_size, before);
        assert_eq!(clone.load().cache.max_object_size, before / 2);
    }
}
