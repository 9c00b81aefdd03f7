//! The miss path of a GET/HEAD, top to bottom: the request to the origin ([`Proxy::fetch`]:
//! a range of an object about to be stored is fetched whole), then the answer
//! ([`Proxy::answer_from_origin`]): offered for storage by [`fill`] (storable → admitted
//! → fill → tee, shared with the background refresh of `stale-while-revalidate`), a 304
//! for the client's own validators, and the client's range (or ascending ranges, as
//! `multipart/byteranges`) cut out of a whole object fetched to be stored.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use http::header::RANGE;
use http::{HeaderMap, Method, Response, StatusCode, request, response};
use http_body_util::BodyExt;

use super::cache::{Began, Cache, Detached, Judging, Marker, Storable, Timing, WholeBody};
use super::collapse::{Fetching, Leader};
use super::origin_request::Shape;
use super::respond::{self, Cut};
use super::routing::{Admitting, RuleCheck};
use super::{Answer, Ask, Proxy};
use crate::admission::{AdmitReason, Assembled, Decision};
use crate::body::{BoxError, ClientBody, ProxyBody};
use crate::config::rules::Lifetimes;
use crate::key::CacheKey;
use crate::live::Snapshot;
use crate::logging::throttle::{OncePerKey, Throttle};
use crate::lost_hits::LostHits;
use crate::metrics::{ByteCounter, Metrics};
use crate::origin::{self, BodyFraming, OriginResponse, ReadTimeout};
use crate::outcome::ErrorKind;
use crate::outcome::{Detail, Forward, Outcome};
use crate::policy::validation;
use crate::policy::{NotStored, UnindexedTags};
use crate::proxy::error::ProxyError;
use crate::range::{self, PartsBody, RangeAnswer};
use crate::store::{EntryWriter, StoreError, StoreHash, Trouble, WholeFill};
use crate::tee::TeeBody;

impl Proxy {
    /// Forwards a GET/HEAD miss, storing the response when policy and admission allow.
    pub(super) async fn fetch(
        &self,
        ask: &Ask<'_>,
        body: ClientBody,
        key: &CacheKey,
        miss: Miss<'_>,
    ) -> Result<Answer, ProxyError> {
        let (head, live) = (ask.head, &**ask.live);
        let Miss {
            marker,
            forward,
            admission,
            rules,
            fetching,
        } = miss;
        let (leader, timed_out) = match fetching {
            Fetching::Leading(leader) => (Some(leader), false),
            Fetching::Alone => (None, false),
            Fetching::WaitedTooLong => (None, true),
        };
        // Whether the answer may be stored, if storable: not for a request that gave up
        // waiting for another one's fill (it gets the range it asked for, not the whole).
        let may_store = head.method == Method::GET && admission.planned().is_admit() && !timed_out;
        // Byte ranges of an object about to be stored are fetched whole and answered from
        // it; any other range is passed to the origin and not stored.
        let whole_for_range = may_store && range::is_answerable_range(&head.headers);
        let ranged = crate::fields::has(&head.headers, &RANGE);
        // A whole object to store is asked for without the client's range (cut from it
        // here) and without its validators, which would let the origin answer 304,
        // leaving nothing to store.
        let shape = match may_store && (whole_for_range || !ranged) {
            true => Shape::Whole(None),
            false => Shape::AsSent,
        };
        let mut range_forwarded = ranged && matches!(shape, Shape::AsSent);
        let to_origin = ask.origin()?;
        let started = Timing::start(&self.cache.store);
        let body = origin::client_body(body);
        let sending = to_origin.send(head.method.clone(), &head.headers, shape, body);
        let mut origin = sending.await?;
        if whole_for_range
            && matches!(origin.framing, BodyFraming::Length(len) if len > live.max_object_size())
        {
            // Too large to store: fetching it whole would only serve one range of it. Drop
            // this response (and its connection) and let the origin answer the range.
            drop(origin);
            range_forwarded = true;
            let empty = origin::empty_body();
            let sending = to_origin.send(Method::GET, &head.headers, Shape::AsSent, empty);
            origin = sending.await?;
        }
        let exchange = Exchange {
            live,
            lifetimes: ask.lifetimes(),
            key,
            marker: marker.as_ref(),
            forward,
            admission,
            rules,
            timing: Timing::answered(started),
            range_forwarded,
            collapse_timed_out: timed_out,
        };
        Ok(self
            .answer_from_origin(head, origin, exchange, leader)
            .await)
    }

    /// Relays the origin's answer to a GET/HEAD, teeing it to a fill when it is
    /// storable and admitted, and cutting the client's range out of a whole object.
    /// `leader`: this request leads a collapse of its key (see [`fill`]).
    pub(super) async fn answer_from_origin(
        &self,
        head: &request::Parts,
        origin: OriginResponse,
        exchange: Exchange<'_>,
        leader: Option<Leader>,
    ) -> Answer {
        let (method, request) = (&head.method, &head.headers);
        let upstream = origin.upstream.clone();
        let teed = match fill(&self.cache, method, request, &exchange, origin, leader) {
            Filling::Now(teed) => teed,
            Filling::Beginning(beginning) => beginning.await,
        };
        let miss = Outcome::forward(exchange.forward).fwd_status(teed.head.status);
        let outcome = match (teed.stored, teed.admitted) {
            (Ok(()), Some(admitted)) => miss.stored().detail(admitted),
            (Ok(()), None) => miss.stored(),
            (Err(detail), _) => miss.detail(detail),
        };
        // Answered at once, not held to the end of the scheduler pass: with the lean
        // server that wait no longer saved CPU, and it held every forwarded answer
        // behind the pass's other tasks (`benches/RESULTS.md`, "the twelfth session").
        Answer::new(relay(head, teed, exchange.range_forwarded), outcome).with_upstream(upstream)
    }
}

/// The client's response to `head` from the origin's `teed` answer: a 304 when the
/// client's validators match a whole 200, the client's range cut out of a whole object
/// (unless the range was `forwarded` to the origin), else the answer as it is.
fn relay(head: &request::Parts, teed: Teed, forwarded: bool) -> Response<ProxyBody> {
    let Teed {
        head: mut response_head,
        framing,
        body,
        ..
    } = teed;
    let whole_get =
        !forwarded && head.method == Method::GET && response_head.status == StatusCode::OK;
    if whole_get && validation::client_not_modified(&head.headers, &response_head.headers) {
        // The client's validators were held back so that the origin sent a storable
        // 200, and that 200 matches them: the client gets its 304 (RFC 9110 §13.1.2).
        // The body is dropped unread: a fill teed from it runs on as an orphan, within
        // `cache.max_orphan_fills` and its own size limit, and without a fill nothing
        // reads it (no body nobody stores is drained, however large).
        drop(body);
        let head = validation::not_modified_head(response_head);
        return Response::from_parts(head, respond::empty());
    }
    let body = match framing {
        BodyFraming::Length(len) if whole_get => {
            let ranged = streamable(range::answer(&head.headers, &response_head.headers, len));
            cut_body(body, respond::cut(&mut response_head, ranged, len))
        }
        _ => boxed(body),
    };
    Response::from_parts(response_head, body)
}

/// What of `ranged` a whole object can answer as it streams in from the origin: parts
/// only in ascending order; for parts out of order, and for a range of unsatisfiable
/// extent, the whole object, which is a valid answer to any range request (RFC 9110
/// §14.2).
fn streamable(ranged: RangeAnswer) -> RangeAnswer {
    match ranged {
        RangeAnswer::Parts(parts) if !range::ascending(&parts) => RangeAnswer::Whole,
        RangeAnswer::Unsatisfiable => RangeAnswer::Whole,
        ranged => ranged,
    }
}

/// The bytes `cut` names, cut out of the whole object's `body` as it streams in.
fn cut_body(body: TeeBody<origin::OriginBody>, cut: Cut) -> ProxyBody {
    match cut {
        Cut::Whole => boxed(body),
        Cut::Part(first, last) => boxed(PartsBody::range(body, first, last)),
        Cut::Parts(parts, multipart) => boxed(PartsBody::multipart(body, &multipart, parts)),
        Cut::Nothing => {
            // `streamable` sends no such answer; the body would be dropped as for a 304
            // (a fill teed from it runs on as an orphan).
            drop(body);
            respond::empty()
        }
    }
}

/// `body` as the client's response body.
fn boxed<B>(body: B) -> ProxyBody
where
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // One allocation: every answer, from the origin or from storage, has the one body type.
    body.map_err(Into::into).boxed_unsync()
}

/// The origin's answer after [`fill`]: its head, and its body teed into the fill if one began.
pub(super) struct Teed {
    /// The origin's status and end-to-end headers.
    pub(super) head: response::Parts,
    /// How the origin delimited the body.
    pub(super) framing: BodyFraming,
    /// `Ok` when a fill began (`Cache-Status: stored`), else the `detail` why not.
    pub(super) stored: Result<(), Detail>,
    /// The `detail` a stored response carries: the mode of `policy = "auto"` that
    /// admitted it ([`Detail::of_admitted`]).
    pub(super) admitted: Option<Detail>,
    /// The body to read: it feeds the fill, when there is one, as it is read.
    pub(super) body: TeeBody<origin::OriginBody>,
}

/// Offers `origin`, the answer to a `method` request with `request` headers, for
/// storage: when it is storable (RFC 9111 policy, framing, size; only whole answers to a
/// GET) and `exchange.admission` admits it, a fill begins and the body is teed into it
/// ([`Filling::Beginning`]); a small body that arrived whole with the head
/// ([`whole_at_head`]) is stored at once, in one file call, and then streams to the
/// client from memory. Every origin answer to a GET/HEAD of a cacheable key goes through
/// here, the client's and the background refresh's alike, so this is where admission
/// decisions are counted: each decision applied to a storable response, the body bytes
/// of those it rejected (as they stream), and in shadow mode the fills second-hit would
/// not have written.
///
/// `leader` holds the key's collapse slot: the fill keeps it until the entry is committed
/// (or the fill dropped), so that the requests waiting for it find the entry; without a
/// fill it is dropped here, and they go to the origin at once.
pub(super) fn fill<'a>(
    cache: &'a Cache,
    method: &Method,
    request: &'a HeaderMap,
    exchange: &'a Exchange<'a>,
    origin: OriginResponse,
    leader: Option<Leader>,
) -> Filling<'a> {
    let answer = (&origin.head, origin.framing);
    let (verdict, decision) = judge(cache, method, request, exchange, answer);
    let detail = match (verdict, decision) {
        (Err(reason), _) => Detail::NotStored(reason),
        (Ok(_), Decision::Reject(reason)) => Detail::Admission(reason),
        (Ok(storable), Decision::Admit(_)) => {
            let storable = storable.detach();
            let answer = (origin, storable);
            let filling = || admitted(cache, request, exchange, decision, answer, leader);
            return Filling::Beginning(super::boxed(filling));
        }
    };
    Filling::Now(unfilled(cache, exchange, decision, origin, detail, leader))
}

/// What [`fill`] made of an origin's answer.
pub(super) enum Filling<'a> {
    /// No fill begins: the answer, teed at once.
    Now(Teed),
    /// The answer is admitted for storage: the fill's beginning (a marker write, the
    /// entry's file, a whole body's one file call), to await. Boxed, and only here: that
    /// state is about 2 KiB, and every answer's future would otherwise carry it and copy
    /// it on each move, while a fill, which writes to disk, affords the allocation.
    Beginning(Pin<Box<dyn Future<Output = Teed> + Send + 'a>>),
}

/// The fill of `origin`, a storable answer admitted under `decision`: a body that came
/// whole with the head is stored at once, any other teed into the fill as it streams; an
/// answer whose fill cannot begin is passed on as [`unfilled`] passes it.
async fn admitted(
    cache: &Cache,
    request: &HeaderMap,
    exchange: &Exchange<'_>,
    decision: Decision,
    (mut origin, storable): (OriginResponse, Detached),
    leader: Option<Leader>,
) -> Teed {
    let (marker, timing, live) = (exchange.marker, exchange.timing, exchange.live);
    let whole = whole_at_head(origin.framing, &mut origin.body).await;
    let storable = storable.attach(&origin.head).with_whole(whole);
    let began = cache.begin_fill(exchange.key, marker, request, storable, timing, live);
    let (stored, body) = match began.await {
        Ok(Began::Whole(whole)) => {
            let stored = store_whole(cache, exchange, decision, *whole, leader).await;
            (stored, TeeBody::passthrough(origin.body))
        }
        Ok(Began::Streaming(writer)) => {
            let leader = Notes::of(exchange.live, decision).began(Ok(writer.key_hash()), leader);
            let counted = writes_avoided(&cache.metrics, Ok(()), decision);
            let counted = counted.map(|counter| (cache.metrics.clone(), counter));
            tee(
                cache,
                exchange.key,
                Ok(writer),
                leader,
                origin.body,
                counted,
            )
        }
        Err(error) => {
            let detail = not_started(&cache.metrics, exchange.key, error);
            return unfilled(cache, exchange, decision, origin, detail, leader);
        }
    };
    Teed {
        head: origin.head,
        framing: origin.framing,
        stored,
        admitted: Detail::of_admitted(decision),
        body,
    }
}

/// `origin` passed on without a fill, for `detail`: admission and the collapse slot
/// (`leader`) are told why, and the body's bytes counted as writes avoided when that is
/// what `decision` made them.
fn unfilled(
    cache: &Cache,
    exchange: &Exchange<'_>,
    decision: Decision,
    origin: OriginResponse,
    detail: Detail,
    leader: Option<Leader>,
) -> Teed {
    let leader = Notes::of(exchange.live, decision).began(Err(&detail), leader);
    let counted = writes_avoided(&cache.metrics, Err(&detail), decision);
    let counted = counted.map(|counter| (cache.metrics.clone(), counter));
    let (stored, body) = tee(
        cache,
        exchange.key,
        Err(detail),
        leader,
        origin.body,
        counted,
    );
    Teed {
        head: origin.head,
        framing: origin.framing,
        stored,
        admitted: Detail::of_admitted(decision),
        body,
    }
}

/// Whom a fill that began, or could not, is told of: the admission policy and the
/// ledger of hits second-hit would have lost (its decision), the key's collapse slot.
struct Notes<'a> {
    admission: &'a Assembled,
    lost_hits: Option<&'a LostHits>,
    decision: Decision,
}

impl<'a> Notes<'a> {
    /// The notes of a fill under `decision` with `live`'s admission.
    fn of(live: &'a Snapshot, decision: Decision) -> Notes<'a> {
        Notes {
            admission: &live.admission,
            lost_hits: live.lost_hits.as_deref(),
            decision,
        }
    }

    /// Notes that a fill of the entry `began` (its key hash) began, or why it did not,
    /// and returns `leader`, the key's collapse slot, for the fill to hold: the slot of
    /// an answer not storable is freed here, and for a reason of the response's own the
    /// key is passed uncollapsed for a while; without a fill, dropping the slot frees it.
    fn began(&self, began: Result<StoreHash, &Detail>, leader: Option<Leader>) -> Option<Leader> {
        match began {
            Ok(hash) => {
                self.admission.policy.note_fill(self.decision);
                if let Some(lost) = self.lost_hits {
                    lost.note_fill(hash, self.decision);
                }
                leader
            }
            Err(Detail::NotStored(reason)) => {
                if let Some(leader) = leader {
                    leader.not_storable(*reason);
                }
                None
            }
            Err(_) => leader,
        }
    }
}

/// Stores `whole`, the body that came with the head, in one file call in its fill's
/// task, which then does, in the same task, what the request does for a streamed fill:
/// notes the fill (or why it did not begin), counts it, and tells `leader` how it ended.
/// A client that leaves while the call waits for the disk takes none of that with it:
/// the entry, its counts and the requests collapsed onto it end as if it had stayed.
/// The body's bytes are counted whole, as the pump of a streamed fill counts what it
/// reads whether or not the client reads it all. `Ok`: stored, else why not.
async fn store_whole(
    cache: &Cache,
    exchange: &Exchange<'_>,
    decision: Decision,
    whole: WholeBody,
    leader: Option<Leader>,
) -> Result<(), Detail> {
    let (metrics, key) = (Arc::clone(&cache.metrics), exchange.key.clone());
    let admission = Arc::clone(&exchange.live.admission);
    let lost_hits = exchange.live.lost_hits.clone();
    let (hash, len) = (whole.key_hash(), whole.len());
    let ended = move |stored: Result<WholeFill, StoreError>| {
        let notes = Notes {
            admission: &admission,
            lost_hits: lost_hits.as_deref(),
            decision,
        };
        let commit = match stored {
            Ok(WholeFill::Committed) => Ok(()),
            Ok(WholeFill::Dropped(error)) => Err(error),
            Err(error) => {
                let detail = not_started(&metrics, &key, error);
                notes.began(Err(&detail), leader);
                return Err(detail);
            }
        };
        let leader = notes.began(Ok(hash), leader);
        if let Some(counter) = writes_avoided(&metrics, Ok(()), decision) {
            metrics.add_bytes(counter, len);
        }
        let dropped = crate::tee::committed(key.as_str(), commit);
        if let Some(leader) = leader {
            leader.fill_ended(dropped);
        }
        Ok(())
    };
    whole.store(cache, ended).await
}

/// The largest body stored in one file call when it arrived whole with its head
/// ([`Store::store_whole`](crate::store::Store::store_whole)): held in memory for the
/// call, and small enough that the hand-off the call saves still weighs against the
/// body's own write.
const WHOLE_AT_HEAD: u64 = 64 * 1024;

/// The whole body of an answer being stored, when it may be stored in one file call:
/// a body of a declared length up to [`WHOLE_AT_HEAD`] that has all arrived with the
/// head. The body still streams to the client as it is. Looked for only once the answer
/// is storable and admitted: reading ahead costs an answer passed on for nothing.
async fn whole_at_head(framing: BodyFraming, body: &mut ReadTimeout) -> Option<bytes::Bytes> {
    match framing {
        BodyFraming::Length(len) if len <= WHOLE_AT_HEAD => body.peek_whole(len).await,
        _ => None,
    }
}

/// Whether `origin` may be stored (`Ok`: with its cache tags; `Err`: why not), and
/// the admission of it: for a storable answer, admission's second phase — the policy, then a site's rule, may
/// decide by the response's type or size, now that its head is here — counted as a
/// decision; otherwise the decision planned before, and the policy is not asked.
fn judge<'o>(
    cache: &Cache,
    method: &Method,
    request: &HeaderMap,
    exchange: &Exchange<'_>,
    (head, framing): (&'o response::Parts, BodyFraming),
) -> (Result<Storable<'o>, NotStored>, Decision) {
    let live = exchange.live;
    let verdict = if method != Method::GET {
        Err(NotStored::Method)
    } else if exchange.collapse_timed_out {
        Err(NotStored::CollapseTimeout)
    } else if exchange.range_forwarded {
        Err(NotStored::Range)
    } else {
        cache.storable(
            Judging {
                live,
                lifetimes: exchange.lifetimes,
            },
            request,
            (head, framing),
            exchange.timing.response,
        )
    };
    if let Err(reason) = &verdict {
        match *reason {
            NotStored::TooLarge => log_too_large(exchange.key, framing, live.max_object_size()),
            NotStored::Tags(unindexed) => note_unindexed(cache, exchange.key, unindexed),
            _ => {}
        }
        return (verdict, exchange.admission.planned());
    }
    let length = match framing {
        BodyFraming::Length(length) => Some(length),
        _ => None,
    };
    // A storable miss, which the estimates replay; a body of undeclared length counts as
    // none (its size is known only once it has streamed).
    if let Some(hash) = exchange.admission.hash() {
        live.tuning.observe(hash, length.unwrap_or(0));
    }
    let policy = &*live.admission.policy;
    let decision = (exchange.admission).on_response(policy, exchange.rules, head, length);
    cache.metrics.count_decision(decision);
    (verdict, decision)
}

/// The `detail` of a fill of `key` that could not start for `error`, logged and counted.
fn not_started(metrics: &Metrics, key: &CacheKey, error: StoreError) -> Detail {
    match error {
        // Larger than the whole budget: no eviction can make room, so this is the
        // object's size, not a failure of the store.
        StoreError::NoSpace { needed, max_size } if needed > max_size => {
            if let Some(held) = TOO_LARGE_LOG.admit() {
                tracing::info!(
                    key = %key,
                    needed,
                    max_size,
                    held_back = held,
                    "object larger than cache.max_size; proxying it uncached"
                );
            }
            Detail::NotStored(NotStored::TooLarge)
        }
        // The operator's cap, not a failure: counted by its detail.
        StoreError::WriteBudget { .. } => Detail::WriteBudget,
        // Asked for before a purge that selects it: served, not stored.
        StoreError::PurgedInFlight => Detail::PurgedInFlight,
        // The cache directory is the new process's now: served, not stored.
        StoreError::Closed => Detail::Handover,
        error if error.trouble().is_some() => {
            // The store logs disk trouble once per back-off period, not per fill.
            tracing::debug!(key = %key, %error, "disk cannot take the fill; proxying uncached");
            metrics.count_error(ErrorKind::FillNotStarted);
            trouble_detail(&error)
        }
        error => {
            tracing::warn!(key = %key, %error, "cannot start fill; proxying uncached");
            metrics.count_error(ErrorKind::FillNotStarted);
            Detail::StoreError
        }
    }
}

/// Which of the body's bytes count as writes (second-hit would have) avoided, for a fill
/// that began (`Ok`) or did not, and why; a fill second-hit would not have written is
/// counted here.
fn writes_avoided(
    metrics: &Metrics,
    began: Result<(), &Detail>,
    decision: Decision,
) -> Option<ByteCounter> {
    match (began, decision) {
        (Err(Detail::Admission(_)), _) => Some(ByteCounter::WritesAvoided),
        (Ok(()), Decision::Admit(AdmitReason::Shadowed(_))) => {
            metrics.count_shadow_write_avoided();
            Some(ByteCounter::ShadowWritesAvoided)
        }
        _ => None,
    }
}

/// The origin's `body`, teed into the fill that `began` streaming (or passed on, when
/// none began); `leader` is told how the fill ended, and the body's data bytes are added
/// to `counted`, if any. `Ok`: stored, else why not.
fn tee(
    cache: &Cache,
    key: &CacheKey,
    began: Result<Box<EntryWriter>, Detail>,
    leader: Option<Leader>,
    body: origin::OriginBody,
    counted: Option<(Arc<Metrics>, ByteCounter)>,
) -> (Result<(), Detail>, TeeBody<origin::OriginBody>) {
    match began {
        Ok(writer) => {
            // Told how the fill ended: its followers find the entry, or all fetch at once.
            let ended = move |dropped| {
                if let Some(leader) = leader {
                    leader.fill_ended(dropped);
                }
            };
            let body =
                TeeBody::with_fill(body, *writer, key.as_str(), &cache.fills, ended, counted);
            (Ok(()), body)
        }
        Err(detail) => {
            let body = TeeBody::passthrough(body);
            let body = match counted {
                Some((metrics, counter)) => body.counting(metrics, counter),
                None => body,
            };
            (Err(detail), body)
        }
    }
}

/// The `detail` of a fill that disk trouble kept from starting: `disk-full` for a disk
/// without room, `store-error` for one failing its writes.
fn trouble_detail(error: &StoreError) -> Detail {
    match error.trouble() {
        Some(Trouble::NoSpace) => Detail::DiskFull,
        _ => Detail::StoreError,
    }
}

/// Says, once per key, that a response declared larger than `cache.max_object_size` is
/// passed on and not stored, naming the limit: an operator whose large files all come
/// back `too-large` learns which setting to raise.
fn log_too_large(key: &CacheKey, framing: BodyFraming, limit: u64) {
    static ONCE: OnceLock<OncePerKey> = OnceLock::new();
    let BodyFraming::Length(length) = framing else {
        return;
    };
    // The key's store hash, folded to 64 bits, picks its slot.
    let hash = key.store_hash().0;
    if ONCE
        .get_or_init(OncePerKey::new)
        .first((hash ^ (hash >> 64)) as u64)
    {
        tracing::info!(
            key = %key,
            length,
            max_object_size = limit,
            "response larger than cache.max_object_size; proxying it uncached"
        );
    }
}

/// Throttles the line about objects larger than `cache.max_size`, which every request
/// for such an object would otherwise write.
static TOO_LARGE_LOG: Throttle = Throttle::new();

/// Counts a response of `key` not stored because its tags could not all be indexed, and
/// logs it (throttled: every request for it would otherwise write the line).
fn note_unindexed(cache: &Cache, key: &CacheKey, reason: UnindexedTags) {
    cache.metrics.count_unindexed_tags(reason);
    if let Some(held) = UNINDEXED_LOG.admit() {
        tracing::warn!(
            key = %key,
            reason = reason.as_str(),
            held_back = held,
            "a response's cache tags cannot all be indexed ([tags] limits); proxying it uncached"
        );
    }
}

/// Throttles the line about responses whose tags cannot all be indexed.
static UNINDEXED_LOG: Throttle = Throttle::new();

/// Reads `body` to its end and drops what it yields, so a fill teed from it completes
/// (or, for a body nobody stores, so the origin connection is reused rather than cut).
pub(super) async fn drain<B: hyper::body::Body + Unpin>(mut body: B) {
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
}

/// One origin exchange for a GET/HEAD, and what the cache decided about it beforehand.
pub(super) struct Exchange<'a> {
    /// The view of the settings and the admission the request loaded.
    pub(super) live: &'a Snapshot,
    /// The lifetimes of the request's site rule.
    pub(super) lifetimes: &'a Lifetimes,
    /// The URL's key (variants are derived from it).
    pub(super) key: &'a CacheKey,
    /// The URL's variant set, when one is stored.
    pub(super) marker: Option<&'a Marker>,
    /// Why the request went to the origin (Cache-Status `fwd`).
    pub(super) forward: Forward,
    /// What admission recorded for the key, asked again only if the answer is storable.
    pub(super) admission: Admitting,
    /// The site's rules, which may override the policy's decision once the response is
    /// known.
    pub(super) rules: Option<RuleCheck<'a>>,
    /// When the request was sent and when the response head arrived.
    pub(super) timing: Timing,
    /// The client's `Range` went to the origin (so the answer is not the whole object).
    pub(super) range_forwarded: bool,
    /// The request waited `cache.collapse_timeout` for another one's fill: not stored.
    pub(super) collapse_timed_out: bool,
}

impl<'a> Exchange<'a> {
    /// The exchange of a revalidation of a stored key (`live`, `key`, `marker`) that went
    /// forward for `forward` with `timing`: re-admitted without asking the policy, and
    /// always for the whole object.
    pub(super) fn revalidation(
        judging: Judging<'a>,
        key: &'a CacheKey,
        marker: Option<&'a Marker>,
        forward: Forward,
        timing: Timing,
    ) -> Exchange<'a> {
        Exchange {
            live: judging.live,
            lifetimes: judging.lifetimes,
            key,
            marker,
            forward,
            admission: Admitting::AlreadyStored,
            rules: None,
            timing,
            range_forwarded: false,
            collapse_timed_out: false,
        }
    }
}

/// A miss on its way to the origin: what the lookup and admission found, and its part in
/// the key's collapse slot.
pub(super) struct Miss<'a> {
    /// The URL's variant set, when one is stored.
    pub(super) marker: Option<Marker>,
    /// Why the request goes to the origin (Cache-Status `fwd`).
    pub(super) forward: Forward,
    /// What admission recorded for the key, and planned as far as the site's rules know
    /// before the response.
    pub(super) admission: Admitting,
    /// The site's rules, for the decision after the response head.
    pub(super) rules: Option<RuleCheck<'a>>,
    /// Whether it leads a collapse, goes alone, or gave up waiting.
    pub(super) fetching: Fetching,
}
