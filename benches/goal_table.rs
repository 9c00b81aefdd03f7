//! The goal table (see `secondhit_bench::goal`): `second-hit` with its defaults beside
//! `s3fifo`, `sieve`, `w-tinylfu`, `lru` and `always` on six synthetic CDN workloads and
//! two few-reuse ones at five cache sizes. Results are recorded in benches/RESULTS.md.
//!
//! Run: `cargo bench --bench goal_table` (3.4 million requests per workload, over a catalog
//! of a million for the Zipf ones; 240 simulations). `-- --requests N --catalog N --threads N` for a quicker
//! look; threads default to the machine's cores.

use secondhit_bench::goal::{self, GoalSpec, GoalWorkload};

fn main() {
    if let Err(error) = run() {
        eprintln!("goal_table: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let (spec, flags) = GoalSpec::from_args(std::env::args().skip(1), &["--threads"])?;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (_, value) in flags {
        threads = value as usize;
    }
    println!(
        "goal table: {} requests per workload, catalog {}, seed {}",
        spec.requests, spec.catalog, spec.seed
    );
    let mut all = Vec::new();
    for kind in GoalWorkload::all() {
        let workload = kind.build(spec)?;
        let cells = goal::run_workload(&workload, &kind.label(), threads)?;
        println!("{}", goal::render(&cells));
        all.extend(cells);
    }
    print!("{}", goal::summary(&all));
    Ok(())
}
