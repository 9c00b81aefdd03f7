//! The TLS listener's side of a connection: its certificates, chosen by SNI from the live
//! snapshot, and the acceptor that runs the handshake (rustls with the ring provider).
//!
//! - **Certificates** (`server.tls.certificates`): each is a chain and a key, two PEM
//!   files, read and checked at start ([`load`]): the chain must hold an
//!   X.509 certificate first, the key must parse (PKCS#8, PKCS#1 or SEC1) and match that
//!   certificate. A file that fails stops the start, naming the key and the file;
//!   `check-config` runs the same checks ([`check`]).
//! - **SNI**: a client's server name is matched against each certificate in order, by the
//!   rules a client checks a certificate with (its DNS names, `*.example.com` wildcards
//!   included, through `webpki`); the first that is valid for the name is served. A
//!   client that sends no name, or one no certificate matches, gets the first certificate.
//! - **Reload**: the certificates are part of the live snapshot (`live::Snapshot`), which
//!   each handshake loads. Every reload reads the files again ([`load`]), so renewed
//!   certificates written over the old files are picked up without a restart, and swaps
//!   them in with the rest of the config: handshakes from then on get the new set; open
//!   connections keep going on the session they negotiated. A file that no longer loads
//!   rejects the whole reload, with an error naming its key and the file: the running
//!   certificates and config are kept.
//! - **ALPN**: `h2`, `http/1.1` and `http/1.0`, in that order; a client that offers no
//!   ALPN at all still connects, and hyper-util's protocol detection reads the HTTP/2
//!   preface either way. A client that offers only other protocols is refused in the
//!   handshake (`no_application_protocol`, RFC 7301 §3.2), as rustls does.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

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
use crate::live::{Certificate, Live};

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

/// Reads every certificate of `tls`, in order; the first that fails is the error.
pub fn load(tls: &TlsConfig) -> Result<Arc<[Certificate]>, CertificateError> {
    let provider = crate::crypto::tls_provider();
    tls.certificates
        .iter()
        .enumerate()
        .map(|(index, files)| {
            let key = load_certificate(&provider, index, files)?;
            let files = files.clone();
            Ok(Certificate { files, key })
        })
        .collect()
}

/// Chooses each handshake's certificate from the live snapshot's (see the module docs).
struct Resolver {
    live: Live,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        choose(&self.live.load().certificates, hello.server_name())
    }
}

/// The certificate for a client that asked for `name`: the first valid for it, else the
/// first one.
fn choose(certificates: &[Certificate], name: Option<&str>) -> Option<Arc<CertifiedKey>> {
    let wanted = name.and_then(|name| ServerName::try_from(name).ok());
    let matching = wanted.and_then(|wanted| {
        certificates
            .iter()
            .find(|candidate| serves(&candidate.key, &wanted))
    });
    matching
        .or(certificates.first())
        .map(|chosen| chosen.key.clone())
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
    load(tls).map(drop)
}

/// The handshake side of the TLS listener, serving the certificates of `live`'s snapshot.
pub(super) fn acceptor(live: Live) -> Result<TlsAcceptor, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(crate::crypto::tls_provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Resolver { live }));
    config.alpn_protocols = ALPN.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The protocols ALPN offers, preferred first: HTTP/1.0 is served by the HTTP/1 side, and
/// a client naming it would otherwise be refused with no protocol in common.
const ALPN: [&[u8]; 3] = [b"h2", b"http/1.1", b"http/1.0"];

/// The TLS listener and its handshake.
pub(super) struct TlsListener {
    pub(super) listener: TcpListener,
    pub(super) acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Serves the certificates of `live`'s snapshot (read by [`load`]) on `listener`,
    /// bound to `server.tls.listen` (or passed by systemd) by [`super::Listeners::open`].
    pub(super) fn start(
        config: &crate::config::TlsConfig,
        listener: std::net::TcpListener,
        live: &Live,
    ) -> Result<TlsListener, StartError> {
        let acceptor = acceptor(live.clone()).map_err(StartError::TlsSetup)?;
        let addr = config.listen;
        let listener = TcpListener::from_std(listener)
            .map_err(|source| StartError::TlsBind { addr, source })?;
        Ok(TlsListener { listener, acceptor })
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
