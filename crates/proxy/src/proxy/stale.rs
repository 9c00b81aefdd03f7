//! Stale stored responses (RFC 9111 §4.2.4, §4.3; RFC 5861): revalidation with the
//! origin, `stale-if-error` (or `cache.stale_if_unreachable`) when it fails, and the
//! background refresh behind `stale-while-revalidate` (one per key at a time: it holds
//! the key's collapse slot, `collapse`).

use std::sync::Arc;
use std::time::SystemTime;

use http::{Method, StatusCode, request};

use super::cache::{Cache, Found, Judging, Lookup, Revalidated};
use super::collapse::Leader;
use super::forward::{self, Exchange, Filling, Teed, drain};
use super::origin_request::OriginRequest;
use super::{Answer, Ask, Proxy, respond};
use crate::key::CacheKey;
use crate::live::Snapshot;
use crate::origin::OriginError;
use crate::outcome::{Detail, Forward, Outcome};
use crate::policy::NotStored;
use crate::policy::freshness::StoredFreshness;
use crate::proxy::error::ProxyError;
use crate::store::EntryMeta;

/// Statuses that count as the origin failing, for `stale-if-error` (RFC 5861 §4).
const ERROR_STATUSES: [StatusCode; 4] = [
    StatusCode::INTERNAL_SERVER_ERROR,
    StatusCode::BAD_GATEWAY,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

impl Proxy {
    /// Validates a stale (or `no-cache`) stored response with the origin, and answers
    /// from whichever response wins; `forward` says why it is revalidated.
    pub(super) async fn revalidate(
        &self,
        ask: &Ask<'_>,
        key: &CacheKey,
        found: Box<Found>,
        freshness: &StoredFreshness,
        forward: Forward,
    ) -> Result<Answer, ProxyError> {
        let (head, live, origin) = (ask.head, &**ask.live, ask.origin()?);
        let now = crate::clock::now();
        let ttl = freshness.ttl_seconds(now);
        let serve_stale = |found: Box<Found>, detail: Detail| {
            self.note_hit(&found, live);
            let status = Outcome::hit().ttl(ttl).detail(detail);
            respond::from_store(head, *found, freshness, now, status)
        };
        let marker = found.marker.clone();
        let entry_ref = (found.entry.meta.clone(), found.entry.body_len);
        // Keep what is needed to serve stale if the origin fails.
        let judging = Judging {
            live,
            lifetimes: ask.lifetimes(),
        };
        let outcome = (self.cache)
            .revalidate(judging, key, &origin, &head.headers, found)
            .await;
        let purged = |answer: Answer| purged_detail(answer, freshness.purged());
        match outcome {
            Ok(Revalidated::NotModified {
                found,
                upstream,
                kept,
            }) => {
                let answer = not_modified(head, *found, forward, kept, judging, now);
                Ok(purged(answer).with_upstream(upstream))
            }
            Ok(Revalidated::Replaced { response, timing }) => {
                let response = *response;
                if ERROR_STATUSES.contains(&response.head.status)
                    && let Some(window) = freshness.within_stale_if_error(now)
                    && let Some(found) = self.reopen(key, head, &entry_ref).await
                {
                    return Ok(serve_stale(found, Detail::stale_if_error(window)));
                }
                let exchange =
                    Exchange::revalidation(judging, key, marker.as_ref(), forward, timing);
                let answer = self.answer_from_origin(head, response, exchange, None);
                Ok(purged(answer.await))
            }
            Err(error) => {
                if let Some(detail) = stale_allowance(&error, forward, live, freshness, now)
                    && let Some(found) = self.reopen(key, head, &entry_ref).await
                {
                    return Ok(serve_stale(found, detail));
                }
                if freshness.forbids_stale() {
                    return Err(ProxyError::MustRevalidate(error));
                }
                Err(error.into())
            }
        }
    }

    /// Looks the entry up again to serve it stale after a failed revalidation
    /// (the first handle was consumed by it); `None` if it changed meanwhile.
    async fn reopen(
        &self,
        key: &CacheKey,
        head: &request::Parts,
        (meta, body_len): &(Arc<EntryMeta>, u64),
    ) -> Option<Box<Found>> {
        match self.cache.lookup(key, &head.headers).await {
            Lookup::Found(found)
                if found.entry.body_len == *body_len
                    && found.entry.meta.response_headers == meta.response_headers =>
            {
                Some(found)
            }
            _ => None,
        }
    }

    /// Starts one background refresh of a stale entry served under
    /// `stale-while-revalidate`, unless one is already running for the key.
    pub(super) fn refresh_in_background(
        &self,
        ask: &Ask<'_>,
        key: &CacheKey,
        stored: http::HeaderMap,
    ) {
        let Ok(origin) = ask.origin() else {
            return;
        };
        // The task outlives the request, and the site with it.
        let origin = origin.into_owned();
        // The key's collapse slot: one refresh at a time, and misses of the key meanwhile
        // wait for what it stores.
        let Some(leader) = self.collapser.try_lead(key.store_hash()) else {
            return;
        };
        let (cache, key, live) = (self.cache.clone(), key.clone(), Arc::clone(ask.live));
        let (request, lifetimes) = (ask.head.headers.clone(), ask.lifetimes().clone());
        tokio::spawn(async move {
            let judging = Judging {
                live: &live,
                lifetimes: &lifetimes,
            };
            let refresh_of = Refresh {
                cache: &cache,
                judging,
                origin: &origin,
                request: &request,
                key: &key,
                stored: &stored,
            };
            refresh(refresh_of, leader).await;
        });
    }
}

/// Whether the stored entry may answer after the origin failed with `error`, and why:
/// the response's own `stale-if-error`, else the operator's allowance for a disconnected
/// origin (RFC 9111 §4.2.4, [`unreachable_allows`]).
fn stale_allowance(
    error: &OriginError,
    forward: Forward,
    live: &Snapshot,
    freshness: &StoredFreshness,
    now: SystemTime,
) -> Option<Detail> {
    if let Some(window) = freshness.within_stale_if_error(now) {
        return Some(Detail::stale_if_error(window));
    }
    unreachable_allows(error, forward, live, freshness, now).then_some(Detail::StaleIfUnreachable)
}

/// Whether `cache.stale_if_unreachable` lets a stale entry (judged by `freshness` at
/// `now`) answer after `error`: the origin could not be reached or timed out, and the
/// entry went stale by itself (`forward` is `stale`, not the client's own `no-cache`).
fn unreachable_allows(
    error: &OriginError,
    forward: Forward,
    live: &Snapshot,
    freshness: &StoredFreshness,
    now: SystemTime,
) -> bool {
    let allowance = live.stale_if_unreachable();
    matches!(error, OriginError::Connect(_) | OriginError::Timeout(_))
        && forward == Forward::Stale
        && !allowance.is_zero()
        && freshness.stale_within(allowance, now)
}

/// The answer from `found` after the origin said 304 to its revalidation for `forward`:
/// not a hit (the origin was asked). When the entry `kept` the refreshed metadata, it is
/// now one second-hit would have too, since the request that revalidated it would have
/// stored it; when it was removed, `Cache-Status` says why.
fn not_modified(
    head: &request::Parts,
    found: Found,
    forward: Forward,
    kept: Result<(), NotStored>,
    judging: Judging<'_>,
    now: SystemTime,
) -> Answer {
    let Judging { live, lifetimes } = judging;
    let fresh = StoredFreshness::new(&found.entry.meta, &live.cache_rules(lifetimes));
    let outcome = Outcome::forward(forward)
        .fwd_status(StatusCode::NOT_MODIFIED)
        .ttl(fresh.ttl_seconds(now));
    let outcome = match kept {
        Ok(()) => {
            if let Some(lost) = &live.lost_hits {
                lost.note_served(found.entry.key_hash());
            }
            outcome
        }
        Err(reason) => outcome.detail(Detail::NotStored(reason)),
    };
    respond::from_store(head, found, &fresh, now, outcome)
}

/// `answer` to the revalidation of a soft-purged entry with `detail=purged`, unless it
/// has a detail of its own (why it was not stored): `Cache-Status` carries one.
fn purged_detail(mut answer: Answer, purged: bool) -> Answer {
    if purged
        && let Outcome::Forwarded(forwarded) = &mut answer.outcome
        && forwarded.detail.is_none()
    {
        forwarded.detail = Some(Detail::Purged);
    }
    answer
}

/// What a background refresh of a stored response needs (`stale-while-revalidate`).
struct Refresh<'a> {
    cache: &'a Cache,
    judging: Judging<'a>,
    /// The origin the entry is revalidated with.
    origin: &'a OriginRequest<'a>,
    /// The headers of the client request that was served stale.
    request: &'a http::HeaderMap,
    key: &'a CacheKey,
    /// The response headers that were served stale: only that entry is refreshed.
    stored: &'a http::HeaderMap,
}

/// The background half of `stale-while-revalidate`: revalidates the stored response
/// for `key` with `origin` (for a client that sent `request` headers) and stores
/// whatever the origin answers, reading the body to its end. `leader` holds the key's
/// slot until then (until the new entry is committed).
async fn refresh(refresh: Refresh<'_>, leader: Leader) {
    let Refresh {
        cache,
        judging,
        origin,
        request,
        key,
        stored,
    } = refresh;
    let (found, marker) = match cache.lookup(key, request).await {
        // Only if it is still the response that was served stale.
        Lookup::Found(found) if &found.entry.meta.response_headers == stored => {
            let marker = found.marker.clone();
            (found, marker)
        }
        _ => return,
    };
    let (response, timing) = match cache.revalidate(judging, key, origin, request, found).await {
        Ok(Revalidated::NotModified { .. }) => return,
        Ok(Revalidated::Replaced { response, timing }) => (*response, timing),
        Err(error) => {
            tracing::info!(key = %key, %error, "background refresh failed");
            return;
        }
    };
    // No client reads this exchange's Cache-Status; `fwd=stale` is what it would say.
    let exchange = Exchange::revalidation(judging, key, marker.as_ref(), Forward::Stale, timing);
    let filling = forward::fill(
        cache,
        &Method::GET,
        request,
        &exchange,
        response,
        Some(leader),
    );
    let Teed { stored, body, .. } = match filling {
        Filling::Now(teed) => teed,
        Filling::Beginning(beginning) => beginning.await,
    };
    if let Err(detail) = stored {
        tracing::debug!(key = %key, reason = detail.as_str(), "background refresh not stored");
        return;
    }
    // Read to the end so the fill completes; the frames themselves go nowhere.
    drain(body).await;
}
