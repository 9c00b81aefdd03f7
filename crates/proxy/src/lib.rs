//! secondhit: a reverse-proxy cache that writes an object to disk only on its second request.
//!
//! Most URLs a cache sees are requested once and never again ("one-hit wonders").
//! Writing them to disk wastes disk bandwidth and pushes useful objects out.
//! secondhit remembers every requested cache key in a rotating pair of aging Bloom
//! filters and stores a response only when its key was seen before within the
//! window the pair remembers (Maggs & Sitaraman, "Algorithmic Nuggets in Content
//! Delivery", SIGCOMM CCR 2015).
//!
//! # Layers
//!
//! The modules below are listed top-down: each uses only itself and the modules listed
//! after it (`tests/it/layers.rs` checks this, and that no files name each other in a
//! circle). A request travels `server` → `proxy` (which loads the [`live`] snapshot once
//! and runs its stages: route, look up, answer from storage, or fetch and fill through
//! `tee`) → `hygiene`, `sites`, `key`, `admission`, [`store`], `policy`, `range`, [`origin`];
//! `proxy::Answer` carries its response with its `outcome::Outcome`, which `cache_status`,
//! `metrics` and `access_log` render once. `tuning` (above `admission` and `store`) holds
//! the miniature simulations that estimate what each admission setting would miss, for
//! `admission.policy = "auto"`. `docs/design.md` walks one hit and one miss
//! through the functions they pass, and says where new features go.
//!
//! # The public surface
//!
//! The library is not published; its users are the `secondhit` binary, the integration
//! tests in `tests/it/` and the benchmarks in `benches/`. Public for them, and only for
//! them:
//!
//! - [`config::Config`] and [`server::Server`] (`bind`, `start`, `run`, `local_addr`,
//!   `admin_addr`, `store`, `live`, `live_parts`): what `secondhit serve` does and what
//!   the tests start; [`lifecycle`] (signals, [`lifecycle::Reloader`]), [`logging`] and
//!   [`preflight`] for the binary; [`upgrade`], the hand-off SIGUSR2 starts, for the
//!   binary and [`lifecycle`].
//! - [`live::Live`]: the view a running proxy reads, which the tests swap settings in.
//! - [`store::Store`] on its own: the store's integration tests drive it without HTTP.
//! - [`admission::AgingPair`] and its parameters: the filter benchmark measures it alone.
//! - [`origin::tls`]: `check-config` tests the origin's TLS settings with it.
//! - [`clock`]: the integration tests make the proxy's wall clock follow tokio's (paused)
//!   clock with [`clock::follow_tokio_time`].
//! - `bench` (feature `bench`): the `bench` and `simulate` commands.
//! - `man`: the man pages `secondhit man` writes.
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
mod header_names;
mod crypto;
pub mod clock;
pub mod build;
pub(crate) mod worker;

// The crates below this one, under the names the modules above use for them.
use secondhit_admission as admission;
use secondhit_store as store;
