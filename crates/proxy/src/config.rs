//! TOML → a validated, typed [`Config`].
//!
//! Loading happens in two steps. First serde reads the file into private
//! `Raw*` structs whose fields are all `Option`s (so every key is optional)
//! and which deny unknown keys; a TOML error is reported with the dotted key
//! it points at. Then `validate` checks every key once, fills in defaults
//! from the `Default` impls (the single source of truth for them) and builds
//! the public types, so the rest of the crate can trust the values without
//! re-checking. Every error names the dotted key (`cache.max_object_size`)
//! and the rule broken.
//!
//! Sizes are strings parsed by `bytesize` ("512KiB", "10GiB"; note "KB" is
//! 1000 bytes and "KiB" 1024) or a TOML integer number of bytes; durations are
//! strings parsed by `humantime` ("500ms", "10s", "1h").
//!
//! A running server reads its `Config` from its live snapshot (`live::Live`), which a
//! reload swaps whole. [`Config::reload`] says which keys of a reloaded file a running
//! server applies and which need a restart.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Uri};
use serde::{Deserialize, Serialize};

pub mod access_format;
mod changes;
mod include;
mod purge;
pub mod rules;
mod server;
mod validate;

pub use changes::Changes;
pub use purge::{MAX_TAG_LENGTH, PurgeConfig, TagSeparator, TagsConfig};
pub use rules::Rules;
pub use secondhit_admission::settings::{
    AdmissionConfig, AdmissionPolicy, FilterSizing, MIN_GENERATION_AGE_SHARE, Optimize, RotateMode,
};
pub use secondhit_store::settings::{Fsync, MaxObjectSize, TAG_OVERHEAD};
pub use server::{
    CertificateFiles, MAX_BLOCKING_THREADS, MAX_MAX_HEADER_BYTES, MAX_MAX_HEADERS, MAX_WORKERS,
    MIN_MAX_HEADER_BYTES, Runtime, ServerConfig, TlsConfig,
};

/// The whole validated configuration. Serialized only for [`Config::reload`] to compare
/// two configs key by key.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
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
    /// `[tags]`: the cache tags read from stored responses.
    pub tags: TagsConfig,
    /// `[purge]`: the `PURGE` method on the proxy's listeners.
    pub purge: PurgeConfig,
    /// `[[site]]`s: hosts with an origin and rules of their own. Empty: `[origin]` and the
    /// top-level `[[rule]]`s serve every host. Compared whole by a reload.
    #[serde(skip)]
    pub sites: Vec<SiteConfig>,
    /// Top-level `[[rule]]`s: the cache rules of the default site (`[origin]`'s). Compared
    /// whole by a reload.
    #[serde(skip)]
    pub rules: Rules,
}

/// One `[[site]]`: the hosts it serves, its origin and its cache rules.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SiteConfig {
    /// Host names it serves, lower-case, without port: exact, or `*.example.com` for any
    /// name below `example.com` (not `example.com` itself). At least one; no host belongs
    /// to two sites.
    pub hosts: Vec<String>,
    /// `[site.origin]`: the same keys as `[origin]`, each defaulting to `[origin]`'s value.
    pub origin: OriginConfig,
    /// `[[site.rule]]`: at most [`rules::MAX_RULES`], first match wins.
    pub rules: Rules,
}

/// What a request for a host no `[[site]]` names gets (`server.unknown_host`); only
/// consulted when there are sites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownHost {
    /// Served by `[origin]` and the top-level `[[rule]]`s (`"default"`).
    Default,
    /// 421 Misdirected Request (`"421"`): this server does not serve that host.
    #[serde(rename = "421")]
    Misdirected,
    /// 404 Not Found (`"404"`).
    #[serde(rename = "404")]
    NotFound,
}

/// `[origin]`: the upstream that misses are fetched from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OriginConfig {
    /// Absolute `http://` or `https://` URI with a host and no path or query.
    #[serde(serialize_with = "changes::shown")]
    pub url: Uri,
    /// PEM file of the CA certificates an `https://` origin is verified against, instead
    /// of the system's trust store; `None`: the system's.
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate from an `https://` origin, unverified (logged at warn at
    /// start): for tests only.
    pub danger_accept_invalid_certs: bool,
    /// Which `Host` header the origin receives.
    pub host_header: HostHeader,
    /// Time allowed to open a connection to the origin (> 0).
    pub connect_timeout: Duration,
    /// Longest gap allowed between bytes of a response body, not its total time (> 0).
    pub read_timeout: Duration,
    /// Longest wait for a response head once the request is on a connection (> 0): from
    /// the request's last byte handed over, or from the last bytes of its body the origin
    /// took while more were ready. Apart from `read_timeout`, so that a server that
    /// accepts connections but answers nothing (stopped, deadlocked) is given up on, and
    /// counted as failing, within seconds, while a long body may still pause longer.
    pub first_byte_timeout: Duration,
    /// When a request that failed on one server is sent to the next (`origin.retry`).
    pub retry: Retry,
    /// Origin requests allowed in flight at once (> 0).
    pub max_in_flight: usize,
    /// Longest wait for one of the `max_in_flight` permits; then 503 with `Retry-After`
    /// (zero: fail at once when none is free).
    pub queue_timeout: Duration,
    /// Bytes of a request body read before an origin permit is taken (at most
    /// [`MAX_BODY_BUFFER_SIZE`]; zero: stream it from the start).
    pub body_buffer_size: u64,
    /// Longest wait for the next bytes of a client's request body (> 0), and the window
    /// over which `body_min_rate` is averaged; then 408.
    pub body_read_timeout: Duration,
    /// Bytes per second a client's request body must average over each
    /// `body_read_timeout` (the first one is a grace period); then 408, which frees the
    /// origin permit a streaming upload holds (zero: only a stall is cut).
    pub body_min_rate: u64,
    /// `servers`: the pool's servers, each with its weight. Empty: `url` alone is the
    /// pool (weight 1); otherwise `url` is the first of them, and all share its scheme.
    pub servers: Vec<OriginServer>,
    /// How requests are spread over the servers that are up.
    pub balance: Balance,
    /// Failures (connection errors, timeouts, answers with a status in `fail_statuses`)
    /// within `fail_timeout` that take a server out of rotation; zero: never by failures. Ignored for a pool of one server,
    /// as nginx does: taking the only server out would turn every request into a 502.
    pub max_fails: u32,
    /// The window `max_fails` are counted in, and how long a server is then out of
    /// rotation when no `health_check` is set (> 0).
    pub fail_timeout: Duration,
    /// The answer statuses that count as a failure of the server (each 500 to 599,
    /// sorted, no duplicates); empty: only connection errors and timeouts count. Other
    /// 5xx answers are the application's, so one failing URL does not take the server
    /// out for every URL.
    pub fail_statuses: Vec<u16>,
    /// Active probes of every server; `None`: passive checks only.
    pub health_check: Option<HealthCheck>,
}

/// One server of an origin pool (`origin.servers`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OriginServer {
    /// `http://` or `https://host[:port]`, as `origin.url`.
    #[serde(serialize_with = "changes::shown")]
    pub url: Uri,
    /// Its share of the requests relative to the others' (1 to [`MAX_WEIGHT`]).
    pub weight: u32,
}

/// The largest `weight` of an origin server: round robin cycles through a list as long
/// as the weights' sum.
pub const MAX_WEIGHT: u32 = 100;

/// The most servers in one origin pool.
pub const MAX_SERVERS: usize = 64;

/// `origin.balance`: which server of the pool a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Each server in turn, in proportion to its weight (`"round-robin"`).
    RoundRobin,
    /// Rendezvous hashing of the request's host and target (its cache key's URL): a key
    /// always goes to the same server while that server is up (`"consistent-hash"`).
    ConsistentHash,
}

/// `origin.health_check`: an active probe of every server of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthCheck {
    /// The path (and query) asked with `GET`.
    pub path: String,
    /// Time between probes of one server (> 0); the first is made at once.
    pub interval: Duration,
    /// The status a healthy server answers.
    pub expect: u16,
    /// How long one probe may take, to its answer's head (> 0): apart from the request
    /// timeouts, so that a server that accepts connections but answers nothing is probed
    /// down within seconds.
    pub timeout: Duration,
}

/// `origin.retry`: which requests that failed on one server of a pool go to the next, as
/// nginx's `proxy_next_upstream` and `proxy_next_upstream_tries` do. A request that could
/// not be sent at all (no connection) always goes to the next server; these govern a
/// request that was sent, and so may have reached the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retry {
    /// The most servers a request that was sent goes to, the first included (1 to
    /// [`MAX_SERVERS`]; 1: never sent twice).
    pub tries: u32,
    /// The failures after which it goes to the next server (each at most once, sorted;
    /// never [`RetryReason::Unsent`], which always does).
    pub on: Vec<RetryReason>,
    /// Whether a request whose method is not idempotent (RFC 9110 §9.2.2: `POST`,
    /// `PATCH`) may be sent twice too; by default it never is, since the first server may
    /// have acted on it.
    pub non_idempotent: bool,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            tries: 2,
            on: vec![RetryReason::Error, RetryReason::Timeout],
            non_idempotent: false,
        }
    }
}

/// Why a request went to another server of its pool: a retry's reason, and what
/// `origin.retry.on` names. Rendered as `/metrics`' `reason` label and the config's
/// words by [`RetryReason::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum RetryReason {
    /// No connection could be opened, so nothing was sent (`"connect"`): always retried.
    Unsent,
    /// The connection failed after the request was sent, before a response head: reset,
    /// closed (a reused keep-alive connection the server closed under it) (`"error"`).
    Error,
    /// No response head within `origin.first_byte_timeout` (`"timeout"`).
    Timeout,
    /// A response head that is not valid HTTP (`"invalid_header"`).
    InvalidHeader,
}

impl RetryReason {
    /// Every reason, in label order.
    pub const ALL: [RetryReason; 4] = [
        RetryReason::Unsent,
        RetryReason::Error,
        RetryReason::Timeout,
        RetryReason::InvalidHeader,
    ];

    /// Its name in `origin.retry.on` and in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::Unsent => "connect",
            RetryReason::Error => "error",
            RetryReason::Timeout => "timeout",
            RetryReason::InvalidHeader => "invalid_header",
        }
    }
}

/// Upper limit of `origin.body_buffer_size`: every request with a body may hold this much.
pub const MAX_BODY_BUFFER_SIZE: u64 = 16 * 1024 * 1024;

impl Default for OriginConfig {
    fn default() -> Self {
        Self {
            url: Uri::from_static("http://127.0.0.1:8081"),
            ca_file: None,
            danger_accept_invalid_certs: false,
            host_header: HostHeader::Client,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(30),
            // A few seconds, where nginx and Varnish wait 60: a server that accepts but
            // answers nothing stalls each request for this long and is taken out only
            // after it, and a request it held goes to the next server (`retry`). A URL
            // slower than this to its first byte needs the key raised for its site.
            first_byte_timeout: Duration::from_secs(5),
            retry: Retry::default(),
            max_in_flight: 1024,
            queue_timeout: Duration::from_secs(5),
            body_buffer_size: 64 * 1024,
            body_read_timeout: Duration::from_secs(10),
            // Twice Apache mod_reqtimeout's default `MinRate=500`, a tenth of a slow
            // mobile uplink: 10KiB per 10s window.
            body_min_rate: 1024,
            servers: Vec::new(),
            balance: Balance::RoundRobin,
            // nginx's defaults for an upstream server.
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            // The gateway answers: the server (or what stands behind it) cannot serve now.
            fail_statuses: vec![502, 503, 504],
            health_check: None,
        }
    }
}

impl OriginConfig {
    /// The pool's servers: `servers`, or `url` alone with weight 1.
    pub fn pool(&self) -> Vec<OriginServer> {
        match self.servers.is_empty() {
            true => vec![OriginServer {
                url: self.url.clone(),
                weight: 1,
            }],
            false => self.servers.clone(),
        }
    }
}

/// Which `Host` header is sent to the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostHeader {
    /// Forward the client's `Host` (`"client"`).
    Client,
    /// Send the host of the origin server the request goes to (`"origin"`).
    Origin,
}

/// `[cache]`: the disk store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheConfig {
    /// Directory holding objects, fills in progress and filter state (non-empty).
    pub dir: PathBuf,
    /// Byte budget for entry files plus fills in progress (> 0).
    pub max_size: u64,
    /// Largest body that is written to disk: bytes, or `"auto"`, a share of `max_size`
    /// ([`CacheConfig::max_object_bytes`] resolves it).
    pub max_object_size: MaxObjectSize,
    /// Free bytes to keep on the cache's filesystem, whatever else fills it: fills
    /// evict entries in the index's order to stay above it, and are refused (not
    /// written) when eviction cannot; the same share of the filesystem's inodes is kept
    /// free. Zero: no floor.
    pub min_free: u64,
    /// When committed fills reach the disk (`cache.fsync`).
    pub fsync: Fsync,
    /// How long start-up waits for another process to release `dir` (zero: fail at once).
    pub lock_timeout: Duration,
    /// Bodies shorter than this are read and verified whole before a hit is
    /// served (at most [`MAX_VERIFY_WHOLE_BELOW`]; zero: verify every body as it streams).
    pub verify_whole_below: u64,
    /// Upper bound of a heuristic freshness lifetime (RFC 9111 §4.2.2: 10% of the time
    /// since `Last-Modified`, for responses without explicit expiry); zero turns
    /// heuristic freshness off.
    pub heuristic_max_age: Duration,
    /// The operator's targeted cache-control field (RFC 9213 §2.1, e.g.
    /// `Secondhit-Cache-Control`): when a response carries it with a valid value, its
    /// directives replace those of `CDN-Cache-Control`, `Cache-Control` and `Expires`
    /// for this cache. `None`: only `CDN-Cache-Control` is targeted at it.
    #[serde(serialize_with = "changes::shown_if_some")]
    pub targeted_field: Option<HeaderName>,
    /// Request fields removed from every GET and HEAD before it is sent to the origin
    /// (lower-cased, without duplicates): fields with which frameworks let a request name
    /// another URL or method than its own (`X-Original-URL`, `X-HTTP-Method-Override`),
    /// which the cache key does not include, so that one client's could choose the
    /// answer stored for everyone. Other methods keep them: nothing of theirs is stored.
    #[serde(serialize_with = "changes::shown_list")]
    pub strip_request_fields: Arc<[HeaderName]>,
    /// How long past its freshness a stored response may still be served when the origin
    /// cannot be reached (connection refused or timed out) and the response does not
    /// forbid it (RFC 9111 §4.2.4 allows serving stale when "disconnected"); zero: only
    /// within the response's own `stale-if-error`.
    pub stale_if_unreachable: Duration,
    /// Byte budget of the memory tier, which serves hot objects without touching their
    /// files (a copy of what is on disk, not counted in `max_size`); zero turns it off.
    pub memory_size: u64,
    /// Largest body, in bytes, the memory tier holds (at most
    /// [`MAX_VERIFY_WHOLE_BELOW`]: such a body is read whole before its hit is served).
    pub memory_max_object_size: u64,
    /// Entry files kept open with their verified headers, so a hit on one reads only
    /// its body (no open, header read or close); zero opens the file on every hit.
    /// At most [`MAX_OPEN_FILES`], and at most half the process's open-file limit is
    /// used.
    pub open_files: usize,
    /// How long a miss waits for another request's fill of the same key (request
    /// collapsing) before it fetches for itself, uncached; zero turns collapsing off.
    pub collapse_timeout: Duration,
    /// Fills whose client went away that may run on to their end at once
    /// (0..=[`MAX_ORPHAN_FILLS`]); zero: a fill ends with its client.
    pub max_orphan_fills: usize,
}

/// The default of `cache.strip_request_fields`: the URL overrides of IIS's URL Rewrite and
/// Symfony/Zend (`X-Original-URL`, `X-Rewrite-URL`) and the method overrides of
/// Symfony, Laravel, Rails, ASP.NET and Google's APIs.
const DEFAULT_STRIP_REQUEST_FIELDS: [HeaderName; 5] = [
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
    HeaderName::from_static("x-http-method-override"),
    HeaderName::from_static("x-http-method"),
    HeaderName::from_static("x-method-override"),
];

/// Upper limit of `cache.open_files`: a million descriptors is what a large cache's
/// hot set might use; more is a typo, not a plan.
pub const MAX_OPEN_FILES: usize = 1_000_000;

/// Upper limit of `cache.max_orphan_fills`: each one holds an origin connection and up
/// to 16 MiB of write buffer.
pub const MAX_ORPHAN_FILLS: usize = 4096;

/// Upper limit of `cache.verify_whole_below`: such bodies are held in memory on every hit.
pub const MAX_VERIFY_WHOLE_BELOW: u64 = 16 * 1024 * 1024;

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("/var/cache/secondhit"),
            max_size: 10 * 1024 * 1024 * 1024,
            max_object_size: MaxObjectSize::Auto,
            // Room for logs, the filter state and other processes on a shared disk to go
            // on for a while after the cache stops growing; small next to a disk worth
            // caching on. A small dedicated disk lowers it.
            min_free: 1024 * 1024 * 1024,
            // Two fsyncs per fill cost a stored miss as much CPU again as the rest of it;
            // one syncfs a second bounds what a power loss loses (benches/RESULTS.md, "batched fsync").
            fsync: Fsync::Every(Duration::from_secs(1)),
            lock_timeout: Duration::from_secs(5),
            verify_whole_below: 64 * 1024,
            heuristic_max_age: Duration::from_secs(24 * 3600),
            targeted_field: None,
            strip_request_fields: Arc::new(DEFAULT_STRIP_REQUEST_FIELDS),
            stale_if_unreachable: Duration::ZERO,
            memory_size: 64 * 1024 * 1024,
            memory_max_object_size: 1024 * 1024,
            // Enough for a hot set of small objects; two file descriptors per
            // connection still fit under the systemd unit's LimitNOFILE=65536.
            open_files: 10_000,
            collapse_timeout: Duration::from_secs(10),
            max_orphan_fills: 64,
        }
    }
}

/// `[log]`: diagnostics and access log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogConfig {
    /// One of `trace`, `debug`, `info`, `warn`, `error` (lowercase).
    pub level: String,
    /// Output format of the diagnostic log.
    pub format: LogFormat,
    /// Where access-log lines go.
    pub access_log: AccessLog,
    /// The layout of an access-log line.
    pub access_format: AccessFormat,
    /// Proxies whose `X-Forwarded-For` names the client (`log.trusted_proxies`).
    #[serde(serialize_with = "changes::shown_list")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".to_owned(),
            format: LogFormat::Text,
            access_log: AccessLog::Off,
            access_format: AccessFormat::Combined,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Output format of the diagnostic log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable lines (`"text"`).
    Text,
    /// One JSON object per line (`"json"`).
    Json,
}

/// Where access-log lines go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum AccessLog {
    /// To standard output (`"stdout"`).
    Stdout,
    /// Not written (`"off"`).
    Off,
    /// Appended to this file (an absolute path), reopened on SIGUSR1.
    File(PathBuf),
}

/// The layout of an access-log line (`log.access_format`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum AccessFormat {
    /// nginx's `combined` format plus the `Cache-Status` and the duration (`"combined"`).
    Combined,
    /// One JSON object per line (`"json"`).
    Json,
    /// A template of nginx-style variables (any value with a `$`), parsed.
    Template(Vec<access_format::Piece>),
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
    /// A value breaks a rule, in a key of a `[[site]]` or a `[[rule]]`: the key names
    /// their index, e.g. `site[1].rule[0].admission`.
    #[error("{key}: {reason}")]
    InvalidAt {
        /// Dotted key with indexes.
        key: String,
        /// The rule broken, with the offending value.
        reason: String,
    },
    /// An error in a fragment file the main file's `include` names, or in a key it set
    /// last.
    #[error("{}: {source}", file.display())]
    InFile {
        /// The fragment.
        file: PathBuf,
        /// What is wrong in it.
        source: Box<ConfigError>,
    },
}

impl Config {
    /// Reads and validates the TOML file at `path`, with the fragment files its
    /// `include` names merged over it (see `include` for the order and the rules).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config = include::load(path, &text)?;
        tracing::debug!(path = %path.display(), "config loaded");
        Ok(config)
    }

    /// Parses and validates TOML text; an empty text gives [`Config::default`]. The text
    /// may not `include` fragments: only [`Config::load`] has a file they are relative to.
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        validate::parse(text)
    }

    /// A warning when `[[site]]`s turn away every other host (`server.unknown_host` of
    /// 421 or 404): a file that adds its first site stops `[origin]` from serving hosts it
    /// served before, which a valid file cannot show otherwise.
    pub fn unknown_hosts_warning(&self) -> Option<String> {
        let status = match self.server.unknown_host {
            _ if self.sites.is_empty() => return None,
            UnknownHost::Default => return None,
            UnknownHost::Misdirected => "421",
            UnknownHost::NotFound => "404",
        };
        Some(format!(
            "a request for a host no [[site]] names gets {status}, and reaches neither an \
             origin nor the cache; set server.unknown_host = \"default\" to have [origin] \
             serve every other host too"
        ))
    }

    /// A warning when the admin listener takes connections from beyond this machine's
    /// loopback with no `server.admin_token`: anyone who reaches it may purge and rotate.
    /// A warning, not an error, since a firewall or a private network may be what keeps
    /// it closed, which a config file cannot show.
    pub fn open_admin_warning(&self) -> Option<String> {
        let listen = self.server.admin_listen?;
        if listen.ip().is_loopback() || self.server.admin_token.is_some() {
            return None;
        }
        Some(format!(
            "server.admin_listen = \"{listen}\" is reachable beyond this machine and \
             server.admin_token is not set: whoever reaches it can purge the cache; set a \
             token, or listen on 127.0.0.1"
        ))
    }

    /// Every warning about this config that a valid file cannot show otherwise, for
    /// `check-config` and the start.
    pub fn warnings(&self) -> Vec<String> {
        [self.unknown_hosts_warning(), self.open_admin_warning()]
            .into_iter()
            .flatten()
            .collect()
    }
}

impl CacheConfig {
    /// `max_object_size` in bytes, `"auto"` resolved against `max_size`.
    pub fn max_object_bytes(&self) -> u64 {
        self.max_object_size.resolve(self.max_size)
    }
}

#[cfg(test)]
mod tests;
