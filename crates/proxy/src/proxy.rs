//! Per-request orchestration: site → key → admission → store lookup → freshness →
//! origin → policy → tee.
//!
//! This module decides and delegates; it parses nothing and touches no file itself.
//! The order of steps follows `docs/design.md`, "The request path":
//! 0. The request's host picks its site (`routing`, [`crate::sites`]): the origin it goes
//!    to and the rules that apply; a host no site names may be answered 421 or 404
//!    (`detail=unknown-host`). A rule may bypass the cache (`fwd=bypass`: no lookup, no
//!    filter, no store), shape the key, ignore the client's `no-cache`, or override
//!    admission — before the response, or by its type and size after its head.
//! 1. Methods other than GET and HEAD are passed through (`fwd=method`), except a `TRACE` or
//!    `OPTIONS` with `Max-Forwards: 0`, which the proxy answers itself; a non-error
//!    answer to an unsafe one invalidates the URL and its same-origin `Location` /
//!    `Content-Location` (RFC 9111 §4.4).
//! 2. Every GET/HEAD key is checked against *and recorded in* the admission filter,
//!    hits included, so a hot object stays known to the filter. Variants share their
//!    URL's key there: admission counts per URL.
//! 3. The stored response for the request's variant is judged by `policy`: fresh → served
//!    (`hit`, with 304/206/416/HEAD handled in `respond`); stale → revalidated with the
//!    origin (`fwd=stale`), served stale during `stale-while-revalidate` while one
//!    background refresh per key runs, or on origin errors within `stale-if-error`;
//!    the request's own directives may demand a newer response (`fwd=request`).
//! 4. A miss goes to the origin (`fwd=uri-miss`, or `fwd=vary-miss` when other variants
//!    exist); a storable response is written to disk only when admission admits it
//!    (`stored`), otherwise `detail` names why not. A range miss (one range, or several)
//!    that will be stored fetches the whole object and answers the ranges from it. The
//!    whole miss path reads top to bottom in `forward`. Before it, concurrent misses of
//!    one key are collapsed (`collapse`): one leads to the origin, the others wait for
//!    its entry and are answered from it (`Cache-Status: ...; collapsed`).
//!
//! A cache failure (lookup or fill) is logged and the request proxied uncached.
//!
//! Every request is counted in [`Metrics`] once its `Cache-Status` is final (in
//! [`Proxy::handle`], beside the access log); the fill path counts admission decisions and
//! the bytes admission kept off the disk, and in shadow mode every fill and every answer
//! from storage is reported to the ledger of entries second-hit would not have stored
//! ([`crate::lost_hits::LostHits`]), which counts the hits second-hit would have lost.
//!
//! Submodules: `cache` (lookup with variants, revalidation, fills), `collapse` (one
//! origin fetch per key at a time), `forward` (the miss
//! path, and the one storable → fill → tee step every origin answer to a GET takes),
//! `respond` (answers from storage, and the head of every range answer), `stale` (stale
//! entries), `origin_request` (the one way a request is sent to the origin),
//! `invalidate` (unsafe methods), `max_forwards` (`TRACE`/`OPTIONS` hop counting),
//! `target_form` (`*` targets and `CONNECT`, answered by the proxy), `routing` (the
//! request's site, and its rules' part in admission).

mod cache;
mod collapse;
mod error;
mod failure_log;
mod forward;
mod invalidate;
mod max_forwards;
pub(crate) mod origin_request;
mod respond;
mod routing;
mod purge;
mod stale;
mod tags;
pub(crate) mod target_form;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::{AUTHORIZATION, HOST, RANGE, REFERER, USER_AGENT};
use http::{Method, Request, Response, request};
use http_body_util::BodyExt;
use hyper::body::Body as _;

use crate::access_log::Record;
use crate::admission::Decision;
use crate::body::{BoxError, ClientBody, ProxyBody};
use crate::cache_status::{self, CACHE_STATUS};
use crate::config::rules::Lifetimes;
use crate::fields;
use crate::hygiene::{self, ClientConnection};
use crate::key::{CacheKey, ClientScheme};
use crate::live::{Live, Snapshot};
use crate::metrics::{Metrics, body_len};
use crate::origin::Upstream;
use crate::outcome::{Detail, Forward, Outcome};
use crate::policy::NotStored;
use crate::policy::freshness::{RequestDirectives, Reuse};
use crate::policy::validation;
use crate::proxy::error::{ProxyError, error_response};
use crate::sites::Site;
use crate::sites::rule::Matched;
use crate::store::Store;

use crate::tee::Fills;
use cache::{Cache, Found, Lookup};
use collapse::{Collapser, Fetching, Role, Waited};
use forward::Miss;
pub(crate) use purge::PurgeRequest;
use routing::{Admitting, RuleCheck};

/// The admission of a key already stored once: a refetch of it is re-admitted without
/// asking the filter.
const READMIT: Admitting = Admitting::AlreadyStored;
use max_forwards::Hop;
use origin_request::{OriginRequest, Shape};

/// A response and what became of its request. Every stage of the request path returns
/// one, and [`Proxy::handle`] renders the outcome — `Cache-Status`, the request counters
/// and the access log — once.
pub(crate) struct Answer {
    response: Response<ProxyBody>,
    outcome: Outcome,
    /// The origin server that answered, when one did: for the access log.
    upstream: Option<Upstream>,
}

impl Answer {
    /// `response`, which `outcome` describes.
    pub(crate) fn new(response: Response<ProxyBody>, outcome: Outcome) -> Answer {
        Answer {
            response,
            outcome,
            upstream: None,
        }
    }

    /// This answer, noting the origin server whose response it is or came from.
    pub(crate) fn with_upstream(mut self, upstream: Upstream) -> Answer {
        self.upstream = Some(upstream);
        self
    }
}

/// One routed request as its stages see it: the client's head and connection, the site
/// that serves it and the one view of the settings it loaded.
#[derive(Clone, Copy)]
struct Ask<'a> {
    /// The client's head, normalised, hop-by-hop fields removed.
    head: &'a request::Parts,
    /// The connection it came on.
    client: ClientConnection,
    /// The site its host picked.
    site: &'a Arc<Site>,
    /// The settings, sites and admission it loaded.
    live: &'a Arc<Snapshot>,
    /// The site's rules whose request conditions it meets.
    matched: Matched,
}

/// The lifetimes of a request no rule gives any.
static NO_LIFETIMES: Lifetimes = Lifetimes::NONE;

impl<'a> Ask<'a> {
    /// The lifetimes its site rule sets (`default_ttl`, `ttl_by_status`, `grace`).
    fn lifetimes(&self) -> &'a Lifetimes {
        let rules = &self.site.rules;
        (self.matched.request_rule(rules)).map_or(&NO_LIFETIMES, |rule| &rule.lifetimes)
    }

    /// The request as it goes to its site's origin.
    fn origin(&self) -> Result<OriginRequest<'a>, ProxyError> {
        let strip = &self.live.settings.cache.strip_request_fields;
        OriginRequest::of(self.head, self.client, self.site, strip)
    }
}

/// The future `make` returns, on the heap. The allocation comes first, so that the
/// compiler builds the future in it (the release build does); `Box::pin(make())` builds
/// it on the stack and copies all of it, several KiB for a path that reaches the origin.
fn boxed<F: std::future::Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    let slot = Box::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

/// What [`Proxy::plan`] found a GET/HEAD to be.
enum Plan<'s> {
    /// The cache may answer it: look it up.
    Cache(Cacheable<'s>),
    /// The cache may not answer it (a bypass rule, `no-store`, origin preconditions):
    /// pass it through, with this outcome.
    Pass(Outcome),
}

/// A request the cache may answer: what its lookup, its fill and its answer need.
struct Cacheable<'s> {
    /// Its key, shaped by the site's rule.
    key: CacheKey,
    /// Its `Cache-Control` (and `Pragma`) directives, as the site's rule leaves them.
    directives: RequestDirectives,
    /// The admission's first phase, and the decision planned before the response: the
    /// policy's, as the rules override it.
    admitting: Admitting,
    /// The site's rules, for the decision once the response head is known.
    rules: Option<RuleCheck<'s>>,
}

/// How [`Proxy::look_up`] ended.
enum Looked<'s> {
    /// An entry to answer from.
    Found(FoundEntry),
    /// Nothing to answer from: fetch.
    Missed(Miss<'s>),
}

/// The entry a lookup found, and how it came to be there.
struct FoundEntry {
    /// The entry.
    found: Box<Found>,
    /// Found after waiting for another request's fill, which was a miss of this kind.
    collapsed: Option<Forward>,
}

/// Everything a request needs, shared by all connections. A clone shares all of it (each
/// worker holds one, so that the handle its requests clone is its own).
#[derive(Clone)]
pub(crate) struct Proxy {
    /// What a reload can change: each request loads it once ([`Live`]).
    live: Live,
    /// The store, the counters and the fills in flight.
    cache: Cache,
    /// The keys with a fill or a `stale-while-revalidate` refresh in flight: one origin
    /// fetch per key, however many requests miss it (or see it stale) meanwhile.
    collapser: Arc<Collapser>,
}

/// The parts a proxy is built from, each made once by `server::Server::bind`.
pub(crate) struct Parts {
    /// The settings, the sites and the admission, loaded once per request.
    pub live: Live,
    /// The disk store.
    pub store: Arc<Store>,
    /// The counters every request feeds (the origin client holds the same `Arc`).
    pub metrics: Arc<Metrics>,
    /// The fills in flight, which shutdown waits for (the server holds a clone).
    pub fills: Fills,
}

impl Proxy {
    /// Assembles a proxy from its parts.
    pub(crate) fn new(parts: Parts) -> Proxy {
        Proxy {
            live: parts.live,
            cache: Cache {
                store: parts.store,
                metrics: parts.metrics,
                fills: parts.fills,
            },
            collapser: Arc::new(Collapser::default()),
        }
    }

    /// The counters every request feeds.
    pub(crate) fn metrics(&self) -> Arc<Metrics> {
        self.cache.metrics.clone()
    }

    /// Answers one request from `peer`, received on the listener of `scheme`. Never fails:
    /// errors become responses through `error_response`.
    ///
    /// The head is checked first ([`hygiene::check_request`]): a rejected request is
    /// answered 400 and never routed. A `*` target or a `CONNECT` (`target_form`), and a
    /// `TRACE` or `OPTIONS` whose `Max-Forwards` is zero (`max_forwards`), are answered
    /// here. Any other accepted head loses its hop-by-hop fields
    /// and is routed; every request sent to the origin for it carries the forwarding
    /// fields ([`hygiene::Forwarding`]), and every response gets `Via`. When the access
    /// log is on, the response's body logs the request once it is done
    /// ([`crate::access_log::AccessLog::wrap_body`]).
    pub(crate) async fn handle(
        &self,
        request: Request<ClientBody>,
        peer: SocketAddr,
        scheme: ClientScheme,
    ) -> Response<ProxyBody> {
        // One view for the whole request, the access log it is logged to included.
        let live = self.live.load();
        // The clock is read for the access log only.
        let started = live.access_log.is_on().then(Instant::now);
        let (mut head, body) = request.into_parts();
        // The target as the client sent it, when normalising changed it: the access log's.
        let mut sent_target = None;
        let client = ClientConnection {
            ip: peer.ip(),
            scheme,
        };
        // Boxed, so that this future stays small: each request's future is moved twice on
        // its way to the connection, and with the routing's state inline each move copied
        // about 2 KiB (`benches/RESULTS.md`, "the routing's future boxed").
        let routed =
            boxed(|| self.check_and_route(&mut head, body, client, &live, &mut sent_target)).await;
        let answer = match routed {
            Ok(answer) => answer,
            Err(error) => {
                // One failure can come with every request: the warning is throttled per kind.
                failure_log::log(&head.method, &head.uri, &error);
                self.cache.metrics.count_error(error.kind());
                error_response(&error)
            }
        };
        let (mut response, outcome, upstream) = self.render(&head.method, answer);
        let tags = &live.settings.tags;
        if !tags.keep_header {
            // The cache's tags are for purges, not for clients (as Fastly does).
            response.headers_mut().remove(&tags.header);
        }
        let Some(started) = started else {
            return response;
        };
        // Moved out of the request head, which is no longer needed: no copies. The wall
        // clock is read only here, so a proxy without an access log never reads it.
        let now = SystemTime::now();
        let host = head.headers.remove(HOST).or_else(|| {
            let authority = head.uri.authority()?;
            http::HeaderValue::from_str(authority.as_str()).ok()
        });
        let record = Record {
            received: now.checked_sub(started.elapsed()).unwrap_or(now),
            peer: peer.ip(),
            method: head.method,
            target: sent_target.unwrap_or(head.uri),
            version: head.version,
            status: response.status(),
            referer: head.headers.remove(REFERER),
            user_agent: head.headers.remove(USER_AGENT),
            host,
            forwarded_for: hygiene::take_list(&mut head.headers, &hygiene::X_FORWARDED_FOR),
            upstream,
            outcome,
            bytes: 0,
            duration: std::time::Duration::ZERO,
        };
        response.map(|body| live.access_log.wrap_body(record, started, body))
    }

    /// Checks the head and answers what the proxy answers itself (a `*` target, `CONNECT`,
    /// `Max-Forwards: 0`); normalises the target and routes everything else, with one
    /// view of the settings, sites and admission for the whole request. `sent_target`:
    /// the target as the client sent it, when normalising changed it.
    async fn check_and_route(
        &self,
        head: &mut request::Parts,
        body: ClientBody,
        client: ClientConnection,
        live: &Arc<Snapshot>,
        sent_target: &mut Option<http::Uri>,
    ) -> Result<Answer, ProxyError> {
        match hygiene::check_request(head).and_then(|()| max_forwards::take_hop(head)) {
            // `*` targets and `CONNECT` name nothing on the origin.
            Ok(_) if target_form::is_own(head) => target_form::answer(head),
            Ok(Hop::Forward) => {
                // From here on the request is the one its key names: what is looked up,
                // stored and forwarded are the same target and host.
                *sent_target = crate::key::normalise_target(head, client.scheme)?;
                // Fields about the client's connection are gone before anything judges
                // the request; the forwarding fields are added only where it is
                // forwarded (`hygiene::Forwarding`).
                crate::origin::strip_hop_by_hop(&mut head.headers);
                self.route(head, client, body, live).await
            }
            Ok(Hop::Answer) => Ok(max_forwards::answer(head)),
            Err(rejection) => Err(ProxyError::Rejected(rejection)),
        }
    }

    /// Renders the answer's outcome, once: its `Cache-Status` (replacing any the origin
    /// sent: ours is the only one about this cache) and `Via`, and the request counters.
    fn render(
        &self,
        method: &Method,
        answer: Answer,
    ) -> (Response<ProxyBody>, Outcome, Option<Upstream>) {
        let Answer {
            mut response,
            outcome,
            upstream,
        } = answer;
        let headers = response.headers_mut();
        headers.insert(CACHE_STATUS, cache_status::header_value(&outcome));
        hygiene::add_response_via(headers);
        let result = outcome.result();
        self.cache.metrics.count_request(result);
        let bytes = body_len(method, &response);
        self.cache.metrics.count_body_bytes(result, bytes);
        (response, outcome, upstream)
    }

    /// Routes a checked request: the hit path inline, everything that goes to the origin
    /// boxed ([`boxed`], built in place on the heap). Why boxed: an async fn's future is as
    /// large as its largest branch; with the miss, pass and revalidation paths inline a hit
    /// would carry their state. Boxing them, and the store's file read, keeps a hit's
    /// future small (`benches/RESULTS.md`, "origin paths boxed"); a miss pays one more
    /// allocation than a hit, and no copy of its future (`benches/RESULTS.md`, "the client
    /// side trimmed by profile"). [`Proxy::handle`] boxes this routing's future in turn.
    async fn route(
        &self,
        head: &request::Parts,
        client: ClientConnection,
        body: ClientBody,
        live: &Arc<Snapshot>,
    ) -> Result<Answer, ProxyError> {
        let site = match routing::site_of(&live.sites, head) {
            Ok(site) => site,
            Err(status) => return Ok(routing::unknown_host(status)),
        };
        // No rules (the usual case): nothing matched, nothing allocated.
        let matched = Matched::of(&site.rules, &head.method, head.uri.path());
        let ask = &Ask {
            head,
            client,
            site: &site,
            live,
            matched,
        };
        let answer = self.serve_site(ask, body).await;
        if let (Some(counters), Ok(answer)) = (&site.counters, &answer) {
            let bytes = body_len(&head.method, &answer.response);
            counters.count(answer.outcome.result(), bytes);
        }
        answer
    }

    /// [`Proxy::route`] once the site is known.
    async fn serve_site(&self, ask: &Ask<'_>, body: ClientBody) -> Result<Answer, ProxyError> {
        let head = ask.head;
        if head.method.as_str() == "PURGE" {
            // Answered here whoever sends it: a purge is never the origin's business.
            return boxed(|| self.purge_method(ask)).await;
        }
        if head.method != Method::GET && head.method != Method::HEAD {
            return boxed(|| self.unsafe_or_other(ask, body)).await;
        }
        // A body is there unless the head said none: an HTTP/1 `Content-Length: 0` or
        // none at all, an HTTP/2 HEADERS frame that ended the stream.
        let has_body = !body.is_end_stream();
        let cacheable = match self.plan(ask, has_body)? {
            Plan::Cache(cacheable) => cacheable,
            Plan::Pass(outcome) => return boxed(|| self.pass_through(ask, body, outcome)).await,
        };
        match self.look_up(ask, &cacheable).await? {
            Looked::Found(entry) => {
                // A request for a stored object: what the estimates replay (a hit there
                // or not, as each modelled cache decides).
                if let Some(hash) = cacheable.admitting.hash() {
                    ask.live.tuning.observe(hash, entry.found.entry.body_len);
                }
                (self.answer_found(ask, body, &cacheable, entry)).await
            }
            Looked::Missed(miss) => boxed(|| self.fetch(ask, body, &cacheable.key, miss)).await,
        }
    }

    /// What a GET/HEAD to `site` needs before its lookup: the site's rules, its key, its
    /// directives and the admission decision (the key is recorded in the filters here,
    /// hits included); or, when the cache may not answer it, the outcome to pass it
    /// through with. `has_body`: the request came with a body.
    fn plan<'a>(&self, ask: &Ask<'a>, has_body: bool) -> Result<Plan<'a>, ProxyError> {
        let (head, client, site) = (ask.head, ask.client, ask.site);
        let matched = ask.matched;
        let rule = matched.request_rule(&site.rules);
        if rule.is_some_and(|rule| rule.bypass) {
            let outcome = Outcome::forward(Forward::Bypass).detail(Detail::Bypass);
            return Ok(Plan::Pass(outcome));
        }
        if has_body {
            // The key does not name the body, and the answer may depend on it (search APIs
            // read GET bodies): passed on whole rather than stripped of its body, so the
            // origin answers what was asked, and neither stored nor served from storage.
            let outcome = Outcome::forward(Forward::Request).detail(Detail::RequestBody);
            return Ok(Plan::Pass(outcome));
        }
        let key = CacheKey::shaped(head, client.scheme, rule.and_then(|rule| rule.key.as_ref()))?;
        let (directives, pending) = {
            // The hasher and the policy of the same assembly.
            let admission = &ask.live.admission;
            let filter_hash = admission.hasher.hash(key.as_str().as_bytes());
            // The filter's blocks load from memory while the request's directives are parsed.
            admission.policy.prefetch(filter_hash);
            let mut directives = RequestDirectives::parse(&head.headers);
            if rule.is_some_and(|rule| rule.ignore_client_no_cache) {
                directives.no_cache = false;
            }
            // Admission's first phase: records the key, hits included.
            (directives, admission.policy.on_request(filter_hash))
        };
        let rules = RuleCheck::of(site, matched);
        let decision = rules.map_or(pending.planned, |rules| rules.planned(pending.planned));
        if directives.no_store {
            // Nothing of this exchange may be stored (RFC 9111 §5.2.1.5), so it is not
            // served from storage either: the client asked to keep it out of caches.
            let outcome =
                Outcome::forward(Forward::Request).detail(Detail::NotStored(NotStored::NoStore));
            return Ok(Plan::Pass(outcome));
        }
        if validation::has_origin_preconditions(&head.headers) {
            // If-Match / If-Unmodified-Since are about the origin's current state.
            return Ok(Plan::Pass(Outcome::forward(Forward::Request)));
        }
        Ok(Plan::Cache(Cacheable {
            key,
            directives,
            admitting: Admitting::Asked {
                pending,
                planned: decision,
            },
            rules,
        }))
    }

    /// Looks the request's key up until it finds an entry or a miss to fetch: a miss of a
    /// key another request is filling waits for that fill (as a follower) and looks
    /// again, once more after a fill that was dropped; see `proxy::collapse`.
    async fn look_up<'a>(
        &self,
        ask: &Ask<'a>,
        cacheable: &Cacheable<'a>,
    ) -> Result<Looked<'a>, ProxyError> {
        let Cacheable {
            key,
            directives,
            admitting,
            rules,
        } = cacheable;
        // Set once this request waited for another one's fill: the miss it was.
        let mut collapsed = None;
        // Its waits for other requests' fills end by then, however many there are.
        let mut deadline = None;
        // Set once a fill it waited for was dropped: if the next one is too, it goes alone.
        let mut waited_for_a_drop = false;
        loop {
            let (marker, forward) = match self.cache.lookup(key, &ask.head.headers).await {
                Lookup::Found(found) => return Ok(Looked::Found(FoundEntry { found, collapsed })),
                Lookup::Miss | Lookup::VaryMiss(_) if directives.only_if_cached => {
                    return Err(ProxyError::OnlyIfCached);
                }
                Lookup::Miss => (None, Forward::UriMiss),
                Lookup::VaryMiss(marker) => (Some(marker), Forward::VaryMiss),
            };
            let fetching = match self.collapse_role(ask, key, admitting.planned()) {
                Role::Leader(leader) => Fetching::Leading(leader),
                Role::Alone => Fetching::Alone,
                Role::Follower(follower) => {
                    let timeout = ask.live.collapse_timeout();
                    // On tokio's clock, like the wait itself (and so paused with it in tests).
                    let until =
                        *deadline.get_or_insert_with(|| tokio::time::Instant::now() + timeout);
                    match Box::pin(follower.wait_until(until)).await {
                        // Look again: the entry, or no entry and the key to join again.
                        Waited::Released => {
                            collapsed = Some(forward);
                            continue;
                        }
                        Waited::Dropped if !waited_for_a_drop => {
                            waited_for_a_drop = true;
                            continue;
                        }
                        Waited::Refused | Waited::Dropped => Fetching::Alone,
                        Waited::TimedOut => Fetching::WaitedTooLong,
                    }
                }
            };
            return Ok(Looked::Missed(Miss {
                marker,
                forward,
                admission: *admitting,
                rules: *rules,
                fetching,
            }));
        }
    }

    /// Answers from the entry the lookup found: a fresh hit (or the answer of the fill
    /// this request waited for, `entry.collapsed`), a stale one the client or
    /// `stale-while-revalidate` accepts, or else a revalidation with the origin.
    async fn answer_found(
        &self,
        ask: &Ask<'_>,
        body: ClientBody,
        cacheable: &Cacheable<'_>,
        entry: FoundEntry,
    ) -> Result<Answer, ProxyError> {
        let (head, key) = (ask.head, &cacheable.key);
        let now = crate::clock::now();
        let freshness = self
            .cache
            .freshness(ask.live, ask.lifetimes(), &entry.found.entry);
        if fields::has(&head.headers, &AUTHORIZATION) && !freshness.shareable_with_credentials() {
            // RFC 9111 §3.5: only a response declared shareable may answer credentials.
            let miss = Miss {
                marker: entry.found.marker,
                forward: Forward::Request,
                admission: READMIT,
                rules: None,
                fetching: Fetching::Alone,
            };
            return boxed(|| self.fetch(ask, body, key, miss)).await;
        }
        let directives = &cacheable.directives;
        let (found, forward) = match self.reuse(ask, entry, &freshness, directives, now) {
            Ok(answer) => return Ok(answer),
            Err(stale) => stale,
        };
        if directives.only_if_cached {
            return Err(ProxyError::OnlyIfCached);
        }
        let window = freshness.within_stale_while_revalidate(now);
        if forward == Forward::Stale
            && let Some(window) = window
        {
            let stored = found.entry.meta.response_headers.clone();
            self.refresh_in_background(ask, key, stored);
            self.note_hit(&found, ask.live);
            let outcome = Outcome::hit()
                .ttl(freshness.ttl_seconds(now))
                .detail(Detail::stale_while_revalidate(window));
            return Ok(respond::from_store(head, *found, &freshness, now, outcome));
        }
        if head.method == Method::HEAD {
            // Revalidating for a HEAD would fetch a body nobody reads; ask the origin.
            let outcome = Outcome::forward(forward);
            return boxed(|| self.pass_through(ask, body, outcome)).await;
        }
        boxed(|| self.revalidate(ask, key, found, &freshness, forward)).await
    }

    /// Answers from the found `entry` when its freshness allows, as the request's
    /// `directives` see it at `now`; else hands the entry back with why it goes forward
    /// (`stale`, or the request's own directives).
    fn reuse(
        &self,
        ask: &Ask<'_>,
        entry: FoundEntry,
        freshness: &crate::policy::freshness::StoredFreshness,
        directives: &RequestDirectives,
        now: SystemTime,
    ) -> Result<Answer, (Box<Found>, Forward)> {
        let FoundEntry { found, collapsed } = entry;
        let ttl = freshness.ttl_seconds(now);
        let outcome = match freshness.reuse(directives, now) {
            Reuse::Fresh => match (collapsed, freshness.rule_lifetime()) {
                (None, None) => Outcome::hit().ttl(ttl),
                (None, Some(lifetime)) => Outcome::hit().ttl(ttl).detail(Detail::Rule(lifetime)),
                (Some(forward), _) => {
                    self.cache.metrics.count_collapsed();
                    Outcome::forward(forward).ttl(ttl).collapsed()
                }
            },
            Reuse::StaleAccepted => Outcome::hit().ttl(ttl).detail(Detail::MaxStale),
            Reuse::Stale => return Err((found, Forward::Stale)),
            Reuse::RequestForbids => return Err((found, Forward::Request)),
        };
        self.note_hit(&found, ask.live);
        Ok(respond::from_store(
            ask.head, *found, freshness, now, outcome,
        ))
    }

    /// The part a miss of `key` takes in its collapse slot (none while
    /// `cache.collapse_timeout` is zero: collapsing is off). Only a GET that admission
    /// admits and that fetches the whole object (no range, or one cut from the whole) may
    /// lead: any other answer will not be stored, so nobody should wait for it. Asked on
    /// a miss only, so a hit reads no more of the request than it did.
    fn collapse_role(&self, ask: &Ask<'_>, key: &CacheKey, decision: Decision) -> Role {
        if ask.live.collapse_timeout().is_zero() {
            return Role::Alone;
        }
        let head = ask.head;
        let may_lead = head.method == Method::GET
            && decision.is_admit()
            && (!fields::has(&head.headers, &RANGE)
                || crate::range::is_answerable_range(&head.headers));
        self.collapser.join(key.store_hash(), may_lead)
    }

    /// Tells the admission policy that `found` answers a request from storage; counts the
    /// hit second-hit would have lost when the (shadow) policy says so.
    fn note_hit(&self, found: &Found, live: &Snapshot) {
        let lost = live.lost_hits.as_ref();
        if lost.is_some_and(|lost| lost.note_served(found.entry.key_hash())) {
            self.cache
                .metrics
                .count_shadow_hit_lost(found.entry.body_len);
        }
    }

    /// Passes a request of another method through; a non-error answer to an unsafe
    /// method invalidates what it names.
    async fn unsafe_or_other(&self, ask: &Ask<'_>, body: ClientBody) -> Result<Answer, ProxyError> {
        let answer = (self.pass_through(ask, body, Outcome::forward(Forward::Method))).await?;
        let (head, client, site) = (ask.head, ask.client, ask.site);
        let response = &answer.response;
        if invalidate::is_unsafe(&head.method) && invalidate::invalidates(response.status()) {
            // Each URL's key as a GET of it would have it, shaped by the site's rules.
            let rules = &site.rules;
            let shape_of = |path: &str| {
                let rule = Matched::of(rules, &Method::GET, path).request_rule(rules);
                rule.and_then(|rule| rule.key.as_ref())
            };
            for key in invalidate::targets(head, client.scheme, response.headers(), shape_of) {
                self.cache.invalidate(&key).await;
            }
        }
        Ok(answer)
    }

    /// Sends a request to the origin unchanged (but for hop-by-hop fields) and relays the answer.
    async fn pass_through(
        &self,
        ask: &Ask<'_>,
        body: ClientBody,
        outcome: Outcome,
    ) -> Result<Answer, ProxyError> {
        let to_origin = ask.origin()?;
        let body = crate::origin::client_body(body);
        let (method, headers) = (ask.head.method.clone(), &ask.head.headers);
        let origin = (to_origin.send(method, headers, Shape::AsSent, body)).await?;
        let outcome = outcome.fwd_status(origin.head.status);
        let upstream = origin.upstream;
        // Boxed: every answer, from the origin or from storage, has the one body type.
        let body = origin.body.map_err(BoxError::from).boxed_unsync();
        let response = Response::from_parts(origin.head, body);
        Ok(Answer::new(response, outcome).with_upstream(upstream))
    }
}
