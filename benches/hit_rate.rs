//! Hit rates and disk writes of the admission policies, by cache size, from the simulator.
//!
//! Workload: the default synthetic workload of `secondhit bench` (60,000 requests, a Zipf
//! 0.9 catalog of 12,000 objects, 70% of distinct objects requested once, lognormal sizes
//! with median 16 KiB and mean 48 KiB, seed 1). Cache sizes: 0.5%, 1%, 5% and 10% of the
//! workload's unique bytes. Policies: `second-hit` (its generation sized to the objects the
//! cache holds, as `secondhit bench` does), `always`, and `exact-second-hit` (remembers
//! every key forever, like nginx's `proxy_cache_min_uses 2`). The simulator uses the same
//! admission code and the same store index as the proxy; `tests/it/bench.rs` checks that it
//! agrees with the HTTP bench within one point of hit ratio.
//!
//! Run: `cargo bench --bench hit_rate` (a few seconds).
//!
//! Results, 2026-11-22, 2-core x86_64 VM (rustc 1.95, release; re-run after the filter's
//! two-words-per-key layout, whose false positives fall on other keys):
//!
//! ```text
//! cache   policy             hit%   byte%   disk objs   disk bytes   admission memory
//! 0.5%    second-hit         25.43   18.27        5565    239.9 MiB   3.9 KiB
//! 0.5%    always             16.00    9.51       50403      2.3 GiB   0 B
//! 0.5%    exact-second-hit   21.33   14.29       20174    915.3 MiB   476.0 KiB
//! 1%      second-hit         30.34   22.93        3456    153.2 MiB   3.9 KiB
//! 1%      always             20.75   13.71       47548      2.1 GiB   0 B
//! 1%      exact-second-hit   26.61   19.23       17004    789.1 MiB   476.0 KiB
//! 5%      second-hit         40.53   33.64        2229    103.2 MiB   5.2 KiB
//! 5%      always             33.28   26.30       40032      1.8 GiB   0 B
//! 5%      exact-second-hit   40.04   33.13        8949    435.0 MiB   476.0 KiB
//! 10%     second-hit         43.82   36.98        2848    132.4 MiB   10.3 KiB
//! 10%     always             39.42   32.61       36350      1.7 GiB   0 B
//! 10%     exact-second-hit   44.93   38.50        6012    297.9 MiB   476.0 KiB
//! ```
//!
//! Baseline: `always` is what a cache without admission does; the headline under each
//! table is `second-hit` relative to it.

use secondhit::bench::workload::{self, SyntheticSpec};
use secondhit::bench::{self, CacheSize, policies::POLICY_NAMES};

fn main() {
    let workload = match workload::synthetic(&SyntheticSpec::default()) {
        Ok(workload) => workload,
        Err(error) => {
            eprintln!("hit_rate: {error}");
            std::process::exit(1);
        }
    };
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let policies: Vec<String> = POLICY_NAMES.iter().map(|p| p.to_string()).collect();
    for share in [0.005, 0.01, 0.05, 0.10] {
        let size = CacheSize::OfUniqueBytes(share);
        let config = bench::config_sized_to_cache(&workload, size.resolve(unique_bytes));
        match bench::run_simulation(&workload, &policies, &config, size) {
            Ok(report) => println!(
                "== cache {}% of unique bytes\n{}",
                share * 100.0,
                report.to_table()
            ),
            Err(error) => {
                eprintln!("hit_rate: {error}");
                std::process::exit(1);
            }
        }
    }
}
