//! `[tags]` and `[purge]`: the cache tags read from responses, and who may purge from the
//! proxy's own port.

use http::HeaderName;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// `[tags]`: the cache tags a stored response carries, for purges by tag (`POST
/// /purge?tag=` on the admin listener).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TagsConfig {
    /// The response field the tags are read from (`Surrogate-Key`, as Fastly reads it;
    /// `Cache-Tag` as Cloudflare does).
    #[serde(serialize_with = "super::changes::shown")]
    pub header: HeaderName,
    /// What separates the tags in that field.
    pub separator: TagSeparator,
    /// Whether clients see the field; by default it is removed from every response the
    /// proxy sends, as Fastly removes `Surrogate-Key` (it names the cache's internals).
    pub keep_header: bool,
    /// Most tags per entry (> 0); a response with more is not stored.
    pub max_per_entry: usize,
    /// Longest tag, in bytes (1..=[`MAX_TAG_LENGTH`]); a response with a longer one is
    /// not stored.
    pub max_length: usize,
    /// Memory the tag index may use, in bytes (an estimate: each tag of each entry counts
    /// twice its length plus [`TAG_OVERHEAD`](secondhit_store::settings::TAG_OVERHEAD)); a response whose tags would go beyond it
    /// is not stored. Zero: tags are neither stored nor indexed.
    pub max_memory: u64,
}

/// Upper limit of `tags.max_length`: what the on-disk format can hold, and far beyond
/// Fastly's 1 KiB.
pub const MAX_TAG_LENGTH: usize = 4096;

/// What separates tags in `tags.header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TagSeparator {
    /// Spaces (and tabs), as in Fastly's `Surrogate-Key` (`"space"`).
    Space,
    /// Commas, each tag trimmed of spaces, as in Cloudflare's `Cache-Tag` (`"comma"`).
    Comma,
}

impl TagSeparator {
    /// The separator a field is read with unless `tags.separator` says otherwise:
    /// commas for `Cache-Tag`, spaces for any other.
    pub fn of(header: &HeaderName) -> TagSeparator {
        if header.as_str() == "cache-tag" {
            TagSeparator::Comma
        } else {
            TagSeparator::Space
        }
    }
}

impl Default for TagsConfig {
    fn default() -> Self {
        Self {
            header: HeaderName::from_static("surrogate-key"),
            separator: TagSeparator::Space,
            keep_header: false,
            // Fastly's limits are a 16 KiB field and 1 KiB keys; a page tagged with every
            // article it shows rarely needs more than a few dozen.
            max_per_entry: 64,
            max_length: 256,
            max_memory: 64 * 1024 * 1024,
        }
    }
}

/// `[purge]`: the `PURGE` method on the proxy's listeners.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PurgeConfig {
    /// Client networks whose `PURGE <url>` purges that URL, as `POST /purge?url=` on the
    /// admin listener does. Empty (the default): `PURGE` is refused from everywhere. A
    /// refused `PURGE` gets 405 and never reaches the origin.
    pub allow: Vec<IpNet>,
}

impl PurgeConfig {
    /// Whether a `PURGE` from `ip` is carried out.
    pub fn allows(&self, ip: std::net::IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket shows as an IPv4-mapped IPv6 address.
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.allow.iter().any(|net| net.contains(&ip))
    }
}
