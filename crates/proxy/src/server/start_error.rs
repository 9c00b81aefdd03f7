//! Why `secondhit serve` could not start: each part's own error, and the sockets.

use std::net::SocketAddr;

use crate::access_log::AccessLogError;
use crate::admission::AdmissionError;
use crate::config::ConfigError;
use crate::origin::OriginError;
use crate::preflight::PreflightError;
use crate::store::StoreError;

/// A failure that stops `secondhit serve` from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config file is missing or invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The cache directory cannot be opened.
    #[error("cache: {0}")]
    Store(#[from] StoreError),
    /// The admission filter cannot be set up (its seed file, usually).
    #[error("admission: {0}")]
    Admission(#[from] AdmissionError),
    /// The origin client cannot be built.
    #[error("{0}")]
    Origin(#[from] OriginError),
    /// The access log file cannot be opened (or its writer started).
    #[error("{0}")]
    AccessLog(#[from] AccessLogError),
    /// The listen address cannot be bound.
    #[error("server.listen: cannot listen on {addr}: {source}")]
    Bind {
        /// The address from `server.listen`.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// A TLS certificate or key file cannot be used (names the key and the file).
    #[error("{0}")]
    Certificate(#[from] super::tls::CertificateError),
    /// rustls refused the TLS listener's settings.
    #[error("server.tls: cannot set up TLS: {0}")]
    TlsSetup(#[source] rustls::Error),
    /// The TLS listen address cannot be bound.
    #[error("server.tls.listen: cannot listen on {addr}: {source}")]
    TlsBind {
        /// The address from `server.tls.listen`.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The admin listener's address cannot be bound.
    #[error("server.admin_listen: cannot listen on {addr}: {source}")]
    AdminBind {
        /// The address from `server.admin_listen`.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// A worker's runtime cannot be built, or its sockets not registered with it.
    #[error("server.workers: cannot set up worker {index}: {source}")]
    Worker {
        /// Which worker (the first is 0).
        index: usize,
        /// Why.
        source: std::io::Error,
    },
    /// The sockets passed by systemd (`LISTEN_FDS`) cannot be used.
    #[error("socket activation: {0}")]
    Inherited(String),
    /// Something on this machine that the config relies on is missing or unusable (a
    /// user, the cache directory, memory for the filters): see [`crate::preflight`].
    #[error("{0}")]
    Preflight(#[from] PreflightError),
}
