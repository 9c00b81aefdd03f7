//! A verified copy of one fill of one key, as the memory tier holds it, and the copy of
//! it that one thread keeps for itself (`thread_copies`). A leaf of its own, so that the
//! memory tier, the thread copies and `read` share the type without importing each other.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::derived::Derived;
use super::entry::EntryMeta;
use crate::FillId;

/// Bytes counted for an entry beyond its body, key and header bytes: the map
/// slot, the `Arc`, the metadata struct and the header map's tables.
const ENTRY_OVERHEAD: u64 = 256;

/// A verified copy of one fill of one key.
#[derive(Debug)]
pub(super) struct HotEntry {
    /// The fill this is a copy of.
    pub(super) fill_id: FillId,
    /// The full key, compared on every use: the map is keyed by its hash.
    pub(super) key: Box<str>,
    /// The entry's metadata as it was read with the body.
    pub(super) meta: Arc<EntryMeta>,
    /// The whole body, verified against `body_hash` when it was read.
    pub(super) body: Bytes,
    /// The body's xxh3-64, as stored.
    pub(super) body_hash: u64,
    /// The body's offset in the entry file (its header length), for range reads.
    pub(super) body_offset: u64,
    /// What the proxy derived from the entry (see `StoredEntry::derived`).
    pub(super) derived: Derived,
}

impl HotEntry {
    /// Bytes the entry counts against the budget.
    pub(super) fn weight(&self) -> u64 {
        let headers = |map: &HeaderMap| -> usize {
            map.iter()
                .map(|(name, value)| name.as_str().len() + value.len())
                .sum()
        };
        let meta = headers(&self.meta.response_headers) + headers(&self.meta.request_headers);
        (self.body.len() + self.key.len() + meta) as u64 + ENTRY_OVERHEAD
    }

    /// The same entry in allocations of its own: no reference count, header value or
    /// body buffer shared with `self`. A hit clones and drops the counts of the entry it
    /// serves (its header values into the response, its body, its metadata); on a copy
    /// only one thread uses, those writes stay in that core's cache instead of moving a
    /// cache line between cores on every hit.
    pub(super) fn unshared(&self) -> HotEntry {
        let meta = &self.meta;
        HotEntry {
            fill_id: self.fill_id,
            key: self.key.clone(),
            meta: Arc::new(EntryMeta {
                request_time: meta.request_time,
                response_time: meta.response_time,
                status: meta.status,
                response_headers: unshared_headers(&meta.response_headers),
                request_headers: unshared_headers(&meta.request_headers),
                tags: meta.tags.clone(),
                purged: meta.purged,
            }),
            body: Bytes::copy_from_slice(&self.body),
            body_hash: self.body_hash,
            body_offset: self.body_offset,
            derived: Derived::default(),
        }
    }
}

/// `map` with every name and value copied into a buffer of its own (a clone of a
/// `HeaderMap` shares them, counted).
fn unshared_headers(map: &HeaderMap) -> HeaderMap {
    let mut copy = HeaderMap::with_capacity(map.len());
    for (name, value) in map {
        // Standard names are static and cost nothing; the fallbacks (a clone, shared)
        // cannot happen for a name or value that was valid once.
        let name =
            HeaderName::from_bytes(name.as_str().as_bytes()).unwrap_or_else(|_| name.clone());
        let mut fresh = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
        fresh.set_sensitive(value.is_sensitive());
        copy.append(name, fresh);
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn an_unshared_copy_keeps_every_field_and_shares_no_buffer() {
        let mut headers = HeaderMap::new();
        headers.append("x-custom", HeaderValue::from_static("one"));
        headers.append("x-custom", HeaderValue::from_bytes(b"two \xe9").unwrap());
        headers.append(
            http::header::CACHE_CONTROL,
            HeaderValue::from_str("max-age=60").unwrap(),
        );
        let mut secret = HeaderValue::from_str("kept").unwrap();
        secret.set_sensitive(true);
        headers.append("x-secret", secret);
        let original = HotEntry {
            fill_id: FillId(7),
            key: "GET http://example.test/a".into(),
            meta: Arc::new(EntryMeta {
                request_time: SystemTime::UNIX_EPOCH,
                response_time: SystemTime::UNIX_EPOCH,
                status: http::StatusCode::OK,
                response_headers: headers.clone(),
                request_headers: headers,
                tags: vec!["t".into()],
                purged: Some(SystemTime::UNIX_EPOCH),
            }),
            body: Bytes::from(vec![5u8; 1000]),
            body_hash: 99,
            body_offset: 4096,
            derived: Derived::default(),
        };
        let copy = original.unshared();
        assert_eq!(copy.fill_id, FillId(7));
        assert_eq!(copy.key, original.key);
        assert_eq!(*copy.meta, *original.meta);
        assert_eq!((copy.body_hash, copy.body_offset), (99, 4096));
        assert_eq!(copy.body, original.body);
        assert_ne!(copy.body.as_ptr(), original.body.as_ptr());
        let pairs = |map: &HeaderMap| -> Vec<(String, Vec<u8>, bool)> {
            map.iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec(), v.is_sensitive()))
                .collect()
        };
        assert_eq!(
            pairs(&copy.meta.response_headers),
            pairs(&original.meta.response_headers)
        );
        for (theirs, ours) in original
            .meta
            .response_headers
            .values()
            .zip(copy.meta.response_headers.values())
        {
            assert_ne!(theirs.as_bytes().as_ptr(), ours.as_bytes().as_ptr());
        }
        assert!(!Arc::ptr_eq(&copy.meta, &original.meta));
        assert!(!Arc::ptr_eq(&copy.derived, &original.derived));
    }
}
