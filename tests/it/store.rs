//! The disk store end to end: byte budget and LRU eviction, restart (clean and after
//! SIGKILL), damaged entries and ranges of them, the directory lock, and refills racing
//! eviction, entry files held open under churn, and small bodies stored in one file
//! call. Real sockets on 127.0.0.1, real files in temp directories.
//!
//! Requests carry a fixed `Host`, so keys stay the same when a restarted proxy listens on
//! another port.
//!
//! Run one area with e.g. `cargo test --test it store::restart::`.

mod common;

mod damage;
mod eviction;
mod lock;
mod mapped;
mod open_files;
mod ranges;
mod restart;
mod whole;
