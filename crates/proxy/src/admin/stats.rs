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

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::admission::{Decision, FilterStats, PairStats, PolicyKind, RecentRotation};
use crate::config::rules::{PathMatch, Rule};
use crate::config::{AdmissionConfig, AdmissionPolicy, FilterSizing, Optimize, RotateMode};
use crate::metrics::{Counts, HistogramCounts, ServerSample};
use crate::outcome::ErrorKind;
use crate::outcome::RequestResult;
use crate::sites::Site;
use crate::store::StoreStats;
use crate::tuning::{Report, choose};

/// Counts by name (result, decision, error kind), in the names' order as JSON objects are.
type ByName = BTreeMap<&'static str, u64>;

/// The document.
#[derive(Serialize)]
pub(super) struct Stats<'a> {
    policy: PolicyKind,
    uptime_seconds: f64,
    requests: ByName,
    hit_ratio: Option<f64>,
    body_bytes: ByName,
    byte_hit_ratio: Option<f64>,
    admission: AdmissionFigures,
    filters: Option<FilterPairFigures>,
    store: StoreFigures,
    origin: OriginFigures<'a>,
    errors: ByName,
    shadow: Option<ShadowFigures>,
    rules: Vec<RuleFigures<'a>>,
}

/// What [`Stats`] is made of: the configured `[admission]`, the policy's kind, the
/// counters, the filter pair's statistics (if it keeps one), the store's, the origin
/// servers', the sites (for their rules) and the estimates.
pub(super) struct Sources<'a, S> {
    pub(super) config: &'a AdmissionConfig,
    pub(super) policy: PolicyKind,
    pub(super) counts: &'a Counts,
    pub(super) filters: Option<&'a PairStats>,
    pub(super) store: &'a StoreStats,
    pub(super) servers: &'a [ServerSample],
    pub(super) sites: S,
    pub(super) report: &'a Report,
}

impl<'a> Stats<'a> {
    /// The document of `sources`.
    pub(super) fn new<S>(sources: Sources<'a, S>) -> Stats<'a>
    where
        S: Iterator<Item = &'a Arc<Site>>,
    {
        let Sources {
            config,
            policy,
            counts,
            ..
        } = sources;
        let by_result = |pick: &dyn Fn(RequestResult) -> u64| -> ByName {
            RequestResult::ALL
                .iter()
                .map(|&r| (r.as_str(), pick(r)))
                .collect()
        };
        Stats {
            policy,
            uptime_seconds: counts.uptime.as_secs_f64(),
            requests: by_result(&|r| counts.requests(r)),
            hit_ratio: counts.hit_ratio(),
            body_bytes: by_result(&|r| counts.body_bytes[r as usize]),
            byte_hit_ratio: counts.byte_hit_ratio(),
            admission: AdmissionFigures {
                decisions: (Decision::ALL.iter())
                    .map(|d| (d.as_str(), counts.decisions[d.index()]))
                    .collect(),
                disk_writes_avoided_bytes: counts.writes_avoided_bytes,
                estimate: EstimateFigures::new(sources.report, config),
            },
            filters: sources
                .filters
                .map(|stats| FilterPairFigures::new(config, stats)),
            store: StoreFigures::new(sources.store),
            origin: OriginFigures::new(&counts.origin, sources.servers),
            errors: (ErrorKind::ALL.iter())
                .map(|&k| (k.as_str(), counts.errors[k as usize]))
                .collect(),
            shadow: (policy == AdmissionPolicy::Shadow.into()).then_some(ShadowFigures {
                writes_avoided: counts.shadow_writes_avoided,
                writes_avoided_bytes: counts.shadow_writes_avoided_bytes,
                hits_lost: counts.shadow_hits_lost,
                hits_lost_bytes: counts.shadow_hits_lost_bytes,
            }),
            rules: rules(sources.sites),
        }
    }
}

/// `admission`.
#[derive(Serialize)]
struct AdmissionFigures {
    decisions: ByName,
    disk_writes_avoided_bytes: u64,
    estimate: EstimateFigures,
}

/// `shadow`.
#[derive(Serialize)]
struct ShadowFigures {
    writes_avoided: u64,
    writes_avoided_bytes: u64,
    hits_lost: u64,
    hits_lost_bytes: u64,
}

/// `origin`: the requests, the time to the response head, and each server's figures.
#[derive(Serialize)]
struct OriginFigures<'a> {
    requests: u64,
    mean_seconds: Option<f64>,
    p50_seconds: Option<f64>,
    p99_seconds: Option<f64>,
    servers: Vec<ServerFigures<'a>>,
}

impl<'a> OriginFigures<'a> {
    fn new(origin: &HistogramCounts, servers: &'a [ServerSample]) -> OriginFigures<'a> {
        OriginFigures {
            requests: origin.count,
            mean_seconds: mean(origin),
            p50_seconds: origin.quantile(0.5),
            p99_seconds: origin.quantile(0.99),
            servers: servers.iter().map(ServerFigures::new).collect(),
        }
    }
}

/// The mean of a latency histogram's samples, `None` before the first.
fn mean(latency: &HistogramCounts) -> Option<f64> {
    (latency.count > 0).then(|| latency.sum_seconds / latency.count as f64)
}

/// One origin server's figures.
#[derive(Serialize)]
struct ServerFigures<'a> {
    url: &'a str,
    up: bool,
    requests: u64,
    failures: u64,
    mean_seconds: Option<f64>,
    /// `[upper bound in seconds, count]` pairs, not cumulative.
    latency_buckets: Vec<(UpperBound, u64)>,
}

impl<'a> ServerFigures<'a> {
    fn new(server: &'a ServerSample) -> ServerFigures<'a> {
        let latency = &server.latency;
        ServerFigures {
            url: &server.url,
            up: server.up,
            requests: server.requests,
            failures: server.failures,
            mean_seconds: mean(latency),
            latency_buckets: (latency.buckets.iter())
                .map(|&(bound, count)| (UpperBound::of(bound), count))
                .collect(),
        }
    }
}

/// A latency bucket's upper bound: seconds, or `"+Inf"` for the last, as Prometheus
/// writes it (JSON has no infinity).
#[derive(Serialize)]
#[serde(untagged)]
enum UpperBound {
    Seconds(f64),
    Infinite(&'static str),
}

impl UpperBound {
    fn of(bound: f64) -> UpperBound {
        match bound.is_finite() {
            true => UpperBound::Seconds(bound),
            false => UpperBound::Infinite("+Inf"),
        }
    }
}

/// `store`.
#[derive(Serialize)]
struct StoreFigures {
    objects: u64,
    bytes: u64,
    max_bytes: u64,
    reserved_bytes: u64,
    memory_objects: u64,
    memory_bytes: u64,
    memory_max_bytes: u64,
    open_files: u64,
    open_files_max: u64,
    tag_bytes: u64,
    evictions: u64,
    ghost_keys: u64,
    committed_fills: u64,
    committed_bytes: u64,
    dropped_fills: u64,
    scan_complete: bool,
}

impl StoreFigures {
    fn new(store: &StoreStats) -> StoreFigures {
        StoreFigures {
            objects: store.objects,
            bytes: store.bytes,
            max_bytes: store.max_bytes,
            reserved_bytes: store.reserved_bytes,
            memory_objects: store.memory_objects,
            memory_bytes: store.memory_bytes,
            memory_max_bytes: store.memory_max_bytes,
            open_files: store.open_files,
            open_files_max: store.open_files_max,
            tag_bytes: store.tag_bytes,
            evictions: store.evictions,
            ghost_keys: store.ghost_keys,
            committed_fills: store.committed_fills,
            committed_bytes: store.committed_bytes,
            dropped_fills: store.dropped_fills.total(),
            scan_complete: store.scan_complete,
        }
    }
}

/// One entry of `rules`: a site's rule, with the lifetimes it sets.
#[derive(Serialize)]
struct RuleFigures<'a> {
    site: &'a str,
    rule: usize,
    path: Option<&'a str>,
    glob: Option<&'a str>,
    methods: Vec<&'a str>,
    bypass: bool,
    default_ttl_seconds: Option<f64>,
    ttl_by_status_seconds: BTreeMap<String, f64>,
    grace_seconds: Option<f64>,
}

/// The `rules` list: each of `sites`' rules, in order.
fn rules<'a>(sites: impl Iterator<Item = &'a Arc<Site>>) -> Vec<RuleFigures<'a>> {
    sites
        .flat_map(|site| {
            let name = site.name.as_str();
            (site.rules.0.iter().enumerate())
                .map(move |(index, rule)| rule_figures(name, index, rule))
        })
        .collect()
}

fn rule_figures<'a>(site: &'a str, index: usize, rule: &'a Rule) -> RuleFigures<'a> {
    let (path, glob) = match &rule.path {
        Some(PathMatch::Prefix(prefix)) => (Some(prefix.as_str()), None),
        Some(PathMatch::Glob { pattern, .. }) => (None, Some(pattern.as_str())),
        None => (None, None),
    };
    let lifetimes = &rule.lifetimes;
    RuleFigures {
        site,
        rule: index,
        path,
        glob,
        methods: rule.methods.iter().map(|m| m.as_str()).collect(),
        bypass: rule.bypass,
        default_ttl_seconds: lifetimes.default_ttl.map(|d| d.as_secs_f64()),
        ttl_by_status_seconds: (lifetimes.by_status.iter())
            .map(|(status, ttl)| (status.as_u16().to_string(), ttl.as_secs_f64()))
            .collect(),
        grace_seconds: lifetimes.grace.map(|d| d.as_secs_f64()),
    }
}

/// `admission.estimate`: the miss-ratio curves of every candidate modelled, the
/// configured size and the chosen candidate marked (see `docs/guide/admin.md`).
#[derive(Serialize)]
struct EstimateFigures {
    sample_rate: f64,
    memory_bytes: u64,
    cache_bytes: u64,
    seconds: f64,
    epochs: u64,
    epoch_seconds: f64,
    optimize: Optimize,
    max_write_rate: Option<u64>,
    chosen: String,
    switches: u64,
    last_verdict: Option<&'static str>,
    curves: Vec<CurveFigures>,
}

/// One candidate's curve.
#[derive(Serialize)]
struct CurveFigures {
    candidate: String,
    runnable: bool,
    chosen: bool,
    points: Vec<PointFigures>,
}

/// One cache size of a curve.
#[derive(Serialize)]
struct PointFigures {
    factor: f64,
    cache_bytes: u64,
    configured_size: bool,
    requests: f64,
    object_miss_ratio: f64,
    byte_miss_ratio: f64,
    written_bytes_per_second: f64,
}

impl EstimateFigures {
    fn new(report: &Report, config: &AdmissionConfig) -> EstimateFigures {
        let estimate = &report.estimate;
        let curves = (estimate.curves.iter())
            .map(|curve| CurveFigures {
                candidate: curve.candidate.to_string(),
                runnable: choose::RUNNABLE.contains(&curve.candidate),
                chosen: curve.candidate == report.current,
                points: (curve.points.iter())
                    .map(|point| PointFigures {
                        factor: point.factor,
                        cache_bytes: point.cache_bytes,
                        configured_size: point.factor == 1.0,
                        requests: point.requests,
                        object_miss_ratio: point.object_miss_ratio,
                        byte_miss_ratio: point.byte_miss_ratio,
                        written_bytes_per_second: report.write_rate(point),
                    })
                    .collect(),
            })
            .collect();
        EstimateFigures {
            sample_rate: estimate.rate,
            memory_bytes: estimate.memory_bytes,
            cache_bytes: estimate.cache_bytes,
            seconds: report.seconds,
            epochs: report.epochs,
            epoch_seconds: config.auto_epoch.as_secs_f64(),
            optimize: config.optimize,
            max_write_rate: config.max_write_rate,
            chosen: report.current.to_string(),
            switches: report.switches,
            last_verdict: report.last.map(|verdict| verdict.as_str()),
            curves,
        }
    }
}

/// `filters`: the configured sizes, the sizing derived from them, the generation, each
/// filter, the rotations and the spare filters.
#[derive(Serialize)]
struct FilterPairFigures {
    configured: ConfiguredFigures,
    bits_per_filter: u64,
    probes: u32,
    bytes_per_filter: u64,
    generation_size: u64,
    generation: u64,
    generation_target: u64,
    current: FilterFigures,
    previous: Option<FilterFigures>,
    estimated_pair_false_positive_rate: f64,
    modelled_pair_false_positive_rate: ModelledRates,
    rotations: RotationCountFigures,
    last_rotation_cause: Option<&'static str>,
    recent_rotations: Vec<RotationFigures>,
    spares: Vec<&'static str>,
}

/// `filters.configured`: `[admission]`'s sizing keys as set.
#[derive(Serialize)]
struct ConfiguredFigures {
    expected_urls: Option<u64>,
    memory_bytes: Option<u64>,
    false_positive_rate: f64,
    max_age_seconds: f64,
    min_generation_age_seconds: f64,
    rotate: RotateMode,
}

/// `filters.rotations`: rotations by cause.
#[derive(Serialize)]
struct RotationCountFigures {
    fill: u64,
    age: u64,
    saturation: u64,
    idle: u64,
    forced: u64,
}

/// `filters.modelled_pair_false_positive_rate`.
#[derive(Serialize)]
struct ModelledRates {
    after_rotation: f64,
    before_rotation: f64,
}

/// One of `filters.recent_rotations`.
#[derive(Serialize)]
struct RotationFigures {
    generation: u64,
    cause: &'static str,
    seconds_ago: f64,
    ended_generation_inserts: u64,
    ended_generation_seconds: f64,
}

impl RotationFigures {
    fn new(rotation: &RecentRotation) -> RotationFigures {
        RotationFigures {
            generation: rotation.generation,
            cause: rotation.cause.as_str(),
            seconds_ago: rotation.ago.as_secs_f64(),
            ended_generation_inserts: rotation.ended_inserts,
            ended_generation_seconds: rotation.ended_age.as_secs_f64(),
        }
    }
}

/// One filter's figures.
#[derive(Serialize)]
struct FilterFigures {
    fill_ratio: f64,
    inserts: u64,
    estimated_keys: f64,
    estimated_false_positive_rate: f64,
    age_seconds: f64,
}

impl FilterFigures {
    fn new(stats: &FilterStats) -> FilterFigures {
        FilterFigures {
            fill_ratio: stats.bits_set_ratio,
            inserts: stats.inserts,
            estimated_keys: stats.estimated_keys,
            estimated_false_positive_rate: stats.estimated_false_positive_rate,
            age_seconds: stats.age.as_secs_f64(),
        }
    }
}

impl FilterPairFigures {
    fn new(config: &AdmissionConfig, stats: &PairStats) -> FilterPairFigures {
        let (expected_urls, memory_bytes) = match config.sizing {
            FilterSizing::ExpectedUrls(keys) => (Some(keys), None),
            FilterSizing::Memory(bytes) => (None, Some(bytes)),
        };
        let params = &stats.params;
        let (after_rotation, before_rotation) = stats.pair_false_positive_rate_range;
        FilterPairFigures {
            configured: ConfiguredFigures {
                expected_urls,
                memory_bytes,
                false_positive_rate: config.false_positive_rate,
                max_age_seconds: config.max_age.as_secs_f64(),
                min_generation_age_seconds: config.min_generation_age.as_secs_f64(),
                rotate: config.rotate,
            },
            bits_per_filter: params.bits,
            probes: params.probes,
            bytes_per_filter: params.filter_bytes(),
            generation_size: params.generation_size,
            generation: stats.generation,
            generation_target: stats.generation_target,
            current: FilterFigures::new(&stats.current),
            previous: stats.previous.as_ref().map(FilterFigures::new),
            estimated_pair_false_positive_rate: stats.estimated_pair_false_positive_rate,
            modelled_pair_false_positive_rate: ModelledRates {
                after_rotation,
                before_rotation,
            },
            rotations: RotationCountFigures {
                fill: stats.rotations.fill,
                age: stats.rotations.age,
                saturation: stats.rotations.saturation,
                idle: stats.rotations.idle,
                forced: stats.rotations.forced,
            },
            last_rotation_cause: stats.last_rotation.map(|cause| cause.as_str()),
            recent_rotations: stats
                .recent_rotations
                .iter()
                .map(RotationFigures::new)
                .collect(),
            spares: stats.spares.iter().map(|s| s.as_str()).collect(),
        }
    }
}
