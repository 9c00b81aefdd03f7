//! What a reload may change: [`Config::reload`] compares a newly loaded file with the
//! running config key by key, and keeps the running value of every key that only a
//! restart can apply.

use super::{
    AdmissionConfig, CacheConfig, Config, FilterSizing, LogConfig, OriginConfig, ServerConfig,
    TlsConfig,
};

/// The keys that differ between the running config and a reloaded one.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Changed keys a running server applies (dotted, in file order).
    pub live: Vec<&'static str>,
    /// Changed keys that need a restart; the reload keeps their running values.
    pub restart: Vec<&'static str>,
}

/// Whether a running server can apply a key.
#[derive(Clone, Copy)]
enum Applies {
    /// Read per request, or part of something a reload rebuilds.
    Live,
    /// Shapes something built once: the listener, the runtime, the open store, the log's
    /// formatter.
    Restart,
}

impl Changes {
    /// Notes `key` if `next` differs from `running`; a restart-only key gets the running
    /// value back.
    fn compare<T: PartialEq + Clone>(
        &mut self,
        key: &'static str,
        applies: Applies,
        running: &T,
        next: &mut T,
    ) {
        if running == next {
            return;
        }
        match applies {
            Applies::Live => self.live.push(key),
            Applies::Restart => {
                self.restart.push(key);
                *next = running.clone();
            }
        }
    }
}

impl Config {
    /// `next` as a reload applies it over `self` (the running config): the keys a running
    /// server can change take `next`'s values, the others keep `self`'s. Returns that
    /// config and the changed keys of each kind.
    ///
    /// Live: all of `[origin]`, the `[[site]]`s, the top-level `[[rule]]`s and
    /// `server.unknown_host` (the sites and their clients are rebuilt), all of
    /// `[admission]` (the policy is rebuilt; same-sized filters keep what they remember),
    /// `cache.max_object_size`,
    /// `cache.heuristic_max_age`, `cache.targeted_field`, `cache.stale_if_unreachable`,
    /// `cache.collapse_timeout`, `server.tls.certificates` (whose files a reload reads
    /// again even when the file names did not change), `log.level`, `log.access_log` and
    /// `log.access_format`. Restart: the rest of `[server]` (a TLS listener added, removed
    /// or moved included), the store's other `[cache]` keys, and `log.format`.
    pub fn reload(&self, mut next: Config) -> (Config, Changes) {
        let mut changes = Changes::default();
        server(&self.server, &mut next.server, &mut changes);
        origin(&self.origin, &mut next.origin, &mut changes);
        cache(&self.cache, &mut next.cache, &mut changes);
        admission(&self.admission, &mut next.admission, &mut changes);
        log(&self.log, &mut next.log, &mut changes);
        // The sites, their origins and rules are rebuilt whole (`sites::Sites`); a change
        // anywhere in them is named by its table.
        changes.compare("site", Applies::Live, &self.sites, &mut next.sites);
        changes.compare("rule", Applies::Live, &self.rules, &mut next.rules);
        (next, changes)
    }
}

// Each section is destructured without `..`, so a new key fails to compile until it is
// classified here.

fn server(running: &ServerConfig, next: &mut ServerConfig, changes: &mut Changes) {
    use Applies::{Live, Restart};
    let ServerConfig {
        listen,
        max_connections,
        header_read_timeout,
        idle_timeout,
        send_timeout,
        max_concurrent_streams,
        max_headers,
        max_header_bytes,
        shutdown_timeout,
        workers,
        blocking_threads,
        admin_listen,
        admin_token,
        user,
        group,
        tls,
        unknown_host,
    } = next;
    let r = running;
    changes.compare("server.listen", Restart, &r.listen, listen);
    // The admin listener is bound, and its token read, once at start.
    changes.compare(
        "server.admin_listen",
        Restart,
        &r.admin_listen,
        admin_listen,
    );
    changes.compare("server.admin_token", Restart, &r.admin_token, admin_token);
    changes.compare(
        "server.max_connections",
        Restart,
        &r.max_connections,
        max_connections,
    );
    let timeout = &r.header_read_timeout;
    changes.compare(
        "server.header_read_timeout",
        Restart,
        timeout,
        header_read_timeout,
    );
    let idle = &r.idle_timeout;
    changes.compare("server.idle_timeout", Restart, idle, idle_timeout);
    let send = &r.send_timeout;
    changes.compare("server.send_timeout", Restart, send, send_timeout);
    let streams = &r.max_concurrent_streams;
    changes.compare(
        "server.max_concurrent_streams",
        Restart,
        streams,
        max_concurrent_streams,
    );
    changes.compare("server.max_headers", Restart, &r.max_headers, max_headers);
    let bytes = &r.max_header_bytes;
    changes.compare("server.max_header_bytes", Restart, bytes, max_header_bytes);
    let shutdown = &r.shutdown_timeout;
    changes.compare(
        "server.shutdown_timeout",
        Restart,
        shutdown,
        shutdown_timeout,
    );
    changes.compare("server.workers", Restart, &r.workers, workers);
    let blocking = &r.blocking_threads;
    changes.compare(
        "server.blocking_threads",
        Restart,
        blocking,
        blocking_threads,
    );
    // Part of the sites, rebuilt on reload.
    let unknown = &r.unknown_host;
    changes.compare("server.unknown_host", Live, unknown, unknown_host);
    // Privileges are dropped once, after binding: there is no way back to change them.
    changes.compare("server.user", Restart, &r.user, user);
    changes.compare("server.group", Restart, &r.group, group);
    server_tls(&r.tls, tls, changes);
}

/// The TLS listener is bound once, at start; its certificates are swapped by a reload.
fn server_tls(running: &Option<TlsConfig>, next: &mut Option<TlsConfig>, changes: &mut Changes) {
    use Applies::{Live, Restart};
    match (running, next.as_mut()) {
        (Some(r), Some(next)) => {
            let TlsConfig {
                listen,
                certificates,
            } = next;
            changes.compare("server.tls.listen", Restart, &r.listen, listen);
            let certs = &r.certificates;
            changes.compare("server.tls.certificates", Live, certs, certificates);
        }
        // Added or removed: a listener to bind or close.
        _ => changes.compare("server.tls", Restart, running, next),
    }
}

fn origin(running: &OriginConfig, next: &mut OriginConfig, changes: &mut Changes) {
    use Applies::Live;
    let OriginConfig {
        url,
        ca_file,
        danger_accept_invalid_certs,
        host_header,
        connect_timeout,
        read_timeout,
        max_in_flight,
        queue_timeout,
        body_buffer_size,
        body_read_timeout,
        body_min_rate,
    } = next;
    let r = running;
    changes.compare("origin.url", Live, &r.url, url);
    changes.compare("origin.ca_file", Live, &r.ca_file, ca_file);
    let danger = &r.danger_accept_invalid_certs;
    let unverified = danger_accept_invalid_certs;
    changes.compare(
        "origin.danger_accept_invalid_certs",
        Live,
        danger,
        unverified,
    );
    changes.compare("origin.host_header", Live, &r.host_header, host_header);
    changes.compare(
        "origin.connect_timeout",
        Live,
        &r.connect_timeout,
        connect_timeout,
    );
    changes.compare("origin.read_timeout", Live, &r.read_timeout, read_timeout);
    changes.compare(
        "origin.max_in_flight",
        Live,
        &r.max_in_flight,
        max_in_flight,
    );
    let queue = &r.queue_timeout;
    changes.compare("origin.queue_timeout", Live, queue, queue_timeout);
    let buffer = &r.body_buffer_size;
    changes.compare("origin.body_buffer_size", Live, buffer, body_buffer_size);
    let body = &r.body_read_timeout;
    changes.compare("origin.body_read_timeout", Live, body, body_read_timeout);
    let rate = &r.body_min_rate;
    changes.compare("origin.body_min_rate", Live, rate, body_min_rate);
}

fn cache(running: &CacheConfig, next: &mut CacheConfig, changes: &mut Changes) {
    use Applies::{Live, Restart};
    let CacheConfig {
        dir,
        max_size,
        max_object_size,
        min_free,
        fsync,
        lock_timeout,
        verify_whole_below,
        heuristic_max_age,
        targeted_field,
        stale_if_unreachable,
        memory_size,
        memory_max_object_size,
        open_files,
        collapse_timeout,
        max_orphan_fills,
    } = next;
    let r = running;
    changes.compare("cache.dir", Restart, &r.dir, dir);
    changes.compare("cache.max_size", Restart, &r.max_size, max_size);
    changes.compare(
        "cache.max_object_size",
        Live,
        &r.max_object_size,
        max_object_size,
    );
    changes.compare("cache.min_free", Restart, &r.min_free, min_free);
    changes.compare("cache.fsync", Restart, &r.fsync, fsync);
    changes.compare("cache.lock_timeout", Restart, &r.lock_timeout, lock_timeout);
    let verify = &r.verify_whole_below;
    changes.compare(
        "cache.verify_whole_below",
        Restart,
        verify,
        verify_whole_below,
    );
    let heuristic = &r.heuristic_max_age;
    changes.compare(
        "cache.heuristic_max_age",
        Live,
        heuristic,
        heuristic_max_age,
    );
    let targeted = &r.targeted_field;
    changes.compare("cache.targeted_field", Live, targeted, targeted_field);
    let stale = &r.stale_if_unreachable;
    changes.compare(
        "cache.stale_if_unreachable",
        Live,
        stale,
        stale_if_unreachable,
    );
    changes.compare("cache.memory_size", Restart, &r.memory_size, memory_size);
    let memory_max = &r.memory_max_object_size;
    changes.compare(
        "cache.memory_max_object_size",
        Restart,
        memory_max,
        memory_max_object_size,
    );
    let open = &r.open_files;
    changes.compare("cache.open_files", Restart, open, open_files);
    // Read per miss.
    let collapse = &r.collapse_timeout;
    changes.compare("cache.collapse_timeout", Live, collapse, collapse_timeout);
    // The orphan fills' semaphore is sized once, at start.
    let orphans = &r.max_orphan_fills;
    changes.compare("cache.max_orphan_fills", Restart, orphans, max_orphan_fills);
}

fn admission(running: &AdmissionConfig, next: &mut AdmissionConfig, changes: &mut Changes) {
    use Applies::Live;
    let AdmissionConfig {
        policy,
        sizing,
        false_positive_rate,
        max_age,
        rotate,
        min_generation_age,
        seed,
        snapshot_every,
    } = next;
    let r = running;
    changes.compare("admission.policy", Live, &r.policy, policy);
    let sizing_key = match sizing {
        FilterSizing::ExpectedUrls(_) => "admission.expected_urls",
        FilterSizing::Memory(_) => "admission.memory",
    };
    changes.compare(sizing_key, Live, &r.sizing, sizing);
    let rate = &r.false_positive_rate;
    changes.compare(
        "admission.false_positive_rate",
        Live,
        rate,
        false_positive_rate,
    );
    changes.compare("admission.max_age", Live, &r.max_age, max_age);
    changes.compare("admission.rotate", Live, &r.rotate, rotate);
    // Read at each rotation of the pair, which a reload of `[admission]` rebuilds.
    let hold = &r.min_generation_age;
    changes.compare(
        "admission.min_generation_age",
        Live,
        hold,
        min_generation_age,
    );
    changes.compare("admission.seed", Live, &r.seed, seed);
    changes.compare(
        "admission.snapshot_every",
        Live,
        &r.snapshot_every,
        snapshot_every,
    );
}

fn log(running: &LogConfig, next: &mut LogConfig, changes: &mut Changes) {
    use Applies::{Live, Restart};
    let LogConfig {
        level,
        format,
        access_log,
        access_format,
    } = next;
    let r = running;
    changes.compare("log.level", Live, &r.level, level);
    changes.compare("log.format", Restart, &r.format, format);
    changes.compare("log.access_log", Live, &r.access_log, access_log);
    changes.compare("log.access_format", Live, &r.access_format, access_format);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{AccessLog, AdmissionPolicy, LogFormat, MaxObjectSize};

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
        file.log.access_log = AccessLog::Off;
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
        assert_eq!(next.log.access_log, AccessLog::Off);
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
