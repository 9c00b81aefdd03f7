//! The online estimator's error against full simulations (see `secondhit_bench::estimator`):
//! on the goal table's workloads, the estimator configured for caches of 0.4% and 5% of the
//! unique bytes (so its sizes, ¼ to 4 times that, span 0.1% to 20%), at sampling rates 1/16
//! to 1/1024, beside the simulator's full runs. Results are recorded in benches/RESULTS.md.
//!
//! Run: `cargo bench --bench estimator` (3.4 million requests per workload).
//! `-- --requests N --catalog N --max-keys N` for a quicker look or another key budget.

use secondhit_bench::estimator;
use secondhit_bench::goal::{GoalSpec, GoalWorkload};

/// The configured cache sizes, as shares of the unique bytes.
const SHARES: [f64; 2] = [0.004, 0.05];
/// The sampling rates.
const RATES: [f64; 4] = [1.0 / 16.0, 1.0 / 64.0, 1.0 / 256.0, 1.0 / 1024.0];

fn main() {
    if let Err(error) = run() {
        eprintln!("estimator: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let (spec, flags) = GoalSpec::from_args(std::env::args().skip(1), &["--max-keys"])?;
    let mut max_keys = u64::MAX;
    for (_, value) in flags {
        max_keys = value;
    }
    println!(
        "estimator error: {} requests per workload, catalog {}, seed {}, key budget {}",
        spec.requests, spec.catalog, spec.seed, max_keys
    );
    for kind in GoalWorkload::all() {
        let workload = kind.build(spec)?;
        for share in SHARES {
            let runs = estimator::measure(&workload, share, &RATES, max_keys)?;
            let label = format!("{}, configured {}%", kind.label(), share * 100.0);
            println!("{}", estimator::render(&label, &runs));
        }
    }
    Ok(())
}
