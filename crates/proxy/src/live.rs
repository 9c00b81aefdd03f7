//! The live view: everything a reload can change — the settings, the sites with their
//! origin clients and rules, the admission policy with its hasher, the access log's
//! destination and the TLS listener's certificates — as one [`Snapshot`] in one swappable
//! handle ([`Live`]).
//!
//! A request loads the snapshot once, when it arrives, and reads every setting, its site,
//! the admission and the access log it is logged to from that one view until its answer
//! is done: it never sees a mix of an old and a new config. A TLS handshake loads it too,
//! for the certificate it serves (`server::tls`). A reload (`lifecycle`) builds the whole
//! next snapshot first — new origin clients, a new admission, a new access-log writer,
//! the certificates read again — and swaps it in one step; a reload that fails to build
//! changes nothing. Keys that need a restart keep their running values in the next
//! snapshot (`config::Config::reload` says which).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

use rustls::sign::CertifiedKey;

use crate::access_log::AccessLog;
use crate::admission::Assembled;
use crate::config::rules::Lifetimes;
use crate::config::{CertificateFiles, Config};
use crate::lost_hits::LostHits;
use crate::policy::Rules;
use crate::sites::Sites;
use crate::tuning::Tuning;

/// One consistent view of what a reload can change.
pub struct Snapshot {
    /// The validated config (restart-only keys at their running values).
    pub settings: Arc<Config>,
    /// The sites: each request's origin client and cache rules, chosen by its host.
    pub sites: Arc<Sites>,
    /// The admission policy every GET/HEAD key is checked against, with its hasher.
    pub admission: Arc<Assembled>,
    /// The entries stored that second-hit would not have stored, under the shadow policy
    /// (built with `admission`, and replaced with it).
    pub(crate) lost_hits: Option<Arc<LostHits>>,
    /// The miss-ratio estimates each hit and storable miss feeds, and `policy = "auto"`
    /// chooses by; rebuilt by a reload only when what they model changed.
    pub(crate) tuning: Arc<Tuning>,
    /// Where each request's line goes: a handle to its destination's writer, which goes
    /// on writing out what it was given after a reload switched to another.
    pub access_log: AccessLog,
    /// The TLS listener's certificates in `server.tls.certificates` order, which each
    /// handshake chooses from; empty without a TLS listener.
    pub certificates: Arc<[Certificate]>,
}

/// One certificate the TLS listener serves, and the files it was read from.
#[derive(Debug)]
pub struct Certificate {
    /// Its entry of `server.tls.certificates`.
    pub files: CertificateFiles,
    /// The chain and its signing key, as rustls serves them.
    pub key: Arc<CertifiedKey>,
}

impl Snapshot {
    /// This snapshot with other `settings`, and the same sites, admission, access log and
    /// certificates.
    pub fn with_settings(&self, settings: Config) -> Snapshot {
        Snapshot {
            settings: Arc::new(settings),
            sites: self.sites.clone(),
            admission: self.admission.clone(),
            lost_hits: self.lost_hits.clone(),
            tuning: self.tuning.clone(),
            access_log: self.access_log.clone(),
            certificates: self.certificates.clone(),
        }
    }

    /// `cache.max_object_size` in bytes: larger bodies are not stored.
    pub fn max_object_size(&self) -> u64 {
        self.settings.cache.max_object_bytes()
    }

    /// The `[cache]` settings the RFC 9111 judgements depend on, with the `lifetimes`
    /// of the request's site rule.
    pub fn cache_rules(&self, lifetimes: &Lifetimes) -> Rules {
        Rules {
            heuristic_max: self.settings.cache.heuristic_max_age,
            targeted_field: self.settings.cache.targeted_field.clone(),
            lifetimes: lifetimes.clone(),
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

    /// Swaps in a snapshot with `settings` and the running sites, admission, access log
    /// and certificates, and returns the settings it replaced. What `settings` holds for
    /// those parts is not applied: they are rebuilt only by a reload.
    pub fn replace_settings(&self, settings: Config) -> Arc<Config> {
        let previous = self
            .current
            .rcu(|current| current.with_settings(Config::clone(&settings)));
        previous.settings.clone()
    }
}
