//! secondhit: a reverse-proxy cache that writes an object to disk only on its second request.
//!
//! Most URLs a cache sees are requested once and never again ("one-hit wonders").
//! Writing them to disk wastes disk bandwidth and pushes useful objects out.
//! secondhit remembers every requested cache key in a rotating pair of aging Bloom
//! filters and stores a response only when its key was seen before within the
//! window the pair remembers (Maggs & Sitaraman, "Algorithmic Nuggets in Content
//! Delivery", SIGCOMM CCR 2015).
//!
//! # The request path
//!
//! A request travels down this list of modules; data flows one way:
//!
//! - [`server`] accepts the connection (HTTP/1.1 or cleartext HTTP/2, and both over TLS
//!   on the TLS listener, whose certificates SNI picks), bounds request
//!   heads, answers heads with ambiguous body framing (`Content-Length` with
//!   `Transfer-Encoding`) with 400 before hyper forwards them, and hands each request to
//!   [`proxy`], which orchestrates the rest and does no parsing or file I/O.
//! - [`hygiene`] checks the request against the RFC 9110/9112 rules hyper lets through
//!   (one valid `Host`, matching the target's authority) and adds `Via` and
//!   `X-Forwarded-*` to what goes to the origin, and `Via` to every response.
//! - [`sites`] picks the request's site by its host (exact or wildcard): the origin
//!   it goes to and the cache rules that may bypass the cache, ignore the client's
//!   `no-cache`, shape its key or override admission.
//! - [`key`] builds the normalised [`key::CacheKey`] (scheme — the listener's —, host,
//!   path, query) and
//!   its stable, unkeyed xxh3-128 store hash.
//! - [`admission`] checks the key's *keyed* hash against the filter pair and records
//!   it — every GET/HEAD, hits included — and plans a [`admission::Decision`], which it
//!   makes once the head of a storable response to a miss is known.
//! - [`store`] looks the key (and the request's variant) up on disk; [`policy`] judges
//!   the entry with RFC 9111: a fresh one is streamed to the client, whole or as a
//!   [`range`] (`Cache-Status: secondhit; hit`); a stale one is revalidated with a
//!   conditional request, and a 304 refreshes its metadata in place.
//! - On a miss, `proxy::collapse` makes concurrent misses of one key share one origin
//!   fetch: the first admitted GET leads, the others wait for its entry to be committed
//!   (at most `cache.collapse_timeout`) and are answered from it (`collapsed`), or go to
//!   the origin at once when the leader's answer will not be stored.
//! - [`origin`] forwards a miss to the origin (pooled hyper client, no redirects, connect
//!   and between-bytes timeouts, TLS to an `https://` origin, at most `origin.max_in_flight` at once with a bounded
//!   wait for a slot, request bodies read ahead before a slot is taken) and strips
//!   hop-by-hop headers.
//! - [`policy`] decides with RFC 9111 whether the response may be stored at all; a
//!   non-error answer to an unsafe method invalidates what it names.
//! - If it may, and admission said admit, [`tee`] streams the body to the client and,
//!   through a bounded buffer, to a [`store::EntryWriter`]; the entry exists only
//!   after the whole body arrived and `finish()` renamed it into place. A fill outlives
//!   a client that leaves (up to `cache.max_orphan_fills` at once), and a graceful
//!   shutdown waits for the fills in flight.
//! - [`cache_status`] formats the RFC 9211 `Cache-Status` header every response carries;
//!   `proxy::error` turns request failures into 400/408/501/502/503/504 responses, in
//!   one function.
//! - When the response's body is done, [`access_log`] queues one record for its writer
//!   thread, without waiting: a line in nginx's combined format or JSON.
//!
//! Beside the request path, [`metrics`] keeps the counters the path feeds (atomics only)
//! and encodes them with the filters' and the store's figures at scrape time, and
//! [`admin`] serves them, with health, statistics, purge and rotation, on the admin
//! listener (`server.admin_listen`).
//!
//! [`config`] turns the TOML file into a validated [`config::Config`]; a running server
//! reads it from a [`live::Live`] snapshot, which a reload swaps whole while it serves
//! (its doc says which settings a swap changes). [`preflight`] checks the config against
//! the machine (run-as user, cache directory, access log, memory for the filters) for
//! `check-config` and before `serve` starts, which binds its sockets (or takes them from
//! systemd, [`server::Listeners`]) and then drops root ([`server::privileges`]).
//! [`logging`] installs the diagnostic log
//! with a filter that can be replaced the same way. [`lifecycle`] handles the signals:
//! SIGTERM/SIGINT stop the server gracefully, SIGHUP reloads the config file into it
//! (swapping the settings, the sites and their origin clients, the admission, the access
//! log and the TLS certificates),
//! SIGUSR1 reopens the access log.
//! `bench`, built with the cargo feature of that name (on by default), drives workloads
//! through the real proxy and simulates them offline; `--no-default-features` leaves it
//! and the crates only it needs out of the proxy.
//!
//! # The public API
//!
//! The library is not published; its users are the `secondhit` binary, the integration
//! tests in `tests/it/` and the benchmarks in `benches/`. Every module is public, so that
//! `cargo doc` shows the path above whole, but the surface meant to be used is small:
//!
//! - [`config::Config`] ([`config::Config::load`], [`config::Config::from_toml_str`]) and
//!   [`server::Server`] ([`server::Server::bind`], [`server::Server::local_addr`],
//!   [`server::Server::run`]): what `secondhit serve` does, and what the tests start.
//! - [`server::Server::admin_addr`]: where the admin API listens (the tests bind it to port
//!   0 and scrape it).
//! - [`server::Server::store`] with [`store::Store::stats`]: the one window into a running
//!   proxy, through which the bench counts disk writes and the tests wait for a fill to
//!   commit or the start-up scan to finish.
//! - [`server::Server::live`] ([`live::Live::replace_settings`]),
//!   [`server::Server::live_parts`] and [`logging::init`] ([`logging::LogReload::apply`]):
//!   what a reload ([`lifecycle::Reloader`]) swaps while the proxy runs.
//! - [`store::Store`] on its own ([`store::Store::open`], `lookup`, `begin_fill`,
//!   `contains`): the store's integration tests drive it without HTTP.
//! - [`admission::AgingPair`] and its parameters: the filter benchmark measures it alone.
//! - `bench` (feature `bench`): the `bench` and `simulate` commands and their pieces, for
//!   the binary, `tests/it/bench.rs` and `benches/hit_rate.rs`.
//!
//! Anything else public is an implementation detail of the request path that happens to be
//! reachable; items only the bench needs are crate-private and built with its feature.
//!
//! The design, why it is so, and where new features go: `docs/design.md`.
//!
//! # Layers
//!
//! The modules below are listed top-down: each uses only itself and the modules listed
//! after it (`tests/it/layers.rs` checks this, and that no files name each other in a
//! circle). Leaves at the bottom hold what several layers share: [`outcome`] (what became
//! of a request), [`body`] (the response body type) and the header names.

pub mod lifecycle;
#[cfg(feature = "bench")]
pub mod bench;
pub mod server;
pub mod admin;
pub mod preflight;
pub mod proxy;
pub mod live;
pub mod tee;
pub mod access_log;
pub mod cache_status;
pub mod sites;
pub mod origin;
pub mod metrics;
pub mod outcome;
pub mod hygiene;
pub mod policy;
pub mod range;
pub mod key;
pub mod admission;
pub mod store;
pub mod logging;
pub mod config;
pub mod body;
mod header_names;
mod crypto;
