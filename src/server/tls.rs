//! The TLS listener's side of a connection: its certificates, chosen by SNI and swapped by
//! a reload, and the acceptor that runs the handshake (rustls with the ring provider).
//!
//! - **Certificates** (`server.tls.certificates`): each is a chain and a key, two PEM
//!   files, read and checked at start ([`Certificates::load`]): the chain must hold an
//!   X.509 certificate first, the key must parse (PKCS#8, PKCS#1 or SEC1) and match that
//!   certificate. A file that fails stops the start, naming the key and the file;
//!   `check-config` runs the same checks ([`check`]).
//! - **SNI**: a client's server name is matched against each certificate in order, by the
//!   rules a client checks a certificate with (its DNS names, `*.example.com` wildcards
//!   included, through `webpki`); the first that is valid for the name is served. A
//!   client that sends no name, or one no certificate matches, gets the first certificate.
//! - **Reload** ([`Certificates::prepare`], then [`Certificates::swap`]): every reload reads
//!   the files again, so renewed certificates written over the old files are picked up
//!   without a restart. Handshakes from then on get the new set; open connections keep
//!   going on the session they negotiated. A certificate whose files no longer load keeps
//!   its running version (same chain and key paths), with an error naming the file; a new
//!   entry that does not load is left out, with the same error.
//! - **ALPN**: `h2` and `http/1.1`, in that order; a client that offers neither (or no
//!   ALPN at all) still connects, and hyper-util's protocol detection reads the HTTP/2
//!   preface either way.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::StartError;
use crate::config::{CertificateFiles, TlsConfig};
use crate::key::ClientScheme;

/// A certificate or key file of `server.tls.certificates` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("server.tls.certificates[{index}].{field}: {path}: {reason}")]
pub struct CertificateError {
    /// The entry's position in `server.tls.certificates`.
    index: usize,
    /// `chain` or `key`.
    field: &'static str,
    /// The file.
    path: String,
    /// What is wrong with it.
    reason: String,
}

impl CertificateError {
    fn new(index: usize, field: &'static str, path: &Path, reason: String) -> CertificateError {
        CertificateError {
            index,
            field,
            path: path.display().to_string(),
            reason,
        }
    }
}

/// One loaded certificate and the files it came from.
#[derive(Debug)]
struct Loaded {
    files: CertificateFiles,
    key: Arc<CertifiedKey>,
}

/// The certificates the TLS listener serves, chosen per handshake by SNI (see the module
/// docs); a reload swaps them whole.
#[derive(Debug)]
pub struct Certificates {
    /// In `server.tls.certificates` order; never empty. arc-swap: a handshake loads the
    /// set without a lock, and a swap never waits for handshakes.
    current: ArcSwap<Vec<Loaded>>,
}

/// A set of certificates read for a reload, not yet in use ([`Certificates::swap`]).
pub struct Prepared(Vec<Loaded>);

impl Certificates {
    /// Reads every certificate of `tls`; the first that fails is the error.
    pub fn load(tls: &TlsConfig) -> Result<Arc<Certificates>, CertificateError> {
        let provider = crate::crypto::tls_provider();
        let loaded = tls
            .certificates
            .iter()
            .enumerate()
            .map(|(index, files)| {
                let key = load_certificate(&provider, index, files)?;
                let files = files.clone();
                Ok(Loaded { files, key })
            })
            .collect::<Result<Vec<_>, CertificateError>>()?;
        Ok(Arc::new(Certificates {
            current: ArcSwap::from_pointee(loaded),
        }))
    }

    /// Reads `files` again for a reload. An entry that fails to load is logged at error,
    /// naming its file, and keeps its running version if there is one (same paths), else
    /// is left out; `None` when nothing would be left.
    pub fn prepare(&self, files: &[CertificateFiles]) -> Option<Prepared> {
        let provider = crate::crypto::tls_provider();
        let running = self.current.load();
        let mut next = Vec::with_capacity(files.len());
        for (index, files) in files.iter().enumerate() {
            match load_certificate(&provider, index, files) {
                Ok(key) => next.push(Loaded {
                    files: files.clone(),
                    key,
                }),
                Err(error) => {
                    let old = running.iter().find(|loaded| &loaded.files == files);
                    tracing::error!(
                        %error,
                        kept = old.is_some(),
                        "TLS certificate not reloaded; the running one is kept if there is one"
                    );
                    if let Some(old) = old {
                        let key = old.key.clone();
                        next.push(Loaded {
                            files: files.clone(),
                            key,
                        });
                    }
                }
            }
        }
        if next.is_empty() {
            tracing::error!("no TLS certificate could be loaded; the running set is kept");
            return None;
        }
        Some(Prepared(next))
    }

    /// Serves `prepared` to every handshake from now on.
    pub fn swap(&self, prepared: Prepared) {
        let count = prepared.0.len();
        self.current.store(Arc::new(prepared.0));
        tracing::info!(certificates = count, "TLS certificates reloaded");
    }

    /// The certificate for a client that asked for `name` (see the module docs).
    fn choose(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let loaded = self.current.load();
        let wanted = name.and_then(|name| ServerName::try_from(name).ok());
        let matching = wanted.and_then(|wanted| {
            loaded
                .iter()
                .find(|candidate| serves(&candidate.key, &wanted))
        });
        matching.or(loaded.first()).map(|chosen| chosen.key.clone())
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.choose(hello.server_name())
    }
}

/// Whether `key`'s certificate is valid for `name`, as a client would check it. The
/// certificate is parsed per handshake: parsing is microseconds beside the handshake's
/// signature, and holding a parsed certificate would borrow from the `CertifiedKey`.
fn serves(key: &CertifiedKey, name: &ServerName<'_>) -> bool {
    key.end_entity_cert()
        .ok()
        .and_then(|der| webpki::EndEntityCert::try_from(der).ok())
        .is_some_and(|cert| cert.verify_is_valid_for_subject_name(name).is_ok())
}

/// Reads and checks one certificate entry (see the module docs).
fn load_certificate(
    provider: &CryptoProvider,
    index: usize,
    files: &CertificateFiles,
) -> Result<Arc<CertifiedKey>, CertificateError> {
    let chain_error = |reason: String| CertificateError::new(index, "chain", &files.chain, reason);
    let key_error = |reason: String| CertificateError::new(index, "key", &files.key, reason);
    let chain = CertificateDer::pem_file_iter(&files.chain)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|e| chain_error(e.to_string()))?;
    let first = chain
        .first()
        .ok_or_else(|| chain_error("holds no PEM CERTIFICATE block".to_owned()))?;
    webpki::EndEntityCert::try_from(first)
        .map_err(|e| chain_error(format!("its first certificate does not parse: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| key_error(e.to_string()))?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| key_error(format!("not a usable private key: {e}")))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| key_error(format!("does not belong to the chain's certificate: {e}")))?;
    Ok(Arc::new(certified))
}

/// Reads every certificate of `tls` as a start would, for `check-config`.
pub fn check(tls: &TlsConfig) -> Result<(), CertificateError> {
    Certificates::load(tls).map(drop)
}

/// The handshake side of the TLS listener, serving `certificates`.
pub(super) fn acceptor(certificates: Arc<Certificates>) -> Result<TlsAcceptor, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(crate::crypto::tls_provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(certificates);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The TLS listener, its handshake and the certificates a reload swaps.
pub(super) struct TlsListener {
    pub(super) listener: TcpListener,
    pub(super) acceptor: TlsAcceptor,
    pub(super) certificates: Arc<Certificates>,
}

impl TlsListener {
    /// Reads the certificates and serves them on `listener`, bound to `server.tls.listen`
    /// (or passed by systemd) by [`super::Listeners::open`].
    pub(super) fn start(
        config: &crate::config::TlsConfig,
        listener: std::net::TcpListener,
    ) -> Result<TlsListener, StartError> {
        let certificates = Certificates::load(config)?;
        let acceptor = acceptor(certificates.clone()).map_err(StartError::TlsSetup)?;
        let addr = config.listen;
        let listener = TcpListener::from_std(listener)
            .map_err(|source| StartError::TlsBind { addr, source })?;
        Ok(TlsListener {
            listener,
            acceptor,
            certificates,
        })
    }
}

/// The next client of either listener, with the scheme of the one it came in on.
pub(super) async fn accept_either(
    plain: &TcpListener,
    tls: Option<&TcpListener>,
) -> (std::io::Result<(TcpStream, SocketAddr)>, ClientScheme) {
    match tls {
        None => (plain.accept().await, ClientScheme::Http),
        Some(tls) => tokio::select! {
            accepted = plain.accept() => (accepted, ClientScheme::Http),
            accepted = tls.accept() => (accepted, ClientScheme::Https),
        },
    }
}
