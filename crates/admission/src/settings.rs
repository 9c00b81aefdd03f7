//! The admission's settings that the config file names (`[admission]`, and a cache rule's
//! `admission`). The config layer parses the file into them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[admission]`: which misses are written to disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdmissionConfig {
    /// The admission policy.
    pub policy: AdmissionPolicy,
    /// How the Bloom filter pair is sized (serialized as the key the file gives it).
    #[serde(flatten)]
    pub sizing: FilterSizing,
    /// Target false-positive rate of one filter, strictly inside (0, 1).
    pub false_positive_rate: f64,
    /// A generation rotates at the latest after this long (> 0).
    pub max_age: Duration,
    /// How a generation's size is chosen.
    pub rotate: RotateMode,
    /// Under `rotate = "auto"`, the longest a generation that reaches its target of new keys
    /// early (a burst) is held open, taking keys up to the filter's capacity; at most
    /// `max_age`, zero turns the hold off (see `admission::BURST_HOLD_SHARE`).
    pub min_generation_age: Duration,
    /// Filter hash key; `None` means generate one and keep it in `cache.dir`.
    pub seed: Option<String>,
    /// How often the filters are saved to `cache.dir/state/` (> 0).
    pub snapshot_every: Duration,
    /// The write budget: bytes a second fills may write, held a minute at a time,
    /// whatever the policy admits (see `store::write_budget`); `None` for no cap.
    pub max_write_rate: Option<u64>,
    /// How often the miss-ratio estimates end an epoch, and `policy = "auto"` chooses
    /// (> 0).
    pub auto_epoch: Duration,
    /// What `policy = "auto"` minimises.
    pub optimize: Optimize,
    /// Time the miss-ratio estimates' replays may take in each second before they sample
    /// fewer keys (down to a least rate): their bound on the request path's CPU.
    pub estimate_budget: Duration,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            policy: AdmissionPolicy::SecondHit,
            sizing: FilterSizing::ExpectedUrls(1_000_000),
            false_positive_rate: 0.01,
            max_age: Duration::from_secs(3600),
            rotate: RotateMode::Auto,
            min_generation_age: Duration::from_secs(3600) / MIN_GENERATION_AGE_SHARE,
            seed: None,
            snapshot_every: Duration::from_secs(60),
            max_write_rate: None,
            auto_epoch: Duration::from_secs(300),
            optimize: Optimize::Bytes,
            // Half a percent of one core.
            estimate_budget: Duration::from_millis(5),
        }
    }
}

/// What `policy = "auto"` minimises (`admission.optimize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimize {
    /// Body bytes that miss (`"bytes"`): the origin's egress.
    Bytes,
    /// Requests that miss (`"objects"`): the origin's load.
    Objects,
}

/// `admission.min_generation_age` defaults to `max_age` divided by this: long enough that
/// a scan burst cannot flush the filters in less than minutes at the default `max_age`,
/// short enough that the hold ends well before `max_age` would end the generation anyway.
pub const MIN_GENERATION_AGE_SHARE: u32 = 4;

/// The admission policy (`admission.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionPolicy {
    /// Store a response only when its key was seen before (`"second-hit"`).
    SecondHit,
    /// Store every storable response (`"always"`).
    Always,
    /// Store like `Always`, and run the second-hit filters alongside to count what they
    /// would have changed (`"shadow"`).
    Shadow,
    /// Run `SecondHit` or `Always`, whichever the live miss-ratio estimates say misses
    /// least (`"auto"`; see `tuning`); the filters record in both.
    Auto,
}

impl AdmissionPolicy {
    /// The name used in the config file, headers and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::SecondHit => "second-hit",
            Self::Always => "always",
            Self::Shadow => "shadow",
            Self::Auto => "auto",
        }
    }

    /// Whether the policy keeps the filter pair: sized by `[admission]`, snapshotted,
    /// counted by preflight's memory check, and needed by a rule's
    /// `admission = "second-hit"`.
    pub fn keeps_filters(self) -> bool {
        match self {
            Self::SecondHit | Self::Shadow | Self::Auto => true,
            Self::Always => false,
        }
    }

    /// Whether the policy stores a URL on its first request, so the store's small queue
    /// sees one-hit wonders and its ghost of evicted keys earns its memory
    /// (see `Store::keep_ghost` in secondhit-store).
    /// `auto` may switch to `always` at any epoch, so its store keeps the ghost.
    pub fn stores_first_sights(self) -> bool {
        match self {
            Self::Always | Self::Shadow | Self::Auto => true,
            Self::SecondHit => false,
        }
    }
}

/// How a filter generation's size is chosen (`admission.rotate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RotateMode {
    /// Rotate when a generation took `expected_urls` new keys (`"fill"`).
    Fill,
    /// Rotate when a generation took one to two times as many new keys as the disk cache
    /// holds objects (twice, less when its admissions write too much; see
    /// `admission::aging_pair::auto`), clamped between a floor and `expected_urls`
    /// (`"auto"`, the default).
    Auto,
}

/// How the Bloom filter pair is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterSizing {
    /// New keys one generation records before it rotates (`admission.expected_urls`).
    ExpectedUrls(u64),
    /// Bytes for the pair of filters (`admission.memory`); the generation size follows.
    Memory(u64),
}

/// The admission a rule imposes (`admission = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleAdmission {
    /// What the filters say, whatever the policy (`"second-hit"`); the loader refuses it
    /// under `admission.policy = "always"`, which keeps no filters.
    SecondHit,
    /// Store every storable response (`"always"`).
    Always,
    /// Store none (`"never"`).
    Never,
}
