//! Unit tests of config loading and validation.

use std::net::SocketAddr;

use super::*;

mod pools;
mod rejected;
mod sites;

pub(super) fn err(text: &str) -> ConfigError {
    match Config::from_toml_str(text) {
        Ok(config) => panic!("accepted {text:?} as {config:?}"),
        Err(e) => e,
    }
}

pub(super) fn kind(e: &ConfigError) -> &'static str {
    match e {
        ConfigError::Read { .. } => "read",
        ConfigError::Parse(_) => "parse",
        ConfigError::Invalid { .. } => "invalid",
        ConfigError::InvalidAt { .. } => "invalid-at",
        ConfigError::InFile { .. } => "in-file",
    }
}

#[test]
fn empty_text_gives_the_defaults() {
    let config = Config::from_toml_str("").unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(config.server.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(
        config.server.admin_listen,
        Some("127.0.0.1:9090".parse().unwrap())
    );
    assert_eq!(config.server.admin_token, None);
    assert_eq!(config.origin.url, "http://127.0.0.1:8081");
    assert_eq!(config.cache.max_object_size, MaxObjectSize::Auto);
    assert_eq!(config.cache.max_size, 10 * 1024 * 1024 * 1024);
    // "auto": an eighth of max_size (1.25 GiB of 10 GiB), at most 256 MiB.
    assert_eq!(config.cache.max_object_bytes(), 256 * 1024 * 1024);
    assert_eq!(config.cache.min_free, 1024 * 1024 * 1024);
    assert_eq!(config.cache.lock_timeout, Duration::from_secs(5));
    assert_eq!(config.cache.collapse_timeout, Duration::from_secs(10));
    assert_eq!(config.cache.max_orphan_fills, 64);
    assert_eq!(config.cache.verify_whole_below, 64 * 1024);
    assert_eq!(config.server.workers, None);
    assert_eq!(config.server.blocking_threads, 32);
    assert_eq!(config.cache.memory_size, 64 * 1024 * 1024);
    assert_eq!(config.cache.memory_max_object_size, 1024 * 1024);
    assert_eq!(config.cache.open_files, 10_000);
    assert_eq!(
        config.admission.sizing,
        FilterSizing::ExpectedUrls(1_000_000)
    );
    assert_eq!(config.admission.max_age, Duration::from_secs(3600));
    assert_eq!(config.admission.policy.as_str(), "second-hit");
    assert_eq!(config.admission.rotate, RotateMode::Auto);
    assert_eq!(config.admission.snapshot_every, Duration::from_secs(60));
    // Empty sections are fine too.
    let sections = "[server]\n[origin]\n[cache]\n[admission]\n[log]\n";
    assert_eq!(Config::from_toml_str(sections).unwrap(), Config::default());
}

#[test]
fn example_file_loads_and_matches_the_defaults() {
    let config = Config::from_toml_str(include_str!("../../../../config/secondhit.toml")).unwrap();
    let mut expected = Config::default();
    expected.cache.dir = PathBuf::from("/tmp/secondhit-cache");
    // Not a default: the one site, served by [origin], that keeps invented hosts away.
    expected.sites = vec![SiteConfig {
        hosts: vec!["127.0.0.1".to_owned(), "localhost".to_owned()],
        origin: expected.origin.clone(),
        ..SiteConfig::default()
    }];
    assert_eq!(config, expected);
}

const FULL: &str = r#"
    [server]
    listen = "0.0.0.0:3128"
    admin_listen = "127.0.0.1:0"
    admin_token = "t0ken"
    admin_hosts = ["Cache-01.Internal.", "admin"]
    max_connections = 50
    header_read_timeout = "500ms"
    max_headers = 20
    max_header_bytes = "16KiB"
    shutdown_timeout = "0s"
    workers = 3
    blocking_threads = 4
    [origin]
    url = "http://origin.example:8000/"
    host_header = "origin"
    connect_timeout = "1s"
    read_timeout = "2m"
    max_in_flight = 7
    body_min_rate = "2KiB"
    [cache]
    dir = "/srv/cache"
    max_size = "2GiB"
    max_object_size = "4MiB"
    min_free = "300MiB"
    fsync = false
    lock_timeout = "250ms"
    verify_whole_below = "4KiB"
    memory_size = "0"
    memory_max_object_size = "16MiB"
    open_files = 0
    [admission]
    policy = "always"
    expected_urls = 5000
    false_positive_rate = 0.001
    max_age = "10m"
    rotate = "fill"
    seed = "s3cret"
    snapshot_every = "5m"
    estimate_budget = "2ms"
    [log]
    level = "WARN"
    format = "json"
    access_log = "/var/log/secondhit/access.log"
    access_format = "json"
"#;

#[test]
fn full_file_from_disk_gives_typed_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secondhit.toml");
    std::fs::write(&path, FULL).unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(c.server.listen, SocketAddr::from(([0, 0, 0, 0], 3128)));
    assert_eq!(
        c.server.admin_listen,
        Some(SocketAddr::from(([127, 0, 0, 1], 0)))
    );
    assert_eq!(c.server.admin_token.as_deref(), Some("t0ken"));
    assert_eq!(c.server.admin_hosts, ["cache-01.internal", "admin"]);
    assert_eq!(c.server.max_connections, 50);
    assert_eq!(c.server.header_read_timeout, Duration::from_millis(500));
    assert_eq!(c.server.max_headers, 20);
    assert_eq!(c.server.max_header_bytes, 16 * 1024);
    assert_eq!(c.server.shutdown_timeout, Duration::ZERO);
    assert_eq!(c.server.workers, Some(3));
    assert_eq!(c.server.blocking_threads, 4);
    assert_eq!(c.origin.url.host(), Some("origin.example"));
    assert_eq!(c.origin.url.port_u16(), Some(8000));
    assert_eq!(c.origin.host_header, HostHeader::Origin);
    assert_eq!(c.origin.connect_timeout, Duration::from_secs(1));
    assert_eq!(c.origin.read_timeout, Duration::from_secs(120));
    assert_eq!(c.origin.max_in_flight, 7);
    assert_eq!(c.origin.body_min_rate, 2048);
    assert_eq!(c.cache.dir, PathBuf::from("/srv/cache"));
    assert_eq!(
        c.cache.max_object_size,
        MaxObjectSize::Bytes(4 * 1024 * 1024)
    );
    assert_eq!(c.cache.max_size, 2 * 1024 * 1024 * 1024);
    assert_eq!(c.cache.min_free, 300 * 1024 * 1024);
    assert_eq!(c.cache.fsync, Fsync::Off);
    assert_eq!(c.cache.lock_timeout, Duration::from_millis(250));
    assert_eq!(c.cache.verify_whole_below, 4096);
    assert_eq!(c.cache.memory_size, 0);
    assert_eq!(c.cache.memory_max_object_size, 16 * 1024 * 1024);
    assert_eq!(c.cache.open_files, 0);
    assert_eq!(c.admission.policy, AdmissionPolicy::Always);
    assert_eq!(c.admission.policy.as_str(), "always");
    assert_eq!(c.admission.sizing, FilterSizing::ExpectedUrls(5000));
    assert_eq!(c.admission.false_positive_rate, 0.001);
    assert_eq!(c.admission.max_age, Duration::from_secs(600));
    assert_eq!(c.admission.rotate, RotateMode::Fill);
    // Not given: a quarter of the `max_age` given, so that it never exceeds it.
    assert_eq!(c.admission.min_generation_age, Duration::from_secs(150));
    assert_eq!(c.admission.seed.as_deref(), Some("s3cret"));
    assert_eq!(c.admission.snapshot_every, Duration::from_secs(300));
    assert_eq!(c.admission.estimate_budget, Duration::from_millis(2));
    assert_eq!(c.log.level, "warn");
    assert_eq!(c.log.format, LogFormat::Json);
    assert_eq!(
        c.log.access_log,
        AccessLog::File(PathBuf::from("/var/log/secondhit/access.log"))
    );
    assert_eq!(c.log.access_format, AccessFormat::Json);
}

#[test]
fn sizes_accept_units_and_plain_integers() {
    let c =
        Config::from_toml_str("[cache]\nmax_object_size = 1000\n[admission]\nmemory = \"4MiB\"")
            .unwrap();
    assert_eq!(c.cache.max_object_size, MaxObjectSize::Bytes(1000));
    assert_eq!(c.admission.sizing, FilterSizing::Memory(4 * 1024 * 1024));
    let c =
        Config::from_toml_str("[cache]\nmax_object_size = \"512KiB\"\n[admission]\nmemory = 64")
            .unwrap();
    assert_eq!(c.cache.max_object_size, MaxObjectSize::Bytes(512 * 1024));
    assert_eq!(c.admission.sizing, FilterSizing::Memory(64));
    // "auto" follows max_size, up to 256 MiB; a max_size below 256 MiB is no error then.
    let c =
        Config::from_toml_str("[cache]\nmax_object_size = \"auto\"\nmax_size = \"48MiB\"").unwrap();
    assert_eq!(c.cache.max_object_size, MaxObjectSize::Auto);
    assert_eq!(c.cache.max_object_bytes(), 6 * 1024 * 1024);
    let c =
        Config::from_toml_str("[cache]\nmax_object_size = \"auto\"\nmax_size = \"1TiB\"").unwrap();
    assert_eq!(c.cache.max_object_bytes(), 256 * 1024 * 1024);
    let c = Config::from_toml_str("[cache]\nverify_whole_below = \"16MiB\"").unwrap();
    assert_eq!(c.cache.verify_whole_below, 16 * 1024 * 1024);
}

#[test]
fn empty_and_zero_values_mean_none_at_once_or_off() {
    let c = Config::from_toml_str("[admission]\nseed = \"\"").unwrap();
    assert_eq!(c.admission.seed, None);
    // Zero means "fail at once" and "verify every body as it streams".
    let c = Config::from_toml_str(
        "[cache]\nlock_timeout = \"0s\"\nverify_whole_below = 0\nmax_size = 1000000\nmax_object_size = 1000000\nheuristic_max_age = \"0s\"",
    )
    .unwrap();
    assert_eq!(c.cache.lock_timeout, Duration::ZERO);
    assert_eq!(c.cache.heuristic_max_age, Duration::ZERO);
    assert_eq!(c.cache.verify_whole_below, 0);
    assert_eq!(c.cache.max_size, 1_000_000);
    assert_eq!(
        c.cache.stale_if_unreachable,
        Duration::ZERO,
        "off by default"
    );
    assert_eq!(c.cache.targeted_field, None, "off by default");
    // Zero turns collapsing off, and lets no fill outlive its client.
    let c =
        Config::from_toml_str("[cache]\ncollapse_timeout = \"0s\"\nmax_orphan_fills = 0").unwrap();
    assert_eq!(c.cache.collapse_timeout, Duration::ZERO);
    assert_eq!(c.cache.max_orphan_fills, 0);
    let c = Config::from_toml_str("[cache]\nstale_if_unreachable = \"10m\"").unwrap();
    assert_eq!(c.cache.stale_if_unreachable, Duration::from_secs(600));
}

#[test]
fn field_names_are_lowercased_and_url_and_method_overrides_are_stripped_by_default() {
    let c = Config::from_toml_str("[cache]\ntargeted_field = \"Secondhit-Cache-Control\"").unwrap();
    assert_eq!(
        c.cache
            .targeted_field
            .as_ref()
            .map(http::HeaderName::as_str),
        Some("secondhit-cache-control")
    );
    let stripped = |c: &Config| -> Vec<String> {
        (c.cache.strip_request_fields.iter())
            .map(ToString::to_string)
            .collect()
    };
    let c = Config::from_toml_str("").unwrap();
    assert_eq!(
        stripped(&c),
        [
            "x-original-url",
            "x-rewrite-url",
            "x-http-method-override",
            "x-http-method",
            "x-method-override"
        ],
        "URL and method overrides are stripped by default"
    );
    let text = "[cache]\nstrip_request_fields = [\"X-Forwarded-Prefix\", \"x-forwarded-prefix\"]";
    assert_eq!(
        stripped(&Config::from_toml_str(text).unwrap()),
        ["x-forwarded-prefix"]
    );
    let c = Config::from_toml_str("[cache]\nstrip_request_fields = []").unwrap();
    assert!(c.cache.strip_request_fields.is_empty());
}

#[test]
fn admin_listener_and_shadow_policy_settings() {
    let c = Config::from_toml_str("[server]\nadmin_listen = \"off\"\nadmin_token = \"\"").unwrap();
    assert_eq!(c.server.admin_listen, None);
    assert_eq!(c.server.admin_token, None, "empty means no token");
    // Another port on the same host as the public listener is fine.
    let c =
        Config::from_toml_str("[server]\nlisten = \"0.0.0.0:80\"\nadmin_listen = \"0.0.0.0:9100\"")
            .unwrap();
    assert_eq!(
        c.server.admin_listen,
        Some(SocketAddr::from(([0, 0, 0, 0], 9100)))
    );
    // Port 0 twice: two ports of the system's choosing, never the same one.
    let c =
        Config::from_toml_str("[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"")
            .unwrap();
    assert_eq!(
        c.server.admin_listen,
        Some(SocketAddr::from(([127, 0, 0, 1], 0)))
    );
    let c = Config::from_toml_str("[admission]\npolicy = \"shadow\"").unwrap();
    assert_eq!(c.admission.policy, AdmissionPolicy::Shadow);
    assert_eq!(c.admission.policy.as_str(), "shadow");
}

#[test]
fn tls_listener_and_https_origin_settings() {
    let config = Config::from_toml_str(
        "[server.tls]\nlisten = \"127.0.0.1:8443\"\ncertificates = [\n\
         { chain = \"/a.pem\", key = \"/a.key\" },\n{ chain = \"/b.pem\", key = \"/b.key\" },\n]\n\
         [origin]\nurl = \"https://origin.example:8443\"\nca_file = \"/ca.pem\"\n",
    )
    .unwrap();
    let tls = config.server.tls.expect("a TLS listener");
    assert_eq!(tls.listen, "127.0.0.1:8443".parse().unwrap());
    let chains: Vec<_> = tls.certificates.iter().map(|c| c.chain.clone()).collect();
    assert_eq!(chains, [PathBuf::from("/a.pem"), PathBuf::from("/b.pem")]);
    assert_eq!(config.origin.url, "https://origin.example:8443");
    assert_eq!(config.origin.ca_file, Some(PathBuf::from("/ca.pem")));
    assert!(!config.origin.danger_accept_invalid_certs);
    let unverified = "[origin]\nurl = \"https://o.example\"\ndanger_accept_invalid_certs = true";
    let config = Config::from_toml_str(unverified).unwrap();
    assert!(config.origin.danger_accept_invalid_certs);
}

#[test]
fn missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let e = Config::load(&path).unwrap_err();
    assert_eq!(kind(&e), "read");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

#[test]
fn syntax_error_names_the_line() {
    let e = err("[server]\nlisten = \n");
    assert_eq!(kind(&e), "parse");
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn exact_messages() {
    let e = err("[cache]\nmax_object_size = \"12XB\"");
    assert_eq!(
        e.to_string(),
        r#"cache.max_object_size: "12XB" is not a size (examples: "512KiB", "10GiB")"#
    );
    let e = err("[server]\nadmin_listen = \"127.0.0.1:8080\"");
    assert_eq!(
        e.to_string(),
        r#"server.admin_listen: 127.0.0.1:8080 is also server.listen; the admin listener needs an address of its own (or "off")"#
    );
    let e = err("[admission]\nexpected_urls = 10\nmemory = \"4MiB\"");
    assert_eq!(
        e.to_string(),
        "admission.memory: set together with admission.expected_urls; set only one of the two (memory sizes the pair from a byte budget, expected_urls from a key count)"
    );
    let e = err("[cache]\nbogus = 1");
    assert!(
        e.to_string()
            .starts_with("cache.bogus: unknown field `bogus`"),
        "{e}"
    );
    assert!(e.to_string().ends_with("(line 2)"), "{e}");
}

#[test]
fn min_generation_age_defaults_to_a_quarter_of_max_age_and_may_be_zero() {
    let c = Config::from_toml_str("").expect("a valid config");
    assert_eq!(c.admission.min_generation_age, Duration::from_secs(900));
    let c =
        Config::from_toml_str("[admission]\nmin_generation_age = \"0s\"").expect("a valid config");
    assert_eq!(c.admission.min_generation_age, Duration::ZERO);
    let c = Config::from_toml_str("[admission]\nmax_age = \"2h\"\nmin_generation_age = \"2h\"")
        .expect("a valid config");
    assert_eq!(c.admission.min_generation_age, Duration::from_secs(7200));
}

#[test]
fn cache_fsync_is_each_fill_off_or_an_interval() {
    let parsed = |value: &str| {
        Config::from_toml_str(&format!("[cache]\nfsync = {value}"))
            .expect("valid")
            .cache
            .fsync
    };
    assert_eq!(
        Config::default().cache.fsync,
        Fsync::Every(Duration::from_secs(1))
    );
    assert_eq!(parsed("true"), Fsync::EachFill);
    assert_eq!(parsed("false"), Fsync::Off);
    assert_eq!(
        parsed("\"250ms\""),
        Fsync::Every(Duration::from_millis(250))
    );
}

#[test]
fn server_runtime_is_thread_per_core_unless_work_stealing_is_asked_for() {
    assert_eq!(Config::default().server.runtime, Runtime::ThreadPerCore);
    let config = Config::from_toml_str("[server]\nruntime = \"work-stealing\"").expect("valid");
    assert_eq!(config.server.runtime, Runtime::WorkStealing);
}

#[test]
fn tags_read_their_separator_from_the_field_and_purge_takes_networks() {
    let config = Config::from_toml_str(
        "[tags]\nheader = \"Cache-Tag\"\n[purge]\nallow = [\"10.1.2.3/8\", \"::1\", \"127.0.0.1\"]\n",
    )
    .expect("valid");
    assert_eq!(config.tags.header.as_str(), "cache-tag");
    assert_eq!(config.tags.separator, TagSeparator::Comma);
    assert_eq!(Config::default().tags.separator, TagSeparator::Space);
    let allows = |ip: &str| config.purge.allows(ip.parse().expect("ip"));
    assert!(allows("10.200.0.1") && allows("::1") && allows("127.0.0.1"));
    assert!(
        allows("::ffff:127.0.0.1"),
        "an IPv4 client on a dual-stack socket"
    );
    assert!(!allows("11.0.0.1") && !allows("127.0.0.2"));
    assert!(
        !Config::default()
            .purge
            .allows("127.0.0.1".parse().expect("ip"))
    );
    for (text, key) in [
        ("[purge]\nallow = [\"10.0.0.0/33\"]", "purge.allow"),
        ("[purge]\nallow = [\"example.com\"]", "purge.allow"),
        ("[tags]\nmax_length = 0", "tags.max_length"),
        ("[tags]\nmax_per_entry = 0", "tags.max_per_entry"),
        ("[tags]\nheader = \"a b\"", "tags.header"),
        ("[tags]\nseparator = \"tab\"", "tags.separator"),
    ] {
        let error = err(text).to_string();
        assert!(error.starts_with(key), "{text:?}: {error}");
    }
}

#[test]
fn the_write_budget_is_a_size_a_second_or_a_drives_rated_writes() {
    let rate = |text: &str| Config::from_toml_str(text).map(|c| c.admission.max_write_rate);
    assert_eq!(rate("").expect("defaults"), None);
    let per_second = rate("[admission]\nmax_write_rate = \"20MiB\"").expect("a size");
    assert_eq!(per_second, Some(20 << 20));
    let with_suffix = rate("[admission]\nmax_write_rate = \"20MiB/s\"").expect("a size a second");
    assert_eq!(with_suffix, Some(20 << 20));
    let drive =
        "[admission]\nmax_write_rate = { drive_writes_per_day = 1, device_size = \"86400KB\" }";
    assert_eq!(
        rate(drive).expect("a drive"),
        Some(1000),
        "86.4 MB a day is 1,000 bytes a second"
    );
}

/// Each of `names` reads (as serde reads the config) as its value, and the value writes
/// back as the name.
fn names_agree<T>(names: &[(&str, T)])
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    for (name, value) in names {
        let read: T = serde_json::from_value(serde_json::json!(name)).expect(name);
        assert_eq!(&read, value, "{name}");
        let written = serde_json::to_value(value).expect("serializes");
        assert_eq!(written, serde_json::json!(name), "{value:?}");
    }
}

#[test]
fn admission_policies_read_and_write_the_names_as_str_gives() {
    use AdmissionPolicy::*;
    let names = [
        ("second-hit", SecondHit),
        ("always", Always),
        ("shadow", Shadow),
        ("auto", Auto),
    ];
    names_agree(&names);
    for (name, policy) in names {
        assert_eq!(policy.as_str(), name);
    }
}

#[test]
fn the_other_config_enums_read_and_write_their_documented_names() {
    names_agree(&[("fill", RotateMode::Fill), ("auto", RotateMode::Auto)]);
    names_agree(&[("bytes", Optimize::Bytes), ("objects", Optimize::Objects)]);
    names_agree(&[
        ("second-hit", rules::RuleAdmission::SecondHit),
        ("always", rules::RuleAdmission::Always),
        ("never", rules::RuleAdmission::Never),
    ]);
    names_agree(&[
        ("client", HostHeader::Client),
        ("origin", HostHeader::Origin),
    ]);
    names_agree(&[
        ("round-robin", Balance::RoundRobin),
        ("consistent-hash", Balance::ConsistentHash),
    ]);
    names_agree(&[
        ("default", UnknownHost::Default),
        ("421", UnknownHost::Misdirected),
        ("404", UnknownHost::NotFound),
    ]);
    names_agree(&[("text", LogFormat::Text), ("json", LogFormat::Json)]);
    names_agree(&[
        ("space", TagSeparator::Space),
        ("comma", TagSeparator::Comma),
    ]);
    names_agree(&[
        ("thread-per-core", Runtime::ThreadPerCore),
        ("work-stealing", Runtime::WorkStealing),
    ]);
}

#[test]
fn an_unknown_value_names_its_key_and_every_value_allowed() {
    let sites = "[[site]]\nhosts = [\"a\"]\n[site.origin]\nurl = \"http://127.0.0.1:1\"\n";
    let cases: [(String, &str, &[&str]); 10] = [
        (
            "[admission]\npolicy = \"x\"".into(),
            "admission.policy",
            &["second-hit", "always", "shadow", "auto"],
        ),
        (
            "[admission]\nrotate = \"x\"".into(),
            "admission.rotate",
            &["fill", "auto"],
        ),
        (
            "[admission]\noptimize = \"x\"".into(),
            "admission.optimize",
            &["bytes", "objects"],
        ),
        (
            "[origin]\nhost_header = \"x\"".into(),
            "origin.host_header",
            &["client", "origin"],
        ),
        (
            "[origin]\nbalance = \"x\"".into(),
            "origin.balance",
            &["round-robin", "consistent-hash"],
        ),
        (
            format!("[server]\nunknown_host = \"x\"\n{sites}"),
            "server.unknown_host",
            &["default", "421", "404"],
        ),
        (
            "[log]\nformat = \"x\"".into(),
            "log.format",
            &["text", "json"],
        ),
        (
            "[log]\nlevel = \"x\"".into(),
            "log.level",
            &["trace", "debug", "info", "warn", "error"],
        ),
        (
            "[tags]\nseparator = \"x\"".into(),
            "tags.separator",
            &["space", "comma"],
        ),
        (
            "[server]\nruntime = \"x\"".into(),
            "server.runtime",
            &["thread-per-core", "work-stealing"],
        ),
    ];
    for (text, key, allowed) in cases {
        let shown = err(&text).to_string();
        assert!(shown.starts_with(&format!("{key}: ")), "{text:?}: {shown}");
        for name in allowed {
            assert!(
                shown.contains(name),
                "{text:?}: {shown} does not list {name}"
            );
        }
    }
}
