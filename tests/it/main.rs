//! The integration tests, as one crate: each area is a module, and all of them share one
//! `support` harness (a scriptable origin, the real proxy on 127.0.0.1:0 with a temp cache
//! directory, the `secondhit` binary as a child process). One crate means the harness is
//! compiled once and one test binary is linked, instead of one per area.
//!
//! Run one area with e.g. `cargo test --test it rfc9111::vary::`, or one test by name with
//! `cargo test NAME` as before.

mod layers;
mod support;

// Reads the access log back with the trace parser of `secondhit simulate`, a bench module.
#[cfg(feature = "bench")]
mod access_log;
mod admin;
mod auto;
mod admin_page;
// Drives the bench harness and `secondhit simulate`, which exist only with the `bench` feature.
#[cfg(feature = "bench")]
mod bench;
mod callgrind_rig;
mod cli;
mod client_limits;
mod collapse;
mod design_doc;
mod device_bundle;
mod disk_full;
mod dropped_fills;
mod filters;
mod ghost;
mod lifecycle;
mod multi_node;
mod one_call_fills;
mod origin_failures;
mod origin_limits;
mod origin_pool;
mod pools;
mod orphan_fills;
mod package;
mod poisoning;
mod proxy;
mod proxy_hygiene;
mod purge;
mod purge_bench;
mod purge_guide;
mod readiness;
mod reload;
// `secondhit bench --target --trace`, a bench-only command.
#[cfg(feature = "bench")]
mod replay;
// `secondhit simulate --recommend` and `--plot`, bench-only commands.
#[cfg(feature = "bench")]
mod recommend;
mod rfc9111;
mod rfc9213;
mod service;
mod settings;
mod shadow;
mod sites;
mod store;
mod thread_bound;
mod ttl;
mod upgrade;
mod tls;
mod walkthrough;
mod workers;
mod write_budget;
