//! The cache tags of a response: read from `tags.header` when it is stored, within the
//! `[tags]` limits, and kept with the entry for purges by tag (see `store::PurgeSelector`).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use http::HeaderMap;

use crate::config::{TagSeparator, TagsConfig};

/// Set once a tag longer than `tags.max_length` was dropped (logged once per process).
static TOO_LONG_LOGGED: AtomicBool = AtomicBool::new(false);
/// Set once tags beyond `tags.max_per_entry` were dropped (logged once per process).
static TOO_MANY_LOGGED: AtomicBool = AtomicBool::new(false);

/// The tags `headers` carry under `config`: every line of the field, split at its
/// separator, each tag once, in order; a tag longer than `max_length` is dropped and the
/// list ends at `max_per_entry` (each logged once). None while `max_memory` is zero.
pub(super) fn of(headers: &HeaderMap, config: &TagsConfig) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    if config.max_memory == 0 {
        return tags;
    }
    // A value that is not visible ASCII names no tag a purge could send.
    let values = headers
        .get_all(&config.header)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let words = values.flat_map(|value| split(value, config.separator));
    for tag in words {
        if tag.len() > config.max_length {
            if !TOO_LONG_LOGGED.swap(true, Relaxed) {
                tracing::warn!(
                    length = tag.len(),
                    max_length = config.max_length,
                    "a cache tag longer than tags.max_length was dropped (logged once)"
                );
            }
            continue;
        }
        if tags.iter().any(|seen| seen == tag) {
            continue;
        }
        if tags.len() == config.max_per_entry {
            if !TOO_MANY_LOGGED.swap(true, Relaxed) {
                tracing::warn!(
                    max_per_entry = config.max_per_entry,
                    "a response carried more cache tags than tags.max_per_entry; it is stored with the first ones (logged once)"
                );
            }
            break;
        }
        tags.push(tag.to_owned());
    }
    tags
}

/// The non-empty tags of one field line.
fn split(value: &str, separator: TagSeparator) -> Box<dyn Iterator<Item = &str> + '_> {
    match separator {
        TagSeparator::Space => Box::new(value.split_ascii_whitespace()),
        TagSeparator::Comma => Box::new(value.split(',').map(str::trim).filter(|t| !t.is_empty())),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use http::header::HeaderName;

    use super::*;

    fn headers(name: &'static str, values: &[&'static str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    #[test]
    fn surrogate_keys_split_at_spaces_and_cache_tags_at_commas() {
        let config = TagsConfig::default();
        let map = headers("surrogate-key", &["article-1  home", "article-1 a,b"]);
        assert_eq!(of(&map, &config), ["article-1", "home", "a,b"]);
        let config = TagsConfig {
            header: HeaderName::from_static("cache-tag"),
            separator: TagSeparator::Comma,
            ..TagsConfig::default()
        };
        let map = headers("cache-tag", &["a, b c ,,", "d"]);
        assert_eq!(of(&map, &config), ["a", "b c", "d"]);
    }

    #[test]
    fn limits_keep_the_tags_that_fit() {
        let config = TagsConfig {
            max_per_entry: 2,
            max_length: 3,
            ..TagsConfig::default()
        };
        let map = headers("surrogate-key", &["toolong a b c"]);
        assert_eq!(of(&map, &config), ["a", "b"]);
        let off = TagsConfig {
            max_memory: 0,
            ..TagsConfig::default()
        };
        assert!(of(&map, &off).is_empty());
    }
}
