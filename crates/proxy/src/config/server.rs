//! `[server]`: the client-facing listeners (plain and TLS), their limits and timeouts,
//! with their defaults and the bounds validation holds them to.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::UnknownHost;

/// `[server]`: the client-facing listener.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerConfig {
    /// Address to accept clients on.
    pub listen: SocketAddr,
    /// Address of the admin listener (metrics, health, stats, purge, rotate); `None`: no
    /// admin listener (`"off"`). Never equal to `listen`.
    pub admin_listen: Option<SocketAddr>,
    /// Bearer token the admin listener requires (`Authorization: Bearer <token>`); `None`
    /// (absent or empty in the file): no token.
    pub admin_token: Option<String>,
    /// Without a token, the host names the admin listener answers to besides IP literals
    /// and `localhost`: lowercase, without a trailing dot. A request naming another `Host`
    /// is refused, so that a web page whose name was rebound to the listener's address
    /// cannot use it.
    pub admin_hosts: Vec<String>,
    /// Open client connections allowed at once (> 0).
    pub max_connections: usize,
    /// Time allowed for a client to send the request head (> 0).
    pub header_read_timeout: Duration,
    /// A connection with no request for this long is closed, HTTP/2 with GOAWAY (> 0).
    pub idle_timeout: Duration,
    /// A connection whose client takes no response bytes for this long while a response
    /// waits for it (a full socket, or a shut HTTP/2 flow-control window) is closed (> 0).
    pub send_timeout: Duration,
    /// Most streams an HTTP/2 client may have open at once on one connection (> 0).
    pub max_concurrent_streams: u32,
    /// Most header fields in an HTTP/1 request head; more get 431 (1..=[`MAX_MAX_HEADERS`]).
    pub max_headers: usize,
    /// Most bytes of a request head, request line included; a larger head gets 431
    /// ([`MIN_MAX_HEADER_BYTES`]..=[`MAX_MAX_HEADER_BYTES`]).
    pub max_header_bytes: usize,
    /// Grace period for in-flight requests on shutdown (zero allowed).
    pub shutdown_timeout: Duration,
    /// Threads that run requests (1..=[`MAX_WORKERS`]); `None`: one per CPU the process
    /// may run on.
    pub workers: Option<usize>,
    /// How the workers share the requests (`server.runtime`).
    pub runtime: Runtime,
    /// Most threads doing blocking file work at once (fills, reads that must wait for
    /// the disk, metadata updates, snapshots): 1..=[`MAX_BLOCKING_THREADS`].
    pub blocking_threads: usize,
    /// What a host no `[[site]]` names gets, when there are sites. 421 by default: an
    /// operator who lists sites has said which hosts this server serves, and RFC 9110
    /// §15.5.20 has a status for the others; forwarding them to `[origin]` would cache
    /// whatever Host a client makes up.
    pub unknown_host: UnknownHost,
    /// The user to run as once the listeners are bound (by name); `None`: stay who started
    /// the process. Started as root with a user set, the process binds (privileged ports
    /// included) as root and then never holds root again.
    pub user: Option<String>,
    /// The group to run as with `user` (by name); `None`: the user's primary group.
    pub group: Option<String>,
    /// A file `serve` writes its process id to once its signal handlers are installed and
    /// removes at a clean exit (an absolute path); `None`: none. Where no service manager
    /// knows the process, logrotate finds whom to send SIGUSR1 here.
    pub pid_file: Option<PathBuf>,
    /// `[server.tls]`: a TLS listener beside `listen`; `None`: none.
    pub tls: Option<TlsConfig>,
}

/// `[server.tls]`: the TLS listener and the certificates it serves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TlsConfig {
    /// Address to accept TLS clients on (never `server.listen` or `server.admin_listen`).
    pub listen: SocketAddr,
    /// The certificates, at least one: a client's SNI name picks the first whose names
    /// match it; the first is served to clients that send no name or one none matches.
    pub certificates: Vec<CertificateFiles>,
}

/// One certificate of `server.tls.certificates`: two PEM files, absolute paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificateFiles {
    /// The certificate chain, the server's own certificate first.
    pub chain: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9090))),
            admin_token: None,
            admin_hosts: Vec::new(),
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            max_concurrent_streams: 128,
            max_headers: 100,
            max_header_bytes: 64 * 1024,
            shutdown_timeout: Duration::from_secs(30),
            workers: None,
            runtime: Runtime::ThreadPerCore,
            blocking_threads: 32,
            user: None,
            group: None,
            pid_file: None,
            tls: None,
            unknown_host: UnknownHost::Misdirected,
        }
    }
}

/// Upper limit of `server.workers`.
pub const MAX_WORKERS: usize = 1024;

/// Upper limit of `server.blocking_threads`, tokio's own default (which is meant for
/// short bursts, not a steady bound).
pub const MAX_BLOCKING_THREADS: usize = 512;

/// Upper limit of `server.max_headers`: hyper allocates room for that many fields per request.
pub const MAX_MAX_HEADERS: usize = 10_000;

/// Lower limit of `server.max_header_bytes`: hyper's smallest read buffer (it panics below).
pub const MIN_MAX_HEADER_BYTES: usize = 8 * 1024;

/// Upper limit of `server.max_header_bytes`: every connection may buffer this much for a head.
pub const MAX_MAX_HEADER_BYTES: usize = 1024 * 1024;

/// `server.runtime`: how the workers share the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// `"thread-per-core"`: each worker a single-threaded runtime with sockets of its own,
    /// serving what it accepts to the end, with no hand-off between threads.
    ThreadPerCore,
    /// `"work-stealing"`: one tokio multi-threaded runtime whose workers take each
    /// other's tasks, with one listening socket.
    WorkStealing,
}
