//! The `Cache-Status` response header (RFC 9211), rendered from a request's
//! [`Outcome`].
//!
//! Every response secondhit sends carries one entry naming this cache:
//! `secondhit; hit` for a response served from disk, `secondhit; fwd=uri-miss; stored`
//! for a miss that is being written to disk, `secondhit; fwd=uri-miss; detail=first-sight`
//! for a miss the admission filter kept off the disk, and so on. `detail` carries the
//! short reason a response was not stored (the same words the access log uses).
//! `fwd-status` is the origin's status for a forwarded request (a revalidation answered
//! 304 reads `fwd=stale; fwd-status=304`), and `ttl` the remaining freshness of a
//! stored response served or refreshed, negative when it is served stale. Every `detail`
//! is a [`crate::outcome::Detail`].
//!
//! `collapsed` marks a miss that waited for another request's fetch of the same key
//! (request collapsing, `proxy::collapse`) and is answered from what that fetch stored:
//! `secondhit; fwd=uri-miss; ttl=60; collapsed`. RFC 9211 §2.6 defines the parameter for
//! exactly this ("collapsed together with one or more other forward requests"), and the
//! request did need the origin, so it is reported as the miss it was rather than as a
//! `hit` (which the metrics would count as served from storage alone); a follower that
//! had to fetch for itself after all carries no `collapsed` (the RFC omits it when false).

use http::HeaderValue;

pub use crate::header_names::CACHE_STATUS;
use crate::outcome::{Detail, Forward};
use crate::outcome::{Forwarded, Outcome};

/// The name of this cache in `Cache-Status` (RFC 9211 §2: a cache identifies itself).
pub const CACHE_NAME: &str = "secondhit";

/// The header value, e.g. `secondhit; fwd=uri-miss; stored`.
pub fn header_value(outcome: &Outcome) -> HeaderValue {
    // Written in the thread's scratch text and copied out at its size: one allocation,
    // the value's own, which every response needs.
    crate::header_text::with_scratch(|text| {
        write(outcome, text);
        // Only static tokens and integers are ever appended, all visible ASCII.
        HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(CACHE_NAME))
    })
}

/// Appends the header's text to `out` (the access log writes it without a header value).
pub fn write(outcome: &Outcome, out: &mut String) {
    out.push_str(CACHE_NAME);
    match outcome {
        Outcome::Hit { ttl, stale } => {
            out.push_str("; hit");
            push_ttl(out, *ttl);
            if let Some(detail) = stale {
                out.push_str("; detail=");
                out.push_str(detail.as_str());
            }
        }
        Outcome::Forwarded(Forwarded {
            why,
            origin_status,
            ttl,
            stored,
            collapsed,
            detail,
        }) => {
            out.push_str("; fwd=");
            out.push_str(why.as_str());
            if let Some(status) = origin_status {
                out.push_str("; fwd-status=");
                out.push_str(itoa::Buffer::new().format(status.as_u16()));
            }
            push_ttl(out, *ttl);
            if *stored {
                out.push_str("; stored");
            }
            if *collapsed {
                out.push_str("; collapsed");
            }
            if let Some(detail) = detail {
                out.push_str("; detail=");
                out.push_str(detail.as_str());
            }
        }
        Outcome::Own(detail) => {
            out.push_str("; detail=");
            out.push_str(detail.as_str());
        }
    }
}

/// Appends `; ttl=<ttl>` when there is one (with `itoa`: `write!` costs several times
/// more, on every response).
fn push_ttl(out: &mut String, ttl: Option<i64>) {
    if let Some(ttl) = ttl {
        out.push_str("; ttl=");
        out.push_str(itoa::Buffer::new().format(ttl));
    }
}

/// The outcome this cache's entry in a `Cache-Status` field says, read back: the inverse of
/// [`write()`], for a client (`secondhit bench --target`) that classifies responses exactly
/// as the proxy's own counters do ([`Outcome::result`]). `values` are the field's lines;
/// of several entries naming this cache (proxies in layers), the last one, nearest the
/// client, is read. `None` when no entry names this cache or the field is not an RFC 8941
/// List; a parameter this cache does not send is ignored.
pub fn parse<'v>(values: impl IntoIterator<Item = &'v HeaderValue>) -> Option<Outcome> {
    let mut joined = Vec::new();
    for value in values {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    let list: sfv::List = sfv::Parser::new(&joined).parse().ok()?;
    let entry = list.iter().rev().find_map(|entry| match entry {
        sfv::ListEntry::Item(item)
            if item.bare_item.as_token().map(|t| t.as_str()) == Some(CACHE_NAME) =>
        {
            Some(item)
        }
        _ => None,
    })?;
    Some(parse_params(&entry.params))
}

/// The outcome of one entry's parameters: `hit`, `fwd=` or neither (the proxy's own answer).
fn parse_params(params: &sfv::Parameters) -> Outcome {
    let token = |name: &str| {
        params
            .get(name)
            .and_then(|v| v.as_token())
            .map(|t| t.as_str().to_owned())
    };
    let integer = |name: &str| params.get(name).and_then(|v| v.as_integer()).map(i64::from);
    let flag = |name: &str| params.get(name).and_then(|v| v.as_boolean()) == Some(true);
    let detail = token("detail").and_then(|t| Detail::ALL.into_iter().find(|d| d.as_str() == t));
    let forwarded = token("fwd").and_then(|t| Forward::ALL.into_iter().find(|f| f.as_str() == t));
    match forwarded {
        _ if flag("hit") => Outcome::Hit {
            ttl: integer("ttl"),
            stale: detail,
        },
        Some(why) => Outcome::Forwarded(Forwarded {
            why,
            origin_status: integer("fwd-status")
                .and_then(|s| u16::try_from(s).ok())
                .and_then(|s| http::StatusCode::from_u16(s).ok()),
            ttl: integer("ttl"),
            stored: flag("stored"),
            collapsed: flag("collapsed"),
            detail,
        }),
        // An answer of the proxy's own always names its reason; one without is labelled
        // as the proxy labels a response that reached the end without one.
        None => Outcome::Own(detail.unwrap_or(Detail::Internal)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::RejectReason;
    use crate::outcome::{Detail, Forward};

    #[test]
    fn values_follow_rfc_9211_syntax() {
        assert_eq!(header_value(&Outcome::hit()), "secondhit; hit");
        assert_eq!(
            header_value(&Outcome::forward(Forward::UriMiss).stored()),
            "secondhit; fwd=uri-miss; stored"
        );
        assert_eq!(
            header_value(
                &Outcome::forward(Forward::UriMiss)
                    .detail(Detail::Admission(RejectReason::FirstSight))
            ),
            "secondhit; fwd=uri-miss; detail=first-sight"
        );
        assert_eq!(
            header_value(&Outcome::forward(Forward::UriMiss).ttl(60).collapsed()),
            "secondhit; fwd=uri-miss; ttl=60; collapsed"
        );
        assert_eq!(
            header_value(&Outcome::forward(Forward::Method)),
            "secondhit; fwd=method"
        );
        assert_eq!(
            header_value(&Outcome::hit().ttl(-3).detail(Detail::MaxStale)),
            "secondhit; hit; ttl=-3; detail=max-stale"
        );
        assert_eq!(
            header_value(&Outcome::own(Detail::MaxForwards)),
            "secondhit; detail=max-forwards"
        );
    }

    /// What the proxy writes reads back as the same outcome, for every detail and reason,
    /// and the entry nearest the client is the one read.
    #[test]
    fn parse_reads_back_what_write_writes() {
        let mut outcomes = vec![Outcome::hit(), Outcome::hit().ttl(30)];
        for why in Forward::ALL {
            outcomes.push(Outcome::forward(why));
            outcomes.push(
                Outcome::forward(why)
                    .fwd_status(http::StatusCode::NOT_FOUND)
                    .ttl(5)
                    .stored()
                    .collapsed(),
            );
        }
        for detail in Detail::ALL {
            outcomes.push(Outcome::hit().ttl(-30).detail(detail));
            outcomes.push(Outcome::forward(Forward::UriMiss).detail(detail));
            outcomes.push(Outcome::own(detail));
        }
        for outcome in outcomes {
            let value = header_value(&outcome);
            assert_eq!(parse([&value]), Some(outcome), "{value:?}");
        }
        let layered = [
            HeaderValue::from_static("secondhit; fwd=uri-miss, othercache; hit"),
            HeaderValue::from_static("secondhit; hit"),
        ];
        assert_eq!(parse(&layered), Some(Outcome::hit()));
        for foreign in ["othercache; hit", "secondhit; hit; ttl=\"x", ""] {
            assert_eq!(
                parse([&HeaderValue::from_static(foreign)]),
                None,
                "{foreign}"
            );
        }
    }

    /// RFC 9211 §2: the field is an RFC 8941 List; every parameter this cache can send,
    /// with every detail, parses as one, its detail as a token.
    #[test]
    fn every_detail_makes_a_structured_field_list() {
        for detail in Detail::ALL {
            let outcomes = [
                Outcome::forward(Forward::Stale)
                    .fwd_status(http::StatusCode::BAD_GATEWAY)
                    .ttl(-30)
                    .stored()
                    .collapsed()
                    .detail(detail),
                Outcome::hit().ttl(-30).detail(detail),
                Outcome::own(detail),
            ];
            for outcome in outcomes {
                let value = header_value(&outcome);
                let list: sfv::List = sfv::Parser::new(value.as_bytes())
                    .parse()
                    .unwrap_or_else(|e| panic!("{value:?} is not an sf-list: {e}"));
                let Some(sfv::ListEntry::Item(item)) = list.first() else {
                    panic!("{value:?} holds no item");
                };
                let sent = item.params.get("detail").and_then(|d| d.as_token());
                assert_eq!(sent.map(|t| t.as_str()), Some(detail.as_str()), "{value:?}");
            }
        }
    }
}
