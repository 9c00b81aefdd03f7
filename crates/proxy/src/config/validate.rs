//! The raw layer of config loading and its validation into the public types.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use http::header::CACHE_CONTROL;
use serde::Deserialize;

use super::{
    AccessFormat, AccessLog, AdmissionConfig, AdmissionPolicy, Balance, CacheConfig, Config,
    ConfigError, FilterSizing, Fsync, HostHeader, LogConfig, LogFormat, MAX_BODY_BUFFER_SIZE,
    MAX_OPEN_FILES, MAX_ORPHAN_FILLS, MAX_VERIFY_WHOLE_BELOW, MIN_GENERATION_AGE_SHARE,
    MaxObjectSize, Optimize, OriginConfig, RotateMode, ServerConfig, access_format,
};

mod pool;
mod purge;
mod server;
mod sites;
mod tls;
mod values;

use crate::header_names::CDN_CACHE_CONTROL;

use values::{
    RawSize, duration, invalid, parse_error, parse_size, positive, positive_duration, within,
};

/// Parses TOML text and validates it into a [`Config`]; the text may not `include`
/// others (only a file has a place its patterns are relative to: `include::load`).
pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
    let raw = read_raw(text)?;
    if raw
        .include
        .as_ref()
        .is_some_and(|patterns| !patterns.is_empty())
    {
        let reason = "is read only from a config file (secondhit check-config FILE)".to_owned();
        return Err(invalid("include", reason));
    }
    validate(raw)
}

/// Reads TOML text into the raw layer: an unknown key or a value of the wrong type is an
/// error naming the key and its line.
pub(super) fn read_raw(text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str(text).map_err(|e| parse_error(text, &e))
}

/// Validates the merged tables of a file and its fragments, each of which
/// [`read_raw`] has read already.
pub(super) fn parse_merged(merged: toml::Table) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string().trim_end().to_owned()))?;
    validate(raw)
}

// The raw layer: what serde reads. `Option` marks a key as absent so the
// default comes from one place.

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a table of sections")]
pub(super) struct RawConfig {
    /// The fragment files to merge over this one (`include::load`); not a setting.
    pub(super) include: Option<Vec<String>>,
    server: server::RawServer,
    origin: RawOrigin,
    cache: RawCache,
    admission: RawAdmission,
    log: RawLog,
    tags: purge::RawTags,
    purge: purge::RawPurge,
    site: Vec<sites::RawSite>,
    rule: Vec<sites::RawRule>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "an [origin] table")]
struct RawOrigin {
    url: Option<String>,
    ca_file: Option<String>,
    danger_accept_invalid_certs: Option<bool>,
    host_header: Option<HostHeader>,
    connect_timeout: Option<String>,
    read_timeout: Option<String>,
    first_byte_timeout: Option<String>,
    retry: Option<pool::RawRetry>,
    max_in_flight: Option<usize>,
    queue_timeout: Option<String>,
    body_buffer_size: Option<RawSize>,
    body_read_timeout: Option<String>,
    body_min_rate: Option<RawSize>,
    servers: Option<Vec<pool::RawServer>>,
    balance: Option<Balance>,
    max_fails: Option<u32>,
    fail_timeout: Option<String>,
    fail_statuses: Option<Vec<i64>>,
    health_check: Option<pool::RawHealthCheck>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [cache] table")]
struct RawCache {
    dir: Option<String>,
    max_size: Option<RawSize>,
    max_object_size: Option<RawSize>,
    min_free: Option<RawSize>,
    fsync: Option<RawFsync>,
    lock_timeout: Option<String>,
    verify_whole_below: Option<RawSize>,
    heuristic_max_age: Option<String>,
    targeted_field: Option<String>,
    strip_request_fields: Option<Vec<String>>,
    stale_if_unreachable: Option<String>,
    memory_size: Option<RawSize>,
    memory_max_object_size: Option<RawSize>,
    collapse_timeout: Option<String>,
    max_orphan_fills: Option<usize>,
    open_files: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "an [admission] table")]
struct RawAdmission {
    policy: Option<AdmissionPolicy>,
    expected_urls: Option<u64>,
    memory: Option<RawSize>,
    false_positive_rate: Option<f64>,
    max_age: Option<String>,
    rotate: Option<RotateMode>,
    min_generation_age: Option<String>,
    seed: Option<String>,
    snapshot_every: Option<String>,
    max_write_rate: Option<RawWriteRate>,
    auto_epoch: Option<String>,
    optimize: Option<Optimize>,
    estimate_budget: Option<String>,
}

/// `admission.max_write_rate` as written: a size a second, or a drive's rated writes.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = r#"a size a second ("20MiB") or { drive_writes_per_day = 1, device_size = "2TiB" }"#
)]
enum RawWriteRate {
    PerSecond(RawSize),
    Drive {
        drive_writes_per_day: f64,
        device_size: RawSize,
    },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [log] table")]
struct RawLog {
    level: Option<String>,
    format: Option<LogFormat>,
    access_log: Option<String>,
    access_format: Option<String>,
    trusted_proxies: Option<Vec<String>>,
}

/// Checks every key of `raw` once and builds the typed [`Config`].
fn validate(mut raw: RawConfig) -> Result<Config, ConfigError> {
    let d = Config::default();
    let unknown_host = raw.server.unknown_host.take();
    let unknown_host = sites::unknown_host(unknown_host, !raw.site.is_empty())?;
    let origin = validate_origin(raw.origin, d.origin)?;
    let admission = validate_admission(raw.admission, d.admission)?;
    Ok(Config {
        server: ServerConfig {
            unknown_host,
            ..server::validate_server(raw.server, d.server)?
        },
        sites: sites::validate_sites(raw.site, &origin, admission.policy)?,
        rules: sites::validate_rules("", raw.rule, admission.policy)?,
        origin,
        cache: validate_cache(raw.cache, d.cache)?,
        admission,
        log: validate_log(raw.log, d.log)?,
        tags: purge::validate_tags(raw.tags, d.tags)?,
        purge: purge::validate_purge(raw.purge)?,
    })
}

fn validate_origin(raw: RawOrigin, d: OriginConfig) -> Result<OriginConfig, ConfigError> {
    let pool = pool::validate_pool(
        pool::RawPool {
            url: raw.url,
            servers: raw.servers,
            balance: raw.balance,
            max_fails: raw.max_fails,
            fail_timeout: raw.fail_timeout,
            fail_statuses: raw.fail_statuses,
            health_check: raw.health_check,
        },
        &d,
    )?;
    let url = pool.url;
    let danger_accept_invalid_certs = raw
        .danger_accept_invalid_certs
        .unwrap_or(d.danger_accept_invalid_certs);
    let ca_file = tls::origin_tls(&url, raw.ca_file, danger_accept_invalid_certs)?.or(d.ca_file);
    // Zero is allowed: the body streams from its first byte (still under its timeout).
    let body_buffer_size = match raw.body_buffer_size {
        None => d.body_buffer_size,
        Some(size) => parse_size("origin.body_buffer_size", size)?,
    };
    if body_buffer_size > MAX_BODY_BUFFER_SIZE {
        let reason = format!(
            "{body_buffer_size} bytes is over the limit of 16MiB (every request with a body may hold this much)"
        );
        return Err(invalid("origin.body_buffer_size", reason));
    }
    Ok(OriginConfig {
        url,
        ca_file,
        danger_accept_invalid_certs,
        host_header: raw.host_header.unwrap_or(d.host_header),
        connect_timeout: positive_duration(
            "origin.connect_timeout",
            raw.connect_timeout,
            d.connect_timeout,
        )?,
        read_timeout: positive_duration("origin.read_timeout", raw.read_timeout, d.read_timeout)?,
        first_byte_timeout: positive_duration(
            "origin.first_byte_timeout",
            raw.first_byte_timeout,
            d.first_byte_timeout,
        )?,
        retry: match raw.retry {
            Some(retry) => pool::retry(retry, &d.retry)?,
            None => d.retry.clone(),
        },
        max_in_flight: positive("origin.max_in_flight", raw.max_in_flight, d.max_in_flight)?,
        // Zero is allowed: no queue, a 503 at once when every permit is taken.
        queue_timeout: duration("origin.queue_timeout", raw.queue_timeout, d.queue_timeout)?,
        body_buffer_size,
        body_read_timeout: positive_duration(
            "origin.body_read_timeout",
            raw.body_read_timeout,
            d.body_read_timeout,
        )?,
        // Zero is allowed: only a stall (`body_read_timeout`) is cut.
        body_min_rate: match raw.body_min_rate {
            None => d.body_min_rate,
            Some(rate) => parse_size("origin.body_min_rate", rate)?,
        },
        servers: pool.servers,
        balance: pool.balance,
        max_fails: pool.max_fails,
        fail_timeout: pool.fail_timeout,
        fail_statuses: pool.fail_statuses,
        health_check: pool.health_check,
    })
}

fn validate_cache(mut raw: RawCache, d: CacheConfig) -> Result<CacheConfig, ConfigError> {
    let dir = cache_dir(raw.dir.take(), &d.dir)?;
    let sizes = cache_sizes(&mut raw, &d)?;
    Ok(CacheConfig {
        dir,
        max_size: sizes.max_size,
        max_object_size: sizes.max_object_size,
        min_free: sizes.min_free,
        fsync: fsync(raw.fsync, d.fsync)?,
        // Zero is allowed: fail at once if another process holds the directory.
        lock_timeout: duration("cache.lock_timeout", raw.lock_timeout, d.lock_timeout)?,
        verify_whole_below: sizes.verify_whole_below,
        // Zero is allowed: no heuristic freshness at all.
        heuristic_max_age: duration(
            "cache.heuristic_max_age",
            raw.heuristic_max_age,
            d.heuristic_max_age,
        )?,
        targeted_field: raw.targeted_field.map(targeted_field).transpose()?,
        strip_request_fields: match raw.strip_request_fields {
            None => d.strip_request_fields,
            Some(names) => strip_request_fields(names)?,
        },
        // Zero is allowed: stale only within the response's own stale-if-error.
        stale_if_unreachable: duration(
            "cache.stale_if_unreachable",
            raw.stale_if_unreachable,
            d.stale_if_unreachable,
        )?,
        memory_size: sizes.memory_size,
        memory_max_object_size: sizes.memory_max_object_size,
        // Zero is allowed: every hit opens its file.
        open_files: within(
            "cache.open_files",
            raw.open_files.unwrap_or(d.open_files),
            0,
            MAX_OPEN_FILES,
        )?,
        // Zero is allowed: no collapsing.
        collapse_timeout: duration(
            "cache.collapse_timeout",
            raw.collapse_timeout,
            d.collapse_timeout,
        )?,
        // Zero is allowed: a fill ends with its client.
        max_orphan_fills: within(
            "cache.max_orphan_fills",
            raw.max_orphan_fills.unwrap_or(d.max_orphan_fills),
            0,
            MAX_ORPHAN_FILLS,
        )?,
    })
}

/// `cache.fsync` as written: `true`, `false`, or how often to sync.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawFsync {
    Flag(bool),
    Every(String),
}

/// `cache.fsync`: `default` when unset; an interval must be a positive duration.
fn fsync(raw: Option<RawFsync>, default: Fsync) -> Result<Fsync, ConfigError> {
    match raw {
        None => Ok(default),
        Some(RawFsync::Flag(true)) => Ok(Fsync::EachFill),
        Some(RawFsync::Flag(false)) => Ok(Fsync::Off),
        Some(RawFsync::Every(text)) => match humantime::parse_duration(&text) {
            Ok(every) if !every.is_zero() => Ok(Fsync::Every(every)),
            _ => Err(invalid(
                "cache.fsync",
                format!(
                    r#"{text:?} is neither true, false nor a positive duration (examples: "1s", "500ms")"#
                ),
            )),
        },
    }
}

/// `cache.dir`: `default` when unset; an empty path is refused.
fn cache_dir(raw: Option<String>, default: &Path) -> Result<PathBuf, ConfigError> {
    match raw {
        None => Ok(default.to_path_buf()),
        Some(text) if text.is_empty() => Err(invalid("cache.dir", "must not be empty".to_owned())),
        Some(text) => Ok(PathBuf::from(text)),
    }
}

/// The sizes of `[cache]`, validated.
struct CacheSizes {
    max_size: u64,
    max_object_size: MaxObjectSize,
    min_free: u64,
    verify_whole_below: u64,
    memory_size: u64,
    memory_max_object_size: u64,
}

/// Validates the sizes of `[cache]` (taking them out of `raw`; `d` holds the defaults):
/// the budget must hold the largest object, and the sizes read whole into memory stay
/// within [`MAX_VERIFY_WHOLE_BELOW`].
fn cache_sizes(raw: &mut RawCache, d: &CacheConfig) -> Result<CacheSizes, ConfigError> {
    let max_object_size = match raw.max_object_size.take() {
        None => d.max_object_size,
        Some(RawSize::Text(text)) if text == "auto" => MaxObjectSize::Auto,
        Some(raw) => {
            let key = "cache.max_object_size";
            MaxObjectSize::Bytes(positive(key, None, parse_size(key, raw)?)?)
        }
    };
    let max_size = size_or("cache.max_size", raw.max_size.take(), d.max_size)?;
    // An object the budget cannot hold is fetched, offered for storage and refused on
    // every request; a budget below the object limit is a mistake to name at start
    // (`"auto"` is a share of the budget, so always within it).
    if let Some(max_object_size) = max_object_size.explicit()
        && max_size < max_object_size
    {
        let reason = format!(
            "{max_size} bytes is smaller than cache.max_object_size ({max_object_size} bytes); \
             raise cache.max_size or lower cache.max_object_size"
        );
        return Err(invalid("cache.max_size", reason));
    }
    let verify_whole_below = read_whole(
        "cache.verify_whole_below",
        raw.verify_whole_below.take(),
        d.verify_whole_below,
        "bodies below it are held in memory whole on every hit",
    )?;
    let memory_max_object_size = read_whole(
        "cache.memory_max_object_size",
        raw.memory_max_object_size.take(),
        d.memory_max_object_size,
        "such a body is read whole before its first hit from disk is served",
    )?;
    // Zero is allowed: no memory tier.
    let memory_size = size_or("cache.memory_size", raw.memory_size.take(), d.memory_size)?;
    // Zero is allowed: no floor (a fill still needs room for itself).
    let min_free = size_or("cache.min_free", raw.min_free.take(), d.min_free)?;
    Ok(CacheSizes {
        max_size: positive("cache.max_size", None, max_size)?,
        max_object_size,
        min_free,
        verify_whole_below,
        memory_size,
        memory_max_object_size,
    })
}

/// The size at `key`: `default` when unset.
fn size_or(key: &'static str, raw: Option<RawSize>, default: u64) -> Result<u64, ConfigError> {
    match raw {
        None => Ok(default),
        Some(size) => parse_size(key, size),
    }
}

/// A size that bounds a body read whole into memory before its hit is served: at most
/// [`MAX_VERIFY_WHOLE_BELOW`]; `why` says what it holds in memory.
fn read_whole(
    key: &'static str,
    raw: Option<RawSize>,
    default: u64,
    why: &str,
) -> Result<u64, ConfigError> {
    let value = size_or(key, raw, default)?;
    if value > MAX_VERIFY_WHOLE_BELOW {
        let reason = format!("{value} bytes is over the limit of 16MiB ({why})");
        return Err(invalid(key, reason));
    }
    Ok(value)
}

/// `cache.targeted_field`: a valid field name (RFC 9110 §5.1), lower-cased, that is not
/// one of the fields it takes precedence over.
fn targeted_field(name: String) -> Result<HeaderName, ConfigError> {
    const KEY: &str = "cache.targeted_field";
    let field = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| invalid(KEY, format!("{name:?} is not a valid field name")))?;
    if field == CACHE_CONTROL || field == CDN_CACHE_CONTROL {
        let reason = format!("{name:?} is a field the targeted field takes precedence over");
        return Err(invalid(KEY, reason));
    }
    Ok(field)
}

/// `cache.strip_request_fields`: valid field names (RFC 9110 §5.1), lower-cased, each once.
fn strip_request_fields(names: Vec<String>) -> Result<Arc<[HeaderName]>, ConfigError> {
    let mut fields: Vec<HeaderName> = Vec::with_capacity(names.len());
    for name in names {
        let field = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            invalid(
                "cache.strip_request_fields",
                format!("{name:?} is not a valid field name"),
            )
        })?;
        if !fields.contains(&field) {
            fields.push(field);
        }
    }
    Ok(fields.into())
}

fn validate_admission(
    raw: RawAdmission,
    d: AdmissionConfig,
) -> Result<AdmissionConfig, ConfigError> {
    let policy = raw.policy.unwrap_or(d.policy);
    let rotate = raw.rotate.unwrap_or(d.rotate);
    let sizing = match (raw.expected_urls, raw.memory) {
        // Both keys size the same filters; silently preferring one would hide a mistake.
        (Some(_), Some(_)) => {
            let reason = "set together with admission.expected_urls; set only one of the two (memory sizes the pair from a byte budget, expected_urls from a key count)";
            return Err(invalid("admission.memory", reason.to_owned()));
        }
        (Some(n), None) => {
            FilterSizing::ExpectedUrls(positive("admission.expected_urls", None, n)?)
        }
        (None, Some(size)) => FilterSizing::Memory(positive(
            "admission.memory",
            None,
            parse_size("admission.memory", size)?,
        )?),
        (None, None) => d.sizing,
    };
    let false_positive_rate = raw.false_positive_rate.unwrap_or(d.false_positive_rate);
    // Written so that NaN fails too; infinities fall outside the range.
    if !(false_positive_rate > 0.0 && false_positive_rate < 1.0) {
        let reason =
            format!("{false_positive_rate} must be strictly between 0 and 1 (example: 0.01)");
        return Err(invalid("admission.false_positive_rate", reason));
    }
    let max_age = positive_duration("admission.max_age", raw.max_age, d.max_age)?;
    let min_generation_age = min_generation_age(raw.min_generation_age, max_age)?;
    Ok(AdmissionConfig {
        policy,
        sizing,
        false_positive_rate,
        max_age,
        rotate,
        min_generation_age,
        seed: raw.seed.filter(|s| !s.is_empty()).or(d.seed),
        snapshot_every: positive_duration(
            "admission.snapshot_every",
            raw.snapshot_every,
            d.snapshot_every,
        )?,
        max_write_rate: raw.max_write_rate.map(write_rate).transpose()?,
        auto_epoch: positive_duration("admission.auto_epoch", raw.auto_epoch, d.auto_epoch)?,
        optimize: raw.optimize.unwrap_or(d.optimize),
        estimate_budget: duration(
            "admission.estimate_budget",
            raw.estimate_budget,
            d.estimate_budget,
        )?,
    })
}

/// `admission.max_write_rate` in bytes a second: at least one, since a budget of none
/// would store nothing (leave the key out for no cap; `policy = "never"` is not a policy).
fn write_rate(raw: RawWriteRate) -> Result<u64, ConfigError> {
    const KEY: &str = "admission.max_write_rate";
    let rate = match raw {
        RawWriteRate::PerSecond(RawSize::Text(text)) => {
            let size = text.strip_suffix("/s").unwrap_or(&text).trim().to_owned();
            parse_size(KEY, RawSize::Text(size))?
        }
        RawWriteRate::PerSecond(size) => parse_size(KEY, size)?,
        RawWriteRate::Drive {
            drive_writes_per_day,
            device_size,
        } => {
            if !(drive_writes_per_day > 0.0 && drive_writes_per_day.is_finite()) {
                let reason = format!(
                    "drive_writes_per_day = {drive_writes_per_day} must be a positive number (example: 1)"
                );
                return Err(invalid(KEY, reason));
            }
            let device = parse_size(KEY, device_size)? as f64;
            (device * drive_writes_per_day / 86_400.0) as u64
        }
    };
    if rate == 0 {
        let reason = "must allow at least one byte a second; leave it out for no cap".to_owned();
        return Err(invalid(KEY, reason));
    }
    Ok(rate)
}

/// `admission.min_generation_age`: a duration no longer than `max_age` ("0s" turns the
/// hold off); absent, `max_age / MIN_GENERATION_AGE_SHARE`, so that it follows a changed
/// `max_age` rather than exceeding it.
fn min_generation_age(raw: Option<String>, max_age: Duration) -> Result<Duration, ConfigError> {
    const KEY: &str = "admission.min_generation_age";
    let default = max_age / MIN_GENERATION_AGE_SHARE;
    let value = duration(KEY, raw, default)?;
    if value > max_age {
        let reason = format!(
            "{} must not exceed admission.max_age ({}): a generation that old has already ended",
            humantime::format_duration(value),
            humantime::format_duration(max_age)
        );
        return Err(invalid(KEY, reason));
    }
    Ok(value)
}

fn validate_log(raw: RawLog, d: LogConfig) -> Result<LogConfig, ConfigError> {
    let access_log = match raw.access_log.as_deref() {
        None => d.access_log,
        Some("stdout") => AccessLog::Stdout,
        Some("off") => AccessLog::Off,
        // Relative paths would depend on the directory the service happens to start in.
        Some(path) if Path::new(path).is_absolute() => AccessLog::File(PathBuf::from(path)),
        Some(other) => {
            let reason = format!(r#"{other:?} must be "stdout", "off" or an absolute file path"#);
            return Err(invalid("log.access_log", reason));
        }
    };
    Ok(LogConfig {
        level: log_level(raw.level, d.level)?,
        format: raw.format.unwrap_or(d.format),
        access_log,
        access_format: access_format(raw.access_format, d.access_format)?,
        trusted_proxies: trusted_proxies(raw.trusted_proxies, d.trusted_proxies)?,
    })
}

/// `log.access_format`: `"combined"`, `"json"`, or a template of `$variables`.
fn access_format(raw: Option<String>, d: AccessFormat) -> Result<AccessFormat, ConfigError> {
    const KEY: &str = "log.access_format";
    match raw {
        Some(template) if template.contains('$') => access_format::parse(&template)
            .map(AccessFormat::Template)
            .map_err(|reason| invalid(KEY, reason)),
        None => Ok(d),
        Some(name) if name == "combined" => Ok(AccessFormat::Combined),
        Some(name) if name == "json" => Ok(AccessFormat::Json),
        Some(_) => {
            let reason = "must be \"combined\", \"json\" or a template of $variables \
                          such as \"$remote_addr $host \\\"$request\\\" $status\"";
            Err(invalid(KEY, reason.to_owned()))
        }
    }
}

/// `log.level`: one of tracing's levels, in any case (a filter directive such as
/// `"info,hyper=warn"` goes in `RUST_LOG`).
fn log_level(raw: Option<String>, d: String) -> Result<String, ConfigError> {
    const LEVELS: [&str; 5] = ["trace", "debug", "info", "warn", "error"];
    let Some(level) = raw.map(|level| level.to_ascii_lowercase()) else {
        return Ok(d);
    };
    if LEVELS.contains(&level.as_str()) {
        return Ok(level);
    }
    let names: Vec<String> = LEVELS.iter().map(|name| format!("{name:?}")).collect();
    let reason = format!("{level:?} is not one of {}", names.join(", "));
    Err(invalid("log.level", reason))
}

/// `log.trusted_proxies`: addresses or CIDR networks (`"10.0.0.0/8"`, `"::1"`).
fn trusted_proxies(
    raw: Option<Vec<String>>,
    d: Vec<ipnet::IpNet>,
) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    let Some(raw) = raw else { return Ok(d) };
    raw.iter()
        .map(|text| {
            let parsed = text
                .parse::<ipnet::IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
            parsed.map_err(|_| {
                let reason =
                    format!("{text:?} is not an IP address or a network such as \"10.0.0.0/8\"");
                invalid("log.trusted_proxies", reason)
            })
        })
        .collect()
}
