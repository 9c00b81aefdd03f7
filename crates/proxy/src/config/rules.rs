//! A site's cache rules as the loader validated them: conditions on the request and the
//! response, and the actions (bypass, `no-cache`, key shape, admission). `sites` matches
//! them against requests.

use std::time::Duration;

use globset::GlobMatcher;
use http::{Method, StatusCode};

pub use secondhit_admission::settings::RuleAdmission;

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
    /// The lifetimes it gives the responses to the requests it matches.
    pub lifetimes: Lifetimes,
}

/// The lifetimes a rule sets in place of, or beside, the origin's (`default_ttl`,
/// `ttl_by_status`, `grace`). Empty (the default) leaves freshness to the origin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifetimes {
    /// The lifetime of a response that has neither explicit freshness nor a heuristic
    /// one, for the statuses a heuristic may apply to (`default_ttl`).
    pub default_ttl: Option<Duration>,
    /// Lifetimes by status that replace the origin's `Cache-Control` and `Expires`
    /// freshness (`ttl_by_status`), sorted by status.
    pub by_status: Vec<(StatusCode, Duration)>,
    /// How long past its freshness a response may be served while it is revalidated or
    /// when the origin fails, when it sets no `stale-while-revalidate` or
    /// `stale-if-error` of its own (`grace`).
    pub grace: Option<Duration>,
}

impl Lifetimes {
    /// None set: freshness is the origin's alone.
    pub const NONE: Lifetimes = Lifetimes {
        default_ttl: None,
        by_status: Vec::new(),
        grace: None,
    };

    /// Whether it sets anything.
    pub fn is_set(&self) -> bool {
        *self != Lifetimes::NONE
    }

    /// The lifetime that replaces the origin's for a response with `status`, if any.
    pub fn override_for(&self, status: StatusCode) -> Option<Duration> {
        self.by_status
            .binary_search_by_key(&status, |(s, _)| *s)
            .ok()
            .and_then(|at| self.by_status.get(at))
            .map(|(_, ttl)| *ttl)
    }
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

impl Rule {
    /// Whether it looks at the response, and so can match only after its head.
    pub fn on_response(&self) -> bool {
        !self.content_types.is_empty() || self.min_size.is_some() || self.max_size.is_some()
    }
}

/// A site's rules, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rules(pub Vec<Rule>);

/// How a cache rule shapes the keys of the requests it matches: which query parameters
/// count, in which order, and whether the port does. The request sent to the origin is
/// never changed, only the key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyShape {
    /// Which query parameters stay in the key.
    pub query: QueryParams,
    /// Parameters sorted (by name, then value), so their order does not split objects.
    pub sort_query: bool,
    /// The authority's port left out, so `host:8080` and `host` share objects.
    pub ignore_port: bool,
}

/// Which query parameters a [`KeyShape`] keeps, by name (compared after percent
/// normalisation, case-sensitively as URIs are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum QueryParams {
    /// Every parameter.
    #[default]
    All,
    /// Every parameter but these (tracking parameters, say).
    Drop(Vec<String>),
    /// Only these.
    Keep(Vec<String>),
}

impl QueryParams {
    /// Whether the parameter `name` stays in the key.
    pub fn keeps(&self, name: &str) -> bool {
        match self {
            QueryParams::All => true,
            QueryParams::Drop(names) => !names.iter().any(|n| n == name),
            QueryParams::Keep(names) => names.iter().any(|n| n == name),
        }
    }
}

impl KeyShape {
    /// Whether it changes the query at all (else the query is appended as usual).
    pub fn shapes_query(&self) -> bool {
        self.sort_query || self.query != QueryParams::All
    }
}
