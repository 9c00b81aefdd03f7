//! `/metrics`: every metric, read at scrape time and encoded by prometheus-client.
//!
//! [`Exporter`] registers one collector with a prometheus-client `Registry`. On each
//! scrape the collector reads the request path's [`Metrics`], the store's [`StoreStats`]
//! and the filter pair's [`PairStats`], and writes them through the library's descriptor
//! and metric encoders, so names, types, label escaping and the text format are the
//! library's. The output is the OpenMetrics text format
//! ([`CONTENT_TYPE`]), which Prometheus reads natively; a counter's samples carry the
//! `_total` suffix there (the descriptors name the family without it).
//!
//! The metric names are an interface: `docs/guide/admin.md` lists each one.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::process::ProcessStats;
use super::{Counts, Metrics, RequestResult, ServerSample, ServerSource, TuningSource};
use crate::admission::{Cause, Decision, FilterStats, LiveAdmission, PairStats};
use crate::config::{AdmissionPolicy, RetryReason};
use crate::outcome::ErrorKind;
use crate::policy::UnindexedTags;
use crate::store::{DiskStats, FillDrop, Store, StoreStats};
use crate::tuning::{Point, Report, choose};

/// The `Content-Type` of the exposition: OpenMetrics text 1.0.0.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Encodes every metric on demand.
pub(crate) struct Exporter {
    registry: Registry,
}

impl Exporter {
    /// An exporter of `metrics`, `store`'s statistics, `admission`'s filter statistics
    /// and the origin servers' figures `servers` reads.
    pub(crate) fn new(
        metrics: Arc<Metrics>,
        store: Arc<Store>,
        admission: Arc<LiveAdmission>,
        servers: ServerSource,
        tuning: TuningSource,
    ) -> Exporter {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape {
            metrics,
            store,
            admission,
            servers,
            tuning,
        }));
        Exporter { registry }
    }

    /// The exposition, as of now.
    pub(crate) fn render(&self) -> Result<String, fmt::Error> {
        let mut text = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// The collector: what a scrape reads.
struct Scrape {
    metrics: Arc<Metrics>,
    store: Arc<Store>,
    /// Loaded per scrape: a reload may replace the policy.
    admission: Arc<LiveAdmission>,
    /// Read per scrape: a reload may change the servers.
    servers: ServerSource,
    /// Read per scrape: a reload may rebuild the estimates.
    tuning: TuningSource,
}

// By hand: prometheus-client wants collectors to be `Debug`, and a policy is not.
impl fmt::Debug for Scrape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scrape")
            .field("policy", &self.admission.load().stats.kind())
            .finish_non_exhaustive()
    }
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let counts = self.metrics.snapshot();
        let store = self.store.stats();
        let policy = self.admission.load().stats.clone();
        let filters = policy.filter_stats();
        let out = &mut encoder;
        requests(out, &counts)?;
        admission(out, &counts)?;
        if let Some(filters) = &filters {
            filter_pair(out, filters)?;
        }
        store_and_disk(out, &store)?;
        origin(out, &counts)?;
        origin_retries(out, &counts)?;
        origin_servers(out, &(self.servers)())?;
        errors(out, &counts, &store)?;
        unindexed_tags(out, &counts)?;
        connections(out, &counts)?;
        counter(
            out,
            "secondhit_collapsed_requests",
            "Misses answered from another request's fill of the same key (Cache-Status collapsed) instead of an origin fetch of their own",
            counts.collapsed,
        )?;
        if policy.kind() == AdmissionPolicy::Shadow.into() {
            shadow(out, &counts)?;
        }
        estimates(
            out,
            &(self.tuning)().report(tokio::time::Instant::now().into_std()),
        )?;
        sites(out, &self.metrics.site_totals())?;
        build_info(out)?;
        if let Some(process) = super::process::read() {
            process_metrics(out, &process)?;
        }
        Ok(())
    }
}

/// Requests and response body bytes by site and result; nothing without `[[site]]`s.
fn sites(out: &mut DescriptorEncoder, totals: &[(String, super::SiteTotals)]) -> fmt::Result {
    if totals.is_empty() {
        return Ok(());
    }
    let samples = |pick: fn(&super::SiteTotals) -> &[u64; RequestResult::ALL.len()]| {
        totals
            .iter()
            .flat_map(|(site, counts)| {
                RequestResult::ALL.map(|r| {
                    let labels = [("site", site.as_str()), ("result", r.as_str())];
                    (labels, pick(counts)[r as usize])
                })
            })
            .collect::<Vec<_>>()
    };
    counter_family(
        out,
        "secondhit_site_requests",
        "Requests a site answered, by site (its first host, default for [origin]'s) and result",
        &samples(|counts| &counts.0),
    )?;
    counter_family(
        out,
        "secondhit_site_response_body_bytes",
        "Response body bytes by site and result, as the responses declared them",
        &samples(|counts| &counts.1),
    )
}

/// `secondhit_build_info`: 1, labelled with the version, the commit and the features built
/// in (as the binary named them, see `build`), so a dashboard can tell which build
/// each node runs.
fn build_info(out: &mut DescriptorEncoder) -> fmt::Result {
    let build = crate::build::get();
    let labels = [
        ("version", build.version),
        ("commit", build.commit),
        ("features", build.features),
    ];
    gauge_family(
        out,
        "secondhit_build_info",
        "Always 1; the labels name the running build",
        &[(labels, 1.0)],
    )
}

/// The `process_*` metrics, named as Prometheus's client libraries name them.
fn process_metrics(out: &mut DescriptorEncoder, process: &ProcessStats) -> fmt::Result {
    let mut cpu = out.encode_descriptor(
        "process_cpu_seconds",
        "Total user and system CPU time spent, in seconds",
        None,
        MetricType::Counter,
    )?;
    cpu.encode_counter::<NoLabelSet, f64, f64>(&process.cpu_seconds, None)?;
    gauge(
        out,
        "process_resident_memory_bytes",
        "Resident memory size, in bytes",
        process.resident_bytes as f64,
    )?;
    gauge(
        out,
        "process_open_fds",
        "Open file descriptors",
        process.open_fds as f64,
    )?;
    if let Some(max) = process.max_fds {
        gauge(
            out,
            "process_max_fds",
            "The limit on open file descriptors",
            max as f64,
        )?;
    }
    gauge(
        out,
        "process_start_time_seconds",
        "Start time of the process, in seconds since the Unix epoch",
        process.start_time_seconds,
    )
}

fn requests(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    let samples = RequestResult::ALL.map(|r| ([("result", r.as_str())], counts.requests(r)));
    counter_family(
        out,
        "secondhit_requests",
        "Requests by result: hit (fresh from storage), stale (stale from storage), miss (to the origin for want of a usable stored response), pass (everything else)",
        &samples,
    )?;
    let bytes =
        RequestResult::ALL.map(|r| ([("result", r.as_str())], counts.body_bytes[r as usize]));
    counter_family(
        out,
        "secondhit_response_body_bytes",
        "Response body bytes by result, as the responses declared them (the byte hit ratio is hit / all)",
        &bytes,
    )
}

fn connections(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    let workers: Vec<String> = (0..counts.connections.len())
        .map(|i| i.to_string())
        .collect();
    let samples: Vec<_> = (workers.iter())
        .zip(&counts.connections)
        .map(|(worker, &count)| ([("worker", worker.as_str())], count))
        .collect();
    counter_family(
        out,
        "secondhit_connections",
        "Client connections accepted, by worker (server.workers): how evenly the kernel spreads them",
        &samples,
    )
}

fn admission(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    let samples = Decision::ALL.map(|d| {
        let decision = if d.is_admit() { "admit" } else { "reject" };
        (
            [("decision", decision), ("reason", d.as_str())],
            counts.decisions[d.index()],
        )
    });
    counter_family(
        out,
        "secondhit_admission_decisions",
        "Admission decisions applied to storable responses, by decision and reason",
        &samples,
    )?;
    counter(
        out,
        "secondhit_disk_writes_avoided_bytes",
        "Body bytes of storable responses that admission kept off the disk",
        counts.writes_avoided_bytes,
    )
}

/// The miss-ratio estimates: each candidate's curve, the choice and its switches.
fn estimates(out: &mut DescriptorEncoder, report: &Report) -> fmt::Result {
    let each = |value: &dyn Fn(&Point) -> f64| per_point(report, value);
    gauge_family(
        out,
        "secondhit_estimate_object_miss_ratio",
        "Estimated share of requests that would miss, by candidate admission setting and cache size (a multiple of cache.max_size)",
        &each(&|p| p.object_miss_ratio),
    )?;
    gauge_family(
        out,
        "secondhit_estimate_byte_miss_ratio",
        "Estimated share of body bytes that would miss, by candidate and cache size factor",
        &each(&|p| p.byte_miss_ratio),
    )?;
    gauge_family(
        out,
        "secondhit_estimate_written_bytes_per_second",
        "Estimated bytes a second written to the cache, by candidate and cache size factor",
        &each(&|p| report.write_rate(p)),
    )?;
    gauge(
        out,
        "secondhit_estimate_sample_rate",
        "Share of keys the miss-ratio estimates sample",
        report.estimate.rate,
    )?;
    gauge(
        out,
        "secondhit_estimate_memory_bytes",
        "Bytes the miss-ratio estimates hold",
        report.estimate.memory_bytes as f64,
    )?;
    let chosen: Vec<_> = (choose::RUNNABLE.iter())
        .map(|&c| {
            (
                [("candidate", c.to_string())],
                f64::from(c == report.current),
            )
        })
        .collect();
    gauge_family(
        out,
        "secondhit_auto_choice",
        "1 for the candidate policy = \"auto\" runs (or would run, under another policy), 0 for the other",
        &chosen,
    )?;
    counter(
        out,
        "secondhit_auto_switches",
        "Switches of the candidate chosen from the estimates (made under policy = \"auto\", counted under every policy)",
        report.switches,
    )
}

/// One sample per candidate and size factor of `report`, of `value` at that point.
fn per_point(
    report: &Report,
    value: &dyn Fn(&Point) -> f64,
) -> Vec<([(&'static str, String); 2], f64)> {
    (report.estimate.curves.iter())
        .flat_map(|curve| {
            (curve.points.iter()).map(|point| {
                let labels = [
                    ("candidate", curve.candidate.to_string()),
                    ("factor", point.factor.to_string()),
                ];
                (labels, value(point))
            })
        })
        .collect()
}

fn filter_pair(out: &mut DescriptorEncoder, stats: &PairStats) -> fmt::Result {
    let each = |value: fn(&FilterStats) -> f64| {
        let mut samples = vec![([("filter", "current")], value(&stats.current))];
        if let Some(previous) = &stats.previous {
            samples.push(([("filter", "previous")], value(previous)));
        }
        samples
    };
    gauge_family(
        out,
        "secondhit_filter_fill_ratio",
        "Share of the filter's bits that are set (about 0.5 at its design load)",
        &each(|f| f.bits_set_ratio),
    )?;
    gauge_family(
        out,
        "secondhit_filter_estimated_keys",
        "Distinct keys in the filter, estimated from its fill",
        &each(|f| f.estimated_keys),
    )?;
    gauge(
        out,
        "secondhit_filter_estimated_fp_rate",
        "False-positive rate of the pair (either filter says yes), from its bits now",
        stats.estimated_pair_false_positive_rate,
    )?;
    let rotations = &stats.rotations;
    let samples = Cause::ALL.map(|cause| {
        let count = match cause {
            Cause::Fill => rotations.fill,
            Cause::Age => rotations.age,
            Cause::Saturation => rotations.saturation,
            Cause::Idle => rotations.idle,
            Cause::Forced => rotations.forced,
        };
        ([("cause", cause.as_str())], count)
    });
    counter_family(
        out,
        "secondhit_filter_rotations",
        "Rotations of the filter pair since start-up, by cause",
        &samples,
    )?;
    gauge(
        out,
        "secondhit_filter_generation_age_seconds",
        "Time since the current filter generation began",
        stats.current.age.as_secs_f64(),
    )
}

fn store_and_disk(out: &mut DescriptorEncoder, store: &StoreStats) -> fmt::Result {
    gauge(
        out,
        "secondhit_store_objects",
        "Entries in the disk cache",
        store.objects as f64,
    )?;
    gauge(
        out,
        "secondhit_store_bytes",
        "Bytes of entry files in the disk cache, headers included",
        store.bytes as f64,
    )?;
    counter(
        out,
        "secondhit_store_evictions",
        "Entries evicted to make room, since start-up",
        store.evictions,
    )?;
    gauge(
        out,
        "secondhit_store_ghost_keys",
        "Keys of evicted entries the index remembers (S3-FIFO's ghost, under policy always or shadow)",
        store.ghost_keys as f64,
    )?;
    gauge(
        out,
        "secondhit_store_memory_bytes",
        "Bytes the memory tier holds: copies of hot entries (cache.memory_size)",
        store.memory_bytes as f64,
    )?;
    gauge(
        out,
        "secondhit_store_open_files",
        "Entry files held open with their verified headers (cache.open_files)",
        store.open_files as f64,
    )?;
    counter(
        out,
        "secondhit_disk_write_bytes",
        "Body bytes of fills committed to the disk cache, since start-up",
        store.committed_bytes,
    )?;
    counter(
        out,
        "secondhit_write_budget_refused_fills",
        "Fills not stored, or dropped as they grew, because the minute's admission.max_write_rate was spent",
        store.write_budget_refused,
    )?;
    let calls = store.fill_calls;
    counter_family(
        out,
        "secondhit_store_fill_calls",
        "File calls of fills, by where they ran: on the worker, or handed to the blocking pool (after the disk stalled, while the filesystem syncs, with cache.fsync = true)",
        &[
            ([("on", "worker")], calls.worker),
            ([("on", "pool")], calls.pool),
        ],
    )?;
    disk_space(out, &store.disk)
}

fn disk_space(out: &mut DescriptorEncoder, disk: &DiskStats) -> fmt::Result {
    gauge(
        out,
        "secondhit_disk_free_bytes",
        "Free bytes on the cache's filesystem at the last reading (taken when fills reserve)",
        disk.free_bytes as f64,
    )?;
    if let Some(inodes) = disk.free_inodes {
        gauge(
            out,
            "secondhit_disk_free_inodes",
            "Free inodes on the cache's filesystem at the last reading",
            inodes as f64,
        )?;
    }
    gauge(
        out,
        "secondhit_disk_backoff",
        "1 while new fills are held back after a cache write failed (ENOSPC, EDQUOT, EIO)",
        if disk.backing_off { 1.0 } else { 0.0 },
    )?;
    counter(
        out,
        "secondhit_disk_write_failures",
        "Cache writes that failed with ENOSPC, EDQUOT or EIO, since start-up",
        disk.write_failures,
    )?;
    counter(
        out,
        "secondhit_disk_refused_fills",
        "Fills not started because the cache's disk had no room above cache.min_free, or fills were backing off",
        disk.refused_fills,
    )
}

fn origin(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    let histogram = &counts.origin;
    let mut metric = out.encode_descriptor(
        "secondhit_origin_request_duration_seconds",
        "Time from sending a request to the origin to its response head (or its failure)",
        None,
        MetricType::Histogram,
    )?;
    metric.encode_histogram::<NoLabelSet>(
        histogram.sum_seconds,
        histogram.count,
        &histogram.buckets,
        None,
    )
}

/// Requests sent again to another server of their pool, by why.
fn origin_retries(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    let samples: Vec<_> = (RetryReason::ALL.iter())
        .map(|&reason| {
            let count = counts.origin_retries[reason as usize];
            ([("reason", reason.as_str())], count)
        })
        .collect();
    counter_family(
        out,
        "secondhit_origin_retries",
        "Requests sent to another server of their pool after one failed: connect (nothing was sent), error (the connection failed before a response head), timeout (no head within origin.first_byte_timeout), invalid_header",
        &samples,
    )
}

/// Each origin server's state and figures, labelled with its URL.
fn origin_servers(out: &mut DescriptorEncoder, servers: &[ServerSample]) -> fmt::Result {
    let label = |server: &ServerSample| [("server", server.url.clone())];
    let up: Vec<_> = (servers.iter())
        .map(|s| (label(s), if s.up { 1.0 } else { 0.0 }))
        .collect();
    gauge_family(
        out,
        "secondhit_origin_server_up",
        "1 while an origin server is in rotation, 0 while failures or a failed probe keep it out",
        &up,
    )?;
    let requests: Vec<_> = servers.iter().map(|s| (label(s), s.requests)).collect();
    counter_family(
        out,
        "secondhit_origin_server_requests",
        "Requests sent to each origin server (probes not included)",
        &requests,
    )?;
    let failures: Vec<_> = servers.iter().map(|s| (label(s), s.failures)).collect();
    counter_family(
        out,
        "secondhit_origin_server_failures",
        "Requests to each origin server that failed: a connection error, a timeout or a 5xx answer",
        &failures,
    )?;
    let mut metric = out.encode_descriptor(
        "secondhit_origin_server_request_duration_seconds",
        "Time from sending a request to each origin server to its response head (or its failure)",
        None,
        MetricType::Histogram,
    )?;
    for server in servers {
        let latency = &server.latency;
        metric
            .encode_family(&label(server))?
            .encode_histogram::<NoLabelSet>(
                latency.sum_seconds,
                latency.count,
                &latency.buckets,
                None,
            )?;
    }
    Ok(())
}

fn errors(out: &mut DescriptorEncoder, counts: &Counts, store: &StoreStats) -> fmt::Result {
    let mut samples: Vec<([(&str, &str); 1], u64)> = ErrorKind::ALL
        .iter()
        .map(|&kind| ([("kind", kind.as_str())], counts.errors[kind as usize]))
        .collect();
    samples.push(([("kind", "store-checksum")], store.checksum_failures));
    samples.push(([("kind", "store-invalid-file")], store.removed_invalid));
    // Fills that ended without an entry for a reason an operator should hear about (a
    // client going away or a body growing too large is routine, not an error).
    for reason in FillDrop::ALL.into_iter().filter(|r| !r.is_expected()) {
        let kind = match reason {
            FillDrop::OriginError => "fill-origin-error",
            FillDrop::DiskBehind => "fill-disk-behind",
            FillDrop::NoSpace => "fill-no-space",
            FillDrop::DiskFull => "fill-disk-full",
            _ => "fill-store-error",
        };
        samples.push(([("kind", kind)], store.dropped_fills.get(reason)));
    }
    counter_family(
        out,
        "secondhit_errors",
        "Errors by kind: request failures answered 400/502/504, and cache failures survived by proxying uncached",
        &samples,
    )
}

fn unindexed_tags(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    let samples: Vec<([(&str, &str); 1], u64)> = UnindexedTags::ALL
        .iter()
        .map(|&reason| {
            let count = counts.unindexed_tags[reason as usize];
            ([("reason", reason.as_str())], count)
        })
        .collect();
    counter_family(
        out,
        "secondhit_tags_unindexed",
        "Responses not stored because their cache tags could not all be indexed (tags.max_per_entry, tags.max_length, tags.max_memory, or a field that is not ASCII), by reason",
        &samples,
    )
}

fn shadow(out: &mut DescriptorEncoder, counts: &Counts) -> fmt::Result {
    counter(
        out,
        "secondhit_shadow_writes_avoided",
        "Shadow mode: fills stored that second-hit would not have written (first sight)",
        counts.shadow_writes_avoided,
    )?;
    counter(
        out,
        "secondhit_shadow_writes_avoided_bytes",
        "Shadow mode: body bytes of those fills",
        counts.shadow_writes_avoided_bytes,
    )?;
    counter(
        out,
        "secondhit_shadow_hits_lost",
        "Shadow mode: hits second-hit would have missed (the first hit on an entry it would not have stored)",
        counts.shadow_hits_lost,
    )?;
    counter(
        out,
        "secondhit_shadow_hits_lost_bytes",
        "Shadow mode: body bytes of the entries those hits served",
        counts.shadow_hits_lost_bytes,
    )
}

/// One counter without labels.
fn counter(out: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let mut metric = out.encode_descriptor(name, help, None, MetricType::Counter)?;
    metric.encode_counter::<NoLabelSet, u64, f64>(&value, None)
}

/// One gauge without labels.
fn gauge(out: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> fmt::Result {
    let mut metric = out.encode_descriptor(name, help, None, MetricType::Gauge)?;
    metric.encode_gauge(&value)
}

/// A counter family: one sample per label set.
fn counter_family<L: EncodeLabelSet>(
    out: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[(L, u64)],
) -> fmt::Result {
    let mut metric = out.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in samples {
        metric
            .encode_family(labels)?
            .encode_counter::<NoLabelSet, u64, f64>(value, None)?;
    }
    Ok(())
}

/// A gauge family: one sample per label set.
fn gauge_family<L: EncodeLabelSet>(
    out: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[(L, f64)],
) -> fmt::Result {
    let mut metric = out.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in samples {
        metric.encode_family(labels)?.encode_gauge(value)?;
    }
    Ok(())
}
