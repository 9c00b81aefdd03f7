//! What a reload may change: [`Config::reload`] compares a newly loaded file with the
//! running config key by key, and keeps the running value of every key that only a
//! restart can apply.
//!
//! The keys are not listed one by one: both configs are serialized (to JSON, the derived
//! `Serialize` of the config types, which writes the keys in the order the structs declare
//! them) and walked key by key, and one table, [`RESTART`], names the keys that need a
//! restart; every other key is live. A `None` is written as `null`, so both configs have
//! the same keys, but for `admission.expected_urls` and `admission.memory`, of which a
//! config has one: the one the file sets names the change.

use std::fmt::Display;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::Config;

/// The keys that differ between the running config and a reloaded one.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Changed keys a running server applies (dotted, in file order).
    pub live: Vec<String>,
    /// Changed keys that need a restart; the reload keeps their running values.
    pub restart: Vec<String>,
}

/// Puts the running value of one restart-only key back into the next config.
type KeepRunning = fn(&Config, &mut Config);

/// A [`RESTART`] entry: the dotted key and how its running value is kept.
macro_rules! restart {
    ($section:ident $(. $key:ident)+) => {
        (
            concat!(stringify!($section) $(, ".", stringify!($key))+),
            |running: &Config, next: &mut Config| {
                next.$section$(.$key)+ = running.$section$(.$key)+.clone()
            },
        )
    };
}

/// The keys only a restart applies: they shape something built once. Every other key is
/// live: read per request, or part of something a reload rebuilds (the sites and their
/// origin clients, the admission, the access log's writer, the certificates).
const RESTART: &[(&str, KeepRunning)] = &[
    // The listeners, their limits and the runtime are set up once, at start; the admin
    // listener's token is read then too.
    restart!(server.listen),
    restart!(server.admin_listen),
    restart!(server.admin_token),
    restart!(server.admin_hosts),
    restart!(server.max_connections),
    restart!(server.header_read_timeout),
    restart!(server.idle_timeout),
    restart!(server.send_timeout),
    restart!(server.max_concurrent_streams),
    restart!(server.max_headers),
    restart!(server.max_header_bytes),
    restart!(server.shutdown_timeout),
    restart!(server.workers),
    restart!(server.runtime),
    restart!(server.blocking_threads),
    // Privileges are dropped once, after binding: there is no way back to change them.
    restart!(server.user),
    restart!(server.group),
    // The pid file is written once, at start, and removed by the process that wrote it.
    restart!(server.pid_file),
    // A TLS listener added, removed or moved: a listener to bind or close. Its
    // certificates are live.
    restart!(server.tls),
    ("server.tls.listen", |running, next| {
        if let (Some(running), Some(next)) = (&running.server.tls, &mut next.server.tls) {
            next.listen = running.listen;
        }
    }),
    // The store is opened once; `cache.max_object_size` and the RFC 9111 settings are
    // read per request.
    restart!(cache.dir),
    restart!(cache.max_size),
    restart!(cache.min_free),
    restart!(cache.fsync),
    restart!(cache.lock_timeout),
    restart!(cache.verify_whole_below),
    restart!(cache.memory_size),
    restart!(cache.memory_max_object_size),
    restart!(cache.open_files),
    // The orphan fills' semaphore is sized once, at start.
    restart!(cache.max_orphan_fills),
    // The diagnostic log's formatter is installed once.
    restart!(log.format),
    // The tag index's budget is the store's, set when it opens.
    restart!(tags.max_memory),
];

impl Config {
    /// `next` as a reload applies it over `self` (the running config): the keys a running
    /// server can change take `next`'s values, the others keep `self`'s. Returns that
    /// config and the changed keys of each kind.
    ///
    /// Live: all of `[origin]`, the `[[site]]`s, the top-level `[[rule]]`s and
    /// `server.unknown_host` (the sites and their clients are rebuilt), all of
    /// `[admission]` (the policy is rebuilt; same-sized filters keep what they remember),
    /// `cache.max_object_size`,
    /// `cache.heuristic_max_age`, `cache.targeted_field`, `cache.strip_request_fields`,
    /// `cache.stale_if_unreachable`, `cache.collapse_timeout`, `server.tls.certificates` (whose files a reload reads
    /// again even when the file names did not change), `log.level`, `log.access_log` and
    /// `log.access_format`, `[purge]` and the rest of `[tags]`. Restart: the rest of
    /// `[server]` (a TLS listener added, removed or moved included), the store's other
    /// `[cache]` keys, `tags.max_memory` and `log.format` (`RESTART`).
    pub fn reload(&self, mut next: Config) -> (Config, Changes) {
        let mut changed = Vec::new();
        let (running_json, next_json) = (json(self), json(&next));
        walk("", Some(&running_json), &next_json, &mut changed);
        // The sites, their origins and rules are rebuilt whole (`sites::Sites`); a change
        // anywhere in them is named by its table.
        if self.sites != next.sites {
            changed.push("site".to_owned());
        }
        if self.rules != next.rules {
            changed.push("rule".to_owned());
        }
        let mut changes = Changes::default();
        for key in changed {
            match RESTART.iter().find(|(restart, _)| *restart == key) {
                Some((_, keep_running)) => {
                    keep_running(self, &mut next);
                    changes.restart.push(key);
                }
                None => changes.live.push(key),
            }
        }
        (next, changes)
    }
}

/// `config` as JSON text, its keys in the order the structs declare them.
fn json(config: &Config) -> Box<RawValue> {
    // Cannot fail: every map in a config has string keys, and every value has a JSON form.
    serde_json::value::to_raw_value(config).expect("a config serializes to JSON")
}

/// Adds to `changed` the dotted key (below `prefix`) of every member of the object `next`
/// whose value differs from its value in `running`; `running: None` counts every member
/// as changed. The sections are walked into, and so is a table holding a [`RESTART`] key
/// when it is a table on both sides; any other value is compared whole.
fn walk(prefix: &str, running: Option<&RawValue>, next: &RawValue, changed: &mut Vec<String>) {
    let (Some(next), running) = (Members::of(next), running.and_then(Members::of)) else {
        return;
    };
    for (name, value) in &next.0 {
        let key = match prefix {
            "" => name.clone(),
            _ => format!("{prefix}.{name}"),
        };
        let was = running.as_ref().map(|running| running.get(name));
        if let Some(Some(was)) = was
            && was.get() == value.get()
        {
            continue;
        }
        let walked = prefix.is_empty()
            || RESTART.iter().any(|(restart, _)| {
                restart
                    .strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
            });
        let table = |raw: &RawValue| raw.get().starts_with('{');
        match was {
            None if walked && table(value) => walk(&key, None, value, changed),
            Some(Some(was)) if walked && table(was) && table(value) => {
                walk(&key, Some(was), value, changed)
            }
            _ => changed.push(key),
        }
    }
}

/// A JSON object's members in the order they are written, each value as its JSON text:
/// `serde_json`'s own map sorts its keys.
struct Members(Vec<(String, Box<RawValue>)>);

impl Members {
    /// The members of `value`; `None` when it is not an object.
    fn of(value: &RawValue) -> Option<Members> {
        serde_json::from_str(value.get()).ok()
    }

    /// The value of the member `name`.
    fn get(&self, name: &str) -> Option<&RawValue> {
        let member = self.0.iter().find(|(member, _)| member == name);
        member.map(|(_, value)| value.as_ref())
    }
}

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Members, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

/// Serializes a value that has no `Serialize` of its own (a URI, a header name) as its
/// text.
pub(super) fn shown<S: serde::Serializer>(
    value: &impl Display,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// [`shown`] for each value of a list.
pub(super) fn shown_list<S: serde::Serializer>(
    values: &[impl Display],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(values.iter().map(ToString::to_string))
}

/// [`shown`] for an optional value: `None` as a JSON `null`.
pub(super) fn shown_if_some<S: serde::Serializer>(
    value: &Option<impl Display>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.collect_str(value),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{
        AccessLog, AdmissionPolicy, CertificateFiles, FilterSizing, LogFormat, MaxObjectSize,
        TlsConfig,
    };

    /// The keys a reload applies; every other key must be in [`RESTART`]. A key added to
    /// the config fails `every_key_is_live_or_restart_only` until it is put in one of them.
    const LIVE: &[&str] = &[
        "server.unknown_host",
        "server.tls.certificates",
        "origin.url",
        "origin.ca_file",
        "origin.danger_accept_invalid_certs",
        "origin.host_header",
        "origin.connect_timeout",
        "origin.read_timeout",
        "origin.first_byte_timeout",
        "origin.retry",
        "origin.max_in_flight",
        "origin.queue_timeout",
        "origin.body_buffer_size",
        "origin.body_read_timeout",
        "origin.body_min_rate",
        "origin.servers",
        "origin.balance",
        "origin.max_fails",
        "origin.fail_timeout",
        "origin.fail_statuses",
        "origin.health_check",
        "cache.max_object_size",
        "cache.heuristic_max_age",
        "cache.targeted_field",
        "cache.strip_request_fields",
        "cache.stale_if_unreachable",
        "cache.collapse_timeout",
        "admission.policy",
        "admission.expected_urls",
        "admission.memory",
        "admission.false_positive_rate",
        "admission.max_age",
        "admission.rotate",
        "admission.min_generation_age",
        "admission.seed",
        "admission.snapshot_every",
        "admission.max_write_rate",
        "admission.auto_epoch",
        "admission.optimize",
        "admission.estimate_budget",
        "log.level",
        "log.access_log",
        "log.access_format",
        "log.trusted_proxies",
        "tags.header",
        "tags.separator",
        "tags.keep_header",
        "tags.max_per_entry",
        "tags.max_length",
        "purge.allow",
    ];

    /// A config with every optional key set, its filters sized by `sizing`.
    fn populated(sizing: FilterSizing) -> Config {
        let mut config = Config::default();
        config.server.admin_token = Some("token".to_owned());
        config.server.workers = Some(2);
        config.server.user = Some("nobody".to_owned());
        config.server.group = Some("nogroup".to_owned());
        config.server.pid_file = Some("/run/secondhit/secondhit.pid".into());
        config.server.tls = Some(TlsConfig {
            listen: "127.0.0.1:8443".parse().expect("address"),
            certificates: vec![CertificateFiles {
                chain: "/c.pem".into(),
                key: "/k.pem".into(),
            }],
        });
        config.origin.ca_file = Some("/ca.pem".into());
        config.origin.health_check = Some(crate::config::HealthCheck {
            path: "/healthz".to_owned(),
            interval: Duration::from_secs(5),
            expect: 200,
            timeout: Duration::from_secs(2),
        });
        config.cache.targeted_field = Some(http::HeaderName::from_static("x-cc"));
        config.admission.sizing = sizing;
        config.admission.seed = Some("seed".to_owned());
        config
    }

    #[test]
    fn every_key_is_live_or_restart_only_and_restart_names_only_keys_that_exist() {
        let mut keys = Vec::new();
        for sizing in [FilterSizing::ExpectedUrls(1), FilterSizing::Memory(1)] {
            walk("", None, &json(&populated(sizing)), &mut keys);
        }
        let restart = |key: &str| RESTART.iter().any(|(restart, _)| *restart == key);
        for key in &keys {
            assert!(
                restart(key) != LIVE.contains(&key.as_str()),
                "{key}: in neither or both of RESTART and LIVE"
            );
        }
        // A table a reload walks into (`server.tls`) is a key too: added or removed.
        let exists = |key: &str| {
            let below = format!("{key}.");
            keys.iter().any(|k| k == key || k.starts_with(&below))
        };
        for key in RESTART
            .iter()
            .map(|(key, _)| *key)
            .chain(LIVE.iter().copied())
        {
            assert!(exists(key), "{key} names no key of the config");
        }
    }

    /// Every key of a fully populated config, dotted (`cache.max_size`).
    fn every_key() -> Vec<String> {
        let mut keys = Vec::new();
        for sizing in [FilterSizing::ExpectedUrls(1), FilterSizing::Memory(1)] {
            walk("", None, &json(&populated(sizing)), &mut keys);
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// The `(section, key)` pairs `config/secondhit.toml` shows, set or commented out
    /// (`# [server.tls]` opens a section as `[server.tls]` does).
    fn example_keys(example: &str) -> Vec<(String, String)> {
        let mut section = String::new();
        let mut pairs = Vec::new();
        for line in example.lines() {
            let line = line.trim_start_matches(['#', ' ']);
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.trim_matches(['[', ']']).to_owned();
            } else if let Some((key, _)) = line.split_once(" = ")
                && !key.contains(' ')
            {
                pairs.push((section.clone(), key.to_owned()));
            }
        }
        pairs
    }

    #[test]
    fn the_configuration_reference_and_the_example_file_document_every_key_and_no_other() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let reference = std::fs::read_to_string(format!("{root}/docs/guide/configure.md"))
            .expect("read docs/guide/configure.md");
        let documented: Vec<&str> = reference
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split('`').next())
            .collect();
        let example = std::fs::read_to_string(format!("{root}/config/secondhit.toml"))
            .expect("read config/secondhit.toml");
        let keys = every_key();
        for key in &keys {
            assert!(
                documented.contains(&key.as_str()),
                "{key} has no row in docs/guide/configure.md"
            );
            let (section, name) = key.rsplit_once('.').expect("a dotted key");
            let in_example =
                example_keys(&example).contains(&(section.to_owned(), name.to_owned()));
            assert!(
                in_example,
                "{key} is not shown in config/secondhit.toml's [{section}]"
            );
        }
        for row in documented {
            assert!(
                keys.iter().any(|key| key == row),
                "docs/guide/configure.md documents {row}, which is no key of the config"
            );
        }
    }

    /// The backquoted words of the paragraph of docs/guide/reload.md that starts with
    /// `start`, to the next blank line.
    fn reload_guide_words(start: &str) -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide/reload.md");
        let guide = std::fs::read_to_string(path).expect("read docs/guide/reload.md");
        let paragraph: Vec<&str> = (guide.lines())
            .skip_while(|line| !line.starts_with(start))
            .take_while(|line| !line.trim().is_empty())
            .collect();
        assert!(
            !paragraph.is_empty(),
            "docs/guide/reload.md has no {start:?}"
        );
        let text = paragraph.join(" ");
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_reload_guide_puts_every_key_on_the_side_the_code_does() {
        let live = reload_guide_words("**What a reload applies.**");
        let restart = reload_guide_words("**What needs a restart**");
        // A key is named itself, or by its section (`[origin]`, "the rest of `[server]`").
        let covers = |words: &[String], key: &str| {
            let section = key.split('.').next().unwrap_or(key);
            words
                .iter()
                .any(|word| *word == key || *word == format!("[{section}]"))
        };
        for key in every_key() {
            let (side, other, named) = match LIVE.contains(&key.as_str()) {
                true => (&live, &restart, "applied by a reload"),
                false => (&restart, &live, "in need of a restart"),
            };
            assert!(
                covers(side, &key),
                "docs/guide/reload.md does not name {key} among the keys {named}"
            );
            assert!(
                !other.contains(&key),
                "docs/guide/reload.md names {key} on the wrong side: it is {named}"
            );
        }
    }

    #[test]
    fn an_unchanged_file_changes_nothing() {
        let running = Config::default();
        let (next, changes) = running.reload(Config::default());
        assert_eq!(next, running);
        assert_eq!(changes, Changes::default());
    }

    #[test]
    fn live_keys_take_the_new_values_and_restart_keys_keep_the_running_ones() {
        let running = Config::default();
        let mut file = Config::default();
        file.server.listen = "127.0.0.1:9999".parse().expect("address");
        file.cache.dir = "/elsewhere".into();
        file.log.format = LogFormat::Json;
        file.origin.read_timeout = Duration::from_secs(3);
        file.admission.policy = AdmissionPolicy::Always;
        file.admission.sizing = FilterSizing::Memory(1 << 20);
        file.cache.max_object_size = MaxObjectSize::Bytes(1);
        file.cache.targeted_field = Some(http::HeaderName::from_static("x-cc"));
        file.log.level = "debug".to_owned();
        file.log.access_log = AccessLog::Stdout;
        let (next, changes) = running.reload(file);
        assert_eq!(
            changes.live,
            [
                "origin.read_timeout",
                "cache.max_object_size",
                "cache.targeted_field",
                "admission.policy",
                "admission.memory",
                "log.level",
                "log.access_log",
            ]
        );
        assert_eq!(
            changes.restart,
            ["server.listen", "cache.dir", "log.format"]
        );
        assert_eq!(next.server, running.server);
        assert_eq!(next.cache.dir, running.cache.dir);
        assert_eq!(next.log.format, running.log.format);
        assert_eq!(next.origin.read_timeout, Duration::from_secs(3));
        assert_eq!(next.admission.policy, AdmissionPolicy::Always);
        assert_eq!(next.cache.max_object_size, MaxObjectSize::Bytes(1));
        assert_eq!(next.log.access_log, AccessLog::Stdout);
    }

    #[test]
    fn tls_certificates_are_live_and_the_tls_listener_needs_a_restart() {
        let tls = |listen: &str, chain: &str| {
            Some(crate::config::TlsConfig {
                listen: listen.parse().expect("address"),
                certificates: vec![crate::config::CertificateFiles {
                    chain: chain.into(),
                    key: "/k.pem".into(),
                }],
            })
        };
        let mut running = Config::default();
        running.server.tls = tls("127.0.0.1:8443", "/a.pem");
        let mut file = running.clone();
        file.server.tls = tls("127.0.0.1:9443", "/b.pem");
        let (next, changes) = running.reload(file);
        assert_eq!(changes.live, ["server.tls.certificates"]);
        assert_eq!(changes.restart, ["server.tls.listen"]);
        assert_eq!(next.server.tls, tls("127.0.0.1:8443", "/b.pem"));

        let (next, changes) = Config::default().reload(running.clone());
        assert_eq!(changes.restart, ["server.tls"]);
        assert_eq!(next.server.tls, None);
    }
}
