//! The cache tags of a response: read from `tags.header` when it is stored, within the
//! `[tags]` limits, and kept with the entry for purges by tag (see `store::PurgeSelector`).
//!
//! A response whose tags cannot all be indexed is not stored at all: kept with only the
//! tags that fit, it would stay a hit after a purge of one of the others.

use http::HeaderMap;

use crate::config::{TagSeparator, TagsConfig};
use crate::policy::UnindexedTags;

/// The tags `headers` carry under `config`: every line of the field, split at its
/// separator, each tag once, in order. `Err` when they cannot all be kept: a line that is
/// not visible ASCII, a tag longer than `max_length`, more than `max_per_entry` tags.
/// None while `max_memory` is zero (tags are off).
pub(super) fn of(headers: &HeaderMap, config: &TagsConfig) -> Result<Vec<String>, UnindexedTags> {
    let mut tags: Vec<String> = Vec::new();
    if config.max_memory == 0 {
        return Ok(tags);
    }
    for value in headers.get_all(&config.header) {
        // A value that is not visible ASCII names no tag a purge could send.
        let value = value.to_str().map_err(|_| UnindexedTags::Unreadable)?;
        for tag in split(value, config.separator) {
            if tag.len() > config.max_length {
                return Err(UnindexedTags::TooLong);
            }
            if tags.iter().any(|seen| seen == tag) {
                continue;
            }
            if tags.len() == config.max_per_entry {
                return Err(UnindexedTags::TooMany);
            }
            tags.push(tag.to_owned());
        }
    }
    Ok(tags)
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

    /// `of`'s answer when it keeps `tags`.
    fn kept(tags: &[&str]) -> Result<Vec<String>, UnindexedTags> {
        Ok(tags.iter().map(|t| t.to_string()).collect())
    }

    #[test]
    fn surrogate_keys_split_at_spaces_and_cache_tags_at_commas() {
        let config = TagsConfig::default();
        let map = headers("surrogate-key", &["article-1  home", "article-1 a,b"]);
        assert_eq!(of(&map, &config), kept(&["article-1", "home", "a,b"]));
        let config = TagsConfig {
            header: HeaderName::from_static("cache-tag"),
            separator: TagSeparator::Comma,
            ..TagsConfig::default()
        };
        let map = headers("cache-tag", &["a, b c ,,", "d"]);
        assert_eq!(of(&map, &config), kept(&["a", "b c", "d"]));
    }

    #[test]
    fn tags_beyond_the_limits_refuse_the_whole_response() {
        let config = TagsConfig {
            max_per_entry: 2,
            max_length: 3,
            ..TagsConfig::default()
        };
        let fits = headers("surrogate-key", &["a b a"]);
        assert_eq!(of(&fits, &config), kept(&["a", "b"]));
        let many = headers("surrogate-key", &["a b", "c"]);
        assert_eq!(of(&many, &config), Err(UnindexedTags::TooMany));
        let long = headers("surrogate-key", &["a toolong"]);
        assert_eq!(of(&long, &config), Err(UnindexedTags::TooLong));
        let mut unreadable = HeaderMap::new();
        let value = HeaderValue::from_bytes(b"caf\xe9").expect("obs-text is a valid value");
        unreadable.insert("surrogate-key", value);
        assert_eq!(of(&unreadable, &config), Err(UnindexedTags::Unreadable));
        let off = TagsConfig {
            max_memory: 0,
            ..TagsConfig::default()
        };
        assert_eq!(of(&long, &off), kept(&[]), "tags off: none are read");
    }
}
