//! Workloads for the bench harness and the simulator: seeded synthetic CDN traffic, or a
//! replay of an operator's own access log.
//!
//! A workload is a sequence of [`Request`]s, each naming an object (a 64-bit id) and its
//! size. The HTTP bench turns a request into the path `/obj/<id>/<size>` (the synthetic
//! origin reads the size from the path); the simulator uses the id directly.
//!
//! # Synthetic traffic
//! CDN request streams mix a popular catalog, whose popularity follows a Zipf law, with a
//! long tail of objects requested exactly once — "one-hit wonders", about three quarters
//! of the distinct objects at Akamai's edges (Maggs & Sitaraman, SIGCOMM CCR 2015). The
//! generator draws each request either from a Zipf catalog or as a brand-new object, with
//! the probability of the latter chosen so that one-hit wonders make up
//! `one_hit_fraction` of the distinct objects requested. Object sizes are lognormal
//! (default median 16 KiB, mean 48 KiB, so σ² = 2 ln(mean/median)), drawn once per object
//! from a generator seeded by the object id, so an object always has the same size.
//!
//! # Trace replay
//! An nginx/Apache access log in common or combined format (the request target and the
//! response size fields are used; only GET and HEAD lines count), or a CSV of
//! `timestamp,key,size`. A malformed line is skipped and counted, never a panic.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal, Zipf};
use xxhash_rust::xxh3::xxh3_64;

/// One request of a workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// The object requested (ids are opaque; equal ids are the same object).
    pub object: u64,
    /// The object's body size in bytes.
    pub size: u64,
    /// When the request was made, in seconds on the workload's own clock (only differences
    /// matter): the trace's timestamps, or the synthetic workload's steady request rate.
    pub at: f64,
}

impl Request {
    /// The URL path the HTTP bench requests: `/obj/<id in hex>/<size>`.
    pub fn path(&self) -> String {
        format!("/obj/{:016x}/{}", self.object, self.size)
    }
}

/// A sequence of requests with a description and what it took to read it.
#[derive(Clone, Debug)]
pub struct Workload {
    /// What the workload is, for reports.
    pub name: String,
    /// The requests, in order.
    pub requests: Vec<Request>,
    /// Trace lines skipped because they could not be parsed (0 for synthetic workloads).
    pub malformed_lines: u64,
    /// Trace lines skipped because they are not GET/HEAD requests.
    pub ignored_lines: u64,
}

impl Workload {
    /// Distinct objects requested, and the sum of their sizes.
    pub fn unique_objects_and_bytes(&self) -> (u64, u64) {
        let mut seen: HashMap<u64, u64> = HashMap::with_capacity(self.requests.len() / 2);
        for request in &self.requests {
            seen.entry(request.object).or_insert(request.size);
        }
        (seen.len() as u64, seen.values().sum())
    }
}

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter of the synthetic workload is out of range.
    #[error("workload parameter {name}: {reason}")]
    Parameter {
        /// The parameter (the command-line flag without dashes).
        name: &'static str,
        /// The rule broken.
        reason: String,
    },
    /// The trace file cannot be read.
    #[error("cannot read trace {}: {source}", path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The trace holds no usable request.
    #[error("trace {} has no usable request ({malformed} malformed lines, {ignored} ignored)", path.display())]
    EmptyTrace {
        /// The trace file.
        path: PathBuf,
        /// Lines that could not be parsed.
        malformed: u64,
        /// Lines that were not GET/HEAD requests.
        ignored: u64,
    },
}

/// Parameters of the synthetic workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    /// Objects in the popular (Zipf) catalog.
    pub catalog: u64,
    /// Zipf exponent of the catalog's popularity.
    pub zipf_exponent: f64,
    /// Fraction of the distinct objects requested that are one-hit wonders.
    pub one_hit_fraction: f64,
    /// Median object size in bytes.
    pub median_size: u64,
    /// Mean object size in bytes (must exceed the median: the lognormal's right skew).
    pub mean_size: u64,
    /// Largest object size generated (the lognormal tail is cut here).
    pub max_size: u64,
    /// Requests in the workload.
    pub requests: u64,
    /// Seed of every random choice: the same spec gives the same requests.
    pub seed: u64,
    /// Requests per second on the workload's clock (the simulator's `max_age` runs on it).
    pub rate: f64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            // Sized so that `secondhit bench` takes about a minute on a 2-core machine.
            catalog: 12_000,
            zipf_exponent: 0.9,
            one_hit_fraction: 0.7,
            median_size: 16 * 1024,
            mean_size: 48 * 1024,
            max_size: 16 * 1024 * 1024,
            requests: 60_000,
            seed: 1,
            rate: 1_000.0,
        }
    }
}

/// Builds the synthetic workload described by `spec`.
pub fn synthetic(spec: &SyntheticSpec) -> Result<Workload, WorkloadError> {
    check_spec(spec)?;
    let zipf = Zipf::new(spec.catalog as f64, spec.zipf_exponent)
        .map_err(|e| parameter("zipf-exponent", format!("{e}")))?;
    let sizes = SizeModel::new(spec)?;
    let wonder_probability = wonder_probability(spec);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut next_wonder = spec.catalog;
    let requests = (0..spec.requests)
        .map(|index| {
            let object = if rng.random_bool(wonder_probability) {
                next_wonder += 1;
                next_wonder
            } else {
                // Zipf samples lie in 1..=catalog; ids 0..catalog are the popular objects.
                zipf.sample(&mut rng) as u64 - 1
            };
            // Mix the seed in so that two seeds give unrelated object ids and sizes.
            let object = xxh3_64(&[object.to_le_bytes(), spec.seed.to_le_bytes()].concat());
            Request {
                object,
                size: sizes.size_of(object),
                at: index as f64 / spec.rate,
            }
        })
        .collect();
    Ok(Workload {
        name: format!(
            "synthetic: {} requests, catalog {}, zipf {}, one-hit {:.0}%, seed {}",
            spec.requests,
            spec.catalog,
            spec.zipf_exponent,
            spec.one_hit_fraction * 100.0,
            spec.seed
        ),
        requests,
        malformed_lines: 0,
        ignored_lines: 0,
    })
}

fn parameter(name: &'static str, reason: String) -> WorkloadError {
    WorkloadError::Parameter { name, reason }
}

fn check_spec(spec: &SyntheticSpec) -> Result<(), WorkloadError> {
    if spec.catalog == 0 {
        return Err(parameter("catalog", "must be at least 1".into()));
    }
    if spec.requests == 0 {
        return Err(parameter("requests", "must be at least 1".into()));
    }
    if !(spec.zipf_exponent.is_finite() && spec.zipf_exponent >= 0.0) {
        return Err(parameter(
            "zipf-exponent",
            "must be a finite number >= 0".into(),
        ));
    }
    if !(0.0..1.0).contains(&spec.one_hit_fraction) {
        return Err(parameter("one-hit-fraction", "must be in [0, 1)".into()));
    }
    if spec.median_size == 0 || spec.mean_size <= spec.median_size {
        return Err(parameter(
            "mean-size",
            "must exceed the median size, which must be > 0".into(),
        ));
    }
    if !(spec.rate.is_finite() && spec.rate > 0.0) {
        return Err(parameter(
            "rate",
            "must be a number of requests per second > 0".into(),
        ));
    }
    if spec.max_size < spec.median_size {
        return Err(parameter(
            "max-size",
            "must be at least the median size".into(),
        ));
    }
    Ok(())
}

/// Lognormal object sizes, drawn once per object.
struct SizeModel {
    distribution: LogNormal<f64>,
    max_size: u64,
    seed: u64,
}

impl SizeModel {
    fn new(spec: &SyntheticSpec) -> Result<SizeModel, WorkloadError> {
        // median = e^μ and mean = e^(μ + σ²/2), so σ² = 2 ln(mean / median).
        let mu = (spec.median_size as f64).ln();
        let sigma = (2.0 * (spec.mean_size as f64 / spec.median_size as f64).ln()).sqrt();
        let distribution =
            LogNormal::new(mu, sigma).map_err(|e| parameter("mean-size", format!("{e}")))?;
        Ok(SizeModel {
            distribution,
            max_size: spec.max_size,
            seed: spec.seed,
        })
    }

    fn size_of(&self, object: u64) -> u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(object ^ self.seed.rotate_left(32));
        (self.distribution.sample(&mut rng) as u64).clamp(1, self.max_size)
    }
}

/// The per-request probability of a new one-hit wonder that makes wonders `one_hit_fraction`
/// of the distinct objects: with W = qR wonders and D(m) distinct catalog objects after
/// m = (1-q)R Zipf draws, solve W / (W + D) = f for q by bisection (the left side grows with q).
fn wonder_probability(spec: &SyntheticSpec) -> f64 {
    let f = spec.one_hit_fraction;
    if f == 0.0 {
        return 0.0;
    }
    let harmonic: f64 = (1..=spec.catalog)
        .map(|i| (i as f64).powf(-spec.zipf_exponent))
        .sum();
    let expected_distinct = |draws: f64| -> f64 {
        (1..=spec.catalog)
            .map(|i| 1.0 - (1.0 - (i as f64).powf(-spec.zipf_exponent) / harmonic).powf(draws))
            .sum()
    };
    let requests = spec.requests as f64;
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    for _ in 0..40 {
        let q = (low + high) / 2.0;
        let wonders = q * requests;
        let share =
            wonders / (wonders + expected_distinct((1.0 - q) * requests)).max(f64::MIN_POSITIVE);
        if share < f {
            low = q;
        } else {
            high = q;
        }
    }
    (low + high) / 2.0
}

/// The layout of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// nginx/Apache common or combined log format.
    AccessLog,
    /// `timestamp,key,size` lines (an optional header line is skipped).
    Csv,
}

impl TraceFormat {
    /// `.csv` files are CSV; anything else is read as an access log.
    pub fn from_path(path: &Path) -> TraceFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("csv") => TraceFormat::Csv,
            _ => TraceFormat::AccessLog,
        }
    }
}

/// Reads a trace file (format from its extension).
pub fn from_trace(path: &Path) -> Result<Workload, WorkloadError> {
    let file = File::open(path).map_err(|source| WorkloadError::Trace {
        path: path.to_owned(),
        source,
    })?;
    let workload = parse_trace(
        BufReader::new(file),
        TraceFormat::from_path(path),
        &path.display().to_string(),
    )
    .map_err(|source| WorkloadError::Trace {
        path: path.to_owned(),
        source,
    })?;
    if workload.requests.is_empty() {
        return Err(WorkloadError::EmptyTrace {
            path: path.to_owned(),
            malformed: workload.malformed_lines,
            ignored: workload.ignored_lines,
        });
    }
    Ok(workload)
}

/// What one trace line says.
enum Line {
    /// A request for `key` at `at` (seconds) whose response had `size` bytes (`None`: size
    /// unknown, e.g. a 304).
    Request {
        key: String,
        size: Option<u64>,
        at: f64,
    },
    /// A line to skip silently (a CSV header, a blank line).
    Skip,
    /// A valid line that is not a cacheable request (another method).
    Ignored,
    /// A line that cannot be parsed.
    Malformed,
}

/// Parses a trace from `reader`; `name` describes it in reports. Only I/O errors fail.
pub fn parse_trace(reader: impl BufRead, format: TraceFormat, name: &str) -> io::Result<Workload> {
    let mut sizes: HashMap<String, u64> = HashMap::new();
    let mut workload = Workload {
        name: format!("trace: {name}"),
        requests: Vec::new(),
        malformed_lines: 0,
        ignored_lines: 0,
    };
    for line in reader.split(b'\n') {
        // Logs are not always valid UTF-8; a lossy read keeps the line countable.
        let line = line?;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        let parsed = match format {
            TraceFormat::AccessLog => parse_access_log_line(text),
            TraceFormat::Csv => parse_csv_line(text),
        };
        match parsed {
            Line::Request { key, size, at } => {
                // A response without a body size (304, 206, "-") keeps the object's last known size.
                let size = match size {
                    Some(size) => *sizes
                        .entry(key.clone())
                        .and_modify(|s| *s = size)
                        .or_insert(size),
                    None => sizes.get(&key).copied().unwrap_or(0),
                };
                workload.requests.push(Request {
                    object: xxh3_64(key.as_bytes()),
                    size,
                    at,
                });
            }
            Line::Skip => {}
            Line::Ignored => workload.ignored_lines += 1,
            Line::Malformed => workload.malformed_lines += 1,
        }
    }
    Ok(workload)
}

/// `host ident user [time] "METHOD target PROTO" status bytes ["referer" "agent"]`
fn parse_access_log_line(text: &str) -> Line {
    if text.trim().is_empty() {
        return Line::Skip;
    }
    let Some((before, rest)) = text.split_once('"') else {
        return Line::Malformed;
    };
    let Some(at) = log_time(before) else {
        return Line::Malformed;
    };
    let Some((request_line, rest)) = rest.split_once('"') else {
        return Line::Malformed;
    };
    let mut request = request_line.split_ascii_whitespace();
    let (Some(method), Some(target)) = (request.next(), request.next()) else {
        return Line::Malformed;
    };
    let mut fields = rest.split_ascii_whitespace();
    let (Some(status), Some(bytes)) = (fields.next(), fields.next()) else {
        return Line::Malformed;
    };
    let Ok(status) = status.parse::<u16>() else {
        return Line::Malformed;
    };
    let size = match bytes {
        "-" => None,
        digits => match digits.parse::<u64>() {
            Ok(size) => Some(size),
            Err(_) => return Line::Malformed,
        },
    };
    if method != "GET" && method != "HEAD" {
        return Line::Ignored;
    }
    // Only a full 200 response tells the object's size.
    let size = if status == 200 && method == "GET" {
        size
    } else {
        None
    };
    Line::Request {
        key: target.to_owned(),
        size,
        at,
    }
}

/// The `[10/Oct/2026:13:55:36 +0000]` field of an access-log line, as unix seconds.
fn log_time(fields: &str) -> Option<f64> {
    let inside = fields.split_once('[')?.1.split_once(']')?.0;
    let (stamp, zone) = inside.split_once(' ')?;
    let mut parts = stamp.splitn(4, ['/', ':']);
    let day: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let rest = parts.next()?; // year
    let year: i64 = rest.parse().ok()?;
    let clock: Vec<i64> = parts
        .next()?
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == month)? as i64
        + 1;
    let (&[hour, minute, second], true) = (clock.as_slice(), (1..=31).contains(&day)) else {
        return None;
    };
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let zone: i64 = zone.get(1..)?.parse().ok()?;
    let offset = sign * ((zone / 100) * 3600 + (zone % 100) * 60);
    Some(
        (days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
            as f64,
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `timestamp,key,size`; the key may itself contain commas.
fn parse_csv_line(text: &str) -> Line {
    let text = text.trim();
    if text.is_empty() {
        return Line::Skip;
    }
    let (Some((timestamp, rest)), Some((_, size))) = (text.split_once(','), text.rsplit_once(','))
    else {
        return Line::Malformed;
    };
    let Some((key, _)) = rest.rsplit_once(',') else {
        return Line::Malformed;
    };
    if timestamp.trim() == "timestamp" && key.trim() == "key" {
        return Line::Skip;
    }
    match (timestamp.trim().parse::<f64>(), size.trim().parse::<u64>()) {
        (Ok(at), Ok(size)) if at.is_finite() && !key.trim().is_empty() => Line::Request {
            key: key.trim().to_owned(),
            size: Some(size),
            at,
        },
        _ => Line::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_spec() -> SyntheticSpec {
        SyntheticSpec {
            catalog: 2_000,
            requests: 40_000,
            ..SyntheticSpec::default()
        }
    }

    #[test]
    fn synthetic_workload_is_reproducible_and_seed_dependent() {
        let a = synthetic(&small_spec()).expect("valid spec");
        let b = synthetic(&small_spec()).expect("valid spec");
        assert_eq!(a.requests, b.requests);
        let c = synthetic(&SyntheticSpec {
            seed: 2,
            ..small_spec()
        })
        .expect("valid spec");
        assert_ne!(a.requests, c.requests);
        assert_eq!(a.requests.len(), 40_000);
    }

    #[test]
    fn one_hit_wonders_make_up_the_requested_fraction() {
        let workload = synthetic(&small_spec()).expect("valid spec");
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for request in &workload.requests {
            *counts.entry(request.object).or_insert(0) += 1;
        }
        let once = counts.values().filter(|&&n| n == 1).count() as f64;
        let share = once / counts.len() as f64;
        // Popular objects requested once add a little to the wonders' 70%.
        assert!((0.68..0.80).contains(&share), "one-hit share {share}");
    }

    #[test]
    fn sizes_are_lognormal_with_the_requested_median_and_mean() {
        let spec = SyntheticSpec {
            one_hit_fraction: 0.9,
            requests: 200_000,
            ..small_spec()
        };
        let workload = synthetic(&spec).expect("valid spec");
        // Over distinct objects: repeats of popular objects would weight a few sizes.
        let distinct: HashMap<u64, u64> = workload
            .requests
            .iter()
            .map(|r| (r.object, r.size))
            .collect();
        let mut sizes: Vec<u64> = distinct.into_values().collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2] as f64;
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        assert!((median / 16_384.0 - 1.0).abs() < 0.05, "median {median}");
        assert!((mean / 49_152.0 - 1.0).abs() < 0.10, "mean {mean}");
        let object = workload.requests[0].object;
        assert!(
            workload
                .requests
                .iter()
                .filter(|r| r.object == object)
                .all(|r| r.size == workload.requests[0].size)
        );
    }

    #[test]
    fn bad_parameters_name_the_parameter() {
        for (spec, name) in [
            (
                SyntheticSpec {
                    catalog: 0,
                    ..small_spec()
                },
                "catalog",
            ),
            (
                SyntheticSpec {
                    one_hit_fraction: 1.0,
                    ..small_spec()
                },
                "one-hit-fraction",
            ),
            (
                SyntheticSpec {
                    mean_size: 1_000,
                    ..small_spec()
                },
                "mean-size",
            ),
            (
                SyntheticSpec {
                    zipf_exponent: f64::NAN,
                    ..small_spec()
                },
                "zipf-exponent",
            ),
        ] {
            let error = synthetic(&spec).expect_err("invalid spec").to_string();
            assert!(error.contains(name), "{error}");
        }
    }

    #[test]
    fn access_logs_in_common_and_combined_format_are_read() {
        let log = "\
127.0.0.1 - - [10/Oct/2026:13:55:36 +0000] \"GET /a.png HTTP/1.1\" 200 2326\n\
127.0.0.1 - frank [10/Oct/2026:13:55:37 +0000] \"GET /b?x=1 HTTP/1.1\" 200 100 \"http://ref/\" \"curl/8\"\n\
127.0.0.1 - - [10/Oct/2026:13:55:38 +0000] \"GET /a.png HTTP/1.1\" 304 -\n\
127.0.0.1 - - [10/Oct/2026:13:55:39 +0000] \"POST /form HTTP/1.1\" 200 5\n\
garbage line without quotes\n\
127.0.0.1 - - [10/Oct/2026:13:55:40 +0000] \"GET /c HTTP/1.1\" abc 10\n\
\n";
        let workload =
            parse_trace(log.as_bytes(), TraceFormat::AccessLog, "test").expect("in-memory read");
        let sizes: Vec<u64> = workload.requests.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [2326, 100, 2326], "a 304 keeps the object's size");
        assert_eq!(workload.requests[0].object, workload.requests[2].object);
        assert_eq!(workload.ignored_lines, 1);
        assert_eq!(workload.malformed_lines, 2);
        let times: Vec<f64> = workload.requests.iter().map(|r| r.at).collect();
        // 2026-10-10T13:55:36Z is 1791640536 unix seconds.
        assert_eq!(times, [1_791_640_536.0, 1_791_640_537.0, 1_791_640_538.0]);
    }

    #[test]
    fn csv_traces_are_read_and_bad_lines_counted() {
        let csv =
            "timestamp,key,size\n1.5,/a,10\n2,/b,with,commas,20\n3,/c,notanumber\nnope\n4,,5\n";
        let workload =
            parse_trace(csv.as_bytes(), TraceFormat::Csv, "test").expect("in-memory read");
        let sizes: Vec<u64> = workload.requests.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [10, 20]);
        assert_eq!(workload.requests[1].object, xxh3_64(b"/b,with,commas"));
        assert_eq!(workload.malformed_lines, 3);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parsers() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..2_000 {
            let len = rng.random_range(0..120);
            let bytes: Vec<u8> = (0..len).map(|_| rng.random_range(0..=255u8)).collect();
            for format in [TraceFormat::AccessLog, TraceFormat::Csv] {
                parse_trace(&bytes[..], format, "fuzz").expect("in-memory read");
            }
        }
    }

    #[test]
    fn trace_files_are_read_by_extension_and_empty_ones_rejected() {
        let dir = tempfile::tempdir().expect("temp dir");
        let csv = dir.path().join("t.csv");
        std::fs::write(&csv, "0,/x,5\n0,/x,5\n").expect("write trace");
        assert_eq!(from_trace(&csv).expect("readable trace").requests.len(), 2);
        let empty = dir.path().join("t.log");
        std::fs::write(&empty, "not a log line\n").expect("write trace");
        assert!(matches!(
            from_trace(&empty),
            Err(WorkloadError::EmptyTrace { malformed: 1, .. })
        ));
        assert!(matches!(
            from_trace(&dir.path().join("missing.log")),
            Err(WorkloadError::Trace { .. })
        ));
    }
}
