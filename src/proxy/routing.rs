//! The request's site, chosen by its host, and the part its rules take in admission.

use std::sync::Arc;

use http::header::HOST;
use http::{HeaderMap, Response, StatusCode, request};

use super::Answer;
use super::respond;
use crate::admission::Decision;
use crate::config::Rules;
use crate::outcome::{Detail, Outcome};
use crate::sites::rule::Matched;
use crate::sites::{Site, Sites};

/// The site of `sites` that serves `head`'s host — its URI authority (HTTP/2, absolute
/// form) or its `Host`, as for the cache key — or the status that answers a host no site
/// names (`server.unknown_host`). The site is then held for the whole exchange.
pub(super) fn site_of(sites: &Sites, head: &request::Parts) -> Result<Arc<Site>, StatusCode> {
    let authority = (head.uri.authority().map(|a| a.as_str()))
        .or_else(|| head.headers.get(HOST).and_then(|host| host.to_str().ok()))
        .unwrap_or("");
    sites.route(authority).cloned()
}

/// The proxy's own answer to a host no site names: `status` (421 or 404) and an empty
/// body.
pub(super) fn unknown_host(status: StatusCode) -> Answer {
    let mut response = Response::new(respond::empty());
    *response.status_mut() = status;
    Answer::new(response, Outcome::own(Detail::UnknownHost))
}

/// What a site's rules need to decide the admission of a storable response once its
/// head is known; `None` where the site has no rules.
#[derive(Clone, Copy)]
pub(super) struct RuleCheck<'a> {
    rules: &'a Rules,
    matched: Matched,
    /// The admission policy's own decision for the key.
    filter: Decision,
}

impl<'a> RuleCheck<'a> {
    /// The check for a request to `site` whose request conditions gave `matched`.
    pub(super) fn of(site: &'a Site, matched: Matched, filter: Decision) -> Option<Self> {
        (!site.rules.0.is_empty()).then_some(RuleCheck {
            rules: &site.rules,
            matched,
            filter,
        })
    }

    /// The admission known before the response ([`Rules::planned`]).
    pub(super) fn planned(self) -> Decision {
        self.matched.planned(self.rules, self.filter)
    }

    /// The admission of a response with `headers` and a declared `length`
    /// ([`Rules::admission`]).
    pub(super) fn admission(self, headers: &HeaderMap, length: Option<u64>) -> Decision {
        self.matched
            .admission(self.rules, headers, length, self.filter)
    }
}
