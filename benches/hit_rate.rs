//! Hit rates and disk writes of the admission policies, by cache size, from the simulator.
//!
//! Workload: the default synthetic workload of `secondhit bench` (60,000 requests, a Zipf
//! 0.9 catalog of 12,000 objects, 70% of distinct objects requested once, lognormal sizes
//! with median 16 KiB and mean 48 KiB, seed 1). Cache sizes: 0.5%, 1%, 5% and 10% of the
//! workload's unique bytes. Policies: `second-hit` (the defaults, `rotate = "auto"` and
//! `max_object_size = "auto"`, with `expected_urls` four times the objects the cache holds,
//! as `secondhit bench` sets it), `always`, and `exact-second-hit` (remembers
//! every key forever, like nginx's `proxy_cache_min_uses 2`), and the simulator's reference
//! caches `s3fifo` (S3-FIFO, SOSP'23), `sieve` (SIEVE, NSDI'24), `w-tinylfu` (W-TinyLFU,
//! ToS'17) and `lru`, all admit-all (the table below predates `sieve` and `w-tinylfu`). The
//! simulator uses the same admission code and the same store index as the proxy;
//! `tests/it/bench.rs` checks that it agrees with the HTTP bench within one point of hit
//! ratio.
//!
//! Run: `cargo bench --bench hit_rate` (a few seconds once built; the build took about seven
//! minutes here, niced, beside other builds).
//!
//! Results, 2026-11-24, 2-core x86_64 VM shared with other builds (rustc 1.95, release;
//! re-run after the store's index took S3-FIFO's small queue in front of its CLOCK, and
//! again after `rotate = "auto"` began steering by its writes: the same table; the
//! defaults are `rotate = "auto"` and `max_object_size = "auto"`; `always` is admit-all
//! over the store's own index, within `max_object_size` like the proxy, `lru` and
//! `s3fifo` admit-all without it):
//!
//! ```text
//! cache   policy             hit%   byte%   disk objs   disk bytes   admission memory
//! 0.5%    second-hit         28.40   21.21        4560    188.1 MiB   3.9 KiB
//! 0.5%    always             26.63   19.66       43900      1.8 GiB   0 B
//! 0.5%    exact-second-hit   27.97   20.77       16154    692.0 MiB   476.0 KiB
//! 0.5%    s3fifo             27.64   20.29       43122      1.7 GiB   0 B
//! 0.5%    lru                16.00    9.51       50403      2.3 GiB   0 B
//! 1%      second-hit         32.63   25.43        3155    129.6 MiB   4.1 KiB
//! 1%      always             30.80   22.89       41396      1.7 GiB   0 B
//! 1%      exact-second-hit   32.48   25.11       13447    581.4 MiB   476.0 KiB
//! 1%      s3fifo             32.10   24.61       40665      1.7 GiB   0 B
//! 1%      lru                20.75   13.71       47548      2.1 GiB   0 B
//! 5%      second-hit         42.10   34.69        2830    130.2 MiB   20.4 KiB
//! 5%      always             40.31   33.18       35749      1.5 GiB   0 B
//! 5%      exact-second-hit   42.40   34.79        7509    352.9 MiB   476.0 KiB
//! 5%      s3fifo             41.74   34.73       34954      1.6 GiB   0 B
//! 5%      lru                33.28   26.30       40032      1.8 GiB   0 B
//! 10%     second-hit         45.15   38.69        3453    169.4 MiB   40.7 KiB
//! 10%     always             44.50   37.59       33298      1.5 GiB   0 B
//! 10%     exact-second-hit   45.51   39.33        5666    273.9 MiB   476.0 KiB
//! 10%     s3fifo             45.86   38.97       32486      1.5 GiB   0 B
//! 10%     lru                39.42   32.61       36350      1.7 GiB   0 B
//! ```
//!
//! Baseline: `always` is what a cache without admission does; the headline under each
//! table is `second-hit` relative to it.
//!
//! These caches are tiny (6.3 MiB at 0.5%, a few hundred objects): the default
//! `max_object_size`, an eighth of the cache, is held at its 1 MiB floor at 0.5%.

use secondhit_bench::workload::{self, SyntheticSpec};
use secondhit_bench::{
    self as bench, CacheSize, policies::POLICY_NAMES, reference::REFERENCE_NAMES,
};

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
