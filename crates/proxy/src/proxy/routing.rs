//! The request's site, chosen by its host, and the part its rules take in admission.

use std::sync::Arc;

use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderMap, Response, StatusCode, request, response};

use super::Answer;
use super::respond;
use crate::admission::{Admission, AdmitReason, Decision, FilterHash, Pending, ResponseInfo};
use crate::config::Rules;
use crate::fields;
use crate::outcome::{Detail, Outcome};
use crate::sites::rule::Matched;
use crate::sites::{Site, Sites};

/// The site of `sites` that serves `head`'s host — its URI authority (HTTP/2, absolute
/// form) or its `Host`, as for the cache key — or the status that answers a host no site
/// names (`server.unknown_host`). The site is then held for the whole exchange.
pub(super) fn site_of(sites: &Sites, head: &request::Parts) -> Result<Arc<Site>, StatusCode> {
    let authority = (head.uri.authority().map(|a| a.as_str()))
        .or_else(|| fields::first(&head.headers, &HOST).and_then(|host| host.to_str().ok()))
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

/// A request's admission between its two phases: what the policy's
/// [`Admission::on_request`] recorded, or a key already stored, which is re-admitted
/// without asking the policy.
#[derive(Clone, Copy, Debug)]
pub(super) enum Admitting {
    /// Asked of the policy before the store lookup.
    Asked {
        /// The policy's first phase, for its second.
        pending: Pending,
        /// The decision planned before the response: the policy's, as the site's request
        /// rule overrides it ([`RuleCheck::planned`]).
        planned: Decision,
    },
    /// A refetch of a key already stored (`AdmitReason::AlreadyStored`).
    AlreadyStored,
}

impl Admitting {
    /// The admission known before the response: it shapes the fetch (may it be stored,
    /// may it lead a collapse).
    pub(super) fn planned(self) -> Decision {
        match self {
            Admitting::Asked { planned, .. } => planned,
            Admitting::AlreadyStored => Decision::Admit(AdmitReason::AlreadyStored),
        }
    }

    /// The key's filter hash, when the policy was asked (the miss-ratio estimates sample
    /// by it).
    pub(super) fn hash(self) -> Option<FilterHash> {
        match self {
            Admitting::Asked { pending, .. } => Some(pending.hash),
            Admitting::AlreadyStored => None,
        }
    }

    /// The admission of a storable response with `head` and a declared `length`: the
    /// policy's second phase ([`Admission::on_response`]), then the site's `rules` over it.
    pub(super) fn on_response(
        self,
        policy: &dyn Admission,
        rules: Option<RuleCheck<'_>>,
        head: &response::Parts,
        length: Option<u64>,
    ) -> Decision {
        let Admitting::Asked { pending, .. } = self else {
            return self.planned();
        };
        let response = ResponseInfo {
            size: length,
            content_type: fields::first(&head.headers, &CONTENT_TYPE).and_then(|v| v.to_str().ok()),
            status: head.status.as_u16(),
        };
        let decision = policy.on_response(pending, &response);
        rules.map_or(decision, |rules| {
            rules.admission(&head.headers, length, decision)
        })
    }
}

/// What a site's rules need to override the admission before the response and once its
/// head is known; `None` where the site has no rules.
#[derive(Clone, Copy)]
pub(super) struct RuleCheck<'a> {
    rules: &'a Rules,
    matched: Matched,
}

impl<'a> RuleCheck<'a> {
    /// The check for a request to `site` whose request conditions gave `matched`.
    pub(super) fn of(site: &'a Site, matched: Matched) -> Option<Self> {
        (!site.rules.0.is_empty()).then_some(RuleCheck {
            rules: &site.rules,
            matched,
        })
    }

    /// The admission known before the response: `filter`, the policy's planned decision,
    /// as the request's rule overrides it ([`Matched::planned`]).
    pub(super) fn planned(self, filter: Decision) -> Decision {
        self.matched.planned(self.rules, filter)
    }

    /// The admission of a response with `headers` and a declared `length`: `decision`, the
    /// policy's, as the first rule that matches overrides it ([`Matched::admission`]).
    pub(super) fn admission(
        self,
        headers: &HeaderMap,
        length: Option<u64>,
        decision: Decision,
    ) -> Decision {
        self.matched
            .admission(self.rules, headers, length, decision)
    }
}
