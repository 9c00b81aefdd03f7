//! The bench harness and the offline simulator: what admission saves, on traffic like yours.
//!
//! - [`workload`]: seeded synthetic CDN traffic, or an operator's access log / CSV trace.
//! - [`origin`]: the synthetic origin, `/obj/<id>/<size>` bodies cacheable for an hour.
//! - [`policies`]: `second-hit`, `always`, and the bench-only `exact-second-hit` reference.
//! - [`report`]: the per-policy table, JSON and SVG chart, and the headline.
pub mod origin;
pub mod policies;
pub mod report;
pub mod workload;
