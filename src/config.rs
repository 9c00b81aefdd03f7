//! TOML → a validated, typed [`Config`].
//!
//! Loading happens in two steps. First serde reads the file into private
//! `Raw*` structs whose fields are all `Option`s (so every key is optional)
//! and which deny unknown keys; a TOML error is reported with the dotted key
//! it points at. Then [`validate`] checks every key once, fills in defaults
//! from the `Default` impls (the single source of truth for them) and builds
//! the public types, so the rest of the crate can trust the values without
//! re-checking. Every error names the dotted key (`cache.max_object_size`)
//! and the rule broken.
//!
//! Keys from the schema whose feature is not built yet (`server.admin_listen`,
//! `cache.max_size`, ...) are read, never ignored: their presence is a
//! [`ConfigError::NotSupported`], so nobody believes a setting took effect.
//!
//! Sizes are strings parsed by `bytesize` ("512KiB", "10GiB"; note "KB" is
//! 1000 bytes and "KiB" 1024) or a TOML integer number of bytes; durations are
//! strings parsed by `humantime` ("500ms", "10s", "1h").

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use serde::de::{self, IgnoredAny, Visitor};

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// `[server]`: the client-facing listener.
    pub server: ServerConfig,
    /// `[origin]`: the upstream that misses are fetched from.
    pub origin: OriginConfig,
    /// `[cache]`: the disk store.
    pub cache: CacheConfig,
    /// `[admission]`: which misses are written to disk.
    pub admission: AdmissionConfig,
    /// `[log]`: diagnostics and access log.
    pub log: LogConfig,
}

/// `[server]`: the client-facing listener.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Address to accept clients on.
    pub listen: SocketAddr,
    /// Open client connections allowed at once (> 0).
    pub max_connections: usize,
    /// Time allowed for a client to send the request head (> 0).
    pub header_read_timeout: Duration,
    /// Grace period for in-flight requests on shutdown (zero allowed).
    pub shutdown_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// `[origin]`: the upstream that misses are fetched from.
#[derive(Debug, Clone, PartialEq)]
pub struct OriginConfig {
    /// Absolute `http://` URI with a host and no path or query.
    pub url: Uri,
    /// Which `Host` header the origin receives.
    pub host_header: HostHeader,
    /// Time allowed to open a connection to the origin (> 0).
    pub connect_timeout: Duration,
    /// Longest gap allowed between bytes of a response, not its total time (> 0).
    pub read_timeout: Duration,
    /// Origin requests allowed in flight at once (> 0).
    pub max_in_flight: usize,
}

impl Default for OriginConfig {
    fn default() -> Self {
        Self {
            url: Uri::from_static("http://127.0.0.1:8081"),
            host_header: HostHeader::Client,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(30),
            max_in_flight: 1024,
        }
    }
}

/// Which `Host` header is sent to the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostHeader {
    /// Forward the client's `Host` (`"client"`).
    Client,
    /// Send the host of `origin.url` (`"origin"`).
    Origin,
}

/// `[cache]`: the disk store.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    /// Directory holding objects, fills in progress and filter state (non-empty).
    pub dir: PathBuf,
    /// Largest body, in bytes, that is written to disk (> 0).
    pub max_object_size: u64,
    /// Whether a fill is fsynced before it is renamed into place.
    pub fsync: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("/var/cache/secondhit"),
            max_object_size: 256 * 1024 * 1024,
            fsync: true,
        }
    }
}

/// `[admission]`: which misses are written to disk.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionConfig {
    /// The admission policy.
    pub policy: AdmissionPolicy,
    /// How the Bloom filter pair is sized.
    pub sizing: FilterSizing,
    /// Target false-positive rate of one filter, strictly inside (0, 1).
    pub false_positive_rate: f64,
    /// A generation rotates at the latest after this long (> 0).
    pub max_age: Duration,
    /// Filter hash key; `None` means generate one and keep it in `cache.dir`.
    pub seed: Option<String>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            policy: AdmissionPolicy::SecondHit,
            sizing: FilterSizing::ExpectedUrls(1_000_000),
            false_positive_rate: 0.01,
            max_age: Duration::from_secs(3600),
            seed: None,
        }
    }
}

/// The admission policy (`admission.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionPolicy {
    /// Store a response only when its key was seen before (`"second-hit"`).
    SecondHit,
    /// Store every storable response (`"always"`).
    Always,
}

impl AdmissionPolicy {
    /// The name used in the config file, headers and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::SecondHit => "second-hit",
            Self::Always => "always",
        }
    }
}

/// How the Bloom filter pair is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSizing {
    /// New keys one generation records before it rotates (`admission.expected_urls`).
    ExpectedUrls(u64),
    /// Bytes for the pair of filters (`admission.memory`); the generation size follows.
    Memory(u64),
}

/// `[log]`: diagnostics and access log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// One of `trace`, `debug`, `info`, `warn`, `error` (lowercase).
    pub level: String,
    /// Output format of the diagnostic log.
    pub format: LogFormat,
    /// Where access-log lines go.
    pub access_log: AccessLog,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".to_owned(),
            format: LogFormat::Text,
            access_log: AccessLog::Stdout,
        }
    }
}

/// Output format of the diagnostic log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (`"text"`).
    Text,
    /// One JSON object per line (`"json"`).
    Json,
}

/// Where access-log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLog {
    /// To standard output (`"stdout"`).
    Stdout,
    /// Not written (`"off"`).
    Off,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Not valid TOML, an unknown key, or a value of the wrong type; names the
    /// dotted key and the line when toml reports where.
    #[error("{0}")]
    Parse(String),
    /// A value breaks a rule.
    #[error("{key}: {reason}")]
    Invalid {
        /// Dotted key, e.g. `cache.max_object_size`.
        key: &'static str,
        /// The rule broken, with the offending value.
        reason: String,
    },
    /// A key or value of the schema whose feature is not built yet.
    #[error("{key}: not supported yet ({what})")]
    NotSupported {
        /// Dotted key, e.g. `server.admin_listen`.
        key: &'static str,
        /// What is missing and what to do instead.
        what: String,
    },
}

impl Config {
    /// Reads and validates the TOML file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config = Self::from_toml_str(&text)?;
        tracing::debug!(path = %path.display(), "config loaded");
        Ok(config)
    }

    /// Parses and validates TOML text; an empty text gives [`Config::default`].
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| parse_error(text, &e))?;
        validate(raw)
    }
}

// The raw layer: what serde reads. `Option` marks a key as absent so the
// default comes from one place; `IgnoredAny` accepts any value of a key whose
// feature is not built, so its presence alone can be reported.

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a table of sections")]
struct RawConfig {
    server: RawServer,
    origin: RawOrigin,
    cache: RawCache,
    admission: RawAdmission,
    log: RawLog,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [server] table")]
struct RawServer {
    listen: Option<String>,
    admin_listen: Option<IgnoredAny>,
    max_connections: Option<usize>,
    header_read_timeout: Option<String>,
    idle_timeout: Option<IgnoredAny>,
    shutdown_timeout: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "an [origin] table")]
struct RawOrigin {
    url: Option<String>,
    host_header: Option<String>,
    connect_timeout: Option<String>,
    read_timeout: Option<String>,
    max_in_flight: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [cache] table")]
struct RawCache {
    dir: Option<String>,
    max_size: Option<IgnoredAny>,
    max_object_size: Option<RawSize>,
    min_free: Option<IgnoredAny>,
    fsync: Option<bool>,
    lock_timeout: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "an [admission] table")]
struct RawAdmission {
    policy: Option<String>,
    expected_urls: Option<u64>,
    memory: Option<RawSize>,
    false_positive_rate: Option<f64>,
    max_age: Option<String>,
    rotate: Option<String>,
    seed: Option<String>,
    snapshot_every: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [log] table")]
struct RawLog {
    level: Option<String>,
    format: Option<String>,
    access_log: Option<String>,
}

/// A size as written: a TOML integer of bytes, or a string for `bytesize`.
/// The string is parsed during validation, so its error can use our wording.
enum RawSize {
    Bytes(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = RawSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a size such as "512KiB" or a whole number of bytes"#)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawSize, E> {
                Ok(RawSize::Bytes(v))
            }
            // toml hands every integer over as i64; a negative one is refused here.
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawSize, E> {
                u64::try_from(v)
                    .map(RawSize::Bytes)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawSize, E> {
                Ok(RawSize::Text(v.to_owned()))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// Checks every key of `raw` once and builds the typed [`Config`].
fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
    let d = Config::default();
    Ok(Config {
        server: validate_server(raw.server, d.server)?,
        origin: validate_origin(raw.origin, d.origin)?,
        cache: validate_cache(raw.cache, d.cache)?,
        admission: validate_admission(raw.admission, d.admission)?,
        log: validate_log(raw.log, d.log)?,
    })
}

fn validate_server(raw: RawServer, d: ServerConfig) -> Result<ServerConfig, ConfigError> {
    not_built(
        "server.admin_listen",
        &raw.admin_listen,
        "the admin listener",
    )?;
    not_built(
        "server.idle_timeout",
        &raw.idle_timeout,
        "the keep-alive idle timeout",
    )?;
    let listen = match raw.listen {
        None => d.listen,
        Some(text) => text.parse().map_err(|_| {
            let example = r#"(example: "127.0.0.1:8080")"#;
            invalid(
                "server.listen",
                format!("{text:?} is not a socket address {example}"),
            )
        })?,
    };
    Ok(ServerConfig {
        listen,
        max_connections: positive(
            "server.max_connections",
            raw.max_connections,
            d.max_connections,
        )?,
        header_read_timeout: positive_duration(
            "server.header_read_timeout",
            raw.header_read_timeout,
            d.header_read_timeout,
        )?,
        // Zero is allowed: it means "stop at once" on shutdown.
        shutdown_timeout: duration(
            "server.shutdown_timeout",
            raw.shutdown_timeout,
            d.shutdown_timeout,
        )?,
    })
}

fn validate_origin(raw: RawOrigin, d: OriginConfig) -> Result<OriginConfig, ConfigError> {
    let url = match raw.url {
        None => d.url,
        Some(text) => origin_url(&text)?,
    };
    let host_header = [
        ("client", HostHeader::Client),
        ("origin", HostHeader::Origin),
    ];
    Ok(OriginConfig {
        url,
        host_header: choice(
            "origin.host_header",
            raw.host_header,
            d.host_header,
            &host_header,
        )?,
        connect_timeout: positive_duration(
            "origin.connect_timeout",
            raw.connect_timeout,
            d.connect_timeout,
        )?,
        read_timeout: positive_duration("origin.read_timeout", raw.read_timeout, d.read_timeout)?,
        max_in_flight: positive("origin.max_in_flight", raw.max_in_flight, d.max_in_flight)?,
    })
}

/// `origin.url` must be `http://host[:port]` with at most a "/" path, because
/// the request path is appended to it unchanged.
fn origin_url(text: &str) -> Result<Uri, ConfigError> {
    const KEY: &str = "origin.url";
    let bad = |rule: &str| invalid(KEY, format!("{text:?} {rule}"));
    let uri: Uri = text
        .parse()
        .map_err(|e| bad(&format!("is not a URI ({e})")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(ConfigError::NotSupported {
                key: KEY,
                what: "TLS to the origin is not built; use an http:// origin".to_owned(),
            });
        }
        Some(other) => {
            return Err(bad(&format!(
                "has scheme {other:?}; only http:// is supported"
            )));
        }
        None => {
            return Err(bad(
                r#"is not an absolute http:// URL (example: "http://127.0.0.1:8081")"#,
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if !matches!(uri.path(), "" | "/") {
        return Err(bad("has a path; give only scheme, host and port"));
    }
    if uri.query().is_some() {
        return Err(bad("has a query; give only scheme, host and port"));
    }
    Ok(uri)
}

fn validate_cache(raw: RawCache, d: CacheConfig) -> Result<CacheConfig, ConfigError> {
    // The byte budget, free-space floor and lock file land with the disk store.
    not_built("cache.max_size", &raw.max_size, "the byte budget")?;
    not_built("cache.min_free", &raw.min_free, "the free-space floor")?;
    not_built(
        "cache.lock_timeout",
        &raw.lock_timeout,
        "the cache directory lock",
    )?;
    let dir = match raw.dir {
        None => d.dir,
        Some(text) if text.is_empty() => {
            return Err(invalid("cache.dir", "must not be empty".to_owned()));
        }
        Some(text) => PathBuf::from(text),
    };
    let max_object_size = match raw.max_object_size {
        None => d.max_object_size,
        Some(size) => parse_size("cache.max_object_size", size)?,
    };
    Ok(CacheConfig {
        dir,
        max_object_size: positive("cache.max_object_size", None, max_object_size)?,
        fsync: raw.fsync.unwrap_or(d.fsync),
    })
}

fn validate_admission(
    raw: RawAdmission,
    d: AdmissionConfig,
) -> Result<AdmissionConfig, ConfigError> {
    not_built(
        "admission.snapshot_every",
        &raw.snapshot_every,
        "filter persistence",
    )?;
    let shadow = r#"the "shadow" policy is not built; use "second-hit" or "always""#;
    not_built_value("admission.policy", raw.policy.as_deref(), "shadow", shadow)?;
    let policies = [
        ("second-hit", AdmissionPolicy::SecondHit),
        ("always", AdmissionPolicy::Always),
    ];
    let policy = choice("admission.policy", raw.policy, d.policy, &policies)?;
    let auto = r#"rotation sized to the cached objects is not built; use "fill""#;
    not_built_value("admission.rotate", raw.rotate.as_deref(), "auto", auto)?;
    // "fill" is the only rotation built, so there is nothing to store.
    choice("admission.rotate", raw.rotate, (), &[("fill", ())])?;
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
    Ok(AdmissionConfig {
        policy,
        sizing,
        false_positive_rate,
        max_age: positive_duration("admission.max_age", raw.max_age, d.max_age)?,
        seed: raw.seed.filter(|s| !s.is_empty()).or(d.seed),
    })
}

fn validate_log(raw: RawLog, d: LogConfig) -> Result<LogConfig, ConfigError> {
    let levels = ["trace", "debug", "info", "warn", "error"].map(|l| (l, l.to_owned()));
    let level = raw.level.map(|l| l.to_ascii_lowercase());
    let formats = [("text", LogFormat::Text), ("json", LogFormat::Json)];
    // Any other value would be a file path, which the schema plans for.
    if let Some(path) = raw
        .access_log
        .as_deref()
        .filter(|v| !matches!(*v, "stdout" | "off"))
    {
        return Err(ConfigError::NotSupported {
            key: "log.access_log",
            what: format!(
                r#"writing the access log to {path:?} is not built; use "stdout" or "off""#
            ),
        });
    }
    let outputs = [("stdout", AccessLog::Stdout), ("off", AccessLog::Off)];
    Ok(LogConfig {
        level: choice("log.level", level, d.level, &levels)?,
        format: choice("log.format", raw.format, d.format, &formats)?,
        access_log: choice("log.access_log", raw.access_log, d.access_log, &outputs)?,
    })
}

fn invalid(key: &'static str, reason: String) -> ConfigError {
    ConfigError::Invalid { key, reason }
}

/// Rejects the presence of a schema key whose `feature` is not built yet.
fn not_built(
    key: &'static str,
    value: &Option<IgnoredAny>,
    feature: &str,
) -> Result<(), ConfigError> {
    match value {
        Some(_) => Err(ConfigError::NotSupported {
            key,
            what: format!("{feature} is not built; remove the key"),
        }),
        None => Ok(()),
    }
}

/// Rejects the one planned value `unbuilt` of `key` whose feature is not built yet.
fn not_built_value(
    key: &'static str,
    value: Option<&str>,
    unbuilt: &str,
    what: &str,
) -> Result<(), ConfigError> {
    match value {
        Some(v) if v == unbuilt => Err(ConfigError::NotSupported {
            key,
            what: what.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Maps the word given for `key` to its value, or the default when absent.
fn choice<T: Clone>(
    key: &'static str,
    raw: Option<String>,
    default: T,
    choices: &[(&str, T)],
) -> Result<T, ConfigError> {
    let Some(word) = raw else { return Ok(default) };
    match choices.iter().find(|(name, _)| *name == word) {
        Some((_, value)) => Ok(value.clone()),
        None => {
            let names: Vec<String> = choices
                .iter()
                .map(|(name, _)| format!("{name:?}"))
                .collect();
            Err(invalid(
                key,
                format!("{word:?} is not one of {}", names.join(", ")),
            ))
        }
    }
}

/// The value given (or the default), rejecting zero for keys that must be positive.
fn positive<T: Default + PartialEq>(
    key: &'static str,
    raw: Option<T>,
    default: T,
) -> Result<T, ConfigError> {
    let value = raw.unwrap_or(default);
    if value == T::default() {
        return Err(invalid(key, "must be greater than zero".to_owned()));
    }
    Ok(value)
}

fn duration(
    key: &'static str,
    raw: Option<String>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(text) = raw else { return Ok(default) };
    humantime::parse_duration(&text).map_err(|_| {
        invalid(
            key,
            format!(r#"{text:?} is not a duration (examples: "500ms", "10s", "1h")"#),
        )
    })
}

fn positive_duration(
    key: &'static str,
    raw: Option<String>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    positive(key, None, duration(key, raw, default)?)
}

fn parse_size(key: &'static str, size: RawSize) -> Result<u64, ConfigError> {
    match size {
        RawSize::Bytes(n) => Ok(n),
        RawSize::Text(text) => text
            .parse::<bytesize::ByteSize>()
            .map(|b| b.as_u64())
            .map_err(|_| {
                invalid(
                    key,
                    format!(r#"{text:?} is not a size (examples: "512KiB", "10GiB")"#),
                )
            }),
    }
}

/// Turns a toml error into [`ConfigError::Parse`], naming the dotted key the
/// error's span falls in (toml's own message names only the last segment).
fn parse_error(text: &str, err: &toml::de::Error) -> ConfigError {
    let Some(pos) = err.span().map(|span| span.start) else {
        return ConfigError::Parse(err.to_string().trim_end().to_owned());
    };
    let Some(key) = key_at(text, pos) else {
        // A syntax error: toml's message already shows the line.
        return ConfigError::Parse(err.to_string().trim_end().to_owned());
    };
    let line = text.bytes().take(pos).filter(|&b| b == b'\n').count() + 1;
    ConfigError::Parse(format!("{key}: {} (line {line})", err.message().trim_end()))
}

/// The dotted key (`section.key`, or just `section`) whose key or value
/// covers byte offset `pos`; `None` if the text does not parse as TOML.
fn key_at(text: &str, pos: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    for (section, value) in doc.get_ref() {
        if let toml::de::DeValue::Table(table) = value.get_ref() {
            for (key, inner) in table {
                if key.span().contains(&pos) || inner.span().contains(&pos) {
                    return Some(format!("{}.{}", section.get_ref(), key.get_ref()));
                }
            }
        }
        if section.span().contains(&pos) || value.span().contains(&pos) {
            return Some(section.get_ref().to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        match Config::from_toml_str(text) {
            Ok(config) => panic!("accepted {text:?} as {config:?}"),
            Err(e) => e,
        }
    }

    fn kind(e: &ConfigError) -> &'static str {
        match e {
            ConfigError::Read { .. } => "read",
            ConfigError::Parse(_) => "parse",
            ConfigError::Invalid { .. } => "invalid",
            ConfigError::NotSupported { .. } => "not-supported",
        }
    }

    #[test]
    fn empty_text_gives_the_defaults() {
        let config = Config::from_toml_str("").unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.server.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(config.origin.url, "http://127.0.0.1:8081");
        assert_eq!(config.cache.max_object_size, 268_435_456);
        assert_eq!(
            config.admission.sizing,
            FilterSizing::ExpectedUrls(1_000_000)
        );
        assert_eq!(config.admission.max_age, Duration::from_secs(3600));
        assert_eq!(config.admission.policy.as_str(), "second-hit");
        // Empty sections are fine too.
        let sections = "[server]\n[origin]\n[cache]\n[admission]\n[log]\n";
        assert_eq!(Config::from_toml_str(sections).unwrap(), Config::default());
    }

    #[test]
    fn example_file_loads_and_matches_the_defaults() {
        let config = Config::from_toml_str(include_str!("../config/secondhit.toml")).unwrap();
        let mut expected = Config::default();
        expected.cache.dir = PathBuf::from("/tmp/secondhit-cache");
        assert_eq!(config, expected);
    }

    const FULL: &str = r#"
        [server]
        listen = "0.0.0.0:3128"
        max_connections = 50
        header_read_timeout = "500ms"
        shutdown_timeout = "0s"
        [origin]
        url = "http://origin.example:8000/"
        host_header = "origin"
        connect_timeout = "1s"
        read_timeout = "2m"
        max_in_flight = 7
        [cache]
        dir = "/srv/cache"
        max_object_size = "4MiB"
        fsync = false
        [admission]
        policy = "always"
        expected_urls = 5000
        false_positive_rate = 0.001
        max_age = "10m"
        rotate = "fill"
        seed = "s3cret"
        [log]
        level = "WARN"
        format = "json"
        access_log = "off"
    "#;

    #[test]
    fn full_file_from_disk_gives_typed_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secondhit.toml");
        std::fs::write(&path, FULL).unwrap();
        let c = Config::load(&path).unwrap();
        assert_eq!(c.server.listen, SocketAddr::from(([0, 0, 0, 0], 3128)));
        assert_eq!(c.server.max_connections, 50);
        assert_eq!(c.server.header_read_timeout, Duration::from_millis(500));
        assert_eq!(c.server.shutdown_timeout, Duration::ZERO);
        assert_eq!(c.origin.url.host(), Some("origin.example"));
        assert_eq!(c.origin.url.port_u16(), Some(8000));
        assert_eq!(c.origin.host_header, HostHeader::Origin);
        assert_eq!(c.origin.connect_timeout, Duration::from_secs(1));
        assert_eq!(c.origin.read_timeout, Duration::from_secs(120));
        assert_eq!(c.origin.max_in_flight, 7);
        assert_eq!(c.cache.dir, PathBuf::from("/srv/cache"));
        assert_eq!(c.cache.max_object_size, 4 * 1024 * 1024);
        assert!(!c.cache.fsync);
        assert_eq!(c.admission.policy, AdmissionPolicy::Always);
        assert_eq!(c.admission.policy.as_str(), "always");
        assert_eq!(c.admission.sizing, FilterSizing::ExpectedUrls(5000));
        assert_eq!(c.admission.false_positive_rate, 0.001);
        assert_eq!(c.admission.max_age, Duration::from_secs(600));
        assert_eq!(c.admission.seed.as_deref(), Some("s3cret"));
        assert_eq!(c.log.level, "warn");
        assert_eq!(c.log.format, LogFormat::Json);
        assert_eq!(c.log.access_log, AccessLog::Off);
    }

    #[test]
    fn sizes_accept_units_and_plain_integers() {
        let c = Config::from_toml_str(
            "[cache]\nmax_object_size = 1000\n[admission]\nmemory = \"4MiB\"",
        )
        .unwrap();
        assert_eq!(c.cache.max_object_size, 1000);
        assert_eq!(c.admission.sizing, FilterSizing::Memory(4 * 1024 * 1024));
        let c = Config::from_toml_str(
            "[cache]\nmax_object_size = \"512KiB\"\n[admission]\nmemory = 64",
        )
        .unwrap();
        assert_eq!(c.cache.max_object_size, 512 * 1024);
        assert_eq!(c.admission.sizing, FilterSizing::Memory(64));
        let c = Config::from_toml_str("[admission]\nseed = \"\"").unwrap();
        assert_eq!(c.admission.seed, None);
    }

    #[test]
    fn missing_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.toml");
        let e = Config::load(&path).unwrap_err();
        assert_eq!(kind(&e), "read");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let e = err("[server]\nlisten = \n");
        assert_eq!(kind(&e), "parse");
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn exact_messages() {
        let e = err("[cache]\nmax_object_size = \"12XB\"");
        assert_eq!(
            e.to_string(),
            r#"cache.max_object_size: "12XB" is not a size (examples: "512KiB", "10GiB")"#
        );
        let e = err("[server]\nadmin_listen = \"127.0.0.1:9090\"");
        assert_eq!(
            e.to_string(),
            "server.admin_listen: not supported yet (the admin listener is not built; remove the key)"
        );
        let e = err("[admission]\nexpected_urls = 10\nmemory = \"4MiB\"");
        assert_eq!(
            e.to_string(),
            "admission.memory: set together with admission.expected_urls; set only one of the two (memory sizes the pair from a byte budget, expected_urls from a key count)"
        );
        let e = err("[cache]\nbogus = 1");
        assert!(
            e.to_string()
                .starts_with("cache.bogus: unknown field `bogus`"),
            "{e}"
        );
        assert!(e.to_string().ends_with("(line 2)"), "{e}");
    }

    /// Each case: (TOML, dotted key the message must name, error kind).
    #[rustfmt::skip]
    const REJECTED: &[(&str, &str, &str)] = &[
        // Unknown keys, in each section and at the top.
        ("[server]\nbogus = 1", "server.bogus", "parse"),
        ("[origin]\nbogus = 1", "origin.bogus", "parse"),
        ("[cache]\nbogus = 1", "cache.bogus", "parse"),
        ("[admission]\nbogus = 1", "admission.bogus", "parse"),
        ("[log]\nbogus = 1", "log.bogus", "parse"),
        ("[bogus]\nx = 1", "bogus", "parse"),
        ("bogus = 1", "bogus", "parse"),
        // Wrong types and negative numbers.
        (
            "[server]\nmax_connections = -1",
            "server.max_connections",
            "parse",
        ),
        (
            "[server]\nmax_connections = \"many\"",
            "server.max_connections",
            "parse",
        ),
        (
            "[server]\nheader_read_timeout = 10",
            "server.header_read_timeout",
            "parse",
        ),
        (
            "[cache]\nmax_object_size = -1",
            "cache.max_object_size",
            "parse",
        ),
        (
            "[cache]\nmax_object_size = 1.5",
            "cache.max_object_size",
            "parse",
        ),
        ("[cache]\nfsync = \"yes\"", "cache.fsync", "parse"),
        (
            "[admission]\nexpected_urls = -5",
            "admission.expected_urls",
            "parse",
        ),
        ("server = 5", "server", "parse"),
        ("[log]\nlevel = [\"info\"]", "log.level", "parse"),
        // [server]
        (
            "[server]\nlisten = \"localhost\"",
            "server.listen",
            "invalid",
        ),
        (
            "[server]\nmax_connections = 0",
            "server.max_connections",
            "invalid",
        ),
        (
            "[server]\nheader_read_timeout = \"10 parsecs\"",
            "server.header_read_timeout",
            "invalid",
        ),
        (
            "[server]\nheader_read_timeout = \"0s\"",
            "server.header_read_timeout",
            "invalid",
        ),
        (
            "[server]\nshutdown_timeout = \"soon\"",
            "server.shutdown_timeout",
            "invalid",
        ),
        (
            "[server]\nadmin_listen = \"127.0.0.1:9090\"",
            "server.admin_listen",
            "not-supported",
        ),
        (
            "[server]\nidle_timeout = \"60s\"",
            "server.idle_timeout",
            "not-supported",
        ),
        // [origin]
        (
            "[origin]\nurl = \"http://exa mple\"",
            "origin.url",
            "invalid",
        ),
        (
            "[origin]\nurl = \"ftp://example.com\"",
            "origin.url",
            "invalid",
        ),
        (
            "[origin]\nurl = \"https://example.com\"",
            "origin.url",
            "not-supported",
        ),
        (
            "[origin]\nurl = \"http://example.com/api\"",
            "origin.url",
            "invalid",
        ),
        (
            "[origin]\nurl = \"http://example.com/?a=1\"",
            "origin.url",
            "invalid",
        ),
        (
            "[origin]\nurl = \"example.com:80\"",
            "origin.url",
            "invalid",
        ),
        ("[origin]\nurl = \"/just/a/path\"", "origin.url", "invalid"),
        (
            "[origin]\nhost_header = \"proxy\"",
            "origin.host_header",
            "invalid",
        ),
        (
            "[origin]\nconnect_timeout = \"0s\"",
            "origin.connect_timeout",
            "invalid",
        ),
        (
            "[origin]\nread_timeout = \"0ms\"",
            "origin.read_timeout",
            "invalid",
        ),
        (
            "[origin]\nmax_in_flight = 0",
            "origin.max_in_flight",
            "invalid",
        ),
        // [cache]
        ("[cache]\ndir = \"\"", "cache.dir", "invalid"),
        (
            "[cache]\nmax_object_size = \"12XB\"",
            "cache.max_object_size",
            "invalid",
        ),
        (
            "[cache]\nmax_object_size = \"0B\"",
            "cache.max_object_size",
            "invalid",
        ),
        (
            "[cache]\nmax_object_size = 0",
            "cache.max_object_size",
            "invalid",
        ),
        (
            "[cache]\nmax_size = \"10GiB\"",
            "cache.max_size",
            "not-supported",
        ),
        (
            "[cache]\nmin_free = \"1GiB\"",
            "cache.min_free",
            "not-supported",
        ),
        (
            "[cache]\nlock_timeout = \"5s\"",
            "cache.lock_timeout",
            "not-supported",
        ),
        // [admission]
        (
            "[admission]\npolicy = \"shadow\"",
            "admission.policy",
            "not-supported",
        ),
        (
            "[admission]\npolicy = \"bogus\"",
            "admission.policy",
            "invalid",
        ),
        (
            "[admission]\nexpected_urls = 0",
            "admission.expected_urls",
            "invalid",
        ),
        (
            "[admission]\nexpected_urls = 10\nmemory = \"4MiB\"",
            "admission.expected_urls",
            "invalid",
        ),
        (
            "[admission]\nmemory = \"0KiB\"",
            "admission.memory",
            "invalid",
        ),
        (
            "[admission]\nmemory = \"lots\"",
            "admission.memory",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = 0",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = 0.0",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = 1",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = 1.5",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = -0.1",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = nan",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nfalse_positive_rate = inf",
            "admission.false_positive_rate",
            "invalid",
        ),
        (
            "[admission]\nmax_age = \"0s\"",
            "admission.max_age",
            "invalid",
        ),
        (
            "[admission]\nmax_age = \"an hour\"",
            "admission.max_age",
            "invalid",
        ),
        (
            "[admission]\nrotate = \"auto\"",
            "admission.rotate",
            "not-supported",
        ),
        (
            "[admission]\nrotate = \"daily\"",
            "admission.rotate",
            "invalid",
        ),
        (
            "[admission]\nsnapshot_every = \"60s\"",
            "admission.snapshot_every",
            "not-supported",
        ),
        // [log]
        ("[log]\nlevel = \"loud\"", "log.level", "invalid"),
        ("[log]\nlevel = \"info,hyper=warn\"", "log.level", "invalid"),
        ("[log]\nformat = \"xml\"", "log.format", "invalid"),
        (
            "[log]\naccess_log = \"/var/log/secondhit.log\"",
            "log.access_log",
            "not-supported",
        ),
    ];

    #[test]
    fn every_invalid_case_is_rejected_naming_its_key() {
        for &(text, key, expected_kind) in REJECTED {
            let e = err(text);
            let shown = e.to_string();
            assert!(
                shown.contains(key),
                "{text:?}: {shown:?} does not name {key}"
            );
            assert_eq!(kind(&e), expected_kind, "{text:?}: {shown}");
            if expected_kind == "not-supported" {
                assert!(shown.contains("not supported yet"), "{shown}");
            }
        }
    }
}
