//! `/stats`: one JSON document with what an operator (or an admin page polling it every
//! second) wants at a glance.
//!
//! Top-level fields: `policy`, `uptime_seconds`, `requests` (by result), `hit_ratio`
//! (`hit / (hit + stale + miss)`, `null` before the first), `body_bytes` (response body
//! bytes by result, as declared by `Content-Length`) and `byte_hit_ratio` (the same ratio in
//! those bytes), `admission` (decisions by reason, bytes kept off the disk), `filters`
//! (`null` for `policy = "always"`: the configured sizes, the sizing derived from them, the
//! generation, each filter's fill, keys, age and false-positive rate, rotations by cause and
//! the latest cause, the last 16 rotations newest first with their cause, how long ago and
//! how long the generation they ended lasted, and the spare filters' states: `retired`,
//! `clearing` or `clean`), `store` (objects, bytes,
//! budget, memory tier and its budget, files held open and their most, evictions, fills
//! committed), `origin` (requests, and the mean, median and 99th percentile of the time
//! to the response head, the percentiles estimated from the latency histogram's buckets;
//! and `servers`: each origin server's URL, whether it is `up`, its requests, failures,
//! mean time to the response head and latency buckets as `[upper bound in seconds,
//! count]` pairs, not cumulative), `errors` (by kind) and `shadow` (`null` unless
//! `policy = "shadow"`), and `rules` (every site's cache rules in order: the `site`, the
//! `rule`'s index, its `path` or `glob`, its `methods`, whether it is a `bypass`, and the
//! lifetimes it sets: `default_ttl_seconds`, `ttl_by_status_seconds` by status, and
//! `grace_seconds`; `null` or empty where unset).
//! Everything is counted since start-up. Numbers that cannot be represented (an estimate of
//! infinitely many keys in a full filter) are `null`.

use serde_json::{Value, json};

use crate::admission::{Decision, FilterStats, PairStats, PolicyKind};
use crate::config::rules::{PathMatch, Rule};
use crate::config::{AdmissionConfig, AdmissionPolicy, FilterSizing, Optimize, RotateMode};
use crate::metrics::{Counts, ServerSample};
use crate::outcome::ErrorKind;
use crate::outcome::RequestResult;
use crate::sites::Site;
use crate::store::StoreStats;
use crate::tuning::{Report, choose};

/// The `rules` list: each of `sites`' rules, in order, with the lifetimes it sets.
pub(super) fn rules<'s>(sites: impl Iterator<Item = &'s std::sync::Arc<Site>>) -> Value {
    let listed = sites.flat_map(|site| {
        let name = site.name.as_str();
        (site.rules.0.iter().enumerate()).map(move |(index, rule)| rule_figures(name, index, rule))
    });
    Value::Array(listed.collect())
}

fn rule_figures(site: &str, index: usize, rule: &Rule) -> Value {
    let (path, glob) = match &rule.path {
        Some(PathMatch::Prefix(prefix)) => (Some(prefix.as_str()), None),
        Some(PathMatch::Glob { pattern, .. }) => (None, Some(pattern.as_str())),
        None => (None, None),
    };
    let lifetimes = &rule.lifetimes;
    let by_status: serde_json::Map<String, Value> = (lifetimes.by_status.iter())
        .map(|(status, ttl)| (status.as_u16().to_string(), ttl.as_secs_f64().into()))
        .collect();
    json!({
        "site": site,
        "rule": index,
        "path": path,
        "glob": glob,
        "methods": rule.methods.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "bypass": rule.bypass,
        "default_ttl_seconds": lifetimes.default_ttl.map(|d| d.as_secs_f64()),
        "ttl_by_status_seconds": by_status,
        "grace_seconds": lifetimes.grace.map(|d| d.as_secs_f64()),
    })
}

/// The document, from the configured `[admission]`, the policy's name, the counters, the
/// filter pair's statistics (if it keeps one) and the store's.
pub(super) fn snapshot(
    config: &AdmissionConfig,
    policy: PolicyKind,
    counts: &Counts,
    filters: Option<&PairStats>,
    store: &StoreStats,
    servers: &[ServerSample],
) -> Value {
    let requests: serde_json::Map<String, Value> = RequestResult::ALL
        .iter()
        .map(|&r| (r.as_str().to_owned(), counts.requests(r).into()))
        .collect();
    let body_bytes: serde_json::Map<String, Value> = RequestResult::ALL
        .iter()
        .map(|&r| (r.as_str().to_owned(), counts.body_bytes[r as usize].into()))
        .collect();
    let decisions: serde_json::Map<String, Value> = Decision::ALL
        .iter()
        .map(|d| (d.as_str().to_owned(), counts.decisions[d.index()].into()))
        .collect();
    let errors: serde_json::Map<String, Value> = ErrorKind::ALL
        .iter()
        .map(|&k| (k.as_str().to_owned(), counts.errors[k as usize].into()))
        .collect();
    let origin = &counts.origin;
    json!({
        "policy": policy,
        "uptime_seconds": counts.uptime.as_secs_f64(),
        "requests": requests,
        "hit_ratio": counts.hit_ratio(),
        "body_bytes": body_bytes,
        "byte_hit_ratio": counts.byte_hit_ratio(),
        "admission": {
            "decisions": decisions,
            "disk_writes_avoided_bytes": counts.writes_avoided_bytes,
        },
        "filters": filters.map(|stats| filter_pair(config, stats)),
        "store": store_figures(store),
        "origin": {
            "requests": origin.count,
            "mean_seconds": (origin.count > 0).then(|| origin.sum_seconds / origin.count as f64),
            "p50_seconds": origin.quantile(0.5),
            "p99_seconds": origin.quantile(0.99),
            "servers": servers.iter().map(server_figures).collect::<Vec<_>>(),
        },
        "errors": errors,
        "shadow": (policy == AdmissionPolicy::Shadow.into()).then(|| json!({
            "writes_avoided": counts.shadow_writes_avoided,
            "writes_avoided_bytes": counts.shadow_writes_avoided_bytes,
            "hits_lost": counts.shadow_hits_lost,
            "hits_lost_bytes": counts.shadow_hits_lost_bytes,
        })),
    })
}

/// One origin server's figures, for `/stats`.
fn server_figures(server: &ServerSample) -> Value {
    let latency = &server.latency;
    json!({
        "url": server.url,
        "up": server.up,
        "requests": server.requests,
        "failures": server.failures,
        "mean_seconds": (latency.count > 0).then(|| latency.sum_seconds / latency.count as f64),
        "latency_buckets": latency.buckets.iter()
            .map(|(bound, count)| json!([if bound.is_finite() { json!(bound) } else { json!("+Inf") }, count]))
            .collect::<Vec<_>>(),
    })
}

/// The store's figures, for `/stats`.
fn store_figures(store: &StoreStats) -> Value {
    json!({
        "objects": store.objects,
        "bytes": store.bytes,
        "max_bytes": store.max_bytes,
        "reserved_bytes": store.reserved_bytes,
        "memory_objects": store.memory_objects,
        "memory_bytes": store.memory_bytes,
        "memory_max_bytes": store.memory_max_bytes,
        "open_files": store.open_files,
        "open_files_max": store.open_files_max,
        "tag_bytes": store.tag_bytes,
        "evictions": store.evictions,
        "ghost_keys": store.ghost_keys,
        "committed_fills": store.committed_fills,
        "committed_bytes": store.committed_bytes,
        "dropped_fills": store.dropped_fills.total(),
        "scan_complete": store.scan_complete,
    })
}

/// The `admission.estimate` object: the miss-ratio curves of every candidate modelled,
/// the configured size and the chosen candidate marked (see `docs/guide/admin.md`).
pub(super) fn estimate(report: &Report, config: &AdmissionConfig) -> Value {
    let estimate = &report.estimate;
    let curves: Vec<Value> = (estimate.curves.iter())
        .map(|curve| {
            let points: Vec<Value> = (curve.points.iter())
                .map(|point| {
                    json!({
                        "factor": point.factor,
                        "cache_bytes": point.cache_bytes,
                        "configured_size": point.factor == 1.0,
                        "requests": point.requests,
                        "object_miss_ratio": point.object_miss_ratio,
                        "byte_miss_ratio": point.byte_miss_ratio,
                        "written_bytes_per_second": report.write_rate(point),
                    })
                })
                .collect();
            json!({
                "candidate": curve.candidate.to_string(),
                "runnable": choose::RUNNABLE.contains(&curve.candidate),
                "chosen": curve.candidate == report.current,
                "points": points,
            })
        })
        .collect();
    json!({
        "sample_rate": estimate.rate,
        "memory_bytes": estimate.memory_bytes,
        "cache_bytes": estimate.cache_bytes,
        "seconds": report.seconds,
        "epochs": report.epochs,
        "epoch_seconds": config.auto_epoch.as_secs_f64(),
        "optimize": match config.optimize {
            Optimize::Bytes => "bytes",
            Optimize::Objects => "objects",
        },
        "max_write_rate": config.max_write_rate,
        "chosen": report.current.to_string(),
        "switches": report.switches,
        "last_verdict": report.last.map(|verdict| verdict.as_str()),
        "curves": curves,
    })
}

/// The `filters` object.
fn filter_pair(config: &AdmissionConfig, stats: &PairStats) -> Value {
    let (expected_urls, memory) = match config.sizing {
        FilterSizing::ExpectedUrls(keys) => (Some(keys), None),
        FilterSizing::Memory(bytes) => (None, Some(bytes)),
    };
    let params = &stats.params;
    let rotations = &stats.rotations;
    json!({
        "configured": {
            "expected_urls": expected_urls,
            "memory_bytes": memory,
            "false_positive_rate": config.false_positive_rate,
            "max_age_seconds": config.max_age.as_secs_f64(),
            "min_generation_age_seconds": config.min_generation_age.as_secs_f64(),
            "rotate": match config.rotate {
                RotateMode::Fill => "fill",
                RotateMode::Auto => "auto",
            },
        },
        "bits_per_filter": params.bits,
        "probes": params.probes,
        "bytes_per_filter": params.filter_bytes(),
        "generation_size": params.generation_size,
        "generation": stats.generation,
        "generation_target": stats.generation_target,
        "current": filter(&stats.current),
        "previous": stats.previous.as_ref().map(filter),
        "estimated_pair_false_positive_rate": stats.estimated_pair_false_positive_rate,
        "modelled_pair_false_positive_rate": {
            "after_rotation": stats.pair_false_positive_rate_range.0,
            "before_rotation": stats.pair_false_positive_rate_range.1,
        },
        "rotations": {
            "fill": rotations.fill,
            "age": rotations.age,
            "saturation": rotations.saturation,
            "idle": rotations.idle,
            "forced": rotations.forced,
        },
        "last_rotation_cause": stats.last_rotation.map(|cause| cause.as_str()),
        "recent_rotations": stats.recent_rotations.iter().map(|r| json!({
            "generation": r.generation,
            "cause": r.cause.as_str(),
            "seconds_ago": r.ago.as_secs_f64(),
            "ended_generation_inserts": r.ended_inserts,
            "ended_generation_seconds": r.ended_age.as_secs_f64(),
        })).collect::<Vec<_>>(),
        "spares": stats.spares.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
    })
}

/// One filter's object.
fn filter(stats: &FilterStats) -> Value {
    json!({
        "fill_ratio": stats.bits_set_ratio,
        "inserts": stats.inserts,
        "estimated_keys": stats.estimated_keys,
        "estimated_false_positive_rate": stats.estimated_false_positive_rate,
        "age_seconds": stats.age.as_secs_f64(),
    })
}
