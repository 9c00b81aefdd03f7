//! The origin pool's keys: `url` or `servers`, `balance`, `max_fails`, `fail_timeout`,
//! `fail_statuses` and `health_check`, in `[origin]` and each `[site.origin]`.

use std::time::Duration;

use http::Uri;
use serde::Deserialize;

use super::super::{
    Balance, HealthCheck, MAX_SERVERS, MAX_WEIGHT, OriginConfig, OriginServer, Retry, RetryReason,
};
use super::values::{duration, invalid, positive_duration};
use super::{ConfigError, tls};

/// One entry of `servers` as written: a URL, or a table with its weight.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = r#"a URL ("http://10.0.0.1:8080") or a table { url = "http://10.0.0.1:8080", weight = 2 }"#
)]
pub(super) enum RawServer {
    Url(String),
    Weighted { url: String, weight: Option<u32> },
}

/// `health_check` as written.
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    default,
    expecting = r#"a table { path = "/healthz", interval = "5s", expect = 200, timeout = "2s" }"#
)]
pub(super) struct RawHealthCheck {
    path: Option<String>,
    interval: Option<String>,
    expect: Option<u16>,
    timeout: Option<String>,
}

/// `retry` as written.
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    default,
    expecting = r#"a table { tries = 2, on = ["error", "timeout"], non_idempotent = false }"#
)]
pub(super) struct RawRetry {
    tries: Option<u32>,
    on: Option<Vec<String>>,
    non_idempotent: Option<bool>,
}

/// `retry`: `tries` 1 to [`MAX_SERVERS`], `on` naming only the failures after which a
/// sent request may go on; each key absent takes `d`'s value (`[origin]`'s, for a site).
pub(super) fn retry(raw: RawRetry, d: &Retry) -> Result<Retry, ConfigError> {
    const KEY: &str = "origin.retry";
    let tries = raw.tries.unwrap_or(d.tries);
    if !(1..=MAX_SERVERS as u32).contains(&tries) {
        let reason = format!("tries = {tries}; give 1 (never resend) to {MAX_SERVERS}");
        return Err(invalid(KEY, reason));
    }
    let on = match raw.on {
        None => d.on.clone(),
        Some(names) => {
            let mut on = Vec::with_capacity(names.len());
            for name in names {
                // `connect` is no choice: a request that was never sent always goes on.
                let reasons = &RetryReason::ALL[1..];
                let Some(reason) = reasons.iter().find(|r| r.as_str() == name) else {
                    let known: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
                    let reason = format!("on names {name:?}; give any of {known:?}");
                    return Err(invalid(KEY, reason));
                };
                on.push(*reason);
            }
            on.sort_unstable();
            on.dedup();
            on
        }
    };
    Ok(Retry {
        tries,
        on,
        non_idempotent: raw.non_idempotent.unwrap_or(d.non_idempotent),
    })
}

/// The pool's keys as written.
pub(super) struct RawPool {
    pub(super) url: Option<String>,
    pub(super) servers: Option<Vec<RawServer>>,
    pub(super) balance: Option<Balance>,
    pub(super) max_fails: Option<u32>,
    pub(super) fail_timeout: Option<String>,
    pub(super) fail_statuses: Option<Vec<i64>>,
    pub(super) health_check: Option<RawHealthCheck>,
}

/// The validated pool keys.
pub(super) struct Pool {
    pub(super) url: Uri,
    pub(super) servers: Vec<OriginServer>,
    pub(super) balance: Balance,
    pub(super) max_fails: u32,
    pub(super) fail_timeout: Duration,
    pub(super) fail_statuses: Vec<u16>,
    pub(super) health_check: Option<HealthCheck>,
}

/// Validates the pool keys; each key absent takes `d`'s value, and `url` or `servers`
/// given replaces both of `d`'s (a site naming its own `url` has that one server).
pub(super) fn validate_pool(raw: RawPool, d: &OriginConfig) -> Result<Pool, ConfigError> {
    let (url, servers) = match (raw.url, raw.servers) {
        (Some(_), Some(_)) => {
            let reason = "is set beside origin.url; give one server as url or several as servers";
            return Err(invalid("origin.servers", reason.to_owned()));
        }
        (Some(text), None) => (tls::origin_url(&text)?, Vec::new()),
        (None, Some(servers)) => {
            let servers = validate_servers(servers)?;
            (servers[0].url.clone(), servers)
        }
        (None, None) => (d.url.clone(), d.servers.clone()),
    };
    Ok(Pool {
        url,
        servers,
        balance: raw.balance.unwrap_or(d.balance),
        // Zero is allowed: nginx's "max_fails=0", failures never take a server out.
        max_fails: raw.max_fails.unwrap_or(d.max_fails),
        fail_timeout: positive_duration("origin.fail_timeout", raw.fail_timeout, d.fail_timeout)?,
        fail_statuses: match raw.fail_statuses {
            Some(raw) => fail_statuses(raw)?,
            None => d.fail_statuses.clone(),
        },
        health_check: match raw.health_check {
            Some(raw) => Some(health_check(raw)?),
            None => d.health_check.clone(),
        },
    })
}

/// `servers`: one to [`MAX_SERVERS`] distinct URLs of one scheme, weights 1 to [`MAX_WEIGHT`].
fn validate_servers(raw: Vec<RawServer>) -> Result<Vec<OriginServer>, ConfigError> {
    const KEY: &str = "origin.servers";
    if raw.is_empty() || raw.len() > MAX_SERVERS {
        let reason = format!("names {} servers; give 1 to {MAX_SERVERS}", raw.len());
        return Err(invalid(KEY, reason));
    }
    let mut servers: Vec<OriginServer> = Vec::with_capacity(raw.len());
    for entry in raw {
        let (text, weight) = match entry {
            RawServer::Url(url) => (url, None),
            RawServer::Weighted { url, weight } => (url, weight),
        };
        let url = tls::origin_url(&text).map_err(|error| rekeyed(KEY, error))?;
        let weight = weight.unwrap_or(1);
        if !(1..=MAX_WEIGHT).contains(&weight) {
            let reason = format!("{text:?} has weight {weight}; give 1 to {MAX_WEIGHT}");
            return Err(invalid(KEY, reason));
        }
        if servers.iter().any(|s| s.url == url) {
            return Err(invalid(KEY, format!("{text:?} is named twice")));
        }
        if let Some(first) = servers.first()
            && first.url.scheme() != url.scheme()
        {
            let reason = "mixes http:// and https:// servers; a pool shares one TLS setting";
            return Err(invalid(KEY, reason.to_owned()));
        }
        servers.push(OriginServer { url, weight });
    }
    Ok(servers)
}

/// An error about `origin.url` (the URL rules of a server) told about `key` instead.
fn rekeyed(key: &'static str, error: ConfigError) -> ConfigError {
    match error {
        ConfigError::Invalid { reason, .. } => invalid(key, reason),
        other => other,
    }
}

/// `fail_statuses`: each 500 to 599, kept sorted and once each. A 4xx is refused: it
/// says the request was wrong, not that the server cannot serve, and the server's
/// `failures` figure counts 5xx answers, so every status that counts is in it.
fn fail_statuses(raw: Vec<i64>) -> Result<Vec<u16>, ConfigError> {
    let mut statuses = Vec::with_capacity(raw.len());
    for status in raw {
        match u16::try_from(status) {
            Ok(status) if (500..=599).contains(&status) => statuses.push(status),
            _ => {
                let reason = format!("{status} is not a 5xx status; give codes 500 to 599");
                return Err(invalid("origin.fail_statuses", reason));
            }
        }
    }
    statuses.sort_unstable();
    statuses.dedup();
    Ok(statuses)
}

/// `health_check`: a path starting with `/`, an interval and a timeout above zero, a
/// status 100-599. The timeout's default is short: a probe asks for a cheap path, and its
/// point is to take a server that answers nothing out within seconds.
fn health_check(raw: RawHealthCheck) -> Result<HealthCheck, ConfigError> {
    const KEY: &str = "origin.health_check";
    let path = raw.path.unwrap_or_else(|| "/".to_owned());
    if !path.starts_with('/') || path.parse::<http::uri::PathAndQuery>().is_err() {
        return Err(invalid(
            KEY,
            format!("path {path:?} is not a path like \"/healthz\""),
        ));
    }
    let interval = duration(KEY, raw.interval, Duration::from_secs(5))?;
    if interval.is_zero() {
        return Err(invalid(
            KEY,
            "interval must be greater than zero".to_owned(),
        ));
    }
    let expect = raw.expect.unwrap_or(200);
    if !(100..=599).contains(&expect) {
        return Err(invalid(
            KEY,
            format!("expect {expect} is not an HTTP status"),
        ));
    }
    let timeout = duration(KEY, raw.timeout, Duration::from_secs(2))?;
    if timeout.is_zero() {
        return Err(invalid(KEY, "timeout must be greater than zero".to_owned()));
    }
    Ok(HealthCheck {
        path,
        interval,
        expect,
        timeout,
    })
}
