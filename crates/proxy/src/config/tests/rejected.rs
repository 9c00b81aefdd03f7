//! Every invalid setting is rejected with an error that names its key.

use super::{err, kind};

/// Each case: (TOML, dotted key the message must name, error kind).
#[rustfmt::skip]
const REJECTED: &[(&str, &str, &str)] = &[
    // Unknown keys, in each section and at the top.
    ("[server]\nbogus = 1", "server.bogus", "parse"),
    ("[origin]\nbogus = 1", "origin.bogus", "parse"),
    ("[cache]\nbogus = 1", "cache.bogus", "parse"),
    ("[admission]\nbogus = 1", "admission.bogus", "parse"),
    ("[log]\nbogus = 1", "log.bogus", "parse"),
    ("[bogus]\nx = 1", "bogus", "parse"),
    ("bogus = 1", "bogus", "parse"),
    // Wrong types and negative numbers.
    (
        "[server]\nmax_connections = -1",
        "server.max_connections",
        "parse",
    ),
    (
        "[server]\nmax_connections = \"many\"",
        "server.max_connections",
        "parse",
    ),
    (
        "[server]\nheader_read_timeout = 10",
        "server.header_read_timeout",
        "parse",
    ),
    (
        "[cache]\nmax_object_size = -1",
        "cache.max_object_size",
        "parse",
    ),
    (
        "[cache]\nmax_object_size = 1.5",
        "cache.max_object_size",
        "parse",
    ),
    ("[cache]\nfsync = \"yes\"", "cache.fsync", "invalid"),
    ("[cache]\nfsync = \"0s\"", "cache.fsync", "invalid"),
    ("[cache]\nfsync = 1", "cache.fsync", "parse"),
    ("[server]\nruntime = \"fast\"", "server.runtime", "parse"),
    (
        "[admission]\nexpected_urls = -5",
        "admission.expected_urls",
        "parse",
    ),
    ("server = 5", "server", "parse"),
    ("[log]\nlevel = [\"info\"]", "log.level", "parse"),
    // [server]
    (
        "[server]\nlisten = \"localhost\"",
        "server.listen",
        "invalid",
    ),
    (
        "[server]\nmax_connections = 0",
        "server.max_connections",
        "invalid",
    ),
    (
        "[server]\nheader_read_timeout = \"10 parsecs\"",
        "server.header_read_timeout",
        "invalid",
    ),
    (
        "[server]\nheader_read_timeout = \"0s\"",
        "server.header_read_timeout",
        "invalid",
    ),
    ("[server]\nmax_headers = 0", "server.max_headers", "invalid"),
    (
        "[server]\nmax_headers = 10001",
        "server.max_headers",
        "invalid",
    ),
    (
        "[server]\nmax_header_bytes = \"4KiB\"",
        "server.max_header_bytes",
        "invalid",
    ),
    (
        "[server]\nmax_header_bytes = \"2MiB\"",
        "server.max_header_bytes",
        "invalid",
    ),
    (
        "[server]\nmax_header_bytes = \"lots\"",
        "server.max_header_bytes",
        "invalid",
    ),
    ("[server]\nworkers = 0", "server.workers", "invalid"),
    ("[server]\nblocking_threads = 0", "server.blocking_threads", "invalid"),
    ("[server]\nblocking_threads = 513", "server.blocking_threads", "invalid"),
    ("[server]\nuser = \"www data\"", "server.user", "invalid"),
    ("[server]\ngroup = \"a:b\"", "server.group", "invalid"),
    (
        "[server]\nshutdown_timeout = \"soon\"",
        "server.shutdown_timeout",
        "invalid",
    ),
    (
        "[server]\nadmin_listen = \"localhost:9090\"",
        "server.admin_listen",
        "invalid",
    ),
    (
        "[server]\nadmin_listen = \"127.0.0.1:8080\"",
        "server.admin_listen",
        "invalid",
    ),
    (
        "[server]\nlisten = \"0.0.0.0:3128\"\nadmin_listen = \"0.0.0.0:3128\"",
        "server.admin_listen",
        "invalid",
    ),
    ("[server]\nadmin_listen = 9090", "server.admin_listen", "parse"),
    (
        "[server]\nadmin_hosts = [\"admin.example:9090\"]",
        "server.admin_hosts",
        "invalid",
    ),
    (
        "[server]\nadmin_hosts = [\"\"]",
        "server.admin_hosts",
        "invalid",
    ),
    (
        "[server]\nadmin_token = \"two words\"",
        "server.admin_token",
        "invalid",
    ),
    (
        "[server]\nidle_timeout = \"0s\"",
        "server.idle_timeout",
        "invalid",
    ),
    (
        "[server]\nmax_concurrent_streams = 0",
        "server.max_concurrent_streams",
        "invalid",
    ),
    (
        "[origin]\nbody_read_timeout = \"0s\"",
        "origin.body_read_timeout",
        "invalid",
    ),
    (
        "[origin]\nbody_min_rate = \"fast\"",
        "origin.body_min_rate",
        "invalid",
    ),
    (
        "[origin]\nbody_buffer_size = \"17MiB\"",
        "origin.body_buffer_size",
        "invalid",
    ),
    (
        "[origin]\nqueue_timeout = \"soon\"",
        "origin.queue_timeout",
        "invalid",
    ),
    // [origin]
    (
        "[origin]\nurl = \"http://exa mple\"",
        "origin.url",
        "invalid",
    ),
    (
        "[origin]\nurl = \"ftp://example.com\"",
        "origin.url",
        "invalid",
    ),
    // TLS to the origin: its options only with https://, and not together.
    (
        "[origin]\nca_file = \"/etc/ca.pem\"",
        "origin.ca_file",
        "invalid",
    ),
    (
        "[origin]\ndanger_accept_invalid_certs = true",
        "origin.danger_accept_invalid_certs",
        "invalid",
    ),
    (
        "[origin]\nurl = \"https://example.com\"\nca_file = \"ca.pem\"",
        "origin.ca_file",
        "invalid",
    ),
    (
        "[origin]\nurl = \"https://example.com\"\nca_file = \"/ca.pem\"\ndanger_accept_invalid_certs = true",
        "origin.danger_accept_invalid_certs",
        "invalid",
    ),
    // [server.tls]
    (
        "[server.tls]\ncertificates = [{ chain = \"/c.pem\", key = \"/k.pem\" }]",
        "server.tls.listen",
        "invalid",
    ),
    (
        "[server.tls]\nlisten = \"127.0.0.1:8080\"\ncertificates = [{ chain = \"/c.pem\", key = \"/k.pem\" }]",
        "server.tls.listen",
        "invalid",
    ),
    (
        "[server.tls]\nlisten = \"127.0.0.1:8443\"",
        "server.tls.certificates",
        "invalid",
    ),
    (
        "[server.tls]\nlisten = \"127.0.0.1:8443\"\ncertificates = [{ chain = \"c.pem\", key = \"/k.pem\" }]",
        "server.tls.certificates",
        "invalid",
    ),
    (
        "[server.tls]\nlisten = \"127.0.0.1:8443\"\ncertificates = [{ chain = \"/c.pem\" }]",
        "server.tls.certificates",
        "invalid",
    ),
    (
        "[origin]\nurl = \"http://example.com/api\"",
        "origin.url",
        "invalid",
    ),
    (
        "[origin]\nurl = \"http://example.com/?a=1\"",
        "origin.url",
        "invalid",
    ),
    (
        "[origin]\nurl = \"example.com:80\"",
        "origin.url",
        "invalid",
    ),
    ("[origin]\nurl = \"/just/a/path\"", "origin.url", "invalid"),
    (
        "[origin]\nhost_header = \"proxy\"",
        "origin.host_header",
        "parse",
    ),
    (
        "[origin]\nconnect_timeout = \"0s\"",
        "origin.connect_timeout",
        "invalid",
    ),
    (
        "[origin]\nread_timeout = \"0ms\"",
        "origin.read_timeout",
        "invalid",
    ),
    (
        "[origin]\nmax_in_flight = 0",
        "origin.max_in_flight",
        "invalid",
    ),
    // [cache]
    ("[cache]\ndir = \"\"", "cache.dir", "invalid"),
    (
        "[cache]\nmax_object_size = \"12XB\"",
        "cache.max_object_size",
        "invalid",
    ),
    (
        "[cache]\nmax_object_size = \"0B\"",
        "cache.max_object_size",
        "invalid",
    ),
    (
        "[cache]\nmax_object_size = 0",
        "cache.max_object_size",
        "invalid",
    ),
    // Only the lower-case word is "auto".
    (
        "[cache]\nmax_object_size = \"Auto\"",
        "cache.max_object_size",
        "invalid",
    ),
    ("[cache]\nmax_size = \"0B\"", "cache.max_size", "invalid"),
    ("[cache]\nmax_size = \"lots\"", "cache.max_size", "invalid"),
    ("[cache]\nmax_size = -1", "cache.max_size", "parse"),
    // A budget smaller than the largest object it is meant to store.
    (
        "[cache]\nmax_size = \"1MiB\"\nmax_object_size = \"2MiB\"",
        "cache.max_size",
        "invalid",
    ),
    ("[cache]\nmin_free = \"lots\"", "cache.min_free", "invalid"),
    ("[cache]\nmin_free = -1", "cache.min_free", "parse"),
    ("[cache]\nlock_timeout = \"soon\"", "cache.lock_timeout", "invalid"),
    ("[cache]\nlock_timeout = 5", "cache.lock_timeout", "parse"),
    ("[cache]\nheuristic_max_age = \"a day\"", "cache.heuristic_max_age", "invalid"),
    ("[cache]\nstale_if_unreachable = \"forever\"", "cache.stale_if_unreachable", "invalid"),
    ("[cache]\ntargeted_field = \"\"", "cache.targeted_field", "invalid"),
    ("[cache]\nstrip_request_fields = [\"X Original\"]", "cache.strip_request_fields", "invalid"),
    ("[cache]\nstrip_request_fields = \"x-original-url\"", "cache.strip_request_fields", "parse"),
    ("[cache]\ntargeted_field = \"My Cache\"", "cache.targeted_field", "invalid"),
    ("[cache]\ntargeted_field = \"Cache-Control\"", "cache.targeted_field", "invalid"),
    ("[cache]\ntargeted_field = \"cdn-cache-control\"", "cache.targeted_field", "invalid"),
    (
        "[cache]\nverify_whole_below = \"17MiB\"",
        "cache.verify_whole_below",
        "invalid",
    ),
    (
        "[cache]\nverify_whole_below = \"small\"",
        "cache.verify_whole_below",
        "invalid",
    ),
    (
        "[cache]\nmemory_max_object_size = \"17MiB\"",
        "cache.memory_max_object_size",
        "invalid",
    ),
    ("[cache]\nmemory_size = \"lots\"", "cache.memory_size", "invalid"),
    ("[cache]\ncollapse_timeout = \"soon\"", "cache.collapse_timeout", "invalid"),
    ("[cache]\nmax_orphan_fills = 4097", "cache.max_orphan_fills", "invalid"),
    ("[cache]\nmax_orphan_fills = -1", "cache.max_orphan_fills", "parse"),
    ("[cache]\nopen_files = 1000001", "cache.open_files", "invalid"),
    ("[cache]\nopen_files = -1", "cache.open_files", "parse"),
    // [admission]
    (
        "[admission]\npolicy = \"bogus\"",
        "admission.policy",
        "parse",
    ),
    (
        "[admission]\nexpected_urls = 0",
        "admission.expected_urls",
        "invalid",
    ),
    (
        "[admission]\nexpected_urls = 10\nmemory = \"4MiB\"",
        "admission.expected_urls",
        "invalid",
    ),
    (
        "[admission]\nmemory = \"0KiB\"",
        "admission.memory",
        "invalid",
    ),
    (
        "[admission]\nmemory = \"lots\"",
        "admission.memory",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = 0",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = 0.0",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = 1",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = 1.5",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = -0.1",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = nan",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nfalse_positive_rate = inf",
        "admission.false_positive_rate",
        "invalid",
    ),
    (
        "[admission]\nmax_age = \"0s\"",
        "admission.max_age",
        "invalid",
    ),
    (
        "[admission]\nmax_age = \"an hour\"",
        "admission.max_age",
        "invalid",
    ),
    (
        "[admission]\nrotate = \"daily\"",
        "admission.rotate",
        "parse",
    ),
    (
        "[admission]\nmax_age = \"10m\"\nmin_generation_age = \"11m\"",
        "admission.min_generation_age",
        "invalid",
    ),
    (
        "[admission]\nmin_generation_age = \"soon\"",
        "admission.min_generation_age",
        "invalid",
    ),
    (
        "[admission]\nsnapshot_every = \"0s\"",
        "admission.snapshot_every",
        "invalid",
    ),
    (
        "[admission]\nsnapshot_every = \"often\"",
        "admission.snapshot_every",
        "invalid",
    ),
    (
        "[admission]\nmax_write_rate = 0",
        "admission.max_write_rate",
        "invalid",
    ),
    (
        "[admission]\nmax_write_rate = \"fast\"",
        "admission.max_write_rate",
        "invalid",
    ),
    (
        "[admission]\nmax_write_rate = { drive_writes_per_day = -1, device_size = \"1TiB\" }",
        "admission.max_write_rate",
        "invalid",
    ),
    (
        "[admission]\nsnapshot_every = 60",
        "admission.snapshot_every",
        "parse",
    ),
    // [log]
    ("[log]\nlevel = \"loud\"", "log.level", "invalid"),
    ("[log]\nlevel = \"info,hyper=warn\"", "log.level", "invalid"),
    ("[log]\nformat = \"xml\"", "log.format", "parse"),
    (
        "[log]\naccess_log = \"logs/access.log\"",
        "log.access_log",
        "invalid",
    ),
    ("[log]\naccess_log = \"\"", "log.access_log", "invalid"),
    (
        "[log]\naccess_format = \"common\"",
        "log.access_format",
        "invalid",
    ),
];

#[test]
fn every_invalid_case_is_rejected_naming_its_key() {
    for &(text, key, expected_kind) in REJECTED {
        let e = err(text);
        let shown = e.to_string();
        assert!(
            shown.contains(key),
            "{text:?}: {shown:?} does not name {key}"
        );
        assert_eq!(kind(&e), expected_kind, "{text:?}: {shown}");
    }
}
