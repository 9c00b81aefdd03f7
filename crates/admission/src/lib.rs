//! Admission: should a response be written to the disk cache?
//!
//! Most distinct URLs an edge cache sees are requested once and never again. Writing those
//! "one-hit wonders" to disk wastes write bandwidth and pushes useful objects out, so
//! `secondhit` stores an object only on its *second* request (Maggs & Sitaraman, "Algorithmic
//! Nuggets in Content Delivery", SIGCOMM CCR 2015). First requests are remembered in a rotating
//! pair of Bloom filters that forget old keys ([`AgingPair`], after Yoon, "Aging Bloom Filter
//! with Two Active Buffers", IEEE TKDE 2010).
//!
//! A policy decides in two phases ([`Admission`]). The proxy hashes each cache key with a
//! [`FilterHasher`] into a [`FilterHash`] and calls [`Admission::on_request`] on every
//! request for a cacheable method, before the store lookup (hits included, so a hot key
//! stays known); the policy records the key and returns a small [`Pending`] with the
//! decision it plans. Once the head of a storable response to a miss is known, the proxy
//! calls [`Admission::on_response`] with that `Pending` and a [`ResponseInfo`] (declared
//! size, content type, status). The answer is a [`Decision`] with a reason, rendered by
//! [`Decision::as_str`] into `Cache-Status` details and logs; a site's rule may override it
//! ([`Decision::overridden_by`]). This module never sees HTTP types: a hash before, plain
//! values after. What a policy reports (its name, memory, filter statistics) and the
//! operator's rotation are a separate trait, [`AdmissionStats`], read by the admin listener
//! and the metrics only.
//!
//! The filter hash is keyed with a per-deployment secret seed ([`resolve_seed`]) so crafted URLs
//! cannot aim at chosen filter bits; it is independent of the store's unkeyed hash, so changing
//! the seed never orphans the disk cache.
//!
//! The parts: `bloom` is one blocked Bloom filter and its sizing ([`FilterParams`]);
//! `aging_pair` the rotating pair, lock-free on the request path, with a background thread
//! that clears retired filters; `persist` the snapshots in `<cache.dir>/state/`
//! ([`Snapshots`]); `stats` what the pair reports ([`PairStats`], through
//! [`AdmissionStats::filter_stats`]); `shadow` the policy that stores like `always` while a
//! pair counts what second-hit would have done ([`Shadow`]). [`assemble`] puts them together
//! for the server, at start and on every reload that changes `[admission]`; `live` holds
//! what it built ([`LiveAdmission`]) so that a reload can swap it while the proxy serves.
//!
//! A new policy is one file here that implements [`Admission`] and [`AdmissionStats`], one
//! value of [`AdmissionPolicy`] in `settings` (its config name, which serde reads and
//! [`AdmissionPolicy::as_str`] writes, and whether it keeps filters), and one match arm in
//! `build`, which [`assemble`] calls.

mod aging_pair;
mod auto;
mod bloom;
mod live;
mod persist;
mod shadow;
mod stats;
pub mod settings;

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use xxhash_rust::xxh3::{xxh3_64, xxh3_128_with_seed};

use crate::settings::RuleAdmission;
use crate::settings::{AdmissionConfig, AdmissionPolicy, FilterSizing, RotateMode};

pub use aging_pair::{AUTO_FLOOR, steer};
pub use aging_pair::{
    AUTO_KEYS_PER_OBJECT, AUTO_MIN_KEYS_PER_OBJECT, AUTO_WRITES_PER_NEW_KEY, AgingPair,
    BURST_HOLD_SHARE, Cause, ObjectCount, Rotation,
};
pub use auto::{Auto, AutoMode};
pub use bloom::FilterParams;
pub use live::LiveAdmission;
pub use persist::{SNAPSHOT_FILE, Snapshots};
pub use shadow::Shadow;
pub use stats::{FilterStats, PairStats, RecentRotation, RotationCounts, SpareState};

/// 128-bit keyed hash of a cache key, the only thing admission sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FilterHash(pub u128);

/// Hashes cache keys for the filters with a per-deployment secret seed (xxh3-128 with seed), independent of the store's unkeyed hash.
#[derive(Clone)]
pub struct FilterHasher {
    /// The secret seed; see [`resolve_seed`].
    seed: u64,
}

impl FilterHasher {
    /// A hasher keyed with `seed`.
    pub fn new(seed: u64) -> Self {
        FilterHasher { seed }
    }

    /// The filter hash of a cache key.
    pub fn hash(&self, key: &[u8]) -> FilterHash {
        FilterHash(xxh3_128_with_seed(key, self.seed))
    }
}

// Hand-written so that a `{:?}` of a struct holding the hasher never logs the secret seed.
impl fmt::Debug for FilterHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilterHasher").finish_non_exhaustive()
    }
}

/// Name of the seed file inside the state directory.
const SEED_FILE: &str = "filter-seed";

/// Seed resolution: Some(text) from config → xxh3_64(text bytes); None → read `<state_dir>/filter-seed` (16 lowercase hex digits + optional newline); if absent, generate 64 random bits (getrandom), write it atomically (temp file in state_dir + fsync + rename), return it. A present but malformed seed file is an error naming the file (never silently replaced: replacing it would silently forget every recorded key).
pub fn resolve_seed(configured: Option<&str>, state_dir: &Path) -> Result<u64, AdmissionError> {
    if let Some(text) = configured {
        return Ok(xxh3_64(text.as_bytes()));
    }
    let path = state_dir.join(SEED_FILE);
    match fs::read(&path) {
        Ok(bytes) => {
            let seed = parse_seed(&bytes).map_err(|reason| AdmissionError::BadSeedFile {
                path: path.clone(),
                reason,
            })?;
            keep_private(&path);
            Ok(seed)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let seed = random_seed().map_err(|source| AdmissionError::SeedFile {
                path: path.clone(),
                source,
            })?;
            write_seed(state_dir, &path, seed).map_err(|source| AdmissionError::SeedFile {
                path: path.clone(),
                source,
            })?;
            tracing::info!(path = %path.display(), "generated a new filter seed");
            Ok(seed)
        }
        Err(source) => Err(AdmissionError::SeedFile { path, source }),
    }
}

/// Parses a seed file's bytes: exactly 16 lowercase hex digits, optionally followed by one newline.
fn parse_seed(bytes: &[u8]) -> Result<u64, String> {
    let digits = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if digits.len() != 16 {
        return Err(format!(
            "expected 16 lowercase hex digits and an optional newline, found {} bytes",
            bytes.len()
        ));
    }
    // Lowercase only, as written: uppercase or other characters mean someone edited the file
    // by hand, which is worth an error rather than a guess.
    if !digits
        .iter()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err("expected only lowercase hex digits (0-9, a-f)".to_owned());
    }
    // All 16 bytes are ASCII hex digits here, so both conversions succeed; map rather than
    // unwrap anyway.
    let text = std::str::from_utf8(digits).map_err(|e| e.to_string())?;
    u64::from_str_radix(text, 16).map_err(|e| e.to_string())
}

/// 64 bits from the operating system's random source.
fn random_seed() -> io::Result<u64> {
    getrandom::u64().map_err(|e| match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::other(format!("random source: {e}")),
    })
}

/// Writes the seed to `path` atomically (see [`persist::write_atomically`]): a reader never
/// sees a half-written seed file.
fn write_seed(state_dir: &Path, path: &Path, seed: u64) -> io::Result<()> {
    persist::write_atomically(state_dir, path, |file| {
        // Private before the secret is in it.
        file.set_permissions(fs::Permissions::from_mode(PRIVATE))?;
        file.write_all(format!("{seed:016x}\n").as_bytes())
    })
}

/// The seed file's mode: who can read the seed can aim URLs at chosen filter bits.
const PRIVATE: u32 = 0o600;

/// Makes a seed file that others may read (left by an earlier version, or copied in)
/// readable by its owner only; a failure is logged and the start goes on with the seed.
fn keep_private(path: &Path) {
    let mode = match fs::metadata(path) {
        Ok(metadata) => metadata.permissions().mode(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read the filter seed file's mode");
            return;
        }
    };
    if mode & 0o077 == 0 {
        return;
    }
    match fs::set_permissions(path, fs::Permissions::from_mode(PRIVATE)) {
        Ok(()) => {
            tracing::info!(path = %path.display(), "made the filter seed file readable by its owner only")
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the filter seed file is readable by others and its mode cannot be changed")
        }
    }
}

/// Errors of the admission module (all about the seed file; filters themselves cannot fail).
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The seed file could not be read or written.
    #[error("filter seed file {}: {source}", path.display())]
    SeedFile {
        /// The seed file's path.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// The seed file exists but does not hold a seed.
    #[error(
        "malformed filter seed file {}: {reason} (fix it, or delete it to generate a new seed and forget every recorded key)",
        path.display()
    )]
    BadSeedFile {
        /// The seed file's path.
        path: PathBuf,
        /// What is wrong with its contents.
        reason: String,
    },
}

/// The outcome of an admission check: store the response or not, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the response to the cache.
    Admit(AdmitReason),
    /// Do not write it.
    Reject(RejectReason),
}

/// Why a response was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitReason {
    /// The key was requested before, within the window the filters remember.
    SeenBefore,
    /// The policy admits everything ([`AlwaysAdmit`]).
    Always,
    /// The key already has a stored (stale) entry being refetched; produced by the proxy, which
    /// re-admits such keys without consulting the filter.
    AlreadyStored,
    /// Admitted by `policy = "shadow"`, which stores everything, although its filter pair
    /// rejected the key for this reason: second-hit would not have stored it.
    Shadowed(RejectReason),
    /// A site's cache rule says `admission = "always"` for this request (see `sites`).
    Rule,
    /// `policy = "auto"` runs `always` now ([`Auto`]), and this is the key's first
    /// request in the remembered window.
    AutoAlways,
    /// `policy = "auto"` decided, and the key was requested before (in either mode).
    AutoSeenBefore,
}

/// Why a response was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// First request for this key in the remembered window; it is now recorded.
    FirstSight,
    /// A site's cache rule says `admission = "never"` for this request (see `sites`).
    Rule,
    /// `policy = "auto"` runs `second-hit` now, and this is the key's first request in the
    /// remembered window.
    AutoFirstSight,
}

impl Decision {
    /// Every decision a policy or the proxy can make, in a fixed order (a counter set
    /// indexes by [`Decision::index`]).
    pub const ALL: [Decision; 10] = [
        Decision::Admit(AdmitReason::SeenBefore),
        Decision::Admit(AdmitReason::Always),
        Decision::Admit(AdmitReason::AlreadyStored),
        Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight)),
        Decision::Reject(RejectReason::FirstSight),
        Decision::Admit(AdmitReason::Rule),
        Decision::Reject(RejectReason::Rule),
        Decision::Admit(AdmitReason::AutoAlways),
        Decision::Admit(AdmitReason::AutoSeenBefore),
        Decision::Reject(RejectReason::AutoFirstSight),
    ];

    /// This decision's position in [`Decision::ALL`].
    pub fn index(self) -> usize {
        match self {
            Decision::Admit(AdmitReason::SeenBefore) => 0,
            Decision::Admit(AdmitReason::Always) => 1,
            Decision::Admit(AdmitReason::AlreadyStored) => 2,
            // Shadow mode only ever shadows a filter's rejection (a rule's "never" is no
            // filter's answer): every shadowed decision is that one.
            Decision::Admit(AdmitReason::Shadowed(_)) => 3,
            Decision::Reject(RejectReason::FirstSight) => 4,
            Decision::Admit(AdmitReason::Rule) => 5,
            Decision::Reject(RejectReason::Rule) => 6,
            Decision::Admit(AdmitReason::AutoAlways) => 7,
            Decision::Admit(AdmitReason::AutoSeenBefore) => 8,
            Decision::Reject(RejectReason::AutoFirstSight) => 9,
        }
    }

    /// Whether the response should be stored.
    pub fn is_admit(&self) -> bool {
        matches!(self, Decision::Admit(_))
    }

    /// The reason as a short token for `Cache-Status` and logs:
    /// "seen-before" | "always" | "already-stored" | "shadow-first-sight" | "first-sight"
    /// | "rule-always" | "rule-never" | "auto-always" | "auto-seen-before"
    /// | "auto-first-sight".
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Admit(AdmitReason::SeenBefore) => "seen-before",
            Decision::Admit(AdmitReason::Always) => "always",
            Decision::Admit(AdmitReason::AlreadyStored) => "already-stored",
            // As in `index`: only a filter's rejection is ever shadowed.
            Decision::Admit(AdmitReason::Shadowed(_)) => "shadow-first-sight",
            Decision::Reject(RejectReason::FirstSight) => "first-sight",
            Decision::Admit(AdmitReason::Rule) => "rule-always",
            Decision::Reject(RejectReason::Rule) => "rule-never",
            Decision::Admit(AdmitReason::AutoAlways) => "auto-always",
            Decision::Admit(AdmitReason::AutoSeenBefore) => "auto-seen-before",
            Decision::Reject(RejectReason::AutoFirstSight) => "auto-first-sight",
        }
    }

    /// This decision as a site rule's `admission` overrides it (`sites` matches the rule;
    /// this says what its value means for a policy's decision): `always` and `never`
    /// decide whatever the policy said, and `second-hit` obeys the filters, also where the
    /// shadow policy admitted what they rejected and where `auto` running `always` did.
    /// Applied over both phases: over
    /// [`Pending::planned`] before the response, over [`Admission::on_response`] after.
    pub fn overridden_by(self, rule: RuleAdmission) -> Decision {
        match (rule, self) {
            (RuleAdmission::Always, _) => Decision::Admit(AdmitReason::Rule),
            (RuleAdmission::Never, _) => Decision::Reject(RejectReason::Rule),
            // Shadow mode admits what its filters rejected; this rule wants them obeyed.
            (RuleAdmission::SecondHit, Decision::Admit(AdmitReason::Shadowed(reason))) => {
                Decision::Reject(reason)
            }
            // `auto` running `always` admits a first sight; this rule wants it kept out.
            (RuleAdmission::SecondHit, Decision::Admit(AdmitReason::AutoAlways)) => {
                Decision::Reject(RejectReason::AutoFirstSight)
            }
            (RuleAdmission::SecondHit, decision) => decision,
        }
    }
}

/// What a policy's first phase ([`Admission::on_request`]) hands to its second
/// ([`Admission::on_response`]): a small `Copy` value the proxy keeps while the request
/// goes to the store and the origin, so the hit path allocates nothing for it.
///
/// The second phase may be asked of another policy than the first (a reload can swap the
/// policy in between), so a policy reads nothing from a `Pending` but these fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The request's filter hash, as recorded.
    pub hash: FilterHash,
    /// The decision the policy expects before the response is known: the proxy prepares
    /// the fetch by it (may the answer be stored, so fetch it whole; may the request lead
    /// a collapsed fetch) and, for a policy that decides by the key alone, it is final.
    pub planned: Decision,
}

impl Pending {
    /// A request recorded under `hash`, with the decision planned for it.
    pub const fn new(hash: FilterHash, planned: Decision) -> Pending {
        Pending { hash, planned }
    }
}

/// What the proxy knows of a storable response when its head has arrived: the facts a
/// policy may decide by in its second phase. Plain values, so that a policy needs no
/// HTTP types (and the simulator can make one from a trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseInfo<'a> {
    /// The body's declared length (`Content-Length`); `None` when the framing declares
    /// none (chunked).
    pub size: Option<u64>,
    /// The `Content-Type` value as sent, when present and visible ASCII.
    pub content_type: Option<&'a str>,
    /// The response's status code.
    pub status: u16,
}

/// An admission policy, in two phases: [`Admission::on_request`] on every request for a
/// cacheable method (hits included, so hot keys stay known), and
/// [`Admission::on_response`] once the head of a storable response to a miss is known.
/// Called concurrently from many threads. What a policy reports is a separate trait,
/// [`AdmissionStats`].
pub trait Admission: Send + Sync {
    /// Records `hash` as requested, before the store lookup, and says what the policy
    /// plans for it. On the hit path: no allocation, no lock.
    fn on_request(&self, hash: FilterHash) -> Pending;
    /// [`Admission::on_request`] at a given time, for replaying a trace on its own clock
    /// (the simulator). Policies without a notion of time ignore `now`.
    fn on_request_at(&self, hash: FilterHash, now: std::time::Instant) -> Pending {
        let _ = now;
        self.on_request(hash)
    }
    /// Decides whether a storable response to the request that gave `pending` is written,
    /// now that its head is known. Asked only of storable answers to misses (a refetch of
    /// a stored key is re-admitted without asking). The default keeps the planned
    /// decision: a policy that decides by the key alone need not implement it.
    fn on_response(&self, pending: Pending, response: &ResponseInfo<'_>) -> Decision {
        let _ = response;
        pending.planned
    }
    /// A hint that `hash` will be recorded soon: a policy that keeps filters starts loading
    /// the key's blocks into the CPU's cache, so that [`Admission::on_request`] does not
    /// wait for memory. Changes no answer. Worth calling a few keys ahead when the keys are
    /// known in advance (the simulator replaying a trace) or a little before the check (the
    /// proxy, before its store lookup); a check of a key in a large filter otherwise waits
    /// one memory latency.
    fn prefetch(&self, hash: FilterHash) {
        let _ = hash;
    }
    /// A fill began under `decision`: the filter pair counts the fills of keys it
    /// admitted, by which `rotate = "auto"` sizes its generations. Called once per fill,
    /// off the hit path. Which entry it was is no concern of a policy: the entries second
    /// hit would not have stored are tracked by the proxy, which knows the store's names
    /// for them (see [`Shadow`]).
    fn note_fill(&self, decision: Decision) {
        let _ = decision;
    }
}

/// What an admission policy reports and the operator may ask of it: read by the admin
/// listener (`/stats`, `/rotate`) and the metrics at their pace, never on the request path.
pub trait AdmissionStats: Send + Sync {
    /// What the policy is: the code that treats one policy apart (the shadow counters)
    /// compares this, and logs, metrics and `/stats` name it by [`PolicyKind::as_str`].
    fn kind(&self) -> PolicyKind;
    /// Bytes of memory the policy holds (for metrics).
    fn memory_bytes(&self) -> u64;
    /// The filter pair's statistics, for policies that keep one (`O(m/64)`: for metrics, not
    /// for the request path).
    fn filter_stats(&self) -> Option<PairStats> {
        None
    }
    /// Ends the filters' current generation now (an operator's request) and returns the new
    /// generation's number; `None` for a policy that keeps no filters.
    fn rotate(&self) -> Option<u64> {
        None
    }
}

/// What an admission policy is ([`AdmissionStats::kind`]): one `admission.policy` names,
/// or one built outside the config (the bench's, a test's) under a name of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// A policy the config names.
    Configured(AdmissionPolicy),
    /// A policy the config cannot name, by the name its reports use.
    Custom(&'static str),
}

impl PolicyKind {
    /// The name in logs, metrics and `/stats`: the config's for a configured policy.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Configured(policy) => policy.as_str(),
            PolicyKind::Custom(name) => name,
        }
    }
}

impl From<AdmissionPolicy> for PolicyKind {
    fn from(policy: AdmissionPolicy) -> PolicyKind {
        PolicyKind::Configured(policy)
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for PolicyKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One policy behind its two interfaces: the phases the request path calls, and what the
/// admin listener and the metrics read. Usually one object behind both ([`Policy::new`]).
#[derive(Clone)]
pub struct Policy {
    /// The request path's side.
    pub admission: Arc<dyn Admission>,
    /// The reporting side.
    pub stats: Arc<dyn AdmissionStats>,
}

impl Policy {
    /// `policy` behind both interfaces.
    pub fn new<P: Admission + AdmissionStats + 'static>(policy: Arc<P>) -> Policy {
        Policy {
            admission: policy.clone(),
            stats: policy,
        }
    }
}

/// The policy that admits every response (config `policy = "always"`), remembering nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysAdmit;

impl Admission for AlwaysAdmit {
    fn on_request(&self, hash: FilterHash) -> Pending {
        Pending::new(hash, Decision::Admit(AdmitReason::Always))
    }
}

impl AdmissionStats for AlwaysAdmit {
    fn memory_bytes(&self) -> u64 {
        0
    }

    fn kind(&self) -> PolicyKind {
        AdmissionPolicy::Always.into()
    }
}

/// What [`assemble`] builds for the proxy and the server.
pub struct Assembled {
    /// The policy the proxy consults (its two phases).
    pub policy: Arc<dyn Admission>,
    /// The same policy's report, for the admin listener and the metrics.
    pub stats: Arc<dyn AdmissionStats>,
    /// The keyed hasher the proxy feeds it with.
    pub hasher: FilterHasher,
    /// The filter pair's snapshots, when the policy keeps filters.
    pub snapshots: Option<Arc<Snapshots>>,
    /// The same policy as `auto`'s switch, under `policy = "auto"`.
    pub auto: Option<Arc<Auto>>,
}

/// Builds what the server needs from `[admission]` (config validation already checked its
/// values): resolves the seed in `state_dir`, builds the policy (`build`), and restores
/// the snapshot of the filter pair it keeps, if any. `objects` counts the objects in the
/// disk cache, for `rotate = "auto"`.
pub fn assemble(
    config: &AdmissionConfig,
    state_dir: &Path,
    objects: ObjectCount,
) -> Result<Assembled, AdmissionError> {
    let seed = resolve_seed(config.seed.as_deref(), state_dir)?;
    let Built { policy, pair, auto } = build(config, objects);
    let snapshots = pair.map(|pair| {
        let snapshots = Arc::new(Snapshots::new(pair, state_dir, seed, config.snapshot_every));
        snapshots.restore();
        match snapshots.reserve() {
            Ok(bytes) => tracing::info!(
                path = %snapshots.path().display(),
                bytes,
                "room for the filter snapshot taken ahead"
            ),
            Err(error) => tracing::warn!(
                path = %snapshots.path().display(),
                %error,
                "cannot take room for the filter snapshot ahead; a save may fail on a full disk"
            ),
        }
        snapshots
    });
    Ok(Assembled {
        policy: policy.admission,
        stats: policy.stats,
        hasher: FilterHasher::new(seed),
        snapshots,
        auto,
    })
}

/// What [`build`] makes of `[admission]`.
struct Built {
    policy: Policy,
    /// The filter pair the policy keeps, which [`assemble`] snapshots.
    pair: Option<Arc<AgingPair>>,
    /// The policy again, as `auto`'s switch.
    auto: Option<Arc<Auto>>,
}

/// The one place that maps `admission.policy` to a policy, one match arm per value, with
/// the filter pair the policy keeps (which [`assemble`] snapshots): `always` keeps no
/// filters; `second-hit` is the pair itself; `shadow` is the same pair (sized, rotated and
/// snapshotted alike) watched by a [`Shadow`] that stores everything; `auto` the same
/// pair behind an [`Auto`] switch. Nothing is used before `assemble` restores the pair's
/// snapshot.
fn build(config: &AdmissionConfig, objects: ObjectCount) -> Built {
    let (policy, pair, auto) = match config.policy {
        AdmissionPolicy::Always => (Policy::new(Arc::new(AlwaysAdmit)), None, None),
        AdmissionPolicy::SecondHit => {
            let pair = pair_from_config(config, objects);
            (Policy::new(pair.clone()), Some(pair), None)
        }
        AdmissionPolicy::Shadow => {
            let pair = pair_from_config(config, objects);
            let shadow = Shadow::new(pair.clone());
            (Policy::new(Arc::new(shadow)), Some(pair), None)
        }
        AdmissionPolicy::Auto => {
            let pair = pair_from_config(config, objects);
            let auto = Arc::new(Auto::new(pair.clone()));
            (Policy::new(auto.clone()), Some(pair), Some(auto))
        }
    };
    Built { policy, pair, auto }
}

/// Just the policy named by `[admission]`, fresh and without snapshots (for tests). Without
/// a disk cache to count, `rotate = "auto"` sizes every generation to its upper clamp,
/// `expected_urls`.
#[cfg(test)]
pub(crate) fn from_config(config: &AdmissionConfig) -> Policy {
    from_config_counting(config, Arc::new(|| u64::MAX))
}

/// Just the policy named by `[admission]`, fresh and without snapshots, with `objects`
/// counting the cache's objects for `rotate = "auto"`: for the bench, which builds and
/// compares policies itself (the simulator counts the entries of its own index).
pub fn from_config_counting(config: &AdmissionConfig, objects: ObjectCount) -> Policy {
    build(config, objects).policy
}

/// `policy = "auto"` as `build` makes it (the filter pair `[admission]` describes behind
/// an [`Auto`] switch), fresh and without snapshots, with the switch itself: for the
/// simulator, which ends the estimates' epochs on a trace's clock and sets the mode.
pub fn auto_counting(config: &AdmissionConfig, objects: ObjectCount) -> (Policy, Arc<Auto>) {
    let auto = Arc::new(Auto::new(pair_from_config(config, objects)));
    (Policy::new(auto.clone()), auto)
}

/// Both phases for one request with a plain 200 response of unknown size: the decision a
/// policy that decides by the key alone makes (the tests' and the simulator's shorthand).
pub fn decide(policy: &dyn Admission, hash: FilterHash) -> Decision {
    let response = ResponseInfo {
        size: None,
        content_type: None,
        status: 200,
    };
    policy.on_response(policy.on_request(hash), &response)
}

/// The size of each filter of the pair `[admission]` describes; `None` for a policy that
/// keeps no filters ([`AdmissionPolicy::keeps_filters`]).
pub fn filter_params(config: &AdmissionConfig) -> Option<FilterParams> {
    config.policy.keeps_filters().then(|| sizing(config))
}

/// The size of each filter `[admission]` asks for, whether or not its policy keeps any.
pub fn sizing(config: &AdmissionConfig) -> FilterParams {
    match config.sizing {
        FilterSizing::ExpectedUrls(keys) => {
            FilterParams::for_expected_keys(keys, config.false_positive_rate)
        }
        FilterSizing::Memory(bytes) => FilterParams::for_memory(bytes, config.false_positive_rate),
    }
}

/// The filter pair `[admission]` describes, for a policy that keeps one.
fn pair_from_config(config: &AdmissionConfig, objects: ObjectCount) -> Arc<AgingPair> {
    let rotation = match config.rotate {
        RotateMode::Fill => Rotation::Fill,
        RotateMode::Auto => Rotation::Auto {
            objects,
            min_generation_age: config.min_generation_age,
        },
    };
    let now = std::time::Instant::now();
    Arc::new(AgingPair::new(
        sizing(config),
        config.max_age,
        rotation,
        now,
    ))
}

#[cfg(test)]
mod tests;
