//! The goal table of issue 36 (see `secondhit::bench::goal`): `second-hit` with its
//! defaults beside `s3fifo`, `sieve`, `w-tinylfu` and `always` on six synthetic CDN
//! workloads at four cache sizes. Results are recorded in benches/RESULTS.md.
//!
//! Run: `cargo bench --bench goal_table` (3.4 million requests per workload, over a catalog
//! of a million; 120 simulations). `-- --requests N --catalog N --threads N` for a quicker
//! look; threads default to the machine's cores.

use secondhit::bench::goal::{self, GoalSpec, ONE_HIT_FRACTIONS, ZIPF_EXPONENTS};

fn main() {
    if let Err(error) = run() {
        eprintln!("goal_table: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut spec = GoalSpec::default();
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--requests" => spec.requests = value("--requests")?,
            "--catalog" => spec.catalog = value("--catalog")?,
            "--seed" => spec.seed = value("--seed")?,
            "--threads" => threads = value("--threads")? as usize,
            // `cargo bench` passes `--bench` to every bench binary.
            _ => {}
        }
    }
    println!(
        "goal table: {} requests per workload, catalog {}, seed {}",
        spec.requests, spec.catalog, spec.seed
    );
    let mut all = Vec::new();
    for zipf in ZIPF_EXPONENTS {
        for one_hit in ONE_HIT_FRACTIONS {
            let workload = goal::goal_workload(spec, zipf, one_hit)?;
            let cells = goal::run_workload(&workload, zipf, one_hit, threads)?;
            println!("{}", goal::render(&cells));
            all.extend(cells);
        }
    }
    print!("{}", goal::summary(&all));
    Ok(())
}
