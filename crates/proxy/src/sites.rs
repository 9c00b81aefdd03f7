//! Sites: which origin and which cache rules serve a request, chosen by its host.
//!
//! Each `[[site]]` names its hosts (exact, or `*.example.com` for any name below
//! `example.com`), its origin and its rules ([`rule`]). Without any `[[site]]`, the
//! top-level `[origin]` and `[[rule]]`s form the one site that serves every host, as
//! before sites existed. With sites, a host none of them names goes to that default site
//! or is answered 421 or 404 (`server.unknown_host`). The store and the admission
//! filters are shared by all sites; the cache key holds the host, so sites never share
//! objects.
//!
//! Routing runs on every request, so it is a hash lookup: exact hosts in one map, and
//! for wildcards one lookup per dot of the host, longest suffix first (the most specific
//! wildcard wins). The host is matched without its port, case-insensitively; a host
//! already lower-case (the usual case) is looked up without a copy. A reload builds a
//! new [`Sites`] and swaps it whole (`proxy`'s `ArcSwap`).

pub(crate) mod rule;

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::quality::RandomState;
use http::StatusCode;

pub(crate) use crate::config::Rules;
use crate::config::{Config, UnknownHost};
use crate::metrics::{Metrics, SiteCounters};
use crate::origin::health::Health;
use crate::origin::{Origin, OriginError};

/// One site: its origin client and its rules.
pub struct Site {
    /// What `/healthz` calls it: its first host, or `default` for `[origin]`'s site.
    pub name: String,
    /// The pooled client of the site's origin.
    pub origin: Origin,
    /// The site's cache rules, in order.
    pub rules: Rules,
    /// Its requests and response bytes by result, when there are `[[site]]`s to tell apart.
    pub counters: Option<Arc<SiteCounters>>,
}

/// Every site of the config, and how a host finds its own.
pub struct Sites {
    sites: Vec<Arc<Site>>,
    /// Exact host (lower-case, no port) → index in `sites`.
    exact: HashMap<Box<str>, usize, RandomState>,
    /// `example.com` for `*.example.com` → index in `sites`.
    wildcard: HashMap<Box<str>, usize, RandomState>,
    /// What a host no site names gets: a site, or a status.
    unknown: Result<Arc<Site>, StatusCode>,
    /// The origin servers' health, by URL: the next `Sites` a reload builds takes it
    /// over, so that servers which stay keep their state.
    health: Arc<Health>,
}

impl Sites {
    /// Builds each site's origin client from the validated config; every client records
    /// its origin requests in `metrics` and its servers' health in `health` (a new
    /// [`Health`] at start, the running sites' [`Sites::health`] on a reload).
    pub fn new(
        config: &Config,
        metrics: &Arc<Metrics>,
        health: Arc<Health>,
    ) -> Result<Sites, OriginError> {
        // Named by its first host; `[origin]`'s site is `default`.
        let counters = |name: &str| (!config.sites.is_empty()).then(|| metrics.site(name));
        let default = || -> Result<Arc<Site>, OriginError> {
            Ok(Arc::new(Site {
                name: "default".to_owned(),
                origin: Origin::new(&config.origin, metrics.clone(), &health)?,
                rules: config.rules.clone(),
                counters: counters("default"),
            }))
        };
        let unknown = match (config.sites.is_empty(), config.server.unknown_host) {
            (true, _) | (false, UnknownHost::Default) => Ok(default()?),
            (false, UnknownHost::Misdirected) => Err(StatusCode::MISDIRECTED_REQUEST),
            (false, UnknownHost::NotFound) => Err(StatusCode::NOT_FOUND),
        };
        let (mut exact, mut wildcard) = (HashMap::default(), HashMap::default());
        let mut sites = Vec::with_capacity(config.sites.len());
        for (index, site) in config.sites.iter().enumerate() {
            for host in &site.hosts {
                match host.strip_prefix("*.") {
                    Some(suffix) => wildcard.insert(suffix.into(), index),
                    None => exact.insert(host.as_str().into(), index),
                };
            }
            sites.push(Arc::new(Site {
                name: site.hosts.first().cloned().unwrap_or_default(),
                origin: Origin::new(&site.origin, metrics.clone(), &health)?,
                rules: site.rules.clone(),
                counters: site.hosts.first().and_then(|host| counters(host)),
            }));
        }
        Ok(Sites {
            sites,
            exact,
            wildcard,
            unknown,
            health,
        })
    }

    /// The origin servers' health, by URL.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Every site that serves requests: the `[[site]]`s in order, then the default site
    /// when one serves the hosts they do not name.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Site>> {
        self.sites.iter().chain(self.unknown.as_ref().ok())
    }

    /// The site of `authority` (a `Host` value or a URI authority), or the status that
    /// answers a host no site names.
    pub fn route(&self, authority: &str) -> Result<&Arc<Site>, StatusCode> {
        if self.sites.is_empty() {
            return self.unknown.as_ref().map_err(|status| *status);
        }
        let host = host_of(authority);
        let lower;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = host.to_ascii_lowercase();
            lower.as_str()
        } else {
            host
        };
        let wildcards = host
            .match_indices('.')
            .filter_map(|(dot, _)| self.wildcard.get(&host[dot + 1..]));
        match self.exact.get(host).into_iter().chain(wildcards).next() {
            Some(&index) => self.sites.get(index).ok_or(StatusCode::NOT_FOUND),
            None => self.unknown.as_ref().map_err(|status| *status),
        }
    }
}

/// The host of an authority: without its port (an IPv6 literal keeps its brackets) and
/// without a trailing dot.
fn host_of(authority: &str) -> &str {
    let host = match authority.strip_prefix('[') {
        Some(_) => authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]),
        None => authority
            .split_once(':')
            .map_or(authority, |(host, _)| host),
    };
    host.strip_suffix('.').unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SiteConfig;

    fn site(hosts: &[&str], url: &str) -> SiteConfig {
        let mut origin = Config::default().origin;
        origin.url = url.parse().expect("url");
        SiteConfig {
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            origin,
            ..SiteConfig::default()
        }
    }

    /// Which site a host is routed to: its index among the `[[site]]`s, or `usize::MAX`
    /// for the default site.
    fn routed(sites: &Sites, host: &str) -> Result<usize, StatusCode> {
        let site = sites.route(host)?;
        let index = sites.sites.iter().position(|s| Arc::ptr_eq(s, site));
        Ok(index.unwrap_or(usize::MAX))
    }

    #[tokio::test]
    async fn hosts_route_exactly_then_by_the_longest_wildcard() {
        let config = Config {
            sites: vec![
                site(&["a.example", "*.example.com"], "http://127.0.0.1:1"),
                site(&["*.b.example.com", "b.example.com"], "http://127.0.0.1:2"),
            ],
            ..Config::default()
        };
        assert_eq!(config.server.unknown_host, UnknownHost::Misdirected);
        let sites = Sites::new(&config, &Arc::new(Metrics::new()), Arc::default()).expect("sites");
        assert_eq!(routed(&sites, "A.Example:8080"), Ok(0));
        assert_eq!(routed(&sites, "x.example.com."), Ok(0));
        assert_eq!(routed(&sites, "b.example.com"), Ok(1));
        assert_eq!(routed(&sites, "y.b.example.com"), Ok(1));
        assert_eq!(
            routed(&sites, "example.com"),
            Err(StatusCode::MISDIRECTED_REQUEST)
        );
        assert_eq!(
            routed(&sites, "[::1]:80"),
            Err(StatusCode::MISDIRECTED_REQUEST)
        );
    }

    #[tokio::test]
    async fn without_sites_the_default_site_serves_every_host() {
        let mut config = Config::default();
        config.origin.url = "http://127.0.0.1:3".parse().expect("url");
        let sites = Sites::new(&config, &Arc::new(Metrics::new()), Arc::default()).expect("sites");
        assert_eq!(routed(&sites, "anything"), Ok(usize::MAX));
        config.sites = vec![site(&["a.example"], "http://127.0.0.1:1")];
        config.server.unknown_host = UnknownHost::Default;
        let sites = Sites::new(&config, &Arc::new(Metrics::new()), Arc::default()).expect("sites");
        assert_eq!(routed(&sites, "other"), Ok(usize::MAX));
        assert_eq!(routed(&sites, "a.example"), Ok(0));
    }

    #[test]
    fn the_host_loses_its_port_and_trailing_dot() {
        assert_eq!(host_of("a.example:80"), "a.example");
        assert_eq!(host_of("a.example."), "a.example");
        assert_eq!(host_of("[::1]:8080"), "[::1]");
        assert_eq!(host_of("[::1]"), "[::1]");
    }
}
