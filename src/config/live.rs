//! [`SettingsHandle`]: the running server's [`Config`], replaceable while it serves.

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

use super::Config;

/// The settings a running server reads, shared by all its parts and replaced as a whole.
///
/// [`crate::server::Server::bind`] makes one from its `Config`; the proxy and its cache
/// keep a clone and read the values below from it where they use them, one lock-free
/// [`SettingsHandle::load`] per step, never a copy made at bind.
/// [`SettingsHandle::replace`] swaps in a new `Config`; a reload (SIGHUP,
/// [`crate::lifecycle::Reloader`]) validates the file, rebuilds the parts named below, and
/// calls it last.
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
/// - `cache.targeted_field`: the operator's targeted cache-control field (RFC 9213), at
///   the same two judgements.
/// - `cache.stale_if_unreachable`: how stale an entry may be served while the origin
///   cannot be reached.
///
/// The others shape a part built from them, so a swap of this handle alone does **not**
/// change them. A reload rebuilds some of those parts and swaps each in its own handle,
/// which the proxy also loads per request:
///
/// - `[origin]`, the `[[site]]`s, the top-level `[[rule]]`s and `server.unknown_host`: the
///   sites with their pooled clients and rules (`sites::Sites`, in an `ArcSwap` the proxy
///   loads per request); requests in flight finish on the site they started with.
/// - `[admission]`: the policy, its hasher and its snapshots, rebuilt by
///   `admission::assemble` ([`crate::admission::LiveAdmission`]); filters of the same size
///   carry over what they remember (through a snapshot), other sizes start empty.
/// - `log.access_log`, `log.access_format`: the access log's destination and format
///   ([`crate::access_log::AccessLog::apply`]).
/// - `log.level`: the diagnostic log's filter ([`crate::logging::LogReload::apply`]).
/// - `server.tls.certificates`: the TLS listener's certificates
///   ([`crate::server::tls::Certificates`]), read again on every reload.
///
/// The rest need a restart; a reload warns about them and keeps their running values
/// ([`Config::reload`] lists them):
///
/// - The rest of `[server]` (`listen`, `tls.listen`, `max_connections`, the head limits and
///   timeout, `shutdown_timeout`, `workers`, `blocking_threads`, `user`, `group`): the
///   runtime, the listeners, the connection builder and the account the process runs as,
///   set up by `main` and `Server::bind`/`Server::run`.
/// - `cache.dir`, `cache.max_size` (the store's budget), `cache.min_free`, `cache.fsync`,
///   `cache.lock_timeout`, `cache.verify_whole_below`, `cache.memory_size`,
///   `cache.memory_max_object_size`, `cache.open_files`: the store's `StoreOptions`,
///   fixed when it opened.
/// - `log.format`: the formatter is fixed when the subscriber is installed.
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
    /// reload passes the file through [`Config::reload`] (which keeps the running values of
    /// what needs a restart) before it calls this.
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
        let before = handle.load().cache.max_object_bytes();
        let mut next = Config::default();
        next.cache.max_object_size = crate::config::MaxObjectSize::Bytes(before / 2);
        let old = handle.replace(next);
        assert_eq!(old.cache.max_object_bytes(), before);
        assert_eq!(clone.load().cache.max_object_bytes(), before / 2);
    }
}
