//! The reverse proxy of secondhit: config, server, request path, origin client, admin
//! listener, metrics and logs. It builds on the crates below it: `secondhit-store` (the
//! cache), `secondhit-admission` (the filters and policies) and `secondhit-tuning` (the
//! live miss-ratio estimates), named `store` and `admission` inside this crate, and
//! `secondhit-h1` (the HTTP/1.1 client of its origin connections).
//!
//! # Layers
//!
//! The modules below are listed top-down: each uses only itself and the modules listed
//! after it (`tests/it/layers.rs` checks this, and that no files name each other in a
//! circle). A request travels `server` → `proxy` (which loads the [`live`] snapshot once
//! and runs its stages: route, look up, answer from storage, or fetch and fill through
//! `tee`) → `hygiene`, `sites`, `key`, `admission`, `store`, `policy`, `range`, [`origin`];
//! `proxy::Answer` carries its response with its [`outcome::Outcome`], which
//! [`cache_status`], `metrics` and `access_log` render once. [`tuning`] runs the estimates
//! of `secondhit-tuning` for `admission.policy = "auto"`. `docs/design.md` walks one hit
//! and one miss through the functions they pass, and says where new features go.
//!
//! # The public surface
//!
//! Not published; its users are the `secondhit` binary, the bench crate, the integration
//! tests in `tests/it/` and the benchmarks in `benches/`:
//!
//! - [`config::Config`] and [`server::Server`]: what `secondhit serve` does and what the
//!   tests start; [`lifecycle`], [`logging`], [`preflight`], [`upgrade`] and [`build`] for
//!   the binary.
//! - [`live::Live`]: the view a running proxy reads, which the tests swap settings in.
//! - [`origin::tls`]: `check-config` tests the origin's TLS settings with it.
//! - [`clock`]: the integration tests make the proxy's wall clock follow tokio's (paused)
//!   clock with [`clock::follow_tokio_time`].
//! - [`cache_status`], [`outcome`] and [`tuning`]: the bench reads `Cache-Status` back and
//!   runs `auto` in the simulator.
//! - `fuzzing` (feature `fuzzing`): the entry points of the fuzz targets in `fuzz/`.
//!
//! Every other module is crate-private.

// Entry points for the fuzz targets in fuzz/; above every module, since it drives them all.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod lifecycle;
pub mod upgrade;
/// What the live miss-ratio estimates cost each request (`benches/observe.rs`).
pub use tuning::{ObserveLoad, observe_cost};
pub mod server;
pub(crate) mod admin;
pub mod preflight;
pub(crate) mod proxy;
pub mod live;
pub(crate) mod lost_hits;
pub(crate) mod tee;
pub(crate) mod access_log;
pub mod cache_status;
pub(crate) mod sites;
pub mod origin;
pub(crate) mod metrics;
pub mod outcome;
pub(crate) mod hygiene;
pub(crate) mod policy;
pub(crate) mod range;
pub(crate) mod key;
pub mod tuning;
pub mod logging;
pub mod config;
pub(crate) mod body;
mod fields;
mod header_names;
mod header_text;
mod crypto;
pub mod clock;
pub mod build;
pub(crate) mod worker;

// The crates below this one, under the names the modules above use for them.
use secondhit_admission as admission;
use secondhit_store as store;
