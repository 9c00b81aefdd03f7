//! Origin pools: `servers` in both forms, `balance`, `max_fails`, `fail_timeout`,
//! `fail_statuses` and `health_check`, their defaults and inheritance by sites, and what is refused.

use std::time::Duration;

use super::{err, kind};
use crate::config::{Balance, Config, ConfigError, HealthCheck, OriginServer, Retry, RetryReason};

fn server(url: &str, weight: u32) -> OriginServer {
    OriginServer {
        url: url.parse().expect("url"),
        weight,
    }
}

#[test]
fn servers_load_as_urls_or_weighted_tables_with_the_pool_keys() {
    let text = r#"
[origin]
servers = ["http://10.0.0.1:8080", { url = "http://10.0.0.2:8080", weight = 3 }]
balance = "consistent-hash"
max_fails = 3
fail_timeout = "30s"
health_check = { path = "/healthz", interval = "2s", expect = 204, timeout = "1s" }
retry = { tries = 3, on = ["timeout", "invalid_header", "timeout"], non_idempotent = true }
"#;
    let config = Config::from_toml_str(text).expect("loads");
    let origin = &config.origin;
    let servers = [
        server("http://10.0.0.1:8080", 1),
        server("http://10.0.0.2:8080", 3),
    ];
    assert_eq!(origin.servers, servers);
    assert_eq!(origin.pool(), servers);
    assert_eq!(
        origin.url, "http://10.0.0.1:8080",
        "url is the first server"
    );
    assert_eq!(origin.balance, Balance::ConsistentHash);
    assert_eq!(
        (origin.max_fails, origin.fail_timeout),
        (3, Duration::from_secs(30))
    );
    let check = HealthCheck {
        path: "/healthz".to_owned(),
        interval: Duration::from_secs(2),
        expect: 204,
        timeout: Duration::from_secs(1),
    };
    assert_eq!(origin.health_check, Some(check));
    let retry = Retry {
        tries: 3,
        on: vec![RetryReason::Timeout, RetryReason::InvalidHeader],
        non_idempotent: true,
    };
    assert_eq!(origin.retry, retry);
}

#[test]
fn url_alone_is_a_pool_of_one_with_nginx_defaults() {
    let config = Config::from_toml_str("[origin]\nurl = \"http://10.0.0.9\"").expect("loads");
    let origin = &config.origin;
    assert_eq!(origin.pool(), [server("http://10.0.0.9", 1)]);
    assert_eq!(origin.balance, Balance::RoundRobin);
    assert_eq!(
        (origin.max_fails, origin.fail_timeout),
        (1, Duration::from_secs(10))
    );
    assert_eq!(origin.health_check, None);
    let probed = "[origin]\nhealth_check = {}";
    let check = Config::from_toml_str(probed)
        .expect("loads")
        .origin
        .health_check;
    let check = check.expect("a health check");
    assert_eq!(
        (
            check.path.as_str(),
            check.interval,
            check.expect,
            check.timeout
        ),
        ("/", Duration::from_secs(5), 200, Duration::from_secs(2))
    );
    // A stopped server is given up on within seconds, and a GET it held goes on once.
    assert_eq!(origin.first_byte_timeout, Duration::from_secs(5));
    let retry = &origin.retry;
    assert_eq!(
        (retry.tries, retry.on.as_slice(), retry.non_idempotent),
        (
            2,
            [RetryReason::Error, RetryReason::Timeout].as_slice(),
            false
        )
    );
}

#[test]
fn a_site_inherits_the_pool_unless_it_names_its_own_url_or_servers() {
    let text = r#"
[origin]
servers = ["http://10.0.0.1", "http://10.0.0.2"]
max_fails = 5
first_byte_timeout = "20s"
retry = { tries = 3 }
[[site]]
hosts = ["inherits.example"]
[[site]]
hosts = ["own.example"]
[site.origin]
url = "http://10.0.0.3"
retry = { on = ["error"] }
"#;
    let config = Config::from_toml_str(text).expect("loads");
    let (inherits, own) = (&config.sites[0].origin, &config.sites[1].origin);
    assert_eq!(inherits.pool(), config.origin.pool());
    assert_eq!(own.pool(), [server("http://10.0.0.3", 1)]);
    assert_eq!((inherits.max_fails, own.max_fails), (5, 5));
    let twenty = Duration::from_secs(20);
    assert_eq!(
        (inherits.first_byte_timeout, own.first_byte_timeout),
        (twenty, twenty)
    );
    // retry's keys default to [origin]'s one by one.
    assert_eq!((inherits.retry.tries, own.retry.tries), (3, 3));
    assert_eq!(own.retry.on, [RetryReason::Error]);
}

#[test]
fn bad_pools_are_refused_naming_the_key() {
    let cases = [
        ("servers = []", "origin.servers"),
        (
            "url = \"http://a\"\nservers = [\"http://b\"]",
            "origin.servers",
        ),
        ("servers = [\"http://a\", \"http://a\"]", "origin.servers"),
        ("servers = [\"http://a\", \"https://b\"]", "origin.servers"),
        ("servers = [\"http://a/path\"]", "origin.servers"),
        (
            "servers = [{ url = \"http://a\", weight = 0 }]",
            "origin.servers",
        ),
        (
            "servers = [{ url = \"http://a\", weight = 101 }]",
            "origin.servers",
        ),
        ("fail_timeout = \"0s\"", "origin.fail_timeout"),
        (
            "health_check = { path = \"healthz\" }",
            "origin.health_check",
        ),
        (
            "health_check = { interval = \"0s\" }",
            "origin.health_check",
        ),
        ("health_check = { expect = 42 }", "origin.health_check"),
        ("health_check = { timeout = \"0s\" }", "origin.health_check"),
        ("first_byte_timeout = \"0s\"", "origin.first_byte_timeout"),
        ("retry = { tries = 0 }", "origin.retry"),
        ("retry = { tries = 65 }", "origin.retry"),
        ("retry = { on = [\"connect\"] }", "origin.retry"),
        ("retry = { on = [\"http_502\"] }", "origin.retry"),
        ("fail_statuses = [404]", "origin.fail_statuses"),
        ("fail_statuses = [502, 600]", "origin.fail_statuses"),
        ("fail_statuses = [-500]", "origin.fail_statuses"),
    ];
    for (keys, key) in cases {
        let error = err(&format!("[origin]\n{keys}"));
        match &error {
            ConfigError::Invalid { key: named, .. } => assert_eq!(*named, key, "{keys}"),
            other => panic!("{keys}: {} error {other}", kind(other)),
        }
    }
    // A malformed entry is a parse error that says what an entry looks like.
    let error = err("[origin]\nservers = [42]").to_string();
    assert!(error.contains("weight"), "{error}");
    let error = err("[origin]\nhealth_check = { path = \"/\", every = \"1s\" }").to_string();
    assert!(error.contains("every"), "{error}");
    let site = "[[site]]\nhosts = [\"a.example\"]\n[site.origin]\nservers = []";
    assert_eq!(
        err(site).to_string().split(':').next(),
        Some("site[0].origin.servers")
    );
}

#[test]
fn fail_statuses_default_to_the_gateway_answers_and_are_inherited_or_overridden_per_site() {
    let config = Config::from_toml_str("").expect("loads");
    assert_eq!(config.origin.fail_statuses, [502, 503, 504]);
    let text = r#"
[origin]
servers = ["http://10.0.0.1", "http://10.0.0.2"]
fail_statuses = [504, 500, 504]
[[site]]
hosts = ["inherits.example"]
[[site]]
hosts = ["own.example"]
[site.origin]
fail_statuses = []
"#;
    let config = Config::from_toml_str(text).expect("loads");
    assert_eq!(
        config.origin.fail_statuses,
        [500, 504],
        "sorted, a duplicate kept once"
    );
    let (inherits, own) = (&config.sites[0].origin, &config.sites[1].origin);
    assert_eq!(inherits.fail_statuses, [500, 504]);
    assert!(own.fail_statuses.is_empty(), "[]: no status counts");
}

#[test]
fn a_fail_status_outside_5xx_is_refused_naming_the_key_and_the_value() {
    let error = err("[origin]\nfail_statuses = [503, 429]").to_string();
    assert!(error.contains("origin.fail_statuses"), "{error}");
    assert!(error.contains("429"), "{error}");
    let site = "[[site]]\nhosts = [\"a.example\"]\n[site.origin]\nfail_statuses = [499]";
    let error = err(site).to_string();
    assert!(error.starts_with("site[0].origin.fail_statuses"), "{error}");
}
