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
//! Matching reads the request once ([`Matched::of`]): a bit per rule whose request
//! conditions hold, so the response-time pass tests only the response.

use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method};

use crate::admission::Decision;
use crate::config::rules::{MAX_RULES, PathMatch, Rule, Rules};

/// The rules whose request conditions hold for one request: what the request-time and
/// response-time decisions are read from.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Matched {
    /// Bit `i`: rule `i`'s request conditions hold.
    bits: u64,
    /// The first of them without response conditions: the request's own rule.
    request_rule: Option<usize>,
}

impl Matched {
    /// Tests every rule's request conditions against `method` and `path`. No rules: no
    /// work beyond the check that there are none.
    pub(crate) fn of(rules: &Rules, method: &Method, path: &str) -> Matched {
        let mut matched = Matched::default();
        for (i, rule) in rules.0.iter().enumerate().take(MAX_RULES) {
            if matches_request(rule, method, path) {
                matched.bits |= 1 << i;
                if matched.request_rule.is_none() && !rule.on_response() {
                    matched.request_rule = Some(i);
                }
            }
        }
        matched
    }

    /// The rule that decides the request's own handling (bypass, `no-cache`, the key).
    pub(crate) fn request_rule(self, rules: &Rules) -> Option<&Rule> {
        self.request_rule.and_then(|i| rules.0.get(i))
    }

    /// The admission planned before the response: `filter` as the request's rule
    /// overrides it, when that rule is also the first match (no rule before it waits for
    /// the response). Used to prepare the fetch (may it be stored, may it lead a collapse);
    /// the response's own decision is [`Matched::admission`].
    pub(crate) fn planned(self, rules: &Rules, filter: Decision) -> Decision {
        let first = (self.bits != 0).then(|| self.bits.trailing_zeros() as usize);
        match (first, self.request_rule) {
            (Some(first), Some(rule)) if first == rule => override_of(rules, rule, filter),
            _ => filter,
        }
    }

    /// The admission of a storable response with `headers` and a declared `length`: the
    /// first rule whose every condition holds decides, or `filter` when none does or it
    /// sets no admission.
    pub(crate) fn admission(
        self,
        rules: &Rules,
        headers: &HeaderMap,
        length: Option<u64>,
        filter: Decision,
    ) -> Decision {
        let mut bits = self.bits;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(rule) = rules.0.get(i)
                && (!rule.on_response() || matches_response(rule, headers, length))
            {
                return override_of(rules, i, filter);
            }
        }
        filter
    }
}

/// `filter`, the policy's decision, as rule number `rule`'s `admission` overrides it
/// ([`Decision::overridden_by`]), or as it is when the rule sets none.
fn override_of(rules: &Rules, rule: usize, filter: Decision) -> Decision {
    match rules.0.get(rule).and_then(|rule| rule.admission) {
        Some(admission) => filter.overridden_by(admission),
        None => filter,
    }
}

fn matches_request(rule: &Rule, method: &Method, path: &str) -> bool {
    let path_matches = match &rule.path {
        None => true,
        Some(PathMatch::Prefix(prefix)) => path.starts_with(prefix.as_str()),
        Some(PathMatch::Glob { matcher, .. }) => matcher.is_match(path),
    };
    path_matches && (rule.methods.is_empty() || rule.methods.contains(method))
}

fn matches_response(rule: &Rule, headers: &HeaderMap, length: Option<u64>) -> bool {
    if !rule.content_types.is_empty() {
        let Some(media) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let media = media.trim_start();
        let starts = |prefix: &String| {
            media
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
        };
        if !rule.content_types.iter().any(starts) {
            return false;
        }
    }
    let at_least = rule
        .min_size
        .is_none_or(|min| length.is_some_and(|l| l >= min));
    let at_most = rule
        .max_size
        .is_none_or(|max| length.is_some_and(|l| l <= max));
    at_least && at_most
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::admission::{AdmitReason, RejectReason};
    use crate::config::rules::RuleAdmission;

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
        let m = Matched::of(&rules, &get, "/a/x");
        assert_eq!(m.planned(&rules, FIRST), RULE_ADMIT);
        let m = Matched::of(&rules, &get, "/a/private/x");
        assert_eq!(
            m.planned(&rules, FIRST),
            Decision::Reject(RejectReason::Rule)
        );
        let m = Matched::of(&rules, &get, "/b");
        assert_eq!(m.planned(&rules, FIRST), FIRST);
        assert!(m.request_rule(&rules).is_none());
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
        let m = Matched::of(&rules, &Method::GET, "/img/a.png");
        // The request's own rule is the bypass; the admission waits for the response.
        assert!(m.request_rule(&rules).is_some_and(|r| r.bypass));
        assert_eq!(m.planned(&rules, FIRST), FIRST);
        let mut png = HeaderMap::new();
        png.insert(CONTENT_TYPE, HeaderValue::from_static("Image/PNG"));
        assert_eq!(m.admission(&rules, &png, None, FIRST), RULE_ADMIT);
        let m = Matched::of(&rules, &Method::GET, "/other");
        assert_eq!(m.admission(&rules, &HeaderMap::new(), None, FIRST), FIRST);
    }

    #[test]
    fn sizes_match_only_a_declared_length_within_them() {
        let rules = Rules(vec![Rule {
            min_size: Some(10),
            max_size: Some(20),
            admission: Some(RuleAdmission::Always),
            ..Rule::default()
        }]);
        let m = Matched::of(&rules, &Method::GET, "/");
        let none = HeaderMap::new();
        assert_eq!(m.admission(&rules, &none, Some(15), FIRST), RULE_ADMIT);
        assert_eq!(m.admission(&rules, &none, Some(21), FIRST), FIRST);
        assert_eq!(m.admission(&rules, &none, None, FIRST), FIRST);
    }

    #[test]
    fn second_hit_obeys_the_filters_even_in_shadow_mode() {
        let shadowed = Decision::Admit(AdmitReason::Shadowed(RejectReason::FirstSight));
        assert_eq!(shadowed.overridden_by(RuleAdmission::SecondHit), FIRST);
        let seen = Decision::Admit(AdmitReason::SeenBefore);
        assert_eq!(seen.overridden_by(RuleAdmission::SecondHit), seen);
    }

    #[test]
    fn methods_and_globs_narrow_a_rule() {
        let rules = Rules(vec![Rule {
            path: Some(PathMatch::glob("/img/**/*.png").expect("glob")),
            methods: vec![Method::GET],
            admission: Some(RuleAdmission::Always),
            ..Rule::default()
        }]);
        let planned =
            |method: &Method, path| Matched::of(&rules, method, path).planned(&rules, FIRST);
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
            Matched::of(&one, &Method::GET, "/a/b.png").planned(&one, FIRST),
            FIRST
        );
        assert_eq!(
            Matched::of(&one, &Method::GET, "/b.png").planned(&one, FIRST),
            RULE_ADMIT
        );
    }
}
