//! What the admin listener checks before it looks at a request's path: that the request
//! names this listener (`Host`), and that a state-changing one was not sent by a web page
//! of another origin.
//!
//! Without `server.admin_token` a browser is the attacker's way in: a page elsewhere can
//! POST to `http://127.0.0.1:9090/purge` as a form or a simple `fetch` (no preflight), and
//! a page whose name the attacker rebinds to the listener's address (DNS rebinding) is
//! same-origin with it and can read every answer. Browsers label both: a rebound page
//! still sends its own name as `Host`, and a cross-origin request carries `Origin` (and
//! `Sec-Fetch-Site`). Tools (curl, scrapers) send neither `Origin` nor a foreign `Host`,
//! so they are not affected, and the admin page's own requests are same-origin.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use http::header::{HOST, ORIGIN};
use http::uri::Authority;
use http::{HeaderMap, HeaderName, Method, Uri};

/// `Sec-Fetch-Site`, which `http` has no constant for.
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// Why the admin listener refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Its `Host` (or its target's authority) is not an IP literal, `localhost`, or a
    /// name of `server.admin_hosts`.
    ForeignHost,
    /// A state-changing request sent from another origin (`Origin`, `Sec-Fetch-Site`).
    CrossSite,
}

/// Checks `method`, `uri` and `headers` of a request to the admin listener, which
/// answers to the names `hosts` besides IP literals and `localhost`; to any name when
/// `hosts` is `None` (a token is set: a rebound page cannot present it, and scrapers may
/// reach the listener by any name).
pub(super) fn check(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    hosts: Option<&[String]>,
) -> Result<(), Refusal> {
    let mut named = headers
        .get_all(HOST)
        .iter()
        .map(|value| value.to_str().ok())
        .chain(uri.authority().map(|a| Some(a.as_str())));
    if let Some(hosts) = hosts
        && !named.all(|host| host.is_some_and(|host| host_allowed(host, hosts)))
    {
        return Err(Refusal::ForeignHost);
    }
    if method == Method::GET || method == Method::HEAD {
        return Ok(());
    }
    // `none` is a request the user made (typed or bookmarked), not one a page sent.
    let site = headers.get(SEC_FETCH_SITE).map(|v| v.as_bytes());
    if site.is_some_and(|site| site != b"same-origin" && site != b"none") {
        return Err(Refusal::CrossSite);
    }
    match headers.get(ORIGIN) {
        None => Ok(()),
        Some(origin) if same_origin(origin.as_bytes(), headers.get(HOST)) => Ok(()),
        Some(_) => Err(Refusal::CrossSite),
    }
}

/// Whether a request's `Host`, `authority`, names this listener: an IP literal,
/// `localhost`, or one of `hosts` (any port; names compared without case and a trailing
/// dot).
fn host_allowed(authority: &str, hosts: &[String]) -> bool {
    // A `Host` carries no user information; `Authority` would accept it.
    let Some(authority) = Authority::from_str(authority)
        .ok()
        .filter(|a| !a.as_str().contains('@'))
    else {
        return false;
    };
    let host = authority.host();
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return Ipv6Addr::from_str(v6).is_ok();
    }
    if Ipv4Addr::from_str(host).is_ok() {
        return true;
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    name.eq_ignore_ascii_case("localhost") || hosts.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// Whether `origin` is this listener's own (`http://` or `https://`, the latter for a
/// TLS proxy in front of it, and the request's `Host`): the admin page's requests.
fn same_origin(origin: &[u8], host: Option<&http::HeaderValue>) -> bool {
    let Some(host) = host.map(|h| h.as_bytes()) else {
        return false;
    };
    let rest = match origin.get(..8) {
        Some(scheme) if scheme.eq_ignore_ascii_case(b"https://") => &origin[8..],
        _ => match origin.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case(b"http://") => &origin[7..],
            _ => return false,
        },
    };
    rest.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_localhost_and_configured_names_are_this_listener() {
        let hosts = ["admin.internal".to_owned()];
        for allowed in [
            "127.0.0.1:9090",
            "10.0.0.1",
            "[::1]:9090",
            "localhost",
            "LOCALHOST.:9090",
            "Admin.Internal:9090",
        ] {
            assert!(host_allowed(allowed, &hosts), "{allowed}");
        }
        for refused in [
            "attacker.example",
            "127.0.0.1.attacker.example",
            "admin.internal.attacker.example",
            "sub.localhost",
            "user@127.0.0.1",
            "[::1",
            "",
        ] {
            assert!(!host_allowed(refused, &hosts), "{refused}");
        }
    }

    #[test]
    fn only_the_listeners_own_origin_may_change_state() {
        let host = http::HeaderValue::from_static("127.0.0.1:9090");
        assert!(same_origin(b"http://127.0.0.1:9090", Some(&host)));
        assert!(same_origin(b"HTTPS://127.0.0.1:9090", Some(&host)));
        assert!(!same_origin(b"http://127.0.0.1:8080", Some(&host)));
        assert!(!same_origin(b"http://127.0.0.1:9090.evil", Some(&host)));
        assert!(!same_origin(b"null", Some(&host)));
        assert!(!same_origin(b"http://127.0.0.1:9090", None));
    }
}
