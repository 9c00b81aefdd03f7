//! `[server]`: the listeners, their limits, and the account the process runs as.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::values::{RawSize, duration, invalid, parse_size, positive, positive_duration, within};
use crate::config::{
    ConfigError, MAX_BLOCKING_THREADS, MAX_MAX_HEADER_BYTES, MAX_MAX_HEADERS, MAX_WORKERS,
    MIN_MAX_HEADER_BYTES, Runtime, ServerConfig, TlsConfig, UnknownHost,
};

/// `[server]` as serde reads it: `None` marks a key as absent.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [server] table")]
pub(super) struct RawServer {
    listen: Option<String>,
    admin_listen: Option<String>,
    admin_token: Option<String>,
    admin_hosts: Option<Vec<String>>,
    max_connections: Option<usize>,
    header_read_timeout: Option<String>,
    max_headers: Option<usize>,
    max_header_bytes: Option<RawSize>,
    idle_timeout: Option<String>,
    send_timeout: Option<String>,
    max_concurrent_streams: Option<u32>,
    shutdown_timeout: Option<String>,
    workers: Option<usize>,
    runtime: Option<Runtime>,
    blocking_threads: Option<usize>,
    user: Option<String>,
    group: Option<String>,
    pid_file: Option<String>,
    tls: Option<super::tls::RawTls>,
    /// Read with the sites it is about (`validate`).
    pub(super) unknown_host: Option<UnknownHost>,
}

/// Validates `[server]`, taking absent keys from `d` (except `unknown_host`, which
/// `validate` reads with the sites).
pub(super) fn validate_server(
    raw: RawServer,
    d: ServerConfig,
) -> Result<ServerConfig, ConfigError> {
    let listen = listen_address(raw.listen, d.listen)?;
    let admin_listen = admin_address(raw.admin_listen, d.admin_listen, listen)?;
    let max_header_bytes = header_bytes(raw.max_header_bytes, d.max_header_bytes)?;
    Ok(ServerConfig {
        listen,
        admin_listen,
        admin_token: admin_token(raw.admin_token)?.or(d.admin_token),
        admin_hosts: match raw.admin_hosts {
            Some(names) => admin_hosts(names)?,
            None => d.admin_hosts,
        },
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
        idle_timeout: positive_duration("server.idle_timeout", raw.idle_timeout, d.idle_timeout)?,
        send_timeout: positive_duration("server.send_timeout", raw.send_timeout, d.send_timeout)?,
        max_concurrent_streams: positive(
            "server.max_concurrent_streams",
            raw.max_concurrent_streams,
            d.max_concurrent_streams,
        )?,
        max_headers: within(
            "server.max_headers",
            raw.max_headers.unwrap_or(d.max_headers),
            1,
            MAX_MAX_HEADERS,
        )?,
        // hyper panics below its minimum read buffer; the range is checked here instead.
        max_header_bytes: within(
            "server.max_header_bytes",
            max_header_bytes,
            MIN_MAX_HEADER_BYTES,
            MAX_MAX_HEADER_BYTES,
        )?,
        // Zero is allowed: it means "stop at once" on shutdown.
        shutdown_timeout: duration(
            "server.shutdown_timeout",
            raw.shutdown_timeout,
            d.shutdown_timeout,
        )?,
        workers: workers(raw.workers, d.workers)?,
        runtime: raw.runtime.unwrap_or(d.runtime),
        blocking_threads: within(
            "server.blocking_threads",
            raw.blocking_threads.unwrap_or(d.blocking_threads),
            1,
            MAX_BLOCKING_THREADS,
        )?,
        user: account_name("server.user", raw.user)?,
        group: account_name("server.group", raw.group)?,
        pid_file: pid_file(raw.pid_file)?,
        tls: tls(raw.tls, d.tls, listen, admin_listen)?,
        // Read with the sites it is about (`validate`).
        unknown_host: d.unknown_host,
    })
}

/// `server.max_header_bytes` as given, `default` when unset; its range is checked with
/// the other limits.
fn header_bytes(raw: Option<RawSize>, default: usize) -> Result<usize, ConfigError> {
    Ok(match raw {
        None => default,
        Some(size) => {
            let bytes = parse_size("server.max_header_bytes", size)?;
            usize::try_from(bytes).unwrap_or(usize::MAX)
        }
    })
}

/// `server.pid_file`: an absolute path, or none when absent or empty.
fn pid_file(raw: Option<String>) -> Result<Option<PathBuf>, ConfigError> {
    match raw.as_deref() {
        None | Some("") => Ok(None),
        Some(path) if Path::new(path).is_absolute() => Ok(Some(PathBuf::from(path))),
        Some(other) => Err(invalid(
            "server.pid_file",
            format!("{other:?} must be an absolute file path"),
        )),
    }
}

/// `server.workers`: `default` when unset.
fn workers(raw: Option<usize>, default: Option<usize>) -> Result<Option<usize>, ConfigError> {
    Ok(match raw {
        None => default,
        Some(workers) => Some(within("server.workers", workers, 1, MAX_WORKERS)?),
    })
}

/// `[server.tls]`, for the listeners `listen` and `admin_listen`: `default` when unset.
fn tls(
    raw: Option<super::tls::RawTls>,
    default: Option<TlsConfig>,
    listen: SocketAddr,
    admin_listen: Option<SocketAddr>,
) -> Result<Option<TlsConfig>, ConfigError> {
    Ok(match raw {
        None => default,
        Some(raw) => Some(super::tls::server_tls(raw, listen, admin_listen)?),
    })
}

/// `server.listen`: `default` when unset.
fn listen_address(raw: Option<String>, default: SocketAddr) -> Result<SocketAddr, ConfigError> {
    match raw {
        None => Ok(default),
        Some(text) => text.parse().map_err(|_| {
            let example = r#"(example: "127.0.0.1:8080")"#;
            invalid(
                "server.listen",
                format!("{text:?} is not a socket address {example}"),
            )
        }),
    }
}

/// `server.admin_listen`: `default` when unset, `None` for `"off"`; refused when it is
/// `listen`'s address.
fn admin_address(
    raw: Option<String>,
    default: Option<SocketAddr>,
    listen: SocketAddr,
) -> Result<Option<SocketAddr>, ConfigError> {
    let admin_listen = match raw {
        None => default,
        Some(text) if text == "off" => None,
        Some(text) => Some(text.parse().map_err(|_| {
            let example = r#"(example: "127.0.0.1:9090", or "off")"#;
            invalid(
                "server.admin_listen",
                format!("{text:?} is not a socket address {example}"),
            )
        })?),
    };
    // Metrics, purge and rotate are for operators: never on the port clients use. Port 0
    // asks the system for a free port, so two of them never clash (the tests bind so).
    if admin_listen == Some(listen) && listen.port() != 0 {
        let reason = format!(
            "{listen} is also server.listen; the admin listener needs an address of its own (or \"off\")"
        );
        return Err(invalid("server.admin_listen", reason));
    }
    Ok(admin_listen)
}

/// `server.user` and `server.group`: empty means none; a name is looked up on this machine
/// at start (and by `check-config`), where a name that does not exist is refused.
fn account_name(key: &'static str, raw: Option<String>) -> Result<Option<String>, ConfigError> {
    match raw {
        Some(name) if name.is_empty() => Ok(None),
        Some(name)
            if name
                .bytes()
                .any(|b| b == 0 || b == b':' || b.is_ascii_whitespace()) =>
        {
            Err(invalid(
                key,
                "must be a user or group name (no spaces, colons or NUL bytes)".to_owned(),
            ))
        }
        name => Ok(name),
    }
}

/// `server.admin_hosts`: DNS names (letters, digits, `-` and `.`), kept lowercase and
/// without a trailing dot, as the admin listener compares them with a request's `Host`.
fn admin_hosts(names: Vec<String>) -> Result<Vec<String>, ConfigError> {
    names
        .into_iter()
        .map(|name| {
            let bare = name.strip_suffix('.').unwrap_or(&name);
            let valid = !bare.is_empty()
                && bare
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            match valid {
                true => Ok(bare.to_ascii_lowercase()),
                false => Err(invalid(
                    "server.admin_hosts",
                    format!("{name:?} is not a host name (no port, scheme or path; IP addresses are always answered)"),
                )),
            }
        })
        .collect()
}

/// `server.admin_token`: empty means none; otherwise visible ASCII only, since it travels in
/// an `Authorization` header (and a token with spaces could never match one).
fn admin_token(raw: Option<String>) -> Result<Option<String>, ConfigError> {
    match raw {
        Some(token) if token.is_empty() => Ok(None),
        Some(token) if !token.bytes().all(|b| b.is_ascii_graphic()) => Err(invalid(
            "server.admin_token",
            "must be visible ASCII characters only (no spaces or control characters)".to_owned(),
        )),
        token => Ok(token),
    }
}
