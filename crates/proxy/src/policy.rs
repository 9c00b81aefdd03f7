//! RFC 9111 decisions: may a response be stored, is a stored one still fresh, which
//! variant answers a request, and how validation works.
//!
//! The rules are written here rather than taken from the `http-cache-semantics` crate,
//! which stores nothing useful for `no-cache` responses, has no cap on heuristic
//! lifetimes, no `stale-while-revalidate`/`stale-if-error`, matches `Vary` on raw values
//! and computes `Age` without `Date`. Each rule below cites its section; the submodules
//! hold the parts:
//! - [`directives`]: `Cache-Control` parsing (§5.2), and the targeted fields that replace
//!   it for this cache (RFC 9213: `CDN-Cache-Control`, `cache.targeted_field`);
//! - [`freshness`]: lifetime, age and reuse (§4.2, §5.2.1), with [`date`] reading the
//!   HTTP-dates (RFC 9110 §5.6.7);
//! - [`validation`]: conditional requests and 304s (§4.3);
//! - [`vary`]: variant selection (§4.1).
//!
//! Storage rules on top of §3 (`docs/design.md`, "Known traps"): only GET responses
//! are stored (a HEAD fill would blank the body); responses setting cookies are not
//! stored; error statuses need explicit freshness; a response that would be stale on
//! arrival is stored only if it carries a validator (it is then revalidated on every
//! use); no request header is handed to the store, so credentials never reach disk.

pub(crate) mod date;
pub(crate) mod directives;
pub(crate) mod freshness;
pub(crate) mod validation;
pub(crate) mod vary;

use std::time::{Duration, SystemTime};

use http::header::{AUTHORIZATION, SET_COOKIE};
use http::{HeaderMap, HeaderName, StatusCode, response};

use crate::config::rules::Lifetimes;
use crate::fields;
use directives::Directives;
use freshness::{LifetimeSource, RequestDirectives};
use vary::VarySpec;

/// The settings the judgements of responses depend on (`[cache]` keys that a reload can
/// change; a judgement kept with an entry is redone when they differ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The cap on heuristic lifetimes (`cache.heuristic_max_age`).
    pub heuristic_max: Duration,
    /// The operator's targeted field (`cache.targeted_field`, RFC 9213 §2.1), ahead of
    /// `CDN-Cache-Control` on the target list.
    pub targeted_field: Option<HeaderName>,
    /// The lifetimes the site rule of the request sets (`default_ttl`, `ttl_by_status`,
    /// `grace`); a reload that changes them changes the judgement too.
    pub lifetimes: Lifetimes,
}

/// Why a response is not written to disk; `as_str` is the `Cache-Status` `detail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStored {
    /// The request was not a GET (HEAD responses have no body to store).
    Method,
    /// `Cache-Control: no-store` in the response or the request.
    NoStore,
    /// `Cache-Control: private` (this is a shared cache).
    Private,
    /// The request carried `Authorization` and the response does not allow sharing it
    /// (`public`, `s-maxage` or `must-revalidate`, §3.5).
    Authorization,
    /// The response sets a cookie: it is meant for one client.
    SetCookie,
    /// `Vary: *`: no later request could ever be answered with it.
    VaryStar,
    /// A partial (206) response is not the whole object.
    Partial,
    /// The request asked for a range that was passed through.
    Range,
    /// The status is not storable without explicit freshness (errors, 302, 307...),
    /// or is never stored (1xx, 304).
    NotCacheable,
    /// Stale on arrival and without a validator to revalidate it.
    NoLifetime,
    /// The body has no length framing: a cut connection would look complete.
    NoLength,
    /// Larger than `cache.max_object_size`, or than the whole `cache.max_size`.
    TooLarge,
    /// The request waited `cache.collapse_timeout` for another request's fill of its key
    /// and then went to the origin itself: its answer is not stored, so that a slow
    /// object does not turn its waiting requests into as many fills.
    CollapseTimeout,
    /// Its cache tags could not all be indexed: stored, it would outlive a purge of a
    /// tag it carries.
    Tags(UnindexedTags),
}

/// Why a response's cache tags could not all be indexed (`[tags]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnindexedTags {
    /// More tags than `tags.max_per_entry`.
    TooMany,
    /// A tag longer than `tags.max_length`.
    TooLong,
    /// A field line that is not visible ASCII, so no tag a purge could name.
    Unreadable,
    /// The tag index is at `tags.max_memory`.
    MemoryFull,
}

impl UnindexedTags {
    /// Every reason, in counter order.
    pub const ALL: [UnindexedTags; 4] = [
        UnindexedTags::TooMany,
        UnindexedTags::TooLong,
        UnindexedTags::Unreadable,
        UnindexedTags::MemoryFull,
    ];

    /// The `Cache-Status` `detail` token, access-log word and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            UnindexedTags::TooMany => "tags-too-many",
            UnindexedTags::TooLong => "tag-too-long",
            UnindexedTags::Unreadable => "tags-unreadable",
            UnindexedTags::MemoryFull => "tag-memory-full",
        }
    }
}

impl NotStored {
    /// The `Cache-Status` `detail` token and access-log word.
    pub fn as_str(self) -> &'static str {
        match self {
            NotStored::Method => "method",
            NotStored::NoStore => "no-store",
            NotStored::Private => "private",
            NotStored::Authorization => "authorization",
            NotStored::SetCookie => "set-cookie",
            NotStored::VaryStar => "vary-star",
            NotStored::Partial => "partial",
            NotStored::Range => "range",
            NotStored::NotCacheable => "not-cacheable",
            NotStored::NoLifetime => "no-lifetime",
            NotStored::NoLength => "no-length",
            NotStored::TooLarge => "too-large",
            NotStored::CollapseTimeout => "collapse-timeout",
            NotStored::Tags(reason) => reason.as_str(),
        }
    }
}

/// Decides whether `response`, the origin's answer to a GET with `request` headers,
/// may be stored (RFC 9111 §3) under `rules`.
pub(crate) fn storability(
    request: &HeaderMap,
    response: &response::Parts,
    response_time: SystemTime,
    rules: &Rules,
) -> Result<(), NotStored> {
    let status = response.status;
    if status == StatusCode::PARTIAL_CONTENT {
        return Err(NotStored::Partial);
    }
    if status.is_informational() || status == StatusCode::NOT_MODIFIED {
        return Err(NotStored::NotCacheable);
    }
    let cc = Directives::of_response(&response.headers, rules.targeted_field.as_ref());
    // must-understand (§5.2.2.3): stored only by a cache that implements the status's
    // caching rules, which then ignores the no-store sent beside it for older caches.
    let must_understand = cc.has("must-understand");
    if must_understand && !freshness::cacheable_by_default(status) {
        return Err(NotStored::NotCacheable);
    }
    let no_store = cc.has("no-store") && !must_understand;
    if no_store || RequestDirectives::parse(request).no_store {
        return Err(NotStored::NoStore);
    }
    if cc.has("private") {
        return Err(NotStored::Private);
    }
    let shareable = ["public", "s-maxage", "must-revalidate"]
        .iter()
        .any(|d| cc.has(d));
    if fields::has(request, &AUTHORIZATION) && !shareable {
        return Err(NotStored::Authorization);
    }
    if fields::has(&response.headers, &SET_COOKIE) {
        return Err(NotStored::SetCookie);
    }
    if VarySpec::of(&response.headers) == VarySpec::Star {
        return Err(NotStored::VaryStar);
    }
    // A status that may be given a heuristic lifetime, with a validator: storable
    // whatever its lifetime (stale, it is revalidated), which is then not worked out
    // here for a response admission may yet refuse.
    if freshness::heuristic_status(status) && validation::has_validator(&response.headers) {
        return Ok(());
    }
    let (lifetime, source) =
        freshness::lifetime(status, &response.headers, &cc, response_time, rules);
    // A rule's `ttl_by_status` is the operator's explicit freshness.
    let overridden = source == LifetimeSource::StatusTtl;
    let explicit = overridden || source == LifetimeSource::Explicit;
    // Errors only with explicit freshness or `public`; other statuses that are not
    // cacheable by default (302, 307...) likewise (RFC 9111 §3, item 5).
    if !explicit && !freshness::heuristic_allowed(status, &cc) {
        return Err(NotStored::NotCacheable);
    }
    let age = freshness::initial_age(&response.headers, response_time, response_time);
    // Under a rule's `ttl_by_status` the origin's `no-cache` is set aside like its
    // `max-age` (`private`, `no-store` and `Set-Cookie` were refused above regardless).
    let fresh = lifetime > age && (overridden || !cc.has("no-cache"));
    if !fresh && !validation::has_validator(&response.headers) {
        return Err(NotStored::NoLifetime);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: Rules = Rules {
        heuristic_max: Duration::from_secs(86_400),
        targeted_field: None,
        lifetimes: Lifetimes::NONE,
    };

    fn response(status: u16, headers: &[(&str, &str)]) -> response::Parts {
        let mut builder = http::Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("test response").into_parts().0
    }

    fn verdict(status: u16, headers: &[(&str, &str)]) -> Result<(), NotStored> {
        storability(
            &HeaderMap::new(),
            &response(status, headers),
            SystemTime::now(),
            &RULES,
        )
    }

    #[test]
    fn positive_lifetime_or_a_validator_is_storable() {
        assert_eq!(verdict(200, &[("cache-control", "max-age=60")]), Ok(()));
        assert_eq!(
            verdict(200, &[("cache-control", "no-cache"), ("etag", "\"a\"")]),
            Ok(())
        );
        assert_eq!(verdict(404, &[("cache-control", "max-age=60")]), Ok(()));
        assert_eq!(verdict(204, &[("cache-control", "max-age=60")]), Ok(()));
        let understood = [("cache-control", "must-understand, no-store, max-age=60")];
        assert_eq!(verdict(200, &understood), Ok(()));
        assert_eq!(verdict(404, &understood), Ok(()));
    }

    #[test]
    fn a_validator_makes_a_heuristic_status_storable_whatever_its_lifetime_and_no_other() {
        let lifetimes: [&[(&str, &str)]; 5] = [
            &[],
            &[("cache-control", "max-age=0")],
            &[("cache-control", "no-cache, max-age=60")],
            &[("expires", "Sun, 01 Nov 2026 00:00:00 GMT")],
            &[("expires", "0")],
        ];
        let validators = [
            ("etag", "\"a\""),
            ("last-modified", "Sun, 01 Nov 2026 00:00:00 GMT"),
        ];
        for status in [200, 203, 204, 300, 301, 308] {
            for lifetime in lifetimes {
                for validator in validators {
                    let headers = [lifetime, &[validator]].concat();
                    assert_eq!(verdict(status, &headers), Ok(()), "{status} {headers:?}");
                }
            }
        }
        // Not a status given a heuristic lifetime: a validator alone does not store it.
        for (status, validator) in [(404, validators[0]), (302, validators[1])] {
            let refused = verdict(status, &[validator]);
            assert_eq!(refused, Err(NotStored::NotCacheable), "{status}");
        }
    }

    #[test]
    fn each_refusal_names_its_reason() {
        type Case = (u16, &'static [(&'static str, &'static str)], NotStored);
        const LM: &str = "Sun, 01 Nov 2026 00:00:00 GMT";
        let cases: [Case; 13] = [
            (
                200,
                &[("cache-control", "no-store, max-age=60")],
                NotStored::NoStore,
            ),
            (
                200,
                &[("cache-control", "private, max-age=60")],
                NotStored::Private,
            ),
            (
                200,
                &[("cache-control", "max-age=60"), ("set-cookie", "a=b")],
                NotStored::SetCookie,
            ),
            (
                200,
                &[("cache-control", "max-age=60"), ("vary", "*")],
                NotStored::VaryStar,
            ),
            (206, &[("cache-control", "max-age=60")], NotStored::Partial),
            (
                200,
                &[("cache-control", "no-cache, max-age=60")],
                NotStored::NoLifetime,
            ),
            (
                200,
                &[("cache-control", "max-age=0")],
                NotStored::NoLifetime,
            ),
            (
                200,
                &[("cache-control", "max-age=60"), ("age", "60")],
                NotStored::NoLifetime,
            ),
            (500, &[], NotStored::NotCacheable),
            (
                418,
                &[("cache-control", "must-understand, no-store, max-age=60")],
                NotStored::NotCacheable,
            ),
            (
                200,
                &[
                    ("cache-control", "must-understand, no-store, max-age=60"),
                    ("set-cookie", "a=b"),
                ],
                NotStored::SetCookie,
            ),
            (404, &[("last-modified", LM)], NotStored::NotCacheable),
            (302, &[("last-modified", LM)], NotStored::NotCacheable),
        ];
        for (status, headers, expected) in cases {
            assert_eq!(
                verdict(status, headers),
                Err(expected),
                "{status} {headers:?}"
            );
        }
    }

    #[test]
    fn an_override_sets_aside_freshness_but_never_privacy() {
        let rules = Rules {
            lifetimes: Lifetimes {
                by_status: vec![
                    (StatusCode::OK, Duration::from_secs(60)),
                    (StatusCode::NOT_FOUND, Duration::from_secs(30)),
                ],
                ..Lifetimes::NONE
            },
            ..RULES
        };
        let judge = |status: u16, headers: &[(&str, &str)]| {
            storability(
                &HeaderMap::new(),
                &response(status, headers),
                SystemTime::now(),
                &rules,
            )
        };
        assert_eq!(
            judge(200, &[("cache-control", "max-age=0, no-cache")]),
            Ok(())
        );
        assert_eq!(judge(404, &[]), Ok(()));
        assert_eq!(judge(500, &[]), Err(NotStored::NotCacheable));
        let private = [("cache-control", "private")];
        assert_eq!(judge(200, &private), Err(NotStored::Private));
        let no_store = [("cache-control", "no-store")];
        assert_eq!(judge(200, &no_store), Err(NotStored::NoStore));
        assert_eq!(
            judge(200, &[("set-cookie", "a=b")]),
            Err(NotStored::SetCookie)
        );
    }

    #[test]
    fn credentials_need_a_sharing_directive() {
        let mut request = HeaderMap::new();
        request.insert(AUTHORIZATION, http::HeaderValue::from_static("Basic eDp5"));
        let now = SystemTime::now();
        let private = response(200, &[("cache-control", "max-age=60")]);
        assert_eq!(
            storability(&request, &private, now, &RULES),
            Err(NotStored::Authorization)
        );
        let public = response(200, &[("cache-control", "public, max-age=60")]);
        assert_eq!(storability(&request, &public, now, &RULES), Ok(()));
    }
}
