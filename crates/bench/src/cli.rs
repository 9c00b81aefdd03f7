//! The arguments of `secondhit bench` and `secondhit simulate`, and what each command does
//! with them. `main.rs` only parses and prints: these functions return the text to print.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::driver::DriveOptions;
use super::html;
use super::plot::{self, Picture};
use super::policies::POLICY_NAMES;
use super::recommend;
use super::reference::REFERENCE_NAMES;
use super::replay::{self, Pace, ReplayOptions};
use super::report::Report;
use super::workload::{SyntheticSpec, TraceFormat, Workload, requests_from_trace};
use super::{BenchOptions, CacheSize, Sweep, WorkloadSource};
use secondhit_proxy::config::{Config, FilterSizing, RotateMode};

/// Where the traffic comes from: a trace file, or the synthetic generator's parameters.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Replay this nginx/Apache access log (common or combined format; secondhit's own
    /// access log in either format), `.jsonl` (secondhit's JSON access log), `.csv`
    /// (`timestamp,key,size`), libCacheSim `oracleGeneral` binary (detected by
    /// "oracleGeneral" in the name) or Twitter cache-trace CSV (detected by its first line)
    /// instead of synthetic traffic.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// The --trace file's format, when detection would guess wrong.
    #[arg(long, value_enum, requires = "trace")]
    pub trace_format: Option<TraceFormat>,
    /// Synthetic: requests to send.
    #[arg(long, default_value_t = SyntheticSpec::default().requests)]
    pub requests: u64,
    /// Synthetic: objects in the popular (Zipf) catalog.
    #[arg(long, default_value_t = SyntheticSpec::default().catalog)]
    pub catalog: u64,
    /// Synthetic: Zipf exponent of the catalog's popularity.
    #[arg(long, default_value_t = SyntheticSpec::default().zipf_exponent)]
    pub zipf: f64,
    /// Synthetic: share of the distinct objects requested exactly once.
    #[arg(long, default_value_t = SyntheticSpec::default().one_hit_fraction)]
    pub one_hit_fraction: f64,
    /// Synthetic: median object size ("16KiB").
    #[arg(long, default_value = "16KiB")]
    pub median_size: bytesize::ByteSize,
    /// Synthetic: mean object size ("48KiB"); must exceed the median.
    #[arg(long, default_value = "48KiB")]
    pub mean_size: bytesize::ByteSize,
    /// Synthetic: seed of every random choice.
    #[arg(long, default_value_t = SyntheticSpec::default().seed)]
    pub seed: u64,
}

impl WorkloadArgs {
    /// The workload source these arguments describe; a synthetic workload's clock runs at
    /// `rate` requests per second.
    pub fn source(&self, rate: f64) -> WorkloadSource {
        match &self.trace {
            Some(path) => WorkloadSource::Trace(path.clone(), self.trace_format),
            None => WorkloadSource::Synthetic(SyntheticSpec {
                catalog: self.catalog,
                zipf_exponent: self.zipf,
                one_hit_fraction: self.one_hit_fraction,
                median_size: self.median_size.as_u64(),
                mean_size: self.mean_size.as_u64(),
                requests: self.requests,
                seed: self.seed,
                rate,
                ..SyntheticSpec::default()
            }),
        }
    }
}

/// Settings both commands share: cache size, policies, and the proxy config.
#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Cache size of every policy: bytes ("512MiB") or a share of the workload's unique
    /// bytes ("5%") [default: 5%].
    // No clap default: `simulate --recommend` chooses a size itself unless one is given.
    #[arg(long)]
    pub cache_size: Option<CacheSize>,
    /// Policies to compare, comma-separated [default: second-hit,auto,always,exact-second-hit;
    /// a plain `simulate` adds the reference caches s3fifo,sieve,w-tinylfu,lru].
    // No clap default: the default list depends on the command (the reference caches exist
    // only in the simulator).
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<String>,
    /// A secondhit config file whose `[admission]` section sizes `second-hit` (and whose
    /// `[cache]` max_object_size applies). Without it, the defaults (`rotate = "auto"`) with
    /// `expected_urls` four times the objects the cache holds (cache size / mean object size).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl PolicyArgs {
    /// The `--cache-size` given, or 5% of the workload's unique bytes.
    pub fn cache_size(&self) -> CacheSize {
        self.cache_size.unwrap_or(CacheSize::OfUniqueBytes(0.05))
    }

    /// The config for the run: the file's, or defaults with the filters sized to the cache.
    fn config(&self, workload: &Workload, cache_size: u64) -> Result<Config, String> {
        Ok(self
            .file_config()?
            .unwrap_or_else(|| super::config_sized_to_cache(workload, cache_size)))
    }

    /// The `--config` file, loaded, if one was given.
    fn file_config(&self) -> Result<Option<Config>, String> {
        self.config
            .as_ref()
            .map(|path| Config::load(path).map_err(|e| format!("{}: {e}", path.display())))
            .transpose()
    }

    /// The `--policies` given, or `defaults`; an error names a policy not in `known`.
    fn policies(&self, defaults: &[&str], known: &[&str]) -> Result<Vec<String>, String> {
        if self.policies.is_empty() {
            return Ok(defaults.iter().map(|&name| name.to_owned()).collect());
        }
        match self
            .policies
            .iter()
            .find(|name| !known.contains(&name.as_str()))
        {
            Some(unknown) => Err(format!(
                "--policies: unknown policy {unknown:?} (known: {})",
                known.join(", ")
            )),
            None => Ok(self.policies.clone()),
        }
    }
}

/// Every policy the simulator knows: the proxy's and the reference caches.
fn simulated_policy_names() -> Vec<&'static str> {
    POLICY_NAMES
        .iter()
        .chain(&REFERENCE_NAMES)
        .copied()
        .collect()
}

/// `secondhit bench`: the real proxy per policy over loopback (or `--target`).
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// The workload: synthetic, or a trace.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// The policies compared and their settings.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Draw byte hit ratio and disk writes per policy into this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Drive an already running proxy at this URL (only client-side figures are reported):
    /// with --trace, the access log's own GET and HEAD requests, hosts included.
    #[arg(long)]
    pub target: Option<String>,
    /// With --target: requests per second, or `max` for as fast as the proxy answers
    /// [default: a --trace log's own pace; synthetic requests: max].
    #[arg(long, value_name = "R|max", value_parser = parse_rate, requires = "target")]
    pub rate: Option<Pace>,
    /// With --target and --trace: replay the log's own pace this many times faster.
    #[arg(long, requires = "trace", requires = "target", conflicts_with = "rate")]
    pub speed: Option<f64>,
    /// With --target: the Host of logged requests that name none (a common or combined
    /// log's) [default: the --target URL's host].
    #[arg(long, requires = "target")]
    pub host: Option<String>,
    /// With --target: the longest one request may take, its body included.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// `--rate`: `max`, or a number of requests per second above 0.
fn parse_rate(text: &str) -> Result<Pace, String> {
    match text.trim() {
        "max" => Ok(Pace::Max),
        number => match number.parse::<f64>() {
            Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(Pace::Rate(rate)),
            _ => Err(format!(
                "{text:?} is neither `max` nor a number of requests per second above 0"
            )),
        },
    }
}

/// Runs `secondhit bench`; returns the table to print.
pub fn bench(args: &BenchArgs) -> Result<String, String> {
    if let Some(target) = &args.target {
        return bench_target(args, target);
    }
    let policies = args.policy.policies(&POLICY_NAMES, &POLICY_NAMES)?;
    let workload =
        (args.workload.source(SyntheticSpec::default().rate).load()).map_err(|e| e.to_string())?;
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let cache_size = args.policy.cache_size().resolve(unique_bytes);
    let options = BenchOptions {
        cache_size: CacheSize::Bytes(cache_size),
        policies,
        drive: DriveOptions {
            concurrency: args.concurrency,
            progress: true,
        },
        config: args.policy.config(&workload, cache_size)?,
    };
    let report = runtime()?
        .block_on(super::run_bench(&workload, &options))
        .map_err(|e| e.to_string())?;
    write_outputs(&report, args.policy.json.as_ref(), args.plot.as_ref())?;
    Ok(report.to_table())
}

/// The async runtime the bench's HTTP runs use.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// `bench --target`: a --trace log's requests, or the synthetic workload's, sent to a
/// running proxy.
fn bench_target(args: &BenchArgs, target: &str) -> Result<String, String> {
    let log = match &args.workload.trace {
        Some(path) => requests_from_trace(path, args.workload.trace_format),
        None => (args.workload.source(SyntheticSpec::default().rate).load())
            .map(|workload| replay::from_workload(&workload)),
    }
    .map_err(|e| e.to_string())?;
    let pace = match (args.rate, args.speed) {
        (Some(pace), _) => pace,
        (None, Some(speed)) if speed.is_finite() && speed > 0.0 => Pace::Logged { speed },
        (None, Some(speed)) => return Err(format!("--speed {speed}: must be above 0")),
        (None, None) if args.workload.trace.is_some() => Pace::Logged { speed: 1.0 },
        (None, None) => Pace::Max,
    };
    let options = ReplayOptions {
        target: target.to_owned(),
        concurrency: args.concurrency,
        pace,
        host: args.host.clone(),
        timeout: args.timeout,
        progress: true,
    };
    let (row, summary) = runtime()?
        .block_on(replay::run(&log, &options))
        .map_err(|e| e.to_string())?;
    let report = Report {
        workload: log.name.clone(),
        cache_size_bytes: 0,
        malformed_lines: log.malformed_lines,
        policies: vec![row],
        replay: Some(summary),
    };
    write_outputs(&report, args.policy.json.as_ref(), args.plot.as_ref())?;
    let table = report.to_table();
    match report.policies.first() {
        // Its hit ratio and throughput would otherwise read as a result: 0% hits at a
        // high rate is what a 404 from every request looks like.
        Some(row) if row.requests > 0 && row.failed_requests == row.requests => {
            let hint = match args.workload.trace {
                Some(_) => {
                    "are --target and the hosts (the log's, or --host) the ones the proxy serves?"
                }
                None => {
                    "does its origin answer /obj/<id>/<size> paths, as the bench's synthetic origin does? (--trace replays your own log's requests)"
                }
            };
            Err(format!(
                "--target {target}: no request got a 2xx answer ({} of {} failed), so these \
                 figures measure nothing; {hint}\n{table}",
                row.failed_requests, row.requests
            ))
        }
        _ => Ok(table),
    }
}

/// `secondhit simulate`: the same policies and store index, no HTTP, no disk.
#[derive(Args, Debug, Clone)]
pub struct SimulateArgs {
    /// The workload: synthetic, or a trace.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// The policies compared and their settings.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Vary one setting of `second-hit` and print a row per value, best marked:
    /// `expected_urls=10000,100000`, `max_age=10m,1h` or `cache_size=1%,5%,10%`.
    #[arg(long)]
    pub sweep: Option<Sweep>,
    /// Sweep the cache size, the filter's generation (expected_urls, rotate) and max_age,
    /// print what second-hit saves against always at each size, and write a ready
    /// `[cache]` + `[admission]` config fragment with the reasons: to FILE, or after the report.
    /// The cache size is --cache-size when given, else chosen from the curve.
    #[arg(long, value_name = "FILE", num_args = 0..=1, conflicts_with = "sweep")]
    pub recommend: Option<Option<PathBuf>>,
    /// Draw byte hit ratio and disk writes against cache size (one line per policy) and
    /// the byte hit ratio over the trace's time, at --cache-size (or the size --recommend
    /// chose), into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write the tables and the picture as one self-contained HTML page (no script, no
    /// external file) to share with a team.
    #[arg(long, value_name = "FILE.html", conflicts_with = "sweep")]
    pub report: Option<PathBuf>,
    /// Synthetic: requests per second on the workload's clock (`max_age` runs on it).
    #[arg(long, default_value_t = SyntheticSpec::default().rate)]
    pub rate: f64,
}

/// Runs `secondhit simulate`; returns the table to print.
pub fn simulate(args: &SimulateArgs) -> Result<String, String> {
    let known = simulated_policy_names();
    // --recommend tunes second-hit against always: by default the reference caches would
    // only add a simulation per cache size each.
    let defaults: &[&str] = if args.recommend.is_some() {
        &POLICY_NAMES
    } else {
        &known
    };
    let policies = args.policy.policies(defaults, &known)?;
    let workload = (args.workload.source(args.rate).load()).map_err(|e| e.to_string())?;
    if let Some(out) = &args.recommend {
        return recommend(args, &policies, &workload, out.as_ref());
    }
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let cache_size = args.policy.cache_size();
    let config = args
        .policy
        .config(&workload, cache_size.resolve(unique_bytes))?;
    let size = cache_size.resolve(unique_bytes);
    // The curve and the picture only when drawn: they cost a simulation per size and policy.
    let drawn = if args.plot.is_some() || args.report.is_some() {
        let file = args.policy.file_config()?;
        let curve = recommend::curve(
            &workload,
            &policies,
            file.as_ref(),
            &recommend::curve_sizes(unique_bytes, Some(size)),
        )?;
        let svg = picture(&workload, &policies, &curve, size, &config)?;
        Some((curve, svg))
    } else {
        None
    };
    let text = match &args.sweep {
        Some(sweep) => {
            let rows = super::run_sweep(&workload, &config, cache_size, sweep)?;
            if let Some(path) = &args.policy.json {
                let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
                std::fs::write(path, text + "\n")
                    .map_err(|e| format!("--json {}: {e}", path.display()))?;
            }
            format!("workload: {}\n{}", workload.name, super::sweep_table(&rows))
        }
        None => {
            let report = super::run_simulation(&workload, &policies, &config, cache_size)?;
            write_outputs(&report, args.policy.json.as_ref(), None)?;
            if let (Some(path), Some((curve, svg))) = (&args.report, &drawn) {
                let page = html::Page {
                    workload: &workload.name,
                    unique_bytes,
                    curve,
                    svg,
                    run: Some(&report),
                    recommendation: None,
                };
                write_file("--report", path, &html::render(&page))?;
            }
            report.to_table()
        }
    };
    if let (Some(path), Some((_, svg))) = (&args.plot, &drawn) {
        write_file("--plot", path, svg)?;
    }
    Ok(text)
}

/// Where the fragment goes, after the report.
const DROP_IN: &str = "copy it into a directory your config file's `include` names (the \
                       package's: /etc/secondhit/conf.d/), where its keys replace the main \
                       file's";

/// `simulate --recommend [FILE]`: the report, and the fragment written to `out` or printed.
fn recommend(
    args: &SimulateArgs,
    policies: &[String],
    workload: &Workload,
    out: Option<&PathBuf>,
) -> Result<String, String> {
    let file = args.policy.file_config()?;
    let recommendation =
        recommend::recommend(workload, policies, file.as_ref(), args.policy.cache_size)?;
    if let Some(path) = &args.policy.json {
        let text = serde_json::to_string_pretty(&recommendation).map_err(|e| e.to_string())?;
        write_file("--json", path, &(text + "\n"))?;
    }
    if args.plot.is_some() || args.report.is_some() {
        let svg = picture(
            workload,
            policies,
            &recommendation.curve,
            recommendation.cache_size,
            &recommendation.config,
        )?;
        if let Some(path) = &args.plot {
            write_file("--plot", path, &svg)?;
        }
        if let Some(path) = &args.report {
            let page = html::Page {
                workload: &workload.name,
                unique_bytes: recommendation.trace.unique_bytes,
                curve: &recommendation.curve,
                svg: &svg,
                run: None,
                recommendation: Some(&recommendation),
            };
            write_file("--report", path, &html::render(&page))?;
        }
    }
    let mut text = recommendation.to_text();
    match out {
        Some(path) => {
            write_file("--recommend", path, &recommendation.fragment)?;
            text.push_str(&format!(
                "\nconfig fragment written to {}: {DROP_IN}\n",
                path.display()
            ));
        }
        None => {
            text.push_str(&format!(
                "\nTo use the config fragment below, {DROP_IN}.\nconfig fragment:\n\n"
            ));
            text.push_str(&recommendation.fragment);
        }
    }
    Ok(text)
}

/// Writes `text` to `path`; an error names the option that gave the path.
fn write_file(option: &str, path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{option} {}: {e}", path.display()))
}

/// The picture as SVG: `curve`, and each policy's hit ratio over time at `size` with `config`.
fn picture(
    workload: &Workload,
    policies: &[String],
    curve: &[Report],
    size: u64,
    config: &Config,
) -> Result<String, String> {
    let timelines = recommend::timelines(workload, policies, config, size)?;
    let (_, unique_bytes) = workload.unique_objects_and_bytes();
    let picture = Picture {
        curve,
        unique_bytes,
        chosen_size: size,
        setting: describe_admission(config),
        timelines: &timelines,
    };
    plot::render_svg(&picture).map_err(|e| format!("cannot draw the picture: {e}"))
}

/// `expected_urls=320, max_age=30m`: the admission settings a picture was drawn with.
fn describe_admission(config: &Config) -> String {
    let admission = &config.admission;
    let sizing = match admission.sizing {
        FilterSizing::ExpectedUrls(n) => format!("expected_urls={n}"),
        FilterSizing::Memory(bytes) => format!("memory={}", super::report::human_bytes(bytes)),
    };
    let rotate = match admission.rotate {
        RotateMode::Fill => "",
        RotateMode::Auto => ", rotate=auto",
    };
    format!(
        "{sizing}{rotate}, max_age={}",
        humantime::format_duration(admission.max_age)
    )
}

fn write_outputs(
    report: &Report,
    json: Option<&PathBuf>,
    plot: Option<&PathBuf>,
) -> Result<(), String> {
    if let Some(path) = json {
        report
            .write_json(path)
            .map_err(|e| format!("--json {}: {e}", path.display()))?;
    }
    if let Some(path) = plot {
        report
            .write_svg(path)
            .map_err(|e| format!("--plot {}: {e}", path.display()))?;
    }
    Ok(())
}
