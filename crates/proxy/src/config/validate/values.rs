//! Single values of the config: sizes, durations and ranges, and the errors
//! that name the key they belong to (split from `validate`, which walks the tables).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Visitor};

use super::super::ConfigError;

/// A size as written: a TOML integer of bytes, or a string for `bytesize`.
/// The string is parsed during validation, so its error can use our wording.
pub(super) enum RawSize {
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

pub(super) fn invalid(key: &'static str, reason: String) -> ConfigError {
    ConfigError::Invalid { key, reason }
}

/// The value given (or the default), rejecting zero for keys that must be positive.
pub(super) fn positive<T: Default + PartialEq>(
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

/// `value` if it lies in `min..=max`, else an error naming both bounds.
pub(super) fn within(
    key: &'static str,
    value: usize,
    min: usize,
    max: usize,
) -> Result<usize, ConfigError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(
            key,
            format!("{value} is outside the allowed range {min}..={max}"),
        ))
    }
}

pub(super) fn duration(
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

pub(super) fn positive_duration(
    key: &'static str,
    raw: Option<String>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    positive(key, None, duration(key, raw, default)?)
}

pub(super) fn parse_size(key: &'static str, size: RawSize) -> Result<u64, ConfigError> {
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
pub(super) fn parse_error(text: &str, err: &toml::de::Error) -> ConfigError {
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

/// The dotted key whose key or value covers byte offset `pos`, as deep as it goes:
/// `section.key`, `section.table.key`, or with the index of an array of tables
/// (`site[1].rule[0].admission`); `None` if the text does not parse as TOML.
pub(super) fn key_at(text: &str, pos: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    key_in(doc.get_ref(), pos, "")
}

/// [`key_at`] within `table`, whose keys are under `prefix`.
fn key_in(table: &toml::de::DeTable<'_>, pos: usize, prefix: &str) -> Option<String> {
    for (key, value) in table {
        let path = match prefix {
            "" => key.get_ref().to_string(),
            _ => format!("{prefix}.{}", key.get_ref()),
        };
        let deeper = match value.get_ref() {
            toml::de::DeValue::Table(inner) => key_in(inner, pos, &path),
            toml::de::DeValue::Array(items) => (items.iter().enumerate()).find_map(|(i, item)| {
                let toml::de::DeValue::Table(inner) = item.get_ref() else {
                    return None;
                };
                key_in(inner, pos, &format!("{path}[{i}]"))
            }),
            _ => None,
        };
        if deeper.is_some() {
            return deeper;
        }
        if key.span().contains(&pos) || value.span().contains(&pos) {
            return Some(path);
        }
    }
    None
}
