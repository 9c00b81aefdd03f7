//! Purges as operators ask for them: `POST /purge?...` on the admin listener, and the
//! `PURGE` method on the proxy's own port from the networks `purge.allow` names. Both
//! take the same [`PurgeRequest`] through [`Proxy::purge`] and answer the same JSON.
//!
//! | query | purges |
//! |---|---|
//! | `url=<absolute URL>` | that URL's entry, every `Vary` variant of it included (404 when nothing was stored) |
//! | `tag=<tag>` | every entry carrying the tag (exact match); repeat `tag=` or separate tags with spaces for several |
//! | `prefix=<absolute URL>` | every entry whose key starts with it, within its host (`http://example.com/img/`) |
//! | `site=<host[:port]>` | every entry of that host, over `http://` and `https://` alike: of every port without one, of that port with one |
//! | `soft=1` (beside any) | marks them stale instead (revalidated before they are served fresh again) |
//!
//! The answer is one JSON object: `{"purged": <entries>, "soft": <bool>, ...}` with the
//! selector echoed (`"url"`, `"tags"`, `"prefix"` or `"site"`, normalised as keys are);
//! a tag purge adds `"unindexed"`, the responses not stored since start because their
//! tags could not all be indexed (see `tags`).

use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use serde_json::{Value, json};

use super::{Answer, Ask, Proxy};
use crate::body::full_body;
use crate::key::{CacheKey, ClientScheme, KeyError};
use crate::outcome::{Detail, Outcome};
use crate::sites::rule::Matched;
use crate::store::{PurgeKind, PurgeMode, PurgeSelector, StoreError};

/// The request field that makes a `PURGE` on the proxy port soft (`Soft-Purge: 1`).
pub(crate) const SOFT_PURGE: &str = "soft-purge";

/// What a purge request selects, parsed and normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PurgeTarget {
    /// One selector: a URL's key (and its variants), a prefix or a site.
    One(PurgeSelector),
    /// Entries carrying any of these tags (`tag=` repeated, or tags separated by spaces).
    Tags(Vec<String>),
}

/// The kinds a query names with one value each; tags may come several to a purge.
const SINGLE_KINDS: [PurgeKind; 3] = [PurgeKind::Url, PurgeKind::Prefix, PurgeKind::Site];

/// One purge, as [`Proxy::purge`] carries it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PurgeRequest {
    /// What it selects.
    pub target: PurgeTarget,
    /// Mark stale rather than remove.
    pub soft: bool,
}

/// Why a purge query cannot be carried out; the message says what to send instead, and
/// is rendered once, into the 400 answer's `error`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PurgeQueryError {
    /// `soft=` is neither 1 nor 0.
    #[error("soft={0:?}: give soft=1 or soft=0")]
    Soft(String),
    /// No selector, or more than one kind of them.
    #[error(
        "give exactly one of ?url=http://host/path, ?tag=T, ?prefix=http://host/path/ or ?site=host (and &soft=1 to mark stale)"
    )]
    NotOneSelector,
    /// `url=` or `prefix=` names no cache key.
    #[error(transparent)]
    Url(#[from] PurgeUrlError),
    /// `site=` is not a host, with a port or without.
    #[error("{0:?} is not a host name (e.g. example.com or example.com:8080)")]
    NotAHost(String),
}

/// Why a purge's URL names no cache key.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PurgeUrlError {
    /// It does not parse as a URI.
    #[error("{url:?} is not a URL ({source}); give the absolute URL, {URL_EXAMPLE}")]
    NotAUrl {
        /// The text given.
        url: String,
        /// Why it does not parse.
        source: http::uri::InvalidUri,
    },
    /// A scheme that is not cached.
    #[error("only http:// and https:// URLs are cached, not {0}://")]
    Scheme(String),
    /// A path alone.
    #[error("{0:?} has no scheme and host; give the absolute URL, {URL_EXAMPLE}")]
    NotAbsolute(String),
    /// No key can be built for it, as for a request.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The URL the errors give as an example.
const URL_EXAMPLE: &str = "e.g. http://example.com/path?query";

/// What a purge answers: a status and a JSON body.
#[derive(Debug)]
pub(crate) struct PurgeReport {
    /// 200; 404 for a URL with nothing stored; 500 when the store failed.
    pub status: StatusCode,
    /// The JSON object, one line.
    pub body: String,
}

impl PurgeRequest {
    /// Parses the admin listener's query (see the module docs); the error says what to
    /// send instead.
    pub(crate) fn from_query(query: Option<&str>) -> Result<PurgeRequest, PurgeQueryError> {
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        let one = |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let soft = match one("soft") {
            None | Some("0" | "false") => false,
            Some("1" | "true") => true,
            Some(other) => return Err(PurgeQueryError::Soft(other.to_owned())),
        };
        let tags: Vec<String> = pairs
            .iter()
            .filter(|(name, _)| name == PurgeKind::Tag.as_str())
            .flat_map(|(_, value)| value.split_ascii_whitespace().map(str::to_owned))
            .collect();
        let singles: Vec<(PurgeKind, &str)> = (SINGLE_KINDS.into_iter())
            .filter_map(|kind| Some((kind, one(kind.as_str())?)))
            .collect();
        if singles.len() + usize::from(!tags.is_empty()) != 1 {
            return Err(PurgeQueryError::NotOneSelector);
        }
        let target = match singles.first() {
            Some(&(kind, value)) => {
                PurgeTarget::One(PurgeSelector::new(kind, normalised(kind, value)?))
            }
            None => PurgeTarget::Tags(tags),
        };
        Ok(PurgeRequest { target, soft })
    }

    /// The selectors to run, and the field the answer echoes them under.
    fn selectors(&self) -> (Vec<PurgeSelector>, &'static str, Value) {
        match &self.target {
            PurgeTarget::One(selector) => (
                vec![selector.clone()],
                selector.kind().as_str(),
                json!(selector.value()),
            ),
            PurgeTarget::Tags(tags) => (
                tags.iter().cloned().map(PurgeSelector::Tag).collect(),
                "tags",
                json!(tags),
            ),
        }
    }
}

/// A single selector's value as keys hold it: a URL or prefix keyed as a request for it
/// would be, a site's host as [`site_name`] writes it.
fn normalised(kind: PurgeKind, value: &str) -> Result<String, PurgeQueryError> {
    match kind {
        PurgeKind::Url | PurgeKind::Prefix => Ok(purge_key(value)?.as_str().to_owned()),
        PurgeKind::Site => site_name(value),
        PurgeKind::Tag => Ok(value.to_owned()),
    }
}

/// The cache key of `url`, an absolute `http://` or `https://` URL (see the admin module's
/// docs, "Which URL a purge names").
pub(crate) fn purge_key(url: &str) -> Result<CacheKey, PurgeUrlError> {
    let uri: Uri = url.parse().map_err(|source| PurgeUrlError::NotAUrl {
        url: url.to_owned(),
        source,
    })?;
    let scheme = match uri.scheme_str() {
        Some(name) => {
            ClientScheme::from_name(name).ok_or_else(|| PurgeUrlError::Scheme(name.to_owned()))?
        }
        None => return Err(PurgeUrlError::NotAbsolute(url.to_owned())),
    };
    let mut parts = Request::new(()).into_parts().0;
    parts.uri = uri;
    Ok(CacheKey::from_request(&parts, scheme)?)
}

/// `site=`'s host, as keys hold it (lower case, without a trailing dot), with the port
/// given, if any, written canonically: `example.com` (every port), `example.com:8080`.
fn site_name(site: &str) -> Result<String, PurgeQueryError> {
    let wrong = || PurgeQueryError::NotAHost(site.to_owned());
    if site.is_empty() || site.contains(['/', '?', '#', '@', ' ']) {
        return Err(wrong());
    }
    let authority: http::uri::Authority = site.parse().map_err(|_| wrong())?;
    let key = purge_key(&format!("http://{}/", authority.host())).map_err(|_| wrong())?;
    // A port that is no number of 0..=65535 is an error, never a host alone: that would
    // purge every port.
    let has_port = authority.as_str().len() > authority.host().len();
    match (has_port, authority.port_u16()) {
        (false, _) => Ok(key.authority().to_owned()),
        (true, Some(port)) => Ok(format!("{}:{port}", key.authority())),
        (true, None) => Err(wrong()),
    }
}

impl Proxy {
    /// Carries out `request` (see the module docs): every selector in turn, the entries
    /// of each counted.
    pub(crate) async fn purge(&self, request: &PurgeRequest) -> PurgeReport {
        let (selectors, field, shown) = request.selectors();
        let mode = if request.soft {
            PurgeMode::MarkStale(crate::clock::now())
        } else {
            PurgeMode::Remove
        };
        let mut purged = 0;
        for selector in &selectors {
            match self.cache.store.purge(selector, mode).await {
                Ok(count) => purged += count,
                Err(error) => {
                    tracing::warn!(?selector, %error, "purge failed");
                    let body =
                        json!({ "error": error.to_string(), "purged": purged, field: shown });
                    // Handed over to an upgrade's new process: a retry reaches that one.
                    let status = match error {
                        StoreError::Closed => StatusCode::SERVICE_UNAVAILABLE,
                        _ => StatusCode::INTERNAL_SERVER_ERROR,
                    };
                    return report(status, &body);
                }
            }
        }
        tracing::info!(field, selector = %shown, purged, soft = request.soft, "purged");
        let mut body = json!({ "purged": purged, "soft": request.soft, field: shown });
        if let PurgeTarget::Tags(_) = request.target {
            // What a tag purge cannot have reached: responses not stored because their
            // tags could not all be indexed (none was stored without some of its tags).
            body["unindexed"] = json!(self.cache.metrics.unindexed_tags());
        }
        let nothing_for_url = purged == 0
            && matches!(&request.target, PurgeTarget::One(s) if s.kind() == PurgeKind::Url);
        let status = if nothing_for_url {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        report(status, &body)
    }

    /// Answers a `PURGE` on the proxy's port: from a network `purge.allow` names, a purge
    /// of the request's URL (keyed as a GET of it would be, the site's rules included;
    /// soft with `Soft-Purge: 1`) answered with the admin API's JSON; from anywhere else
    /// 405. Never forwarded to the origin.
    pub(super) async fn purge_method(&self, ask: &Ask<'_>) -> Result<Answer, super::ProxyError> {
        let (head, client, site) = (ask.head, ask.client, ask.site);
        if !ask.live.settings.purge.allows(client.ip) {
            let mut response =
                Response::new(full_body("PURGE is not allowed from this address\n".into()));
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            let headers = response.headers_mut();
            headers.insert(
                ALLOW,
                HeaderValue::from_static("GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"),
            );
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return Ok(Answer::new(response, Outcome::own(Detail::PurgeRefused)));
        }
        let rules = &site.rules;
        let rule = Matched::of(rules, &Method::GET, head.uri.path()).request_rule(rules);
        let key = CacheKey::shaped(head, client.scheme, rule.and_then(|rule| rule.key.as_ref()))?;
        let soft = head
            .headers
            .get(SOFT_PURGE)
            .is_some_and(|v| v.as_bytes() == b"1");
        let request = PurgeRequest {
            target: PurgeTarget::One(PurgeSelector::Url(key.as_str().to_owned())),
            soft,
        };
        let done = self.purge(&request).await;
        let mut response = Response::new(full_body(done.body.into()));
        *response.status_mut() = done.status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Answer::new(response, Outcome::own(Detail::Purge)))
    }
}

/// A report of `status` with `body` on one line.
fn report(status: StatusCode, body: &Value) -> PurgeReport {
    let mut body = body.to_string();
    body.push('\n');
    PurgeReport { status, body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_urls_map_to_the_keys_requests_get() {
        let key = |url| purge_key(url).map(|k| k.as_str().to_owned());
        assert_eq!(
            key("http://Example.COM:80/a/../b?x=%7e").ok().as_deref(),
            Some("http://example.com/b?x=~")
        );
        assert_eq!(
            key("http://example.com:8080/").ok().as_deref(),
            Some("http://example.com:8080/")
        );
        // What came in over the TLS listener is keyed https://.
        assert_eq!(
            key("HTTPS://example.com:443/").ok().as_deref(),
            Some("https://example.com/")
        );
        assert!(matches!(
            key("/just/a/path"),
            Err(PurgeUrlError::NotAbsolute(_))
        ));
        assert!(matches!(key("ftp://example.com/"), Err(PurgeUrlError::Scheme(s)) if s == "ftp"));
        assert!(matches!(
            key("not a url"),
            Err(PurgeUrlError::NotAUrl { .. })
        ));
    }

    #[test]
    fn queries_name_exactly_one_selector() {
        let parse = |q| PurgeRequest::from_query(Some(q)).ok();
        let tags =
            |list: &[&str]| PurgeTarget::Tags(list.iter().map(|t| (*t).to_owned()).collect());
        assert_eq!(
            parse("tag=a&tag=b%20c").map(|r| r.target),
            Some(tags(&["a", "b", "c"]))
        );
        assert_eq!(
            parse("prefix=http://Example.com/img/&soft=1"),
            Some(PurgeRequest {
                target: PurgeTarget::One(PurgeSelector::Prefix(
                    "http://example.com/img/".to_owned()
                )),
                soft: true
            })
        );
        assert_eq!(
            parse("site=Example.COM:80").map(|r| r.target),
            Some(PurgeTarget::One(PurgeSelector::Site(
                "example.com:80".to_owned()
            )))
        );
        assert_eq!(
            parse("url=http://Example.com/x").map(|r| r.target),
            Some(PurgeTarget::One(PurgeSelector::Url(
                "http://example.com/x".to_owned()
            )))
        );
        assert_eq!(
            parse("site=Example.COM.").map(|r| r.target),
            Some(PurgeTarget::One(PurgeSelector::Site(
                "example.com".to_owned()
            )))
        );
        let error = |q| PurgeRequest::from_query(Some(q)).err();
        for bad in ["", "tag=", "tag=a&site=b", "soft=1"] {
            let refused = error(bad);
            assert!(
                matches!(refused, Some(PurgeQueryError::NotOneSelector)),
                "{bad:?}: {refused:?}"
            );
        }
        for bad in ["site=a/b", "site=a:99999", "site=a:"] {
            let refused = error(bad);
            assert!(
                matches!(&refused, Some(PurgeQueryError::NotAHost(site)) if bad.ends_with(site.as_str())),
                "{bad:?}: {refused:?}"
            );
        }
        let refused = error("url=/x");
        assert!(
            matches!(
                refused,
                Some(PurgeQueryError::Url(PurgeUrlError::NotAbsolute(_)))
            ),
            "{refused:?}"
        );
        let refused = error("tag=a&soft=yes");
        assert!(
            matches!(&refused, Some(PurgeQueryError::Soft(given)) if given == "yes"),
            "{refused:?}"
        );
        assert_eq!(
            refused.map(|e| e.to_string()).as_deref(),
            Some("soft=\"yes\": give soft=1 or soft=0")
        );
    }
}
