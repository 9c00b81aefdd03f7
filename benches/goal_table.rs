//! The goal table (see `secondhit_bench::goal`): `second-hit` with its defaults beside
//! `s3fifo`, `sieve`, `w-tinylfu`, `lru` and `always` on six synthetic CDN workloads and
//! two few-reuse ones at five cache sizes. Results are recorded in benches/RESULTS.md.
//!
//! Run: `cargo bench --bench goal_table` (3.4 million requests per workload, over a catalog
//! of a million for the Zipf ones; 280 simulations). `-- --requests N --catalog N --threads N` for a quicker
//! look; threads default to the machine's cores. `-- --auto-epoch SECS` sets `auto`'s epoch
//! (seconds of the workloads' clock of 1,000 requests a second; default the
//! `admission.auto_epoch` default, 300).

use secondhit_bench::goal::{self, GoalSpec, GoalWorkload};

fn main() {
    if let Err(error) = run() {
        eprintln!("goal_table: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let (spec, flags) =
        GoalSpec::from_args(std::env::args().skip(1), &["--threads", "--auto-epoch"])?;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut auto_epoch = None;
    for (flag, value) in flags {
        match flag.as_str() {
            "--auto-epoch" => auto_epoch = Some(std::time::Duration::from_secs(value.max(1))),
            _ => threads = value as usize,
        }
    }
    println!(
        "goal table: {} requests per workload, catalog {}, seed {}, auto's epoch {}",
        spec.requests,
        spec.catalog,
        spec.seed,
        auto_epoch.map_or("the default (5m)".to_owned(), |epoch| format!("{epoch:?}"))
    );
    let mut all = Vec::new();
    for kind in GoalWorkload::all() {
        let workload = kind.build(spec)?;
        let cells = goal::run_workload(&workload, &kind.label(), threads, auto_epoch)?;
        println!("{}", goal::render(&cells));
        all.extend(cells);
    }
    print!("{}", goal::summary(&all));
    Ok(())
}
