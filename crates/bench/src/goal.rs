//! The goal table: on the synthetic CDN workloads (Zipf 0.8, 0.9 and 1.0, with
//! half or 70% of the distinct objects requested once) and on few-reuse workloads (half
//! the objects requested once, the rest 3–4 times soon after: [`workload::few_reuse`](fn@workload::few_reuse)),
//! at 0.1%, 1%, 5%, 10% and 20% of the unique bytes, `second-hit` with its defaults beside
//! the published policies (`s3fifo`, `sieve`, `w-tinylfu`, `lru`) and `always` at the same
//! cache bytes, and `auto` (the proxy's choice between the two, its epochs every
//! `admission.auto_epoch` of the workload's clock: 300,000 requests at the default 5
//! minutes and 1,000 requests a second): object miss ratio, byte miss ratio, disk write
//! bytes against `always` and per request. Under each cache size it says whether
//! `second-hit` met the goal (both miss ratios at or below the best published policy's,
//! and writes at most a tenth of `always`'s), and how far `auto` is from the best of all
//! the others ([`AUTO_TOLERANCE`]), with its epochs and switches.
//!
//! Run with `cargo bench --bench goal_table` (`-- --requests N` for a quicker look,
//! `-- --auto-epoch SECS` for `auto`'s epochs in seconds of the workload's clock).

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::report::PolicyReport;
use super::simulate::{self, AutoRun, SimCache};
use super::workload::{self, FewReuseSpec, SyntheticSpec, Workload};
use super::{CacheSize, config_sized_to_cache, simulation_hasher};

/// Zipf exponents of the goal's Zipf workloads.
pub const ZIPF_EXPONENTS: [f64; 3] = [0.8, 0.9, 1.0];
/// Shares of one-hit wonders among the distinct objects of the Zipf workloads.
pub const ONE_HIT_FRACTIONS: [f64; 2] = [0.5, 0.7];
/// Median reuse distances (in requests) of the few-reuse workloads: repeats within a
/// cache of 0.1% of the unique bytes, and a few times further, with a longer tail.
pub const FEW_REUSE_GAPS: [(f64, f64); 2] = [(300.0, 1.0), (3_000.0, 1.5)];
/// Cache sizes, as shares of the workload's unique bytes.
pub const CACHE_SHARES: [f64; 5] = [0.001, 0.01, 0.05, 0.10, 0.20];
/// The policies, `second-hit` first and the baseline `always` last.
pub const POLICIES: [&str; 7] = [
    "second-hit",
    "auto",
    "s3fifo",
    "sieve",
    "w-tinylfu",
    "lru",
    "always",
];
/// The published policies `second-hit` must match or beat.
const PUBLISHED: [&str; 4] = ["s3fifo", "sieve", "w-tinylfu", "lru"];
/// `second-hit`'s write bytes must stay at or below this share of `always`'s.
pub const WRITE_SHARE_GOAL: f64 = 0.10;
/// How far `auto`'s miss ratios may be above the best of the others' (a tenth of a point).
pub const AUTO_TOLERANCE: f64 = 0.001;

/// The workloads' size: requests, catalog and seed; the rest is [`SyntheticSpec`]'s default.
#[derive(Clone, Copy, Debug)]
pub struct GoalSpec {
    /// Requests per workload.
    pub requests: u64,
    /// Objects in the Zipf catalog.
    pub catalog: u64,
    /// Seed of every workload.
    pub seed: u64,
}

impl Default for GoalSpec {
    /// The synthetic CDN trace the goal was set on: 3.4 million requests over a catalog of
    /// a million.
    fn default() -> Self {
        GoalSpec {
            requests: 3_400_000,
            catalog: 1_000_000,
            seed: 1,
        }
    }
}

impl GoalSpec {
    /// The spec a bench's command line gives (`--requests N`, `--catalog N`, `--seed N`)
    /// and the values of its own numeric flags among `extra`, by name. Other words are
    /// skipped: `cargo bench` passes `--bench` to every bench binary.
    pub fn from_args(
        args: impl Iterator<Item = String>,
        extra: &[&str],
    ) -> Result<(GoalSpec, Vec<(String, u64)>), String> {
        let mut spec = GoalSpec::default();
        let mut others = Vec::new();
        let mut args = args;
        while let Some(arg) = args.next() {
            let known = ["--requests", "--catalog", "--seed"].contains(&arg.as_str());
            if !known && !extra.contains(&arg.as_str()) {
                continue;
            }
            let value: u64 = args
                .next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{arg} needs a number"))?;
            match arg.as_str() {
                "--requests" => spec.requests = value,
                "--catalog" => spec.catalog = value,
                "--seed" => spec.seed = value,
                _ => others.push((arg, value)),
            }
        }
        Ok((spec, others))
    }
}

/// One workload of the goal table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GoalWorkload {
    /// Zipf popularity with a share of one-hit wonders ([`workload::synthetic`]).
    Zipf {
        /// The Zipf exponent.
        exponent: f64,
        /// The share of one-hit wonders among the distinct objects.
        one_hit: f64,
    },
    /// Half the objects once, the rest 3–4 times at this median reuse distance and shape
    /// ([`workload::few_reuse`](fn@workload::few_reuse)).
    FewReuse {
        /// Median requests between two requests of an object.
        gap_median: f64,
        /// The lognormal shape of the distance.
        gap_sigma: f64,
    },
}

impl GoalWorkload {
    /// Every workload of the table, the six Zipf ones first.
    pub fn all() -> Vec<GoalWorkload> {
        let zipf = ZIPF_EXPONENTS.iter().flat_map(|&exponent| {
            ONE_HIT_FRACTIONS
                .iter()
                .map(move |&one_hit| GoalWorkload::Zipf { exponent, one_hit })
        });
        let few = FEW_REUSE_GAPS
            .iter()
            .map(|&(gap_median, gap_sigma)| GoalWorkload::FewReuse {
                gap_median,
                gap_sigma,
            });
        zipf.chain(few).collect()
    }

    /// The workload's name in tables.
    pub fn label(&self) -> String {
        match self {
            GoalWorkload::Zipf { exponent, one_hit } => {
                format!("zipf {exponent}, one-hit {:.0}%", one_hit * 100.0)
            }
            GoalWorkload::FewReuse {
                gap_median,
                gap_sigma,
            } => format!("few-reuse, one-hit 50%, 3-4x, gap median {gap_median} sigma {gap_sigma}"),
        }
    }

    /// The workload's requests at the size of `spec`.
    pub fn build(&self, spec: GoalSpec) -> Result<Workload, String> {
        match *self {
            GoalWorkload::Zipf { exponent, one_hit } => goal_workload(spec, exponent, one_hit),
            GoalWorkload::FewReuse {
                gap_median,
                gap_sigma,
            } => workload::few_reuse(&FewReuseSpec {
                requests: spec.requests,
                seed: spec.seed,
                gap_median,
                gap_sigma,
                ..FewReuseSpec::default()
            })
            .map_err(|e| e.to_string()),
        }
    }
}

/// One workload at one cache size: each policy's run, in [`POLICIES`] order.
#[derive(Clone, Debug)]
pub struct GoalCell {
    /// The workload's name ([`GoalWorkload::label`]).
    pub workload: String,
    /// The cache size as a share of the unique bytes.
    pub share: f64,
    /// One report per policy.
    pub runs: Vec<PolicyReport>,
    /// What `auto` did: its epochs, switches and requests under `always`.
    pub auto: Option<AutoRun>,
}

impl GoalCell {
    fn run(&self, policy: &str) -> Option<&PolicyReport> {
        self.runs.iter().find(|run| run.policy == policy)
    }

    /// `second-hit`'s write bytes as a share of `always`'s.
    pub fn write_share(&self, policy: &str) -> Option<f64> {
        let writes = self.run(policy)?.disk_write_bytes? as f64;
        let always = self.run("always")?.disk_write_bytes? as f64;
        Some(if always > 0.0 { writes / always } else { 0.0 })
    }

    /// The best published policy's object and byte miss ratios (each its own best).
    pub fn best_published(&self) -> (f64, f64) {
        PUBLISHED.iter().filter_map(|name| self.run(name)).fold(
            (1.0_f64, 1.0_f64),
            |(object, byte), run| {
                (
                    object.min(1.0 - run.hit_ratio),
                    byte.min(1.0 - run.byte_hit_ratio),
                )
            },
        )
    }

    /// Whether `second-hit` met each part of the goal: object miss, byte miss, writes.
    pub fn verdict(&self) -> Option<[bool; 3]> {
        let run = self.run("second-hit")?;
        let (object, byte) = self.best_published();
        let share = self.write_share("second-hit")?;
        Some([
            1.0 - run.hit_ratio <= object,
            1.0 - run.byte_hit_ratio <= byte,
            share <= WRITE_SHARE_GOAL,
        ])
    }
}

/// `auto` against the best of the other policies in one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoVerdict {
    /// The policy with the fewest object misses among the others, and how many points
    /// (of requests) `auto` misses more (negative: fewer).
    pub object: (String, f64),
    /// Likewise for byte misses.
    pub byte: (String, f64),
}

impl AutoVerdict {
    /// Whether both are within [`AUTO_TOLERANCE`].
    pub fn met(&self) -> bool {
        self.object.1 <= AUTO_TOLERANCE * 100.0 && self.byte.1 <= AUTO_TOLERANCE * 100.0
    }
}

impl GoalCell {
    /// `auto` against the best of the others, in object and byte misses.
    pub fn auto_verdict(&self) -> Option<AutoVerdict> {
        let auto = self.run("auto")?;
        let others = || self.runs.iter().filter(|run| run.policy != "auto");
        let best = |miss: fn(&PolicyReport) -> f64| {
            let run = others().min_by(|a, b| miss(a).total_cmp(&miss(b)))?;
            Some((run.policy.clone(), (miss(auto) - miss(run)) * 100.0))
        };
        Some(AutoVerdict {
            object: best(|run| 1.0 - run.hit_ratio)?,
            byte: best(|run| 1.0 - run.byte_hit_ratio)?,
        })
    }
}

/// Body bytes `run` wrote to disk per request.
fn written_per_request(run: &PolicyReport) -> f64 {
    run.disk_write_bytes.unwrap_or(0) as f64 / run.requests.max(1) as f64
}

/// The workload of `spec` with one Zipf exponent and one-hit share.
pub fn goal_workload(spec: GoalSpec, zipf: f64, one_hit: f64) -> Result<Workload, String> {
    workload::synthetic(&SyntheticSpec {
        requests: spec.requests,
        catalog: spec.catalog,
        seed: spec.seed,
        zipf_exponent: zipf,
        one_hit_fraction: one_hit,
        ..SyntheticSpec::default()
    })
    .map_err(|e| e.to_string())
}

/// Runs every policy at every size of [`CACHE_SHARES`] over `workload`, on `threads`
/// threads; `auto` with epochs of `auto_epoch` of the workload's clock, or the default
/// `admission.auto_epoch`.
pub fn run_workload(
    workload: &Workload,
    label: &str,
    threads: usize,
    auto_epoch: Option<std::time::Duration>,
) -> Result<Vec<GoalCell>, String> {
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let jobs: Vec<(usize, usize)> = (0..CACHE_SHARES.len())
        .flat_map(|size| (0..POLICIES.len()).map(move |policy| (size, policy)))
        .collect();
    let results: Mutex<Vec<Option<GoalRun>>> = Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(size, policy)) = jobs.get(job) else {
                        break;
                    };
                    let run = run_goal_job(workload, unique_bytes, auto_epoch, size, policy);
                    let mut results = results.lock().unwrap_or_else(|e| e.into_inner());
                    results[job] = run;
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    cells_of(results, label)
}

/// One policy's run in a goal cell, with what `auto` did when it is `auto`.
type GoalRun = (PolicyReport, Option<AutoRun>);

/// Runs policy `policy` of [`POLICIES`] at size `size` of [`CACHE_SHARES`]; `None` for a
/// policy the simulator does not know.
fn run_goal_job(
    workload: &Workload,
    unique_bytes: u64,
    auto_epoch: Option<std::time::Duration>,
    size: usize,
    policy: usize,
) -> Option<GoalRun> {
    let max_size = CacheSize::OfUniqueBytes(CACHE_SHARES[size]).resolve(unique_bytes);
    let mut config = config_sized_to_cache(workload, max_size);
    if let Some(epoch) = auto_epoch {
        config.admission.auto_epoch = epoch;
    }
    let cache = SimCache {
        max_size,
        max_object_size: config.cache.max_object_size,
    };
    let hasher = simulation_hasher(&config);
    match POLICIES[policy] {
        "auto" => {
            let (report, run) =
                simulate::simulate_auto(workload, &config.admission, &hasher, cache);
            Some((report, Some(run)))
        }
        name => simulate::simulate(workload, name, &config.admission, &hasher, cache)
            .map(|report| (report, None)),
    }
}

/// The cells of `label`, one per size, from `results` laid out size by size, policy by
/// policy.
fn cells_of(mut results: Vec<Option<GoalRun>>, label: &str) -> Result<Vec<GoalCell>, String> {
    CACHE_SHARES
        .iter()
        .enumerate()
        .map(|(size, &share)| {
            let mut auto = None;
            let runs = (0..POLICIES.len())
                .map(|policy| {
                    let (report, run) = results[size * POLICIES.len() + policy]
                        .take()
                        .ok_or_else(|| format!("unknown policy {:?}", POLICIES[policy]))?;
                    auto = auto.or(run);
                    Ok(report)
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(GoalCell {
                workload: label.to_owned(),
                share,
                runs,
                auto,
            })
        })
        .collect()
}

/// The table of one workload's cells, each size's verdicts under it.
pub fn render(cells: &[GoalCell]) -> String {
    let mut out = String::new();
    let Some(first) = cells.first() else {
        return out;
    };
    let _ = writeln!(out, "{}", first.workload);
    let _ = writeln!(
        out,
        "{:<6} {:<11} {:>8} {:>9} {:>13} {:>11}",
        "cache", "policy", "obj miss", "byte miss", "writes/always", "written B/req"
    );
    for cell in cells {
        for run in &cell.runs {
            let _ = writeln!(
                out,
                "{:<6} {:<11} {:>8.4} {:>9.4} {:>12.3}x {:>13.0}",
                format!("{}%", cell.share * 100.0),
                run.policy,
                1.0 - run.hit_ratio,
                1.0 - run.byte_hit_ratio,
                cell.write_share(&run.policy).unwrap_or(0.0),
                written_per_request(run),
            );
        }
        let mark = |met: bool| if met { "met" } else { "MISSED" };
        if let Some([object, byte, writes]) = cell.verdict() {
            let (best_object, best_byte) = cell.best_published();
            let _ = writeln!(
                out,
                "  goal: obj miss <= {best_object:.4} {}, byte miss <= {best_byte:.4} {}, writes <= {WRITE_SHARE_GOAL}x {}",
                mark(object),
                mark(byte),
                mark(writes)
            );
        }
        if let Some(line) = auto_line(cell) {
            out.push_str(&line);
        }
    }
    out
}

/// `  auto: ...`: against the best of the others, within the tolerance or not, and what
/// its epochs did.
fn auto_line(cell: &GoalCell) -> Option<String> {
    let verdict = cell.auto_verdict()?;
    let run = cell.auto.unwrap_or_default();
    let requests = cell.run("auto")?.requests.max(1);
    Some(format!(
        "  auto: obj miss {:+.2} points vs {}, byte miss {:+.2} vs {}: {} ({} epochs, {} switches, {:.0}% of requests under always)\n",
        verdict.object.1,
        verdict.object.0,
        verdict.byte.1,
        verdict.byte.0,
        if verdict.met() {
            format!("within {} point", AUTO_TOLERANCE * 100.0)
        } else {
            format!("NOT within {} point", AUTO_TOLERANCE * 100.0)
        },
        run.epochs,
        run.switches,
        100.0 * run.requests_as_always as f64 / requests as f64,
    ))
}

/// How many cells met each part of the goal, of how many: object, byte, writes, all
/// three; and in how many `auto` was within [`AUTO_TOLERANCE`] of the best of the others.
pub fn summary(cells: &[GoalCell]) -> String {
    let verdicts: Vec<[bool; 3]> = cells.iter().filter_map(GoalCell::verdict).collect();
    let count = |part: usize| verdicts.iter().filter(|v| v[part]).count();
    let all = verdicts.iter().filter(|v| v.iter().all(|&met| met)).count();
    let autos: Vec<AutoVerdict> = cells.iter().filter_map(GoalCell::auto_verdict).collect();
    format!(
        "goal met in {} of {} cells (object miss {}, byte miss {}, writes {})\n\
         auto within {} point of the best of the others in {} of {} cells\n",
        all,
        verdicts.len(),
        count(0),
        count(1),
        count(2),
        AUTO_TOLERANCE * 100.0,
        autos.iter().filter(|v| v.met()).count(),
        autos.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_goal_table_runs_every_policy_at_every_size_and_judges_it() {
        let spec = GoalSpec {
            requests: 20_000,
            catalog: 2_000,
            seed: 3,
        };
        let kind = GoalWorkload::Zipf {
            exponent: 0.9,
            one_hit: 0.7,
        };
        let workload = kind.build(spec).expect("valid spec");
        let cells = run_workload(&workload, &kind.label(), 2, None).expect("known policies");
        assert_eq!(cells.len(), CACHE_SHARES.len());
        for cell in &cells {
            let names: Vec<&str> = cell.runs.iter().map(|r| r.policy.as_str()).collect();
            assert_eq!(names, POLICIES);
            assert_eq!(cell.write_share("always"), Some(1.0));
            assert!(cell.verdict().is_some());
        }
        // More cache, fewer misses, for every policy.
        for policy in POLICIES {
            let misses: Vec<f64> = cells
                .iter()
                .map(|cell| 1.0 - cell.run(policy).expect("ran").byte_hit_ratio)
                .collect();
            assert!(
                misses.windows(2).all(|w| w[1] <= w[0]),
                "{policy}: {misses:?}"
            );
        }
        let table = render(&cells);
        assert!(table.contains("zipf 0.9, one-hit 70%"), "{table}");
        assert_eq!(table.matches("  goal:").count(), CACHE_SHARES.len());
        assert_eq!(table.matches("  auto: ").count(), CACHE_SHARES.len());
        assert!(table.contains("written B/req"), "{table}");
        assert!(summary(&cells).starts_with("goal met in"));
        assert!(summary(&cells).contains("auto within 0.1 point"));
        // `auto` ended its epochs on the workload's clock: 20,000 requests at 1,000 a
        // second are 20 seconds, no epoch of the default 5 minutes.
        assert!(
            cells
                .iter()
                .all(|cell| cell.auto.is_some_and(|run| run.epochs == 0))
        );
    }
}
