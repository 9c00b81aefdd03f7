//! Hit rates and disk writes of the admission policies, by cache size, from the simulator.
//!
//! Workload: the default synthetic workload of `secondhit bench` (60,000 requests, a Zipf
//! 0.9 catalog of 12,000 objects, 70% of distinct objects requested once, lognormal sizes
//! with median 16 KiB and mean 48 KiB, seed 1). Cache sizes: 0.5%, 1%, 5% and 10% of the
//! workload's unique bytes. Policies: `second-hit` (its generation sized to the objects the
//! cache holds, as `secondhit bench` does), `always`, and `exact-second-hit` (remembers
//! every key forever, like nginx's `proxy_cache_min_uses 2`), and the simulator's reference
//! caches `s3fifo` (S3-FIFO, SOSP'23) and `lru`, both admit-all. The simulator uses the same
//! admission code and the same store index as the proxy; `tests/it/bench.rs` checks that it
//! agrees with the HTTP bench within one point of hit ratio.
//!
//! Run: `cargo bench --bench hit_rate` (a few seconds once built; the build took about seven
//! minutes here, niced, beside other builds).
//!
//! Results, 2026-11-24, 2-core x86_64 VM shared with other builds (rustc 1.95, release;
//! re-run after the store's index moved from LRU to CLOCK with a 2-bit hit counter, and
//! with the reference caches `s3fifo` and `lru` added; `always` is admit-all over the
//! store's own CLOCK index, `lru` admit-all LRU):
//!
//! ```text
//! cache   policy             hit%   byte%   disk objs   disk bytes   admission memory
//! 0.5%    second-hit         26.39   19.45        5093    215.4 MiB   3.9 KiB
//! 0.5%    always             17.86   10.62       49286      2.2 GiB   0 B
//! 0.5%    exact-second-hit   22.92   15.62       19221    881.2 MiB   476.0 KiB
//! 0.5%    s3fifo             27.64   20.29       43122      1.7 GiB   0 B
//! 0.5%    lru                16.00    9.51       50403      2.3 GiB   0 B
//! 1%      second-hit         31.67   24.21        3131    139.7 MiB   3.9 KiB
//! 1%      always             22.74   15.36       46354      2.1 GiB   0 B
//! 1%      exact-second-hit   28.22   21.13       16038    740.7 MiB   476.0 KiB
//! 1%      s3fifo             32.10   24.61       40665      1.7 GiB   0 B
//! 1%      lru                20.75   13.71       47548      2.1 GiB   0 B
//! 5%      second-hit         40.79   33.75        2188    101.7 MiB   5.2 KiB
//! 5%      always             35.50   28.27       38701      1.8 GiB   0 B
//! 5%      exact-second-hit   41.05   34.13        8341    409.4 MiB   476.0 KiB
//! 5%      s3fifo             41.74   34.73       34954      1.6 GiB   0 B
//! 5%      lru                33.28   26.30       40032      1.8 GiB   0 B
//! 10%     second-hit         43.83   37.01        2848    132.4 MiB   10.3 KiB
//! 10%     always             41.43   34.55       35141      1.6 GiB   0 B
//! 10%     exact-second-hit   45.37   39.01        5750    284.9 MiB   476.0 KiB
//! 10%     s3fifo             45.86   38.97       32486      1.5 GiB   0 B
//! 10%     lru                39.42   32.61       36350      1.7 GiB   0 B
//! ```
//!
//! Baseline: `always` is what a cache without admission does; the headline under each
//! table is `second-hit` relative to it.

use secondhit::bench::workload::{self, SyntheticSpec};
use secondhit::bench::{self, CacheSize, policies::POLICY_NAMES, reference::REFERENCE_NAMES};

fn main() {
    let workload = match workload::synthetic(&SyntheticSpec::default()) {
        Ok(workload) => workload,
        Err(error) => {
            eprintln!("hit_rate: {error}");
            std::process::exit(1);
        }
    };
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let policies: Vec<String> = POLICY_NAMES
        .iter()
        .chain(&REFERENCE_NAMES)
        .map(|p| p.to_string())
        .collect();
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
