//! The disk store end to end: byte budget and LRU eviction, restart (clean and after
//! SIGKILL), damaged entries, the directory lock, and refills racing eviction. Real
//! sockets on 127.0.0.1, real files in temp directories.
//!
//! Requests carry a fixed `Host`, so keys stay the same when a restarted proxy listens on
//! another port.
//!
//! Run one area with e.g. `cargo test --test store restart::`.

mod support;

#[path = "store/common.rs"]
mod common;

#[path = "store/damage.rs"]
mod damage;
#[path = "store/eviction.rs"]
mod eviction;
#[path = "store/lock.rs"]
mod lock;
#[path = "store/restart.rs"]
mod restart;
