//! `[[site]]` and `[[rule]]` tables: their raw layer and their validation. Errors name the
//! site's and the rule's index and the field (`site[1].rule[0].admission`).

use std::collections::BTreeMap;

use http::{Method, StatusCode};
use serde::Deserialize;

use super::values::{RawSize, invalid, parse_size, positive_duration};
use super::{RawOrigin, validate_origin};
use crate::config::rules::{
    KeyShape, Lifetimes, MAX_RULES, PathMatch, QueryParams, Rule, RuleAdmission, Rules,
};
use crate::config::{
    AdmissionPolicy, ConfigError, OriginConfig, ServerConfig, SiteConfig, UnknownHost,
};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [[site]] table")]
pub(super) struct RawSite {
    hosts: Option<Vec<String>>,
    origin: Option<RawOrigin>,
    rule: Vec<RawRule>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [[rule]] table")]
pub(super) struct RawRule {
    path: Option<String>,
    glob: Option<String>,
    methods: Option<Vec<String>>,
    content_type: Option<Vec<String>>,
    min_size: Option<RawSize>,
    max_size: Option<RawSize>,
    admission: Option<RuleAdmission>,
    bypass: Option<bool>,
    ignore_client_no_cache: Option<bool>,
    drop_query: Option<Vec<String>>,
    keep_query: Option<Vec<String>>,
    sort_query: Option<bool>,
    ignore_port: Option<bool>,
    default_ttl: Option<String>,
    ttl_by_status: Option<BTreeMap<String, String>>,
    grace: Option<String>,
}

/// Re-keys an error about `key` (a key relative to a site or rule) under `prefix`.
fn under(prefix: &str, error: ConfigError) -> ConfigError {
    let (key, reason) = match error {
        ConfigError::Invalid { key, reason } => (key, reason),
        other => return other,
    };
    ConfigError::InvalidAt {
        key: format!("{prefix}.{key}"),
        reason,
    }
}

fn at(prefix: &str, field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidAt {
        key: format!("{prefix}.{field}"),
        reason: reason.into(),
    }
}

/// `server.unknown_host`: refused without sites, where every host is the default site's
/// (an answer that is never given would suggest otherwise).
pub(super) fn unknown_host(
    raw: Option<UnknownHost>,
    has_sites: bool,
) -> Result<UnknownHost, ConfigError> {
    const KEY: &str = "server.unknown_host";
    if raw.is_some() && !has_sites {
        let reason = "applies only with [[site]] sections; without them [origin] serves every host";
        return Err(invalid(KEY, reason.to_owned()));
    }
    Ok(raw.unwrap_or(ServerConfig::default().unknown_host))
}

/// The `[[site]]`s, each origin defaulting to `[origin]`'s values key by key.
pub(super) fn validate_sites(
    raw: Vec<RawSite>,
    origin: &OriginConfig,
    policy: AdmissionPolicy,
) -> Result<Vec<SiteConfig>, ConfigError> {
    let mut sites: Vec<SiteConfig> = Vec::with_capacity(raw.len());
    for (index, site) in raw.into_iter().enumerate() {
        let prefix = format!("site[{index}]");
        let mut hosts = Vec::new();
        for host in site.hosts.unwrap_or_default() {
            let host = site_host(&host).map_err(|reason| at(&prefix, "hosts", reason))?;
            let owner = sites.iter().position(|s| s.hosts.contains(&host));
            if let Some(owner) = owner.or_else(|| hosts.contains(&host).then_some(index)) {
                let reason = format!("{host:?} is also a host of site[{owner}]");
                return Err(at(&prefix, "hosts", reason));
            }
            hosts.push(host);
        }
        if hosts.is_empty() {
            return Err(at(&prefix, "hosts", "must name at least one host"));
        }
        let origin = validate_origin(site.origin.unwrap_or_default(), origin.clone())
            .map_err(|e| under(&prefix, e))?;
        let rules = validate_rules(&prefix, site.rule, policy)?;
        sites.push(SiteConfig {
            hosts,
            origin,
            rules,
        });
    }
    Ok(sites)
}

/// A `hosts` entry: a host name or IP literal, lower-cased, or `*.` and a name; no port
/// (matching ignores it) and no other wildcard.
fn site_host(raw: &str) -> Result<String, String> {
    let host = raw.to_ascii_lowercase();
    let name = host.strip_prefix("*.").unwrap_or(&host);
    let is_ip6 = name.starts_with('[') && name.ends_with(']');
    let valid = !name.is_empty()
        && (is_ip6
            || name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
    if name.contains(':') && !is_ip6 {
        return Err(format!(
            "{raw:?} has a port; hosts match without their port, give the host alone"
        ));
    }
    if !valid || name.starts_with('.') || name.ends_with('.') {
        return Err(format!(
            r#"{raw:?} is not a host name, an IP literal, or "*." and a host name"#
        ));
    }
    Ok(host)
}

/// A list of `[[rule]]`s under `prefix` (`site[0]`, or `` for the top level).
pub(super) fn validate_rules(
    prefix: &str,
    raw: Vec<RawRule>,
    policy: AdmissionPolicy,
) -> Result<Rules, ConfigError> {
    let list = if prefix.is_empty() {
        "rule".to_owned()
    } else {
        format!("{prefix}.rule")
    };
    if raw.len() > MAX_RULES {
        let reason = format!("{} rules; at most {MAX_RULES} per site", raw.len());
        return Err(ConfigError::InvalidAt { key: list, reason });
    }
    let rules = raw
        .into_iter()
        .enumerate()
        .map(|(index, rule)| validate_rule(&format!("{list}[{index}]"), rule, policy))
        .collect::<Result<_, _>>()?;
    Ok(Rules(rules))
}

fn validate_rule(prefix: &str, raw: RawRule, policy: AdmissionPolicy) -> Result<Rule, ConfigError> {
    let path = rule_path(prefix, raw.path, raw.glob)?;
    let methods = raw
        .methods
        .unwrap_or_default()
        .into_iter()
        .map(|name| {
            Method::from_bytes(name.as_bytes())
                .map_err(|_| at(prefix, "methods", format!("{name:?} is not a method")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut content_types = Vec::new();
    for media in raw.content_type.unwrap_or_default() {
        if media.is_empty() {
            return Err(at(prefix, "content_type", "an entry is empty"));
        }
        content_types.push(media.to_ascii_lowercase());
    }
    let (min_size, max_size) = rule_sizes(prefix, raw.min_size, raw.max_size)?;
    let admission = rule_admission(prefix, raw.admission, policy)?;
    let query = rule_query(prefix, raw.drop_query, raw.keep_query)?;
    let key = KeyShape {
        query,
        sort_query: raw.sort_query.unwrap_or(false),
        ignore_port: raw.ignore_port.unwrap_or(false),
    };
    let lifetimes = rule_lifetimes(prefix, raw.default_ttl, raw.ttl_by_status, raw.grace)?;
    let rule = Rule {
        path,
        methods,
        content_types,
        min_size,
        max_size,
        admission,
        bypass: raw.bypass.unwrap_or(false),
        ignore_client_no_cache: raw.ignore_client_no_cache.unwrap_or(false),
        key: (key != KeyShape::default()).then_some(key),
        lifetimes,
    };
    check_actions(prefix, &rule)?;
    Ok(rule)
}

/// The rule's `path` (a prefix, starting with `/`) or `glob`, of which at most one is set.
fn rule_path(
    prefix: &str,
    path: Option<String>,
    glob: Option<String>,
) -> Result<Option<PathMatch>, ConfigError> {
    Ok(match (path, glob) {
        (Some(_), Some(_)) => {
            return Err(at(
                prefix,
                "glob",
                "set together with path; give one of the two",
            ));
        }
        (Some(prefix_path), None) if !prefix_path.starts_with('/') => {
            let reason = format!(r#"{prefix_path:?} must start with "/""#);
            return Err(at(prefix, "path", reason));
        }
        (Some(prefix_path), None) => Some(PathMatch::Prefix(prefix_path)),
        (None, Some(glob)) => Some(
            PathMatch::glob(&glob)
                .map_err(|e| at(prefix, "glob", format!("{glob:?} is not a glob ({e})")))?,
        ),
        (None, None) => None,
    })
}

/// The rule's `min_size` and `max_size`, which must not be the wrong way round.
fn rule_sizes(
    prefix: &str,
    min_size: Option<RawSize>,
    max_size: Option<RawSize>,
) -> Result<(Option<u64>, Option<u64>), ConfigError> {
    let size = |key, raw: Option<RawSize>| {
        raw.map(|size| parse_size(key, size))
            .transpose()
            .map_err(|e| under(prefix, e))
    };
    let (min_size, max_size) = (size("min_size", min_size)?, size("max_size", max_size)?);
    if let (Some(min), Some(max)) = (min_size, max_size)
        && min > max
    {
        let reason = format!("{max} bytes is smaller than min_size ({min} bytes)");
        return Err(at(prefix, "max_size", reason));
    }
    Ok((min_size, max_size))
}

/// The rule's `default_ttl`, `ttl_by_status` and `grace`: positive durations, and statuses
/// a response could be stored with (200 to 599 but 206, which is never stored whole).
fn rule_lifetimes(
    prefix: &str,
    default_ttl: Option<String>,
    by_status: Option<BTreeMap<String, String>>,
    grace: Option<String>,
) -> Result<Lifetimes, ConfigError> {
    let duration = |key, raw: Option<String>| {
        raw.map(|text| positive_duration(key, Some(text), std::time::Duration::ZERO))
            .transpose()
            .map_err(|e| under(prefix, e))
    };
    let mut statuses = Vec::new();
    for (status, ttl) in by_status.unwrap_or_default() {
        let code = status
            .parse::<u16>()
            .ok()
            .filter(|code| (200..=599).contains(code) && *code != 206)
            .and_then(|code| StatusCode::from_u16(code).ok())
            .ok_or_else(|| {
                let reason = format!("{status:?} is not a status from 200 to 599 (206 excepted)");
                at(prefix, "ttl_by_status", reason)
            })?;
        let ttl = duration("ttl_by_status", Some(ttl))?.unwrap_or_default();
        statuses.push((code, ttl));
    }
    // The map's keys are strings: "404" and "0404" name one status.
    statuses.sort_by_key(|(code, _)| *code);
    if let Some(pair) = statuses.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        let reason = format!("status {} is given twice", pair[0].0.as_u16());
        return Err(at(prefix, "ttl_by_status", reason));
    }
    Ok(Lifetimes {
        default_ttl: duration("default_ttl", default_ttl)?,
        by_status: statuses,
        grace: duration("grace", grace)?,
    })
}

/// The rule's `admission`; `"second-hit"` needs a policy that keeps the filters.
fn rule_admission(
    prefix: &str,
    admission: Option<RuleAdmission>,
    policy: AdmissionPolicy,
) -> Result<Option<RuleAdmission>, ConfigError> {
    if admission == Some(RuleAdmission::SecondHit) && !policy.keeps_filters() {
        let reason = format!(
            r#""second-hit" needs the filters, which admission.policy = "{}" does not keep; use "second-hit" or "shadow" as the policy"#,
            policy.as_str()
        );
        return Err(at(prefix, "admission", reason));
    }
    Ok(admission)
}

/// The rule's `drop_query` or `keep_query` (at most one is set): the query parameters
/// its keys keep.
fn rule_query(
    prefix: &str,
    drop: Option<Vec<String>>,
    keep: Option<Vec<String>>,
) -> Result<QueryParams, ConfigError> {
    Ok(match (drop, keep) {
        (Some(_), Some(_)) => {
            return Err(at(
                prefix,
                "keep_query",
                "set together with drop_query; give one of the two",
            ));
        }
        (Some(names), None) => QueryParams::Drop(names),
        (None, Some(names)) => QueryParams::Keep(names),
        (None, None) => QueryParams::All,
    })
}

/// A rule must do something, a response rule can only set admission (the rest is
/// decided before the response), and a bypass stores nothing for admission to decide.
fn check_actions(prefix: &str, rule: &Rule) -> Result<(), ConfigError> {
    let request_actions = [
        ("bypass", rule.bypass),
        ("ignore_client_no_cache", rule.ignore_client_no_cache),
        (
            "drop_query, keep_query, sort_query or ignore_port",
            rule.key.is_some(),
        ),
        (
            "default_ttl, ttl_by_status or grace",
            rule.lifetimes.is_set(),
        ),
    ];
    if rule.on_response()
        && let Some((field, _)) = request_actions.iter().find(|(_, set)| *set)
    {
        let reason = "a rule that matches on the response (content_type, min_size, max_size) can only set admission: the rest is decided before the response";
        return Err(at(prefix, field, reason));
    }
    if rule.bypass && rule.admission.is_some() {
        let reason = "set together with bypass = true, which stores nothing; give one of the two";
        return Err(at(prefix, "admission", reason));
    }
    if rule.bypass && rule.lifetimes.is_set() {
        let reason = "set together with bypass = true, which stores nothing; give one of the two";
        return Err(at(prefix, "default_ttl, ttl_by_status or grace", reason));
    }
    if rule.admission.is_none() && !request_actions.iter().any(|(_, set)| *set) {
        let reason = "the rule sets nothing: give admission, bypass, ignore_client_no_cache, drop_query, keep_query, sort_query, ignore_port, default_ttl, ttl_by_status or grace";
        return Err(ConfigError::InvalidAt {
            key: prefix.to_owned(),
            reason: reason.to_owned(),
        });
    }
    Ok(())
}
