//! The live miss-ratio estimates' cost on the request path (`tuning::Tuning::observe`, called
//! on every hit and storable miss under every policy): nanoseconds per call on 1 and 4
//! threads, for caches of 1 GiB to 1 TiB of 64 KiB objects, each at the sampling rate the
//! proxy chooses for it (which the replays' CPU budget lowers, down to 1/32, at full
//! speed: the rate it ended at is shown too). A 1 KiB memory hit costs about 8 µs of CPU (benches/RESULTS.md),
//! so 2% of it is about 160 ns. Results are recorded in benches/RESULTS.md.
//!
//! Run: `cargo bench --features bench --bench observe`.

use secondhit_proxy::ObserveLoad;

const GIB: u64 = 1 << 30;
const SIZE: u64 = 64 * 1024;
const REQUESTS: usize = 2_000_000;

fn main() {
    println!("observe: {REQUESTS} calls per thread, objects of {SIZE} bytes");
    for max_size in [GIB, 10 * GIB, 100 * GIB, 1024 * GIB] {
        // A catalog of ten caches' worth of objects.
        let catalog = 10 * max_size / SIZE;
        for threads in [1, 4] {
            let load = ObserveLoad {
                catalog,
                requests: REQUESTS,
                threads,
            };
            let (rate, ended, nanos) = secondhit_proxy::observe_cost(max_size, SIZE, load);
            println!(
                "cache {:>5} GiB, rate 1/{:<6.0} (ended 1/{:<6.0}) threads {threads}: {nanos:6.1} ns per call",
                max_size / GIB,
                1.0 / rate,
                1.0 / ended
            );
        }
    }
}
