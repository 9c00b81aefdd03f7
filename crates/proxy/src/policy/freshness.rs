//! Freshness of a stored response (RFC 9111 §4.2) and whether a request may reuse it.
//!
//! - **Lifetime** (§4.2.1): `s-maxage` (this is a shared cache), else `max-age`, else
//!   `Expires − Date` (not when a targeted field, RFC 9213, replaced `Cache-Control`); an invalid value of the one that applies means "already stale".
//!   Without any of them, a heuristic (§4.2.2): 10% of `Date − Last-Modified`, capped
//!   by `cache.heuristic_max_age`, only for the non-error statuses that are cacheable
//!   by default (error responses need explicit freshness, so a burst of errors cannot
//!   be cached by accident).
//! - **Age** (§4.2.3): `corrected_initial_age` from the `Age` and `Date` fields and the
//!   request/response times, plus the time the entry has been stored.
//! - **Reuse** (§4.2.4, §5.2.1): request directives (`no-cache`, `max-age`, `min-fresh`,
//!   `max-stale`, `Pragma: no-cache`) against that age and lifetime; serving stale is
//!   forbidden by `no-cache`, `must-revalidate`, `proxy-revalidate` and `s-maxage`.

use std::time::{Duration, SystemTime};

use http::header::{AGE, CACHE_CONTROL, DATE, EXPIRES, LAST_MODIFIED, PRAGMA};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::Rules;
use super::directives::{Directives, Seconds, parse_delta_seconds};
use crate::fields;
use crate::store::EntryMeta;

/// Statuses that are cacheable by default and not errors (RFC 9110 §15.1 lists 404,
/// 405, 410, 414 and 501 too; those are stored only with explicit freshness here).
const HEURISTIC_STATUSES: [u16; 6] = [200, 203, 204, 300, 301, 308];

/// The statuses RFC 9110 §15.1 defines as cacheable by default: this cache implements
/// their caching rules, so it "understands" them for `must-understand` (RFC 9111 §5.2.2.3).
const CACHEABLE_BY_DEFAULT: [u16; 11] = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501];

/// True if `status` is cacheable by default (RFC 9110 §15.1; 206 is, but is never stored
/// here).
pub(crate) fn cacheable_by_default(status: StatusCode) -> bool {
    CACHEABLE_BY_DEFAULT.contains(&status.as_u16())
}

/// True if a response with `status` may get a heuristic lifetime.
pub(crate) fn heuristic_status(status: StatusCode) -> bool {
    HEURISTIC_STATUSES.contains(&status.as_u16())
}

/// True if a response with `status` and directives `cc` may get a heuristic lifetime:
/// by its status, or whatever its status when the origin marked it `public` (RFC 9111
/// §3 and §4.2.2: the origin itself then asks for it to be cached, so an error cannot be
/// cached by accident).
pub(crate) fn heuristic_allowed(status: StatusCode, cc: &Directives) -> bool {
    heuristic_status(status) || cc.has("public")
}

/// Where a freshness lifetime came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LifetimeSource {
    /// `s-maxage`, `max-age` or `Expires` (valid or not).
    Explicit,
    /// 10% of the time since `Last-Modified`.
    Heuristic,
    /// A site rule's `default_ttl`: the origin gave no explicit freshness.
    DefaultTtl,
    /// A site rule's `ttl_by_status`, in place of the origin's explicit freshness.
    StatusTtl,
    /// Nothing gives the response a lifetime.
    None,
}

/// What a site rule's lifetimes did for a stored response: the `Cache-Status` detail of
/// the hit it gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleLifetime {
    /// Fresh for the rule's `default_ttl`.
    DefaultTtl,
    /// Fresh for the rule's `ttl_by_status`.
    StatusTtl,
    /// Stale within the rule's `grace`, served while it is revalidated.
    GraceWhileRevalidate,
    /// Stale within the rule's `grace`, served because the origin failed.
    GraceIfError,
}

impl RuleLifetime {
    /// Every value, in label order.
    pub const ALL: [RuleLifetime; 4] = [
        RuleLifetime::DefaultTtl,
        RuleLifetime::StatusTtl,
        RuleLifetime::GraceWhileRevalidate,
        RuleLifetime::GraceIfError,
    ];

    /// The `Cache-Status` `detail` token, access-log word and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleLifetime::DefaultTtl => "default-ttl",
            RuleLifetime::StatusTtl => "rule-ttl",
            RuleLifetime::GraceWhileRevalidate => "grace-revalidate",
            RuleLifetime::GraceIfError => "grace-if-error",
        }
    }
}

/// Which window lets a stale response be served: the response's own directive, or a
/// site rule's `grace` standing in for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleWindow {
    /// The response's `stale-while-revalidate` or `stale-if-error`.
    Directive,
    /// The rule's `grace`.
    Grace,
}

/// The freshness lifetime of a response under `rules` and where it came from: a site
/// rule's `ttl_by_status` for its status first (the operator overrides the origin), then
/// the origin's explicit freshness, then, for the statuses a heuristic may apply to, the
/// rule's `default_ttl` (the operator's stated lifetime beats a guess from
/// `Last-Modified`), then the heuristic.
pub(crate) fn lifetime(
    status: StatusCode,
    headers: &HeaderMap,
    cc: &Directives,
    response_time: SystemTime,
    rules: &Rules,
) -> (Duration, LifetimeSource) {
    if let Some(ttl) = rules.lifetimes.override_for(status) {
        return (ttl, LifetimeSource::StatusTtl);
    }
    let date = date_value(headers).unwrap_or(response_time);
    if let Some(explicit) = explicit_lifetime(headers, cc, date) {
        return (explicit, LifetimeSource::Explicit);
    }
    if !heuristic_allowed(status, cc) {
        return (Duration::ZERO, LifetimeSource::None);
    }
    if let Some(ttl) = rules.lifetimes.default_ttl {
        return (ttl, LifetimeSource::DefaultTtl);
    }
    if let Some(modified) = fields::first(headers, &LAST_MODIFIED).and_then(parse_date)
        && let Ok(since) = date.duration_since(modified)
    {
        let lifetime = (since / 10).min(rules.heuristic_max);
        if !lifetime.is_zero() {
            return (lifetime, LifetimeSource::Heuristic);
        }
    }
    (Duration::ZERO, LifetimeSource::None)
}

/// The lifetime the origin gave explicitly, if it did: `s-maxage`, else `max-age`, else
/// `Expires` − `date` (an invalid value of the one that applies: zero).
fn explicit_lifetime(headers: &HeaderMap, cc: &Directives, date: SystemTime) -> Option<Duration> {
    let explicit = |seconds: Seconds| match seconds {
        Seconds::Valid(s) => Duration::from_secs(s),
        Seconds::Invalid => Duration::ZERO,
    };
    if let Some(seconds) = cc.seconds("s-maxage").or_else(|| cc.seconds("max-age")) {
        return Some(explicit(seconds));
    }
    // A targeted field overrides Expires as well as Cache-Control (RFC 9213 §2.1).
    let mut expires = fields::all(headers, &EXPIRES);
    if cc.is_targeted() {
        return None;
    }
    let first = expires.next()?;
    // An invalid date ("0") or a second, different Expires: already expired (§5.3).
    let valid = expires.all(|other| other == first);
    Some(match (valid, parse_date(first)) {
        (true, Some(at)) => at.duration_since(date).unwrap_or(Duration::ZERO),
        _ => Duration::ZERO,
    })
}

/// The age of a response when it arrived (`corrected_initial_age`, RFC 9111 §4.2.3).
pub(crate) fn initial_age(
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let apparent_age = date_value(headers)
        .and_then(|date| response_time.duration_since(date).ok())
        .unwrap_or(Duration::ZERO);
    let response_delay = response_time
        .duration_since(request_time)
        .unwrap_or(Duration::ZERO);
    apparent_age.max(age_value(headers) + response_delay)
}

/// The `Age` field (RFC 9111 §5.1): the first member of a list-based value (several
/// lines or commas), when it is delta-seconds, capped at 2^31 like any (§1.2.2). Anything
/// else (`40abc`, `+40`, `4 0`) is invalid and the field is ignored: zero.
fn age_value(headers: &HeaderMap) -> Duration {
    let first = fields::all(headers, &AGE)
        // An unreadable line reads as an invalid member.
        .flat_map(|line| line.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        // Empty list elements do not count (RFC 9110 §5.6.1.2).
        .find(|member| !member.is_empty());
    match first.map(parse_delta_seconds) {
        Some(Seconds::Valid(seconds)) => Duration::from_secs(seconds),
        _ => Duration::ZERO,
    }
}

/// The `Date` field, if valid.
fn date_value(headers: &HeaderMap) -> Option<SystemTime> {
    fields::first(headers, &DATE).and_then(parse_date)
}

/// An HTTP-date in any of its three forms, if valid ([`super::date`]).
pub(crate) fn parse_date(value: &HeaderValue) -> Option<SystemTime> {
    super::date::parse(value.to_str().ok()?, crate::clock::now())
}

/// The request's own caching directives (RFC 9111 §5.2.1, §5.4).
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestDirectives {
    /// `no-cache`, or `Pragma: no-cache` without a `Cache-Control` field.
    pub no_cache: bool,
    /// `no-store`: do not store the response, do not serve from the cache.
    pub no_store: bool,
    /// `only-if-cached`: answer from the cache or with 504.
    pub only_if_cached: bool,
    /// `max-age`: the largest acceptable age.
    pub max_age: Option<Duration>,
    /// `max-stale`: `Some(None)` accepts any staleness.
    pub max_stale: Option<Option<Duration>>,
    /// `min-fresh`: the least remaining freshness acceptable.
    pub min_fresh: Option<Duration>,
}

impl RequestDirectives {
    /// Reads the request's `Cache-Control` (and `Pragma` when there is no `Cache-Control`).
    /// Directives with invalid values are ignored: a malformed request limit must not
    /// turn a hit into a miss or the reverse.
    pub(crate) fn parse(headers: &HeaderMap) -> RequestDirectives {
        // Most requests carry neither field, and a request is read for them up to twice.
        if !fields::has(headers, &CACHE_CONTROL) && !fields::has(headers, &PRAGMA) {
            return RequestDirectives::default();
        }
        let cc = Directives::parse(headers);
        let pragma_no_cache = cc.is_empty()
            && fields::all(headers, &PRAGMA)
                .filter_map(|v| v.to_str().ok())
                .any(|v| {
                    v.split(',')
                        .any(|d| d.trim().eq_ignore_ascii_case("no-cache"))
                });
        let valid = |seconds: Option<Seconds>| match seconds {
            Some(Seconds::Valid(s)) => Some(Duration::from_secs(s)),
            _ => None,
        };
        let max_stale = match cc.optional_seconds("max-stale") {
            None | Some(Some(Seconds::Invalid)) => None,
            Some(None) => Some(None),
            Some(Some(Seconds::Valid(s))) => Some(Some(Duration::from_secs(s))),
        };
        RequestDirectives {
            no_cache: cc.has("no-cache") || pragma_no_cache,
            no_store: cc.has("no-store"),
            only_if_cached: cc.has("only-if-cached"),
            max_age: valid(cc.seconds("max-age")),
            max_stale,
            min_fresh: valid(cc.seconds("min-fresh")),
        }
    }
}

/// What a request may do with a stored response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Fresh and acceptable: serve it.
    Fresh,
    /// Stale, but the request's `max-stale` accepts it and nothing forbids it.
    StaleAccepted,
    /// Stale (or `no-cache`): validate it with the origin.
    Stale,
    /// The request's own directives ask for a newer response than this one.
    RequestForbids,
}

/// A stored response seen through RFC 9111: its lifetime, age and directives.
pub(crate) struct StoredFreshness {
    cc: Directives,
    lifetime: Duration,
    /// Where the lifetime came from: a rule's `ttl_by_status` also sets aside the
    /// origin's `no-cache` and `s-maxage`.
    source: LifetimeSource,
    /// The rule's `grace`, standing in for a missing `stale-while-revalidate` or
    /// `stale-if-error`.
    grace: Option<Duration>,
    initial_age: Duration,
    response_time: SystemTime,
    /// A soft purge marked the response stale.
    purged: bool,
}

impl StoredFreshness {
    /// Evaluates `meta` under `rules`.
    pub(crate) fn new(meta: &EntryMeta, rules: &Rules) -> StoredFreshness {
        let cc = Directives::of_response(&meta.response_headers, rules.targeted_field.as_ref());
        let (lifetime, source) = lifetime(
            meta.status,
            &meta.response_headers,
            &cc,
            meta.response_time,
            rules,
        );
        let initial_age = initial_age(
            &meta.response_headers,
            meta.request_time,
            meta.response_time,
        );
        // A soft purge ends the lifetime at the response's age when it was purged, so it
        // is stale from then on and its stale windows count from the purge.
        let lifetime = match meta.purged {
            Some(at) => {
                let since = at
                    .duration_since(meta.response_time)
                    .unwrap_or(Duration::ZERO);
                lifetime.min(initial_age + since)
            }
            None => lifetime,
        };
        StoredFreshness {
            initial_age,
            cc,
            lifetime,
            source,
            grace: rules.lifetimes.grace,
            response_time: meta.response_time,
            purged: meta.purged.is_some(),
        }
    }

    /// The site rule's lifetime that makes the response fresh, if one does.
    pub(crate) fn rule_lifetime(&self) -> Option<RuleLifetime> {
        match self.source {
            LifetimeSource::DefaultTtl => Some(RuleLifetime::DefaultTtl),
            LifetimeSource::StatusTtl => Some(RuleLifetime::StatusTtl),
            _ => None,
        }
    }

    /// True when a rule's `ttl_by_status` replaced the origin's freshness, whose
    /// `no-cache` and `s-maxage` then no longer apply.
    fn overridden(&self) -> bool {
        self.source == LifetimeSource::StatusTtl
    }

    /// True if a soft purge marked the response stale (until a revalidation replaces
    /// its metadata).
    pub(crate) fn purged(&self) -> bool {
        self.purged
    }

    /// The response's current age (RFC 9111 §4.2.3).
    pub(crate) fn age(&self, now: SystemTime) -> Duration {
        self.initial_age
            + now
                .duration_since(self.response_time)
                .unwrap_or(Duration::ZERO)
    }

    /// Remaining freshness in whole seconds; negative once stale (the `ttl` of Cache-Status).
    pub(crate) fn ttl_seconds(&self, now: SystemTime) -> i64 {
        let age = self.age(now);
        if self.lifetime > age {
            i64::try_from((self.lifetime - age).as_secs()).unwrap_or(i64::MAX)
        } else {
            -i64::try_from((age - self.lifetime).as_secs()).unwrap_or(i64::MAX)
        }
    }

    /// True while the age is below the lifetime.
    pub(crate) fn is_fresh(&self, now: SystemTime) -> bool {
        self.lifetime > self.age(now)
    }

    /// How long ago the response became stale (zero while fresh).
    fn staleness(&self, now: SystemTime) -> Duration {
        self.age(now).saturating_sub(self.lifetime)
    }

    /// True if the response may never be served stale by this shared cache (§4.2.4):
    /// `no-cache`, `must-revalidate`, `proxy-revalidate`, or `s-maxage` (§5.2.2.10).
    /// Under a rule's `ttl_by_status`, only `must-revalidate` and `proxy-revalidate` do.
    pub(crate) fn forbids_stale(&self) -> bool {
        let origin_freshness =
            !self.overridden() && ["no-cache", "s-maxage"].iter().any(|d| self.cc.has(d));
        origin_freshness
            || ["must-revalidate", "proxy-revalidate"]
                .iter()
                .any(|d| self.cc.has(d))
    }

    /// True if a cached copy may answer a request carrying `Authorization` (§3.5).
    pub(crate) fn shareable_with_credentials(&self) -> bool {
        ["public", "s-maxage", "must-revalidate"]
            .iter()
            .any(|d| self.cc.has(d))
    }

    /// The window that lets the stale response be served while it is revalidated: its
    /// `stale-while-revalidate` (RFC 5861 §3), or the rule's `grace` when it has none.
    pub(crate) fn within_stale_while_revalidate(&self, now: SystemTime) -> Option<StaleWindow> {
        self.within_window("stale-while-revalidate", now)
    }

    /// The window that lets the stale response be served when the origin fails: its
    /// `stale-if-error` (RFC 5861 §4), or the rule's `grace` when it has none.
    pub(crate) fn within_stale_if_error(&self, now: SystemTime) -> Option<StaleWindow> {
        self.within_window("stale-if-error", now)
    }

    /// True if the response may be served at most `window` past its freshness: not
    /// forbidden to be served stale, and stale by no more than `window`.
    pub(crate) fn stale_within(&self, window: Duration, now: SystemTime) -> bool {
        !self.forbids_stale() && self.staleness(now) <= window
    }

    fn within_window(&self, directive: &str, now: SystemTime) -> Option<StaleWindow> {
        let (window, which) = match self.cc.seconds(directive) {
            Some(Seconds::Valid(window)) => (Duration::from_secs(window), StaleWindow::Directive),
            Some(Seconds::Invalid) => return None,
            None => (self.grace?, StaleWindow::Grace),
        };
        self.stale_within(window, now).then_some(which)
    }

    /// What `request` may do with this response at `now`.
    pub(crate) fn reuse(&self, request: &RequestDirectives, now: SystemTime) -> Reuse {
        let age = self.age(now);
        if request.no_cache {
            return Reuse::RequestForbids;
        }
        if self.cc.has("no-cache") && !self.overridden() {
            return Reuse::Stale;
        }
        if request.max_age.is_some_and(|max| age > max) {
            return Reuse::RequestForbids;
        }
        if request
            .min_fresh
            .is_some_and(|min| self.lifetime.saturating_sub(age) < min)
        {
            return Reuse::RequestForbids;
        }
        if self.is_fresh(now) {
            return Reuse::Fresh;
        }
        let accepted = match request.max_stale {
            None => false,
            Some(None) => true,
            Some(Some(max)) => self.staleness(now) <= max,
        };
        // A soft purge says the content changed, which a client's tolerance for age does
        // not cover: it is revalidated (and served stale only if the origin fails).
        if accepted && !self.forbids_stale() && !self.purged {
            Reuse::StaleAccepted
        } else {
            Reuse::Stale
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::directives::MAX_DELTA_SECONDS;
    use super::*;
    use crate::config::rules::Lifetimes;

    const DAY: Duration = Duration::from_secs(86_400);

    const RULES: Rules = Rules {
        heuristic_max: DAY,
        targeted_field: None,
        lifetimes: Lifetimes::NONE,
    };

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("test header"));
        }
        map
    }

    #[test]
    fn request_directives_come_from_cache_control_else_pragma() {
        let parse = |pairs: &[(&'static str, String)]| RequestDirectives::parse(&headers(pairs));
        let none = parse(&[("accept", "*/*".into())]);
        assert!(!none.no_cache && !none.no_store && !none.only_if_cached);
        assert_eq!(
            (none.max_age, none.max_stale, none.min_fresh),
            (None, None, None)
        );
        assert!(parse(&[("pragma", "x, No-Cache".into())]).no_cache);
        let cc = parse(&[
            ("cache-control", "no-store, max-age=5, max-stale".into()),
            ("pragma", "no-cache".into()),
        ]);
        assert!(
            cc.no_store && !cc.no_cache,
            "Pragma counts only without Cache-Control"
        );
        assert_eq!(cc.max_age, Some(Duration::from_secs(5)));
        assert_eq!(cc.max_stale, Some(None));
        let cc = parse(&[("cache-control", "min-fresh=7, only-if-cached".into())]);
        assert!(cc.only_if_cached);
        assert_eq!(cc.min_fresh, Some(Duration::from_secs(7)));
    }

    fn life(
        status: u16,
        pairs: &[(&'static str, String)],
        now: SystemTime,
    ) -> (Duration, LifetimeSource) {
        let h = headers(pairs);
        let status = StatusCode::from_u16(status).expect("status");
        lifetime(status, &h, &Directives::parse(&h), now, &RULES)
    }

    #[test]
    fn a_soft_purge_ends_the_lifetime_and_starts_the_stale_windows() {
        let sent = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let cc = (
            "cache-control",
            "max-age=3600, stale-while-revalidate=60".to_owned(),
        );
        let meta = |purged| EntryMeta {
            request_time: sent,
            response_time: sent,
            status: StatusCode::OK,
            response_headers: headers(&[cc.clone(), ("date", httpdate::fmt_http_date(sent))]),
            request_headers: HeaderMap::new(),
            tags: Vec::new(),
            purged,
        };
        let rules = RULES;
        let later = sent + Duration::from_secs(100);
        let kept = StoredFreshness::new(&meta(None), &rules);
        assert!(kept.is_fresh(later) && !kept.purged());
        let purged = StoredFreshness::new(&meta(Some(sent + Duration::from_secs(90))), &rules);
        assert!(purged.purged());
        assert!(!purged.is_fresh(later), "stale from the purge on");
        assert!(
            purged.within_stale_while_revalidate(later).is_some(),
            "10s past the purge"
        );
        let much_later = sent + Duration::from_secs(200);
        assert!(
            purged.within_stale_while_revalidate(much_later).is_none(),
            "110s past it"
        );
    }

    #[test]
    fn lifetime_precedence_s_maxage_max_age_expires() {
        let now = SystemTime::now();
        let date = httpdate::fmt_http_date(now);
        let expires = httpdate::fmt_http_date(now + Duration::from_secs(300));
        let cc = |v: &str| ("cache-control", v.to_owned());
        let both = [
            cc("max-age=60, s-maxage=30"),
            ("expires", expires.clone()),
            ("date", date.clone()),
        ];
        assert_eq!(life(200, &both, now).0, Duration::from_secs(30));
        let max_age = [
            cc("max-age=60"),
            ("expires", expires.clone()),
            ("date", date.clone()),
        ];
        assert_eq!(life(200, &max_age, now).0, Duration::from_secs(60));
        let only_expires = [("expires", expires), ("date", date)];
        assert_eq!(life(200, &only_expires, now).0, Duration::from_secs(300));
    }

    #[test]
    fn invalid_expiry_is_stale_and_heuristics_skip_errors() {
        // Whole seconds: HTTP dates have no fractions.
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
        let zero = life(200, &[("expires", "0".to_owned())], now);
        assert_eq!(zero, (Duration::ZERO, LifetimeSource::Explicit));
        let modified = httpdate::fmt_http_date(now - Duration::from_secs(1000));
        let lm = [("last-modified", modified)];
        assert_eq!(
            life(200, &lm, now),
            (Duration::from_secs(100), LifetimeSource::Heuristic)
        );
        assert_eq!(life(404, &lm, now).1, LifetimeSource::None);
        // Marked public by the origin, any status may get one.
        let public = [lm[0].clone(), ("cache-control", "public".to_owned())];
        assert_eq!(life(599, &public, now).1, LifetimeSource::Heuristic);
        assert_eq!(life(404, &public, now).1, LifetimeSource::Heuristic);
        let old = [("last-modified", httpdate::fmt_http_date(now - 100 * DAY))];
        assert_eq!(life(200, &old, now).0, DAY, "capped by heuristic_max");
    }

    #[test]
    fn rule_lifetimes_rank_override_explicit_default_heuristic() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
        let rules = Rules {
            lifetimes: Lifetimes {
                default_ttl: Some(Duration::from_secs(600)),
                by_status: vec![(StatusCode::NOT_FOUND, Duration::from_secs(30))],
                grace: None,
            },
            ..RULES
        };
        let judge = |status: u16, pairs: &[(&'static str, String)]| {
            let h = headers(pairs);
            let status = StatusCode::from_u16(status).expect("status");
            lifetime(status, &h, &Directives::parse(&h), now, &rules)
        };
        let secs = Duration::from_secs;
        let cc = |v: &str| ("cache-control", v.to_owned());
        assert_eq!(
            judge(404, &[cc("max-age=9")]),
            (secs(30), LifetimeSource::StatusTtl)
        );
        assert_eq!(
            judge(200, &[cc("max-age=9")]),
            (secs(9), LifetimeSource::Explicit)
        );
        assert_eq!(judge(200, &[]), (secs(600), LifetimeSource::DefaultTtl));
        // The operator's default beats a guess from Last-Modified.
        let lm = ("last-modified", httpdate::fmt_http_date(now - DAY));
        assert_eq!(judge(200, &[lm]), (secs(600), LifetimeSource::DefaultTtl));
        // An error needs explicit freshness or an override: no default for it.
        assert_eq!(judge(500, &[]), (Duration::ZERO, LifetimeSource::None));
    }

    #[test]
    fn age_is_the_first_member_if_valid() {
        let now = SystemTime::now();
        let age = |values: &[&'static str]| {
            let pairs: Vec<_> = values.iter().map(|v| ("age", (*v).to_owned())).collect();
            initial_age(&headers(&pairs), now, now).as_secs()
        };
        assert_eq!(age(&["40, 90"]), 40);
        assert_eq!(age(&["40", "90"]), 40);
        assert_eq!(age(&[" , 40"]), 40);
        for invalid in ["40abc", "+40", "4 0", "-1", "40.0", "abc, 40"] {
            assert_eq!(age(&[invalid]), 0, "{invalid}");
        }
        assert_eq!(age(&["99999999999999999999"]), MAX_DELTA_SECONDS);
    }

    #[test]
    fn age_counts_age_header_and_delay() {
        let now = SystemTime::now();
        let h = headers(&[("age", "40".to_owned())]);
        let age = initial_age(&h, now - Duration::from_secs(2), now);
        assert_eq!(age, Duration::from_secs(42));
    }
}
