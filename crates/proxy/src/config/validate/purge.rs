//! `[tags]` and `[purge]`: raw tables and their validation.

use http::HeaderName;
use ipnet::IpNet;
use serde::Deserialize;

use super::super::{ConfigError, MAX_TAG_LENGTH, PurgeConfig, TagSeparator, TagsConfig};
use super::values::{RawSize, invalid, parse_size, positive, within};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [tags] table")]
pub(super) struct RawTags {
    header: Option<String>,
    separator: Option<TagSeparator>,
    keep_header: Option<bool>,
    max_per_entry: Option<usize>,
    max_length: Option<usize>,
    max_memory: Option<RawSize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [purge] table")]
pub(super) struct RawPurge {
    allow: Option<Vec<String>>,
}

/// Checks `[tags]`.
pub(super) fn validate_tags(raw: RawTags, d: TagsConfig) -> Result<TagsConfig, ConfigError> {
    let header = match raw.header {
        None => d.header,
        Some(name) => HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid("tags.header", format!("{name:?} is not a valid field name")))?,
    };
    let separator = raw.separator.unwrap_or_else(|| TagSeparator::of(&header));
    let max_length = raw.max_length.unwrap_or(d.max_length);
    Ok(TagsConfig {
        header,
        separator,
        keep_header: raw.keep_header.unwrap_or(d.keep_header),
        max_per_entry: positive("tags.max_per_entry", raw.max_per_entry, d.max_per_entry)?,
        max_length: within("tags.max_length", max_length, 1, MAX_TAG_LENGTH)?,
        max_memory: match raw.max_memory {
            None => d.max_memory,
            Some(size) => parse_size("tags.max_memory", size)?,
        },
    })
}

/// Checks `[purge]`: each `allow` entry a CIDR network (`10.0.0.0/8`) or one address.
pub(super) fn validate_purge(raw: RawPurge) -> Result<PurgeConfig, ConfigError> {
    let allow = raw.allow.unwrap_or_default();
    let allow = allow
        .iter()
        .map(|text| {
            let net = text.parse::<IpNet>().or_else(|_| {
                text.parse::<std::net::IpAddr>().map(IpNet::from)
            });
            net.map(|net| net.trunc()).map_err(|_| {
                let reason = format!(
                    "{text:?} is not a network (examples: \"127.0.0.1/32\", \"10.0.0.0/8\", \"::1\")"
                );
                invalid("purge.allow", reason)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PurgeConfig { allow })
}
