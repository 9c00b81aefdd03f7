//! A site's cache rules: a short ordered list, compiled at load, matched per request.
//!
//! A rule matches on the request (path prefix or glob, method) and, optionally, on the
//! response head (`Content-Type`, declared size). First match wins, but what is known
//! decides when: before the response only rules without response conditions can match,
//! so the request's own decisions (bypass, `no-cache`, the key's shape) come from the
//! first of those whose request conditions hold; the admission of a storable response
//! is decided after its head, by the first rule whose every condition holds. A rule
//! with response conditions may therefore only set `admission` (the loader refuses
//! anything else on it).
//!
//! Matching reads the request once ([`Rules::matching`]): a bit per rule whose request
//! conditions hold, so the response-time pass tests only the response.

use globset::GlobMatcher;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method};

use crate::admission::{AdmitReason, Decision, RejectReason};
use crate::key::KeyShape;

/// Most rules one site may have: the request-side matches are one bit each in a `u64`.
pub const MAX_RULES: usize = 64;

/// One rule: conditions, all of which must hold, and actions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rule {
    /// Which request paths it applies to; `None`: every path.
    pub path: Option<PathMatch>,
    /// Which methods it applies to; empty: every method.
    pub methods: Vec<Method>,
    /// Media-type prefixes of the response's `Content-Type` (lower-case, e.g. `image/`);
    /// empty: any. A response without the field matches none.
    pub content_types: Vec<String>,
    /// Smallest declared response length (`Content-Length`) it applies to.
    pub min_size: Option<u64>,
    /// Largest declared response length it applies to.
    pub max_size: Option<u64>,
    /// The admission it imposes on storable responses; `None`: the policy's.
    pub admission: Option<RuleAdmission>,
    /// No lookup and no store: the request goes to the origin as it is.
    pub bypass: bool,
    /// The client's `Cache-Control: no-cache` (or `Pragma: no-cache`) does not force a
    /// revalidation.
    pub ignore_client_no_cache: bool,
    /// How the key of a matching request is shaped; `None`: as usual.
    pub key: Option<KeyShape>,
}

/// A rule's path condition.
#[derive(Debug, Clone)]
pub enum PathMatch {
    /// The path starts with this.
    Prefix(String),
    /// The path matches this glob (`*` stays within a segment, `**` crosses them).
    Glob {
        /// The pattern as written, for equality and messages.
        pattern: String,
        /// The compiled pattern.
        matcher: GlobMatcher,
    },
}

impl PathMatch {
    /// Compiles a glob in which `*` stays within a segment and `**` crosses them.
    pub fn glob(pattern: &str) -> Result<PathMatch, globset::Error> {
        let matcher = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()?
            .compile_matcher();
        Ok(PathMatch::Glob {
            pattern: pattern.to_owned(),
            matcher,
        })
    }
}

impl PartialEq for PathMatch {
    // A compiled glob has no equality of its own; its pattern decides it.
    fn eq(&self, other: &PathMatch) -> bool {
        match (self, other) {
            (PathMatch::Prefix(a), PathMatch::Prefix(b)) => a == b,
            (PathMatch::Glob { pattern: a, .. }, PathMatch::Glob { pattern: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// The admission a rule imposes (`admission = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAdmission {
    /// What the filters say, whatever the policy (`"second-hit"`); the loader refuses it
    /// under `admission.policy = "always"`, which keeps no filters.
    SecondHit,
    /// Store every storable response (`"always"`).
    Always,
    /// Store none (`"never"`).
    Never,
}

impl RuleAdmission {
    /// `filter`, the policy's decision for the key, as this rule overrides it.
    fn apply(self, filter: Decision) -> Decision {
        match (self, filter) {
            (RuleAdmission::Always, _) => Decision::Admit(AdmitReason::Rule),
            (RuleAdmission::Never, _) => Decision::Reject(RejectReason::Rule),
            // Shadow mode admits what its filters rejected; this rule wants them obeyed.
            (RuleAdmission::SecondHit, Decision::Admit(AdmitReason::Shadowed(reason))) => {
                Decision::Reject(reason)
            }
            (RuleAdmission::SecondHit, decision) => decision,
        }
    }
}

impl Rule {
    /// Whether it looks at the response, and so can match only after its head.
    pub fn on_response(&self) -> bool {
        !self.content_types.is_empty() || self.min_size.is_some() || self.max_size.is_some()
    }

    fn matches_request(&self, method: &Method, path: &str) -> bool {
        let path_matches = match &self.path {
            None => true,
            Some(PathMatch::Prefix(prefix)) => path.starts_with(prefix.as_str()),
            Some(PathMatch::Glob { matcher, .. }) => matcher.is_match(path),
        };
        path_matches && (self.methods.is_empty() || self.methods.contains(method))
    }

    fn matches_response(&self, headers: &HeaderMap, length: Option<u64>) -> bool {
        if !self.content_types.is_empty() {
            let Some(media) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
                return false;
            };
            let media = media.trim_start();
            let starts = |prefix: &String| {
                media
                    .get(..prefix.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
            };
            if !self.content_types.iter().any(starts) {
                return false;
            }
        }
        let at_least = self
            .min_size
            .is_none_or(|min| length.is_some_and(|l| l >= min));
        let at_most = self
            .max_size
            .is_none_or(|max| length.is_some_and(|l| l <= max));
        at_least && at_most
    }
}

/// A site's rules, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rules(pub Vec<Rule>);

/// The rules whose request conditions hold for one request: what the request-time and
/// response-time decisions are read from.
#[derive(Clone, Copy, Debug, Default)]
pub struct Matched {
    /// Bit `i`: rule `i`'s request conditions hold.
    bits: u64,
    /// The first of them without response conditions: the request's own rule.
    request_rule: Option<usize>,
}

impl Rules {
    /// Tests every rule's request conditions against `method` and `path`. No rules: no
    /// work beyond the check that there are none.
    pub fn matching(&self, method: &Method, path: &str) -> Matched {
        let mut matched = Matched::default();
        for (i, rule) in self.0.iter().enumerate().take(MAX_RULES) {
            if rule.matches_request(method, path) {
                matched.bits |= 1 << i;
                if matched.request_rule.is_none() && !rule.on_response() {
                    matched.request_rule = Some(i);
                }
            }
        }
        matched
    }

    /// The rule that decides the request's own handling (bypass, `no-cache`, the key).
    pub fn request_rule(&self, matched: Matched) -> Option<&Rule> {
        matched.request_rule.and_then(|i| self.0.get(i))
    }

    /// The admission planned before the response: `filter` as the request's rule
    /// overrides it, when that rule is also the first match (no rule before it waits for
    /// the response). Used to prepare the fetch (may it be stored, may it lead a collapse);
    /// the response's own decision is [`Rules::admission`].
    pub fn planned(&self, matched: Matched, filter: Decision) -> Decision {
        let first = (matched.bits != 0).then(|| matched.bits.trailing_zeros() as usize);
        match (first, matched.request_rule) {
            (Some(first), Some(rule)) if first == rule => self.override_of(rule, filter),
            _ => filter,
        }
    }

    /// The admission of a storable response with `headers` and a declared `length`: the
    /// first rule whose every condition holds decides, or `filter` when none does or it
    /// sets no admission.
    pub fn admission(
        &self,
        matched: Matched,
        headers: &HeaderMap,
        length: Option<u64>,
        filter: Decision,
    ) -> Decision {
        let mut bits = matched.bits;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(rule) = self.0.get(i)
                && (!rule.on_response() || rule.matches_response(headers, length))
            {
                return self.override_of(i, filter);
            }
        }
        filter
    }

    fn override_of(&self, rule: usize, filter: Decision) -> Decision {
        match self.0.get(rule).and_then(|rule| rule.admission) {
            Some(admission) => admission.apply(filter),
            None => filter,
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn rule(path: &str) -> Rule {
        Rule {
            path: Some(PathMatch::Prefix(path.to_owned())),
            ..Rule::default()
        }
    }

    const FIRST: Decision = Decision::Reject(RejectReason::FirstSight);
    const RULE_ADMIT: Decision = Decision::Admit(AdmitReason::Rule);

    #[test]
    fn the_first_rule_that_matches_decides() {
        let rules = Rules(vec![
            Rule {
                admission: Some(RuleAdmission::Never),
                ..rule("/a/private/")
            },
            Rule {
                admission: Some(RuleAdmission::Always),
                ..rule("/a/")
            },
        ]);
        let get = Method::GET;
        let m = rules.matching(&get, "/a/x");
        assert_eq!(rules.planned(m, FIRST), RULE_ADMIT);
        let m = rules.matching(&get, "/a/private/x");
        assert_eq!(
            rules.planned(m, FIRST),
            Decision::Reject(RejectReason::Rule)
        );
        let m = rules.matching(&get, "/b");
        assert_eq!(rules.planned(m, FIRST), FIRST);
        assert!(rules.request_rule(m).is_none());
    }

    #[test]
    fn a_response_rule_decides_only_after_the_head() {
        let rules = Rules(vec![
            Rule {
                content_types: vec!["image/".to_owned()],
                admission: Some(RuleAdmission::Always),
                ..Rule::default()
            },
            Rule {
                bypass: true,
                ..rule("/img/")
            },
        ]);
        let m = rules.matching(&Method::GET, "/img/a.png");
        // The request's own rule is the bypass; the admission waits for the response.
        assert!(rules.request_rule(m).is_some_and(|r| r.bypass));
        assert_eq!(rules.planned(m, FIRST), FIRST);
        let mut png = HeaderMap::new();
        png.insert(CONTENT_TYPE, HeaderValue::from_static("Image/PNG"));
        assert_eq!(rules.admission(m, &png, None, FIRST), RULE_ADMIT);
        let m = rules.matching(&Method::GET, "/other");
        assert_eq!(rules.admission(m, &HeaderMap::new(), None, FIRST), FIRST);
    }

    #[test]
    fn sizes_match_only_a_declared_length_within_them() {
        let rules = Rules(vec![Rule {
            min_size: Some(10),
            max_size: Some(20),
            admission: Some(RuleAdmission::Always),
            ..Rule::default()
        }]);
        let m = rules.matching(&Method::GET, "/");
        let none = HeaderMap::new();
        assert_eq!(rules.admission(m, &none, Some(15), FIRST), RULE_ADMIT);
        assert_eq!(rules.admission(m, &none, Some(21), FIRST), FIRST);
        assert_eq!(rules.admission(m, &none, None, FIRST), FIRST);
    }

    #[test]
    fn second_hit_obeys_the_filters_even_in_shadow_mode() {
        let shadowed = Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight));
        assert_eq!(RuleAdmission::SecondHit.apply(shadowed), FIRST);
        let seen = Decision::Admit(AdmitReason::SeenBefore);
        assert_eq!(RuleAdmission::SecondHit.apply(seen), seen);
    }

    #[test]
    fn methods_and_globs_narrow_a_rule() {
        let rules = Rules(vec![Rule {
            path: Some(PathMatch::glob("/img/**/*.png").expect("glob")),
            methods: vec![Method::GET],
            admission: Some(RuleAdmission::Always),
            ..Rule::default()
        }]);
        let planned = |method: &Method, path| rules.planned(rules.matching(method, path), FIRST);
        assert_eq!(planned(&Method::GET, "/img/a/b.png"), RULE_ADMIT);
        assert_eq!(planned(&Method::HEAD, "/img/a/b.png"), FIRST);
        assert_eq!(planned(&Method::GET, "/img/a/b.jpg"), FIRST);
        let one = Rules(vec![Rule {
            path: Some(PathMatch::glob("/*.png").expect("glob")),
            admission: Some(RuleAdmission::Always),
            ..Rule::default()
        }]);
        // `*` stays within its segment.
        assert_eq!(
            one.planned(one.matching(&Method::GET, "/a/b.png"), FIRST),
            FIRST
        );
        assert_eq!(
            one.planned(one.matching(&Method::GET, "/b.png"), FIRST),
            RULE_ADMIT
        );
    }
}
