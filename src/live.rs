//! The live view: everything a reload can change that a request reads — the settings,
//! the sites with their origin clients and rules, and the admission policy with its
//! hasher — as one [`Snapshot`] in one swappable handle ([`Live`]).
//!
//! A request loads the snapshot once, when it arrives, and reads every setting, its site
//! and the admission from that one view until its answer is done: it never sees a mix of
//! an old and a new config. A reload (`lifecycle`) builds the whole next snapshot first —
//! new origin clients, a new admission — and swaps it in one step; a reload that fails
//! to build changes nothing.
//!
//! Two reloadable parts live outside the snapshot, because no request reads them: the
//! access log's destination (its writer thread switches, `access_log::AccessLog::apply`)
//! and the TLS certificates (read per handshake, `server::tls::Certificates`). A reload
//! switches them right after the swap. Keys that need a restart keep their running
//! values in the next snapshot (`config::Config::reload` says which).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

use crate::admission::Assembled;
use crate::config::Config;
use crate::policy::Rules;
use crate::sites::Sites;

/// One consistent view of what a reload can change.
pub struct Snapshot {
    /// The validated config (restart-only keys at their running values).
    pub settings: Arc<Config>,
    /// The sites: each request's origin client and cache rules, chosen by its host.
    pub sites: Arc<Sites>,
    /// The admission policy every GET/HEAD key is checked against, with its hasher.
    pub admission: Arc<Assembled>,
}

impl Snapshot {
    /// This snapshot with other `settings`, and the same sites and admission.
    pub fn with_settings(&self, settings: Config) -> Snapshot {
        Snapshot {
            settings: Arc::new(settings),
            sites: self.sites.clone(),
            admission: self.admission.clone(),
        }
    }

    /// `cache.max_object_size` in bytes: larger bodies are not stored.
    pub fn max_object_size(&self) -> u64 {
        self.settings.cache.max_object_bytes()
    }

    /// The `[cache]` settings the RFC 9111 judgements depend on.
    pub fn cache_rules(&self) -> Rules {
        Rules {
            heuristic_max: self.settings.cache.heuristic_max_age,
            targeted_field: self.settings.cache.targeted_field.clone(),
        }
    }

    /// `cache.stale_if_unreachable`: how stale an entry may be served while the origin
    /// cannot be reached.
    pub fn stale_if_unreachable(&self) -> Duration {
        self.settings.cache.stale_if_unreachable
    }

    /// `cache.collapse_timeout`: how long a miss waits for another request's fill of its
    /// key; zero: misses are not collapsed.
    pub fn collapse_timeout(&self) -> Duration {
        self.settings.cache.collapse_timeout
    }
}

/// The handle every part that serves requests shares; loads are lock-free.
#[derive(Clone)]
pub struct Live {
    /// arc-swap: a load takes no lock and, for a short hold, writes no reference count; a
    /// `replace` is seen by every load that starts after it returns, while a load that
    /// began before keeps its snapshot until its guard drops.
    current: Arc<ArcSwap<Snapshot>>,
}

impl Live {
    /// A handle holding `snapshot`.
    pub fn new(snapshot: Snapshot) -> Live {
        Live {
            current: Arc::new(ArcSwap::from_pointee(snapshot)),
        }
    }

    /// The snapshot in use now, for one request.
    pub fn load(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// The snapshot in use now, to keep (a reload compares against it).
    pub fn load_full(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Swaps in `next` for every later request, and returns the snapshot it replaced.
    pub fn replace(&self, next: Snapshot) -> Arc<Snapshot> {
        self.current.swap(Arc::new(next))
    }

    /// Swaps in a snapshot with `settings` and the running sites and admission, and
    /// returns the settings it replaced. What `settings` holds for the sites or the
    /// admission is not applied: those parts are rebuilt only by a reload.
    pub fn replace_settings(&self, settings: Config) -> Arc<Config> {
        let settings = Arc::new(settings);
        let previous = self.current.rcu(|current| Snapshot {
            settings: settings.clone(),
            sites: current.sites.clone(),
            admission: current.admission.clone(),
        });
        previous.settings.clone()
    }
}
