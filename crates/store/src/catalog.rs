//! The catalog: what purges need to know about each indexed entry and the index does not
//! keep — its key and its cache tags — with the reverse maps a purge searches: tag →
//! entries, site (the key's authority) → entries, and varying URL → its variants.
//!
//! A record follows its entry: it is added when a fill is placed in the index (under the
//! fences' lock, see `fence`, so a purge either finds it here or fences the fill out) or
//! found by the start-up scan, and forgotten when the entry's file is unlinked (evicted,
//! replaced, removed, purged or damaged). Forgetting names the fill, so the unlink of a
//! replaced fill leaves its successor's record alone.
//!
//! Everything is sharded: records by key hash, each reverse map by the name it maps
//! (tag, site or URL). A record's lock is taken before a reverse map's, and never the other
//! way round: a purge reads a batch of members from a reverse map
//! ([`Catalog::members`], at most [`BATCH`] under one lock), lets the lock go, then checks
//! each member's record. Members are kept in ordered sets so the next batch starts after
//! the last one seen: a purge of a hundred thousand entries never holds a lock for more
//! than one batch, and hits (which never take these locks) are not held up at all.
//!
//! Tags are matched exactly, as strings: purging `a` never purges an entry tagged only
//! `ab` (unlike prefix or substring matching).

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use foldhash::quality::RandomState;
use xxhash_rust::xxh3::xxh3_64;

/// Shards of each map; as many as the index has, for the same reason (two operations on
/// different keys rarely meet on one lock).
const SHARDS: usize = super::index::SHARDS;

/// Members a purge takes from a reverse map under one lock.
pub(crate) const BATCH: usize = 512;

use crate::settings::TAG_OVERHEAD;
use crate::{FillId, FillRef, StoreHash};

/// What a purge selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PurgeSelector {
    /// Entries carrying this tag (exact match).
    Tag(String),
    /// Entries whose key starts with this text (`http://host/path/` prefix, normalised
    /// as keys are).
    Prefix(String),
    /// Entries of this host: a host alone (`example.com`) names every port of it, a host
    /// with a port (`example.com:8080`) that port only, where a key on its scheme's
    /// default port carries none. Under either scheme.
    Site(String),
    /// The entry of this key, and every variant of it when it varies.
    Url(String),
}

/// The kinds of purge, named in one place: the admin API's query parameters (`?tag=`,
/// `?prefix=`, `?site=`, `?url=`) and the purge log's lines both spell a kind by
/// [`PurgeKind::as_str`] and read it back with [`str::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PurgeKind {
    /// [`PurgeSelector::Tag`] (`"tag"`).
    Tag,
    /// [`PurgeSelector::Prefix`] (`"prefix"`).
    Prefix,
    /// [`PurgeSelector::Site`] (`"site"`).
    Site,
    /// [`PurgeSelector::Url`] (`"url"`).
    Url,
}

impl PurgeKind {
    /// Every kind.
    pub const ALL: [PurgeKind; 4] = [
        PurgeKind::Tag,
        PurgeKind::Prefix,
        PurgeKind::Site,
        PurgeKind::Url,
    ];

    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            PurgeKind::Tag => "tag",
            PurgeKind::Prefix => "prefix",
            PurgeKind::Site => "site",
            PurgeKind::Url => "url",
        }
    }
}

/// A name that is no [`PurgeKind`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a kind of purge (tag, prefix, site or url)")]
pub struct UnknownPurgeKind(pub String);

impl std::str::FromStr for PurgeKind {
    type Err = UnknownPurgeKind;

    fn from_str(name: &str) -> Result<PurgeKind, UnknownPurgeKind> {
        (PurgeKind::ALL.into_iter())
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| UnknownPurgeKind(name.to_owned()))
    }
}

impl PurgeSelector {
    /// The selector of `kind` with `value` (a tag, a prefix, a site or a URL).
    pub fn new(kind: PurgeKind, value: String) -> PurgeSelector {
        match kind {
            PurgeKind::Tag => PurgeSelector::Tag(value),
            PurgeKind::Prefix => PurgeSelector::Prefix(value),
            PurgeKind::Site => PurgeSelector::Site(value),
            PurgeKind::Url => PurgeSelector::Url(value),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> PurgeKind {
        match self {
            PurgeSelector::Tag(_) => PurgeKind::Tag,
            PurgeSelector::Prefix(_) => PurgeKind::Prefix,
            PurgeSelector::Site(_) => PurgeKind::Site,
            PurgeSelector::Url(_) => PurgeKind::Url,
        }
    }

    /// The tag, prefix, site or URL it names.
    pub fn value(&self) -> &str {
        match self {
            PurgeSelector::Tag(value)
            | PurgeSelector::Prefix(value)
            | PurgeSelector::Site(value)
            | PurgeSelector::Url(value) => value,
        }
    }

    /// Whether an entry of `key` carrying `tags` is selected.
    pub(crate) fn matches<T: AsRef<str>>(&self, key: &str, tags: &[T]) -> bool {
        match self {
            PurgeSelector::Tag(tag) => tags.iter().any(|t| t.as_ref() == tag),
            PurgeSelector::Prefix(prefix) => key.starts_with(prefix.as_str()),
            PurgeSelector::Site(site) => of_site(key, site),
            PurgeSelector::Url(url) => key == url || base_url(key) == Some(url.as_str()),
        }
    }

    /// The reverse map and name whose members include every entry selected (but for a
    /// URL's own entry, which is looked up by its hash).
    fn group(&self) -> (Map, &str) {
        match self {
            PurgeSelector::Tag(tag) => (Map::Tag, tag),
            PurgeSelector::Prefix(prefix) => (Map::Site, host(authority(prefix))),
            PurgeSelector::Site(site) => (Map::Site, host(site)),
            PurgeSelector::Url(url) => (Map::Url, url),
        }
    }
}

/// What an entry's `tags` are charged in the tag budget.
fn cost(tags: &[String]) -> u64 {
    tags.iter()
        .map(|tag| 2 * tag.len() as u64 + TAG_OVERHEAD)
        .sum()
}

/// The authority of a key: what lies between `://` and the path.
pub(crate) fn authority(key: &str) -> &str {
    let rest = key.split_once("://").map_or(key, |(_, rest)| rest);
    let end = rest.find(['/', '?', ' ']).unwrap_or(rest.len());
    &rest[..end]
}

/// The host of an authority, its port left out (an IPv6 literal keeps its brackets).
fn host(authority: &str) -> &str {
    let end = match authority.starts_with('[') {
        true => authority.find(']').map_or(authority.len(), |end| end + 1),
        false => authority.find(':').unwrap_or(authority.len()),
    };
    &authority[..end]
}

/// Whether the entry of `key` is of `site` (see [`PurgeSelector::Site`]): an operator who
/// names a host means all of it, whichever port its clients used.
fn of_site(key: &str, site: &str) -> bool {
    let (authority, site_host) = (authority(key), host(site));
    let Some(port) = site[site_host.len()..].strip_prefix(':') else {
        return host(authority) == site;
    };
    let default_port = match key.split_once("://") {
        Some(("http", _)) => "80",
        Some(("https", _)) => "443",
        _ => return authority == site,
    };
    authority == site || (authority == site_host && port == default_port)
}

/// The URL a variant's key belongs to (see `CacheKey::variant`); `None` for other keys.
fn base_url(key: &str) -> Option<&str> {
    key.split_once(" vary=").map(|(base, _)| base)
}

/// One of the reverse maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Map {
    Tag,
    Site,
    Url,
}

/// What the catalog keeps about one entry.
#[derive(Debug)]
struct Record {
    fill_id: FillId,
    key: Box<str>,
    tags: Box<[Box<str>]>,
    /// What its tags are charged in the tag budget.
    tag_cost: u64,
}

/// A reverse map: name → the key hashes of the entries under it.
type Groups = Box<[Mutex<HashMap<Box<str>, BTreeSet<StoreHash>, RandomState>>]>;

/// The catalog (see the module docs).
#[derive(Debug)]
pub(crate) struct Catalog {
    records: Box<[Mutex<HashMap<StoreHash, Record, RandomState>>]>,
    by_tag: Groups,
    by_site: Groups,
    by_url: Groups,
    /// What the records' tags are charged, against `max_tag_bytes`.
    tag_bytes: AtomicU64,
    max_tag_bytes: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section is a few map operations that cannot fail half-way.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn groups() -> Groups {
    (0..SHARDS).map(|_| Mutex::default()).collect()
}

impl Catalog {
    /// An empty catalog whose records' tags may be charged `max_tag_bytes` in all.
    pub(crate) fn new(max_tag_bytes: u64) -> Catalog {
        Catalog {
            records: (0..SHARDS).map(|_| Mutex::default()).collect(),
            by_tag: groups(),
            by_site: groups(),
            by_url: groups(),
            tag_bytes: AtomicU64::new(0),
            max_tag_bytes,
        }
    }

    fn record_shard(
        &self,
        key_hash: StoreHash,
    ) -> MutexGuard<'_, HashMap<StoreHash, Record, RandomState>> {
        lock(&self.records[key_hash.0 as usize % SHARDS])
    }

    fn map(&self, map: Map) -> &Groups {
        match map {
            Map::Tag => &self.by_tag,
            Map::Site => &self.by_site,
            Map::Url => &self.by_url,
        }
    }

    fn group_shard(
        &self,
        map: Map,
        name: &str,
    ) -> MutexGuard<'_, HashMap<Box<str>, BTreeSet<StoreHash>, RandomState>> {
        let shard = xxh3_64(name.as_bytes()) as usize % SHARDS;
        lock(&self.map(map)[shard])
    }

    fn join(&self, map: Map, name: &str, key_hash: StoreHash) {
        let mut shard = self.group_shard(map, name);
        match shard.get_mut(name) {
            Some(members) => {
                members.insert(key_hash);
            }
            None => {
                shard.insert(name.into(), BTreeSet::from([key_hash]));
            }
        }
    }

    fn leave(&self, map: Map, name: &str, key_hash: StoreHash) {
        let mut shard = self.group_shard(map, name);
        if let Some(members) = shard.get_mut(name) {
            members.remove(&key_hash);
            if members.is_empty() {
                shard.remove(name);
            }
        }
    }

    /// Records the entry `fill_id` of `key` with all its `tags`, replacing the key's
    /// earlier record. Every tag is kept, whatever the budget: a tag left out would make
    /// a purge of it miss the entry. The budget is held by refusing to store what does not
    /// [`fit`](Catalog::fits), so it is passed only by fills that started together, or at
    /// start-up when `tags.max_memory` was lowered.
    pub(crate) fn insert(&self, key_hash: StoreHash, fill_id: FillId, key: &str, tags: &[String]) {
        let mut records = self.record_shard(key_hash);
        if let Some(old) = records.remove(&key_hash) {
            self.unlink_record(key_hash, &old);
        }
        let tag_cost = cost(tags);
        self.tag_bytes.fetch_add(tag_cost, Relaxed);
        let record = Record {
            fill_id,
            key: key.into(),
            tags: tags.iter().map(|tag| tag.as_str().into()).collect(),
            tag_cost,
        };
        self.join(Map::Site, host(authority(key)), key_hash);
        if let Some(base) = base_url(key) {
            self.join(Map::Url, base, key_hash);
        }
        for tag in &record.tags {
            self.join(Map::Tag, tag, key_hash);
        }
        records.insert(key_hash, record);
    }

    /// Whether an entry carrying `tags` fits the tag budget now.
    pub(crate) fn fits(&self, tags: &[String]) -> bool {
        let used = self.tag_bytes.load(Relaxed);
        used.checked_add(cost(tags))
            .is_some_and(|total| total <= self.max_tag_bytes)
    }

    /// Takes `record` out of the reverse maps and gives back its tags' charge.
    fn unlink_record(&self, key_hash: StoreHash, record: &Record) {
        self.leave(Map::Site, host(authority(&record.key)), key_hash);
        if let Some(base) = base_url(&record.key) {
            self.leave(Map::Url, base, key_hash);
        }
        for tag in &record.tags {
            self.leave(Map::Tag, tag, key_hash);
        }
        self.tag_bytes.fetch_sub(record.tag_cost, Relaxed);
    }

    /// Forgets the record of `fill.key` if it is of `fill.fill`.
    pub(crate) fn forget(&self, fill: FillRef) {
        let key_hash = fill.key;
        let mut records = self.record_shard(key_hash);
        if records
            .get(&key_hash)
            .is_some_and(|r| r.fill_id == fill.fill)
            && let Some(record) = records.remove(&key_hash)
        {
            self.unlink_record(key_hash, &record);
        }
    }

    /// The fill of `key_hash` when its entry is one `selector` selects.
    pub(crate) fn selected(&self, key_hash: StoreHash, selector: &PurgeSelector) -> Option<FillId> {
        let records = self.record_shard(key_hash);
        let record = records.get(&key_hash)?;
        selector
            .matches(&record.key, &record.tags)
            .then_some(record.fill_id)
    }

    /// Up to [`BATCH`] key hashes from the reverse map `selector` searches, in order,
    /// after `after` (from the start when `None`); a superset of the entries selected.
    pub(crate) fn members(
        &self,
        selector: &PurgeSelector,
        after: Option<StoreHash>,
    ) -> Vec<StoreHash> {
        let (map, name) = selector.group();
        let shard = self.group_shard(map, name);
        let Some(members) = shard.get(name) else {
            return Vec::new();
        };
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        members
            .range((from, Bound::Unbounded))
            .take(BATCH)
            .copied()
            .collect()
    }

    /// The tags recorded for `key_hash` (for tests and statistics).
    #[cfg(test)]
    pub(crate) fn tags(&self, key_hash: StoreHash) -> Option<Vec<String>> {
        let records = self.record_shard(key_hash);
        let record = records.get(&key_hash)?;
        Some(record.tags.iter().map(|t| t.to_string()).collect())
    }

    /// What the records' tags are charged now.
    pub(crate) fn tag_bytes(&self) -> u64 {
        self.tag_bytes.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    fn hashes(list: &[u128]) -> Vec<StoreHash> {
        list.iter().copied().map(StoreHash).collect()
    }

    #[test]
    fn tags_match_exactly_never_by_prefix_or_substring() {
        let catalog = Catalog::new(u64::MAX);
        catalog.insert(StoreHash(1), FillId(10), "http://a/1", &tags(&["a"]));
        catalog.insert(StoreHash(2), FillId(20), "http://a/2", &tags(&["ab", "xa"]));
        let tag = PurgeSelector::Tag("a".to_owned());
        assert_eq!(catalog.members(&tag, None), hashes(&[1]));
        assert_eq!(catalog.selected(StoreHash(1), &tag), Some(FillId(10)));
        assert_eq!(catalog.selected(StoreHash(2), &tag), None);
    }

    #[test]
    fn sites_prefixes_and_variants_find_their_entries() {
        let catalog = Catalog::new(u64::MAX);
        catalog.insert(StoreHash(1), FillId(1), "http://a/img/1", &[]);
        catalog.insert(StoreHash(2), FillId(1), "https://a/img/2", &[]);
        catalog.insert(StoreHash(3), FillId(1), "http://a:8080/img/3", &[]);
        catalog.insert(StoreHash(4), FillId(1), "http://a/v vary=01-02", &[]);
        catalog.insert(StoreHash(5), FillId(1), "http://a/v", &[]);
        let site = PurgeSelector::Site("a".to_owned());
        let found: Vec<StoreHash> = (1..=5)
            .map(StoreHash)
            .filter(|&h| catalog.selected(h, &site).is_some())
            .collect();
        assert_eq!(found, hashes(&[1, 2, 3, 4, 5]));
        let default_port = PurgeSelector::Site("a:80".to_owned());
        let found: Vec<StoreHash> = (1..=5)
            .map(StoreHash)
            .filter(|&h| catalog.selected(h, &default_port).is_some())
            .collect();
        assert_eq!(found, hashes(&[1, 4, 5]));
        let prefix = PurgeSelector::Prefix("http://a/img/".to_owned());
        assert_eq!(catalog.members(&prefix, None), hashes(&[1, 2, 3, 4, 5]));
        let found: Vec<StoreHash> = (1..=5)
            .map(StoreHash)
            .filter(|&h| catalog.selected(h, &prefix).is_some())
            .collect();
        assert_eq!(found, hashes(&[1]));
        let url = PurgeSelector::Url("http://a/v".to_owned());
        assert_eq!(catalog.members(&url, None), hashes(&[4]));
        assert!(
            catalog.selected(StoreHash(5), &url).is_some()
                && catalog.selected(StoreHash(4), &url).is_some()
        );
    }

    #[test]
    fn forgetting_names_the_fill_and_empties_the_maps() {
        let catalog = Catalog::new(u64::MAX);
        catalog.insert(StoreHash(1), FillId(10), "http://a/1", &tags(&["t"]));
        // A newer fill replaces the record; the unlink of the older one leaves it.
        catalog.insert(StoreHash(1), FillId(11), "http://a/1", &tags(&["u"]));
        catalog.forget(FillRef {
            key: StoreHash(1),
            fill: FillId(10),
        });
        assert_eq!(catalog.tags(StoreHash(1)), Some(tags(&["u"])));
        assert!(
            catalog
                .members(&PurgeSelector::Tag("t".to_owned()), None)
                .is_empty()
        );
        catalog.forget(FillRef {
            key: StoreHash(1),
            fill: FillId(11),
        });
        assert_eq!(catalog.tags(StoreHash(1)), None);
        assert_eq!(catalog.tag_bytes(), 0);
        for map in [&catalog.by_tag, &catalog.by_site, &catalog.by_url] {
            assert!(map.iter().all(|shard| lock(shard).is_empty()));
        }
    }

    #[test]
    fn the_tag_budget_is_checked_before_and_never_cuts_tags() {
        let one = 2 + TAG_OVERHEAD;
        let catalog = Catalog::new(3 * one);
        let two = tags(&["a", "b"]);
        assert!(catalog.fits(&two));
        catalog.insert(StoreHash(1), FillId(1), "http://a/1", &two);
        assert!(!catalog.fits(&tags(&["c", "d"])));
        assert!(catalog.fits(&tags(&["c"])));
        // Two fills that started together may pass it; neither loses a tag.
        catalog.insert(StoreHash(2), FillId(1), "http://a/2", &tags(&["c", "d"]));
        assert_eq!(catalog.tags(StoreHash(2)), Some(tags(&["c", "d"])));
        assert_eq!(catalog.tag_bytes(), 4 * one);
        catalog.forget(FillRef {
            key: StoreHash(1),
            fill: FillId(1),
        });
        catalog.forget(FillRef {
            key: StoreHash(2),
            fill: FillId(1),
        });
        assert_eq!(catalog.tag_bytes(), 0);
        assert!(catalog.fits(&tags(&["e", "f", "g"])));
    }

    #[test]
    fn members_come_in_batches_that_resume_after_the_last() {
        let catalog = Catalog::new(u64::MAX);
        let total = BATCH as u128 * 2 + 7;
        for hash in 0..total {
            catalog.insert(
                StoreHash(hash),
                FillId(1),
                &format!("http://a/{hash}"),
                &tags(&["t"]),
            );
        }
        let tag = PurgeSelector::Tag("t".to_owned());
        let (mut seen, mut after) = (0, None);
        loop {
            let batch = catalog.members(&tag, after);
            assert!(batch.len() <= BATCH);
            let Some(&last) = batch.last() else { break };
            seen += batch.len() as u128;
            after = Some(last);
        }
        assert_eq!(seen, total);
    }

    #[test]
    fn authorities_are_cut_from_keys() {
        assert_eq!(authority("http://a:8080/x?y"), "a:8080");
        assert_eq!(authority("https://a"), "a");
        assert_eq!(authority("http://a?q"), "a");
        assert_eq!(base_url("http://a/v vary=1-2"), Some("http://a/v"));
        assert_eq!(base_url("http://a/v"), None);
        assert_eq!(host("a:8080"), "a");
        assert_eq!(host("a"), "a");
        assert_eq!(host("[::1]:8080"), "[::1]");
        assert_eq!(host("[::1]"), "[::1]");
    }

    #[test]
    fn a_site_without_a_port_is_every_port_of_its_host_and_one_with_a_port_that_port() {
        let keys = [
            "http://a/x",
            "https://a/x",
            "http://a:8080/x",
            "https://a:443/x",
            "http://ab/x",
            "http://[::1]:8080/x",
        ];
        let selected = |site: &str| -> Vec<&str> {
            keys.into_iter().filter(|key| of_site(key, site)).collect()
        };
        assert_eq!(selected("a"), keys[..4]);
        assert_eq!(selected("a:8080"), ["http://a:8080/x"]);
        assert_eq!(selected("a:80"), ["http://a/x"]);
        assert_eq!(selected("a:443"), ["https://a/x", "https://a:443/x"]);
        assert_eq!(selected("[::1]"), ["http://[::1]:8080/x"]);
        assert_eq!(selected("[::1]:80"), Vec::<&str>::new());
    }
}
