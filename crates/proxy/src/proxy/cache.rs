//! The cache side of a request: finding the stored response (resolving variants),
//! revalidating it, and starting fills. Shared by the request path and the background
//! refreshes of `stale-while-revalidate`, so it holds only cheap clones.
//!
//! Variants (RFC 9111 §4.1) are stored side by side: the URL's own key holds a small
//! *marker* entry (empty body) naming the `Vary` fields and a random nonce, and each
//! variant lives under `CacheKey::variant(nonce, selector)`. A lookup reads the marker,
//! computes the request's selector and looks the variant up; a variant of a response
//! varying on `Accept-Encoding` is served only to a request that accepts its
//! `Content-Encoding` (`Marker::serves_coding`). Removing the marker
//! (invalidation) or replacing it (new `Vary` fields) orphans every old variant at
//! once; orphans are never reachable again and leave by eviction.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, AUTHORIZATION, CONTENT_LENGTH, RANGE, VARY};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, response};

use super::origin_request::{OriginRequest, Shape};
use crate::config::rules::Lifetimes;
use crate::fields;
use crate::key::CacheKey;
use crate::live::Snapshot;
use crate::metrics::Metrics;
use crate::origin::{BodyFraming, OriginError, OriginResponse, Upstream};
use crate::outcome::ErrorKind;
use crate::policy::freshness::StoredFreshness;
use crate::policy::vary::{self, VarySpec};
use crate::policy::{self, NotStored, Rules, UnindexedTags, validation};
use crate::range::{self, RangeAnswer};
use crate::store::{
    EntryMeta, EntryWriter, FillTicket, Store, StoreError, StoreHash, StoredEntry, WholeFill,
};
use crate::tee::Fills;

/// The field of a marker entry that holds the variant set's nonce (never sent to clients:
/// a marker is never served).
const MARKER_FIELD: HeaderName = HeaderName::from_static("secondhit-variants");

/// The variant set of a URL, read from its marker entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Marker {
    nonce: u64,
    fields: Vec<HeaderName>,
}

impl Marker {
    /// The marker described by `meta`, if `meta` is a marker's.
    fn of(meta: &EntryMeta) -> Option<Marker> {
        let nonce = meta.response_headers.get(MARKER_FIELD)?.to_str().ok()?;
        let nonce = u64::from_str_radix(nonce, 16).ok()?;
        match VarySpec::of(&meta.response_headers) {
            VarySpec::Fields(fields) => Some(Marker { nonce, fields }),
            _ => None,
        }
    }

    /// False when the variants vary on `Accept-Encoding` and `request` does not accept
    /// the `Content-Encoding` of the variant `meta` (which its selector picked): the
    /// selector tells apart only some codings ([`vary::accepts_coding`]), and a client
    /// must never get a coding it did not ask for. The request is then a vary-miss, and
    /// its own answer replaces the variant.
    fn serves_coding(&self, request: &HeaderMap, meta: &EntryMeta) -> bool {
        !self.fields.contains(&ACCEPT_ENCODING)
            || vary::accepts_coding(request, &meta.response_headers)
    }

    /// The key of the variant `request` selects.
    fn variant_key(&self, primary: &CacheKey, request: &HeaderMap) -> CacheKey {
        primary.variant(self.nonce, vary::selector(&self.fields, request))
    }
}

/// False when `request` asks for one range of `entry` (as `respond::from_store` will
/// answer it) that is small enough to read and verify before the head is sent, and a
/// block under it fails its checksum: the store has discarded the entry, and the request
/// is a miss rather than a 206 with wrong bytes ([`StoredEntry::verify_range`]). Only a
/// request with a `Range` field on an entry read from its file pays anything.
async fn verified_for_range(entry: &mut StoredEntry, request: &HeaderMap) -> bool {
    match range_to_verify(entry, request) {
        None => true,
        // Boxed: the read is about 700 bytes of future state that every lookup, and so
        // every request's future above it, would otherwise carry and copy; only a range
        // request on an entry read from its file allocates it.
        Some((first, last)) => Box::pin(entry.verify_range(first, last)).await,
    }
}

/// The one range of `entry` that `request` asks for and that must be verified before
/// the head is sent, if any ([`verified_for_range`]).
fn range_to_verify(entry: &StoredEntry, request: &HeaderMap) -> Option<(u64, u64)> {
    // Cheapest test first: a hit from memory has nothing to read ahead.
    if entry.body_in_memory().is_some()
        || !fields::has(request, &RANGE)
        || entry.meta.status != StatusCode::OK
    {
        return None;
    }
    match range::answer(request, &entry.meta.response_headers, entry.body_len) {
        RangeAnswer::Part { first, last } => Some((first, last)),
        _ => None,
    }
}

/// A stored response that answers the request's URL and variant.
pub(super) struct Found {
    /// The entry, header verified, body not yet read.
    pub entry: StoredEntry,
    /// The URL's variant set, when the response varies.
    pub marker: Option<Marker>,
}

/// What the store holds for a request.
pub(super) enum Lookup {
    /// Nothing for the URL.
    Miss,
    /// Variants of the URL exist, none for this request.
    VaryMiss(Marker),
    /// The response for this request (boxed: an open entry is large, the others small).
    Found(Box<Found>),
}

/// A stored response's freshness, with the settings it was judged under; dereferences to
/// the [`StoredFreshness`].
pub(super) struct Judged {
    rules: Rules,
    freshness: StoredFreshness,
}

impl std::ops::Deref for Judged {
    type Target = StoredFreshness;

    fn deref(&self) -> &StoredFreshness {
        &self.freshness
    }
}

/// What the origin said to a revalidation.
pub(super) enum Revalidated {
    /// 304 for the stored representation.
    NotModified {
        /// The entry, with the metadata that answers the request that revalidated (boxed
        /// like [`Lookup::Found`]).
        found: Box<Found>,
        /// The origin server that answered.
        upstream: Upstream,
        /// Whether the entry keeps the updated metadata, or why it was removed instead:
        /// the 304 made the response one this cache must not share.
        kept: Result<(), NotStored>,
    },
    /// A new response (or a 304 for another representation, refetched whole).
    Replaced {
        /// The origin's answer, body still streaming (boxed: a head and a body are large).
        response: Box<OriginResponse>,
        /// When it was asked for and answered.
        timing: Timing,
    },
}

/// When a request went to the origin and its answer's head came back, and the store's
/// ticket taken before it was sent (a purge after it fences the answer's fill).
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    /// When the request was sent.
    pub request: SystemTime,
    /// When the head arrived.
    pub response: SystemTime,
    /// Taken just before the request was sent ([`Store::fill_ticket`]).
    pub ticket: FillTicket,
}

/// What a response is judged by: the live settings and the `lifetimes` of the request's
/// site rule.
#[derive(Clone, Copy)]
pub(super) struct Judging<'a> {
    /// The settings the request loaded.
    pub(super) live: &'a Snapshot,
    /// The lifetimes of the request's site rule.
    pub(super) lifetimes: &'a Lifetimes,
}

/// The start of an exchange with the origin, before its answer: [`Timing::start`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Started {
    /// When the request was sent.
    request: SystemTime,
    /// Taken just before the request was sent.
    ticket: FillTicket,
}

impl Timing {
    /// The start of an exchange with the origin: now, and a ticket from `store`.
    pub(super) fn start(store: &Store) -> Started {
        Started {
            request: crate::clock::now(),
            ticket: store.fill_ticket(),
        }
    }

    /// The exchange started at `started`, its head arriving now.
    pub(super) fn answered(started: Started) -> Timing {
        Timing {
            request: started.request,
            response: crate::clock::now(),
            ticket: started.ticket,
        }
    }
}

/// The store, with the rules that connect it to the origins.
#[derive(Clone)]
pub(super) struct Cache {
    /// The disk store.
    pub store: Arc<Store>,
    /// The counters the request path feeds.
    pub metrics: Arc<Metrics>,
    /// The fills in flight, and the bound on those that outlive their client.
    pub fills: Fills,
}

/// An origin response [`Cache::storable`] found storable, with the cache tags it read.
pub(super) struct Storable<'o> {
    /// The response's status and end-to-end fields.
    head: &'o response::Parts,
    /// How its body is delimited.
    framing: BodyFraming,
    tags: Vec<String>,
    /// Its whole body, when that came with the head ([`Storable::with_whole`]).
    whole: Option<Bytes>,
}

impl<'o> Storable<'o> {
    /// This response with `whole`, its whole body when that came with its head: stored
    /// in one file call rather than streamed.
    pub(super) fn with_whole(mut self, whole: Option<Bytes>) -> Self {
        self.whole = whole;
        self
    }

    /// What was found, without the borrow of the head: for a fill that takes the
    /// response with it ([`Detached::attach`]).
    pub(super) fn detach(self) -> Detached {
        Detached {
            framing: self.framing,
            tags: self.tags,
        }
    }
}

/// A [`Storable`] without its head.
pub(super) struct Detached {
    framing: BodyFraming,
    tags: Vec<String>,
}

impl Detached {
    /// The storable response again, with `head`, the head it was found of.
    pub(super) fn attach(self, head: &response::Parts) -> Storable<'_> {
        Storable {
            head,
            framing: self.framing,
            tags: self.tags,
            whole: None,
        }
    }
}

/// A fill that began ([`Cache::begin_fill`]).
pub(super) enum Began {
    /// The body is to stream into this writer as it arrives. Boxed: the writer is large,
    /// and moves into its task anyway.
    Streaming(Box<EntryWriter>),
    /// The whole body is at hand, to be stored in one file call ([`WholeBody::store`]).
    /// Boxed: the metadata is large, and moves into its task anyway.
    Whole(Box<WholeBody>),
}

/// A whole body and what it is stored as, before its one file call
/// ([`Store::store_whole`]).
pub(super) struct WholeBody {
    /// The entry's key: the variant's, when the response varies.
    key: CacheKey,
    meta: EntryMeta,
    body: Bytes,
    max_len: u64,
    ticket: FillTicket,
}

impl WholeBody {
    /// The store hash of the entry's key.
    pub(super) fn key_hash(&self) -> StoreHash {
        self.key.store_hash()
    }

    /// The body's length.
    pub(super) fn len(&self) -> u64 {
        self.body.len() as u64
    }

    /// Stores the body in one file call as a fill of `cache` ([`Fills::run_here`]), then
    /// hands how that went to `ended` and returns what `ended` made of it. The fill
    /// outlives this future: a graceful shutdown waits for it, and a client that leaves
    /// meanwhile (this future dropped) splits neither the file's rename from its indexing
    /// nor the call from `ended`, which the requests collapsed onto the fill wait for.
    ///
    /// [`Fills::run_here`]: crate::tee::Fills::run_here
    pub(super) async fn store<T: Send + 'static>(
        self,
        cache: &Cache,
        ended: impl FnOnce(Result<WholeFill, StoreError>) -> T + Send + 'static,
    ) -> T {
        let store = Arc::clone(&cache.store);
        let fill = async move {
            let WholeBody {
                key,
                meta,
                body,
                max_len,
                ticket,
            } = self;
            let (hash, key) = (key.store_hash(), key.as_str());
            ended(
                store
                    .store_whole(key, hash, &meta, body, max_len, ticket)
                    .await,
            )
        };
        cache.fills.run_here(fill).await
    }
}

impl Cache {
    /// `entry`'s freshness (RFC 9111 §4.2), judged once per fill and kept with it
    /// ([`StoredEntry::derived`]): a hit from the memory tier parses no date or directive.
    /// Judged again, without keeping it, when `cache.heuristic_max_age`,
    /// `cache.targeted_field` or the `lifetimes` of the request's site rule changed since.
    pub(super) fn freshness(
        &self,
        live: &Snapshot,
        lifetimes: &Lifetimes,
        entry: &StoredEntry,
    ) -> Arc<Judged> {
        let settings = &live.settings;
        let judge = |entry: &StoredEntry| {
            let rules = live.cache_rules(lifetimes);
            Judged {
                freshness: StoredFreshness::new(&entry.meta, &rules),
                rules,
            }
        };
        let kept = entry.derived(judge);
        // Compared field by field rather than through a new `Rules`: no clone per hit.
        let current = kept.rules.heuristic_max == settings.cache.heuristic_max_age
            && kept.rules.targeted_field == settings.cache.targeted_field
            && kept.rules.lifetimes == *lifetimes;
        if current {
            kept
        } else {
            Arc::new(judge(entry))
        }
    }

    /// Finds the stored response for `key` and the request's `Vary` fields. A store
    /// failure is logged and treated as a miss: the request is then proxied uncached;
    /// so is an entry whose blocks under the request's one small range fail their
    /// checksums ([`verified_for_range`]).
    pub(super) async fn lookup(&self, key: &CacheKey, request: &HeaderMap) -> Lookup {
        let Some(mut entry) = self.lookup_key(key).await else {
            return Lookup::Miss;
        };
        let Some(marker) = Marker::of(&entry.meta) else {
            if !verified_for_range(&mut entry, request).await {
                return Lookup::Miss;
            }
            return Lookup::Found(Box::new(Found {
                entry,
                marker: None,
            }));
        };
        let Some(mut entry) = self.lookup_key(&marker.variant_key(key, request)).await else {
            return Lookup::VaryMiss(marker);
        };
        if !marker.serves_coding(request, &entry.meta)
            || !verified_for_range(&mut entry, request).await
        {
            return Lookup::VaryMiss(marker);
        }
        Lookup::Found(Box::new(Found {
            entry,
            marker: Some(marker),
        }))
    }

    async fn lookup_key(&self, key: &CacheKey) -> Option<StoredEntry> {
        match self.store.lookup(key.as_str(), key.store_hash()).await {
            Ok(entry) => entry,
            Err(error) => {
                tracing::warn!(key = %key, %error, "cache lookup failed; proxying uncached");
                self.metrics.count_error(ErrorKind::StoreLookup);
                None
            }
        }
    }

    /// Asks `origin` whether `found`, the entry of `key` under `live`'s settings, is still
    /// good: a conditional GET with its validators (a plain GET when it has none), with
    /// the client's `request` headers. A 304 updates the entry's metadata in place (RFC
    /// 9111 §4.3.4) without touching the body, unless the updated fields make the
    /// response unstorable: then the entry is removed and the answer is this request's
    /// alone ([`Cache::keep_refreshed`]).
    pub(super) async fn revalidate(
        &self,
        judging: Judging<'_>,
        key: &CacheKey,
        origin: &OriginRequest<'_>,
        request: &HeaderMap,
        mut found: Box<Found>,
    ) -> Result<Revalidated, OriginError> {
        let stored = &found.entry.meta.response_headers;
        let conditional = validation::has_validator(stored).then_some(stored);
        let (response, timing) = fetch_whole(&self.store, origin, request, conditional).await?;
        if response.head.status != StatusCode::NOT_MODIFIED {
            return Ok(Revalidated::Replaced {
                response: Box::new(response),
                timing,
            });
        }
        let Some(refreshed) = validation::freshen(
            &found.entry.meta,
            &response.head,
            timing.request,
            timing.response,
        ) else {
            // A 304 for a representation we do not have: ask again, unconditionally.
            let (response, timing) = fetch_whole(&self.store, origin, request, None).await?;
            return Ok(Revalidated::Replaced {
                response: Box::new(response),
                timing,
            });
        };
        let kept = self
            .keep_refreshed(judging, key, request, &found, &refreshed.stored)
            .await;
        found.entry.meta = Arc::new(refreshed.for_this_request());
        Ok(Revalidated::NotModified {
            found,
            upstream: response.upstream,
            kept,
        })
    }

    /// Writes `stored`, the metadata a 304 refreshed, into `found`'s entry when a
    /// response with those fields may be stored (RFC 9111 §3, judged as a new response
    /// would be); otherwise removes the entry, so that no later client is answered with
    /// fields (`private`, `no-store`...) the origin meant for one request.
    async fn keep_refreshed(
        &self,
        judging: Judging<'_>,
        key: &CacheKey,
        request: &HeaderMap,
        found: &Found,
        stored: &EntryMeta,
    ) -> Result<(), NotStored> {
        if let Err(reason) = refreshed_storability(judging, request, stored) {
            let entry_key = match &found.marker {
                Some(marker) => marker.variant_key(key, request),
                None => key.clone(),
            };
            self.invalidate(&entry_key).await;
            return Err(reason);
        }
        match self.store.update_meta(&found.entry, stored).await {
            Ok(true) => {}
            // Evicted or replaced meanwhile: this answer still uses the body it holds.
            Ok(false) => tracing::debug!("revalidated entry changed meanwhile; not updated"),
            Err(error) => {
                tracing::warn!(%error, "cannot update revalidated metadata; serving it once");
            }
        }
        Ok(())
    }

    /// Storability of the origin's answer to a GET under `live`'s settings and the
    /// `lifetimes` of the request's site rule: RFC 9111 policy, framing, a size within
    /// `cache.max_object_size`, and cache tags that can all be indexed (`[tags]`).
    pub(super) fn storable<'o>(
        &self,
        judging: Judging<'_>,
        request: &HeaderMap,
        (head, framing): (&'o response::Parts, BodyFraming),
        response_time: SystemTime,
    ) -> Result<Storable<'o>, NotStored> {
        let Judging { live, lifetimes } = judging;
        let rules = live.cache_rules(lifetimes);
        policy::storability(request, head, response_time, &rules)?;
        let max_len = live.max_object_size();
        match framing {
            BodyFraming::UntilClose => return Err(NotStored::NoLength),
            BodyFraming::Length(length) if length > max_len => return Err(NotStored::TooLarge),
            BodyFraming::Length(_) | BodyFraming::Delimited => {}
        }
        let tags = super::tags::of(&head.headers, &live.settings.tags);
        let tags = tags.map_err(NotStored::Tags)?;
        match self.store.tags_fit(&tags) {
            true => Ok(Storable {
                head,
                framing,
                tags,
                whole: None,
            }),
            false => Err(NotStored::Tags(UnindexedTags::MemoryFull)),
        }
    }

    /// Starts the fill of `storable`, the response to a GET of `key` with `request`
    /// headers, for a body of at most `live`'s `cache.max_object_size`, under the key
    /// and with the metadata of [`Cache::fill_entry`]. A body that came whole with the
    /// head ([`Storable::with_whole`]) is to be stored in one file call
    /// ([`WholeBody::store`]); any other streams into the fill's writer.
    pub(super) async fn begin_fill(
        &self,
        key: &CacheKey,
        marker: Option<&Marker>,
        request: &HeaderMap,
        mut storable: Storable<'_>,
        timing: Timing,
        live: &Snapshot,
    ) -> Result<Began, StoreError> {
        let max_len = live.max_object_size();
        let declared = match storable.framing {
            BodyFraming::Length(length) => Some(length),
            _ => None,
        };
        let whole = storable.whole.take();
        let (fill_key, meta) = self
            .fill_entry(key, marker, request, storable, timing)
            .await?;
        let Some(body) = whole else {
            let writer = (self.store)
                .begin_fill(
                    fill_key.as_str(),
                    fill_key.store_hash(),
                    &meta,
                    declared,
                    max_len,
                    timing.ticket,
                )
                .await?;
            return Ok(Began::Streaming(Box::new(writer)));
        };
        Ok(Began::Whole(Box::new(WholeBody {
            key: fill_key,
            meta,
            body,
            max_len,
            ticket: timing.ticket,
        })))
    }

    /// What the fill of `storable`, the response to a GET of `key` with `request`
    /// headers, is stored as: under the variant's key when the response varies (writing
    /// a new marker when the URL has none for these fields), under `key` itself
    /// otherwise; with the cache tags [`Cache::storable`] read.
    async fn fill_entry(
        &self,
        key: &CacheKey,
        marker: Option<&Marker>,
        request: &HeaderMap,
        storable: Storable<'_>,
        timing: Timing,
    ) -> Result<(CacheKey, EntryMeta), StoreError> {
        let Storable { head, tags, .. } = storable;
        let fill_key = match VarySpec::of(&head.headers) {
            VarySpec::Fields(fields) => {
                let marker = match marker {
                    Some(marker) if marker.fields == fields => marker.clone(),
                    _ => self.write_marker(key, fields, timing.ticket).await?,
                };
                marker.variant_key(key, request)
            }
            VarySpec::None | VarySpec::Star => key.clone(),
        };
        let mut response_headers = head.headers.clone();
        // Only a marker may carry the marker field, or a response would pose as one.
        response_headers.remove(MARKER_FIELD);
        let meta = EntryMeta {
            request_time: timing.request,
            response_time: timing.response,
            status: head.status,
            tags,
            response_headers,
            request_headers: HeaderMap::new(),
            purged: None,
        };
        Ok((fill_key, meta))
    }

    /// Stores a new marker for `key` (a fresh nonce, so older variants are orphaned),
    /// for a response requested at `ticket`.
    async fn write_marker(
        &self,
        key: &CacheKey,
        fields: Vec<HeaderName>,
        ticket: FillTicket,
    ) -> Result<Marker, StoreError> {
        let marker = Marker {
            nonce: rand::random(),
            fields,
        };
        let mut headers = HeaderMap::new();
        let vary = VarySpec::Fields(marker.fields.clone()).to_field_value();
        if let Ok(value) = HeaderValue::from_str(&vary) {
            headers.insert(VARY, value);
        }
        headers.insert(
            MARKER_FIELD,
            // Hex digits only: always a valid field value.
            HeaderValue::from_str(&format!("{:x}", marker.nonce))
                .unwrap_or_else(|_| HeaderValue::from_static("0")),
        );
        headers.insert(CONTENT_LENGTH, HeaderValue::from(0u64));
        let now = crate::clock::now();
        let meta = EntryMeta {
            request_time: now,
            response_time: now,
            status: StatusCode::OK,
            response_headers: headers,
            request_headers: HeaderMap::new(),
            tags: Vec::new(),
            purged: None,
        };
        let marker_entry = WholeBody {
            key: key.clone(),
            meta,
            body: Bytes::new(),
            max_len: 0,
            ticket,
        };
        // As a fill, as a variant's fill is: a client that leaves meanwhile cannot leave
        // the marker's file renamed into place but not indexed.
        match marker_entry.store(self, |stored| stored).await? {
            WholeFill::Committed => Ok(marker),
            WholeFill::Dropped(error) => Err(error),
        }
    }

    /// Removes what is stored for `key` (its marker, and so all its variants).
    pub(super) async fn invalidate(&self, key: &CacheKey) {
        match self.store.remove(key.as_str(), key.store_hash()).await {
            Ok(removed) => tracing::debug!(key = %key, removed, "invalidated"),
            Err(error) => tracing::warn!(key = %key, %error, "cannot invalidate a cache entry"),
        }
    }
}

/// Whether a response with `stored`'s status and fields may be stored, as a new answer to
/// a request with `request`'s credentials would be judged. The request's own
/// `Cache-Control` is left out: a client's `no-store` keeps its own exchange out of the
/// cache, but it does not make the stored response unstorable for everyone.
fn refreshed_storability(
    judging: Judging<'_>,
    request: &HeaderMap,
    stored: &EntryMeta,
) -> Result<(), NotStored> {
    let mut credentials = HeaderMap::new();
    if let Some(authorization) = fields::first(request, &AUTHORIZATION) {
        credentials.insert(AUTHORIZATION, authorization.clone());
    }
    let mut head = http::Response::new(()).into_parts().0;
    head.status = stored.status;
    head.headers = stored.response_headers.clone();
    policy::storability(
        &credentials,
        &head,
        stored.response_time,
        &judging.live.cache_rules(judging.lifetimes),
    )
}

/// GETs the whole object from `origin`: the client's `request` headers without its
/// conditionals or ranges, with the stored validators when given.
async fn fetch_whole(
    store: &Store,
    origin: &OriginRequest<'_>,
    request: &HeaderMap,
    validators_of: Option<&HeaderMap>,
) -> Result<(OriginResponse, Timing), OriginError> {
    let started = Timing::start(store);
    let (shape, empty) = (Shape::Whole(validators_of), crate::origin::empty_body());
    let response = (origin.send(Method::GET, request, shape, empty)).await?;
    Ok((response, Timing::answered(started)))
}
