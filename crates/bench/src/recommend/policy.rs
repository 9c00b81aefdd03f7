//! The last stage of `--recommend`: which of the proxy's policies, and the write budget
//! with it.
//!
//! `second-hit` with the settings chosen before, `auto` with the same filters (its epochs
//! every `admission.auto_epoch` of the trace's clock, as the simulator runs it) and
//! `always`, at the chosen size. The choice is the rule of the stages before
//! ([`super::TIE`]): of those within a quarter point of the best byte hit ratio, the one
//! writing fewest bytes, `second-hit` first on equal writes, then `auto`. So `auto` is
//! proposed where it misses fewest by more than a quarter point, or where it is within a
//! quarter point of the best and writes less than the others that are.
//!
//! The write budget (`admission.max_write_rate`): none where the proposed policy writes
//! at most [`SMALL_WRITES`] of what `always` writes (admission keeps the writes down
//! already); else the bytes it wrote in the trace's busiest minute, a second's share, plus
//! [`HEADROOM`]: the trace's own traffic never meets it, and a burst of new objects
//! beyond what the trace saw is capped there (the proxy counts the budget a minute at a
//! time, and skips a fill past it).

use serde::Serialize;

use super::mark_choice;
use crate::report::PolicyReport;
use crate::simulate::{self, AutoRun, SimCache};
use crate::workload::Workload;
use crate::{SweepRow, simulation_hasher};
use secondhit_proxy::config::Config;

/// A share of `always`'s write bytes at or under which no budget is proposed: the
/// issue's goal for `second-hit`'s writes where it wins, with a little room.
pub const SMALL_WRITES: f64 = 0.12;

/// How much more than the busiest minute's rate the proposed budget allows.
pub const HEADROOM: f64 = 1.25;

/// A policy `--recommend` proposes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Proposed {
    /// `policy = "second-hit"`.
    SecondHit,
    /// `policy = "auto"`.
    Auto,
    /// `policy = "always"`.
    Always,
}

impl Proposed {
    /// In the order a tie goes (see the module docs).
    const ALL: [Proposed; 3] = [Proposed::SecondHit, Proposed::Auto, Proposed::Always];

    /// The name the config and the simulator use.
    pub fn as_str(self) -> &'static str {
        match self {
            Proposed::SecondHit => "second-hit",
            Proposed::Auto => "auto",
            Proposed::Always => "always",
        }
    }
}

/// The write budget proposed with the policy.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteBudget {
    /// None: the policy writes this share (at most [`SMALL_WRITES`]) of `always`'s bytes.
    Small {
        /// Its write bytes over `always`'s.
        share: f64,
    },
    /// `max_write_rate`: the busiest minute's rate plus [`HEADROOM`].
    Cap {
        /// The budget, bytes a second.
        bytes_per_second: u64,
        /// Body bytes written in the trace's busiest minute.
        busiest_minute: u64,
        /// Its write bytes over `always`'s.
        share: f64,
    },
}

/// What the stage found.
pub(super) struct PolicyStage {
    /// `second-hit`, `auto` and `always` at the chosen size, the proposed one best.
    pub rows: Vec<SweepRow>,
    /// The proposed policy.
    pub proposed: Proposed,
    /// What `auto` did over the trace.
    pub auto_run: AutoRun,
    /// The write budget proposed with it.
    pub budget: WriteBudget,
}

/// Runs `auto` with `config` at `cache_size`, sets it beside `second_hit` and `always`
/// (already run there) and chooses: see the module docs.
pub(super) fn choose(
    workload: &Workload,
    config: &Config,
    cache_size: u64,
    second_hit: &PolicyReport,
    always: &PolicyReport,
) -> Result<PolicyStage, String> {
    let hasher = simulation_hasher(config);
    let cache = SimCache {
        max_size: cache_size,
        max_object_size: config.cache.max_object_size,
    };
    let (auto, auto_run) = simulate::simulate_auto(workload, &config.admission, &hasher, cache);
    let mut rows: Vec<SweepRow> = [second_hit.clone(), auto, always.clone()]
        .into_iter()
        .zip(Proposed::ALL)
        .map(|(result, policy)| SweepRow {
            setting: format!("policy={}", policy.as_str()),
            result,
            best: false,
        })
        .collect();
    let chosen = mark_choice(&mut rows);
    let proposed = Proposed::ALL[chosen];
    let writes = |row: &SweepRow| row.result.disk_write_bytes.unwrap_or(0) as f64;
    let share = writes(&rows[chosen]) / writes(&rows[2]).max(1.0);
    let budget = if share <= SMALL_WRITES {
        WriteBudget::Small { share }
    } else {
        let name = proposed.as_str();
        let busiest =
            simulate::busiest_minute_writes(workload, name, &config.admission, &hasher, cache)
                .ok_or_else(|| format!("unknown policy {name:?}"))?;
        WriteBudget::Cap {
            bytes_per_second: ((busiest as f64 * HEADROOM / 60.0).ceil() as u64).max(1),
            busiest_minute: busiest,
            share,
        }
    };
    Ok(PolicyStage {
        rows,
        proposed,
        auto_run,
        budget,
    })
}
