//! TLS to an `https://` origin: what the origin's certificate is verified against.
//!
//! - By default, the system's trust store (`rustls-native-certs`: the same CA bundle curl
//!   and the OS's own tools use, so a private CA the operator installed there is trusted
//!   too, and the bundle is updated with the system rather than with a rebuild).
//! - With `origin.ca_file`, only the CA certificates in that PEM file (an origin with a
//!   private CA, or a pinned one), as curl's `--cacert`.
//! - With `origin.danger_accept_invalid_certs = true`, nothing: any certificate is taken,
//!   only the handshake's signatures are checked. For tests against self-signed origins;
//!   `Origin::new` logs it at warn whenever it builds such a client.
//!
//! The name checked, and sent as SNI, is the host of `origin.url` (of each server's URL
//! in a pool, `origin.servers`), whatever `Host` the origin gets (`origin.host_header`). The client offers HTTP/1.1 only (ALPN
//! `http/1.1`), as it speaks to http:// origins: the proxy's `Via` and framing rules
//! assume an HTTP/1.1 origin.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::OriginError;
use crate::config::OriginConfig;

/// The rustls client settings for the origin of `config` (its `ca_file` read now).
pub fn client_config(config: &OriginConfig) -> Result<ClientConfig, OriginError> {
    let provider = crate::crypto::tls_provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| OriginError::Client(format!("origin TLS: {e}")))?;
    let https = config.url.scheme_str() == Some("https");
    let config = if config.danger_accept_invalid_certs {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else if let Some(path) = &config.ca_file {
        builder
            .with_root_certificates(ca_file_roots(path)?)
            .with_no_client_auth()
    } else if https {
        builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth()
    } else {
        // An http:// origin never makes a handshake: no trust store to read.
        builder
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth()
    };
    Ok(config)
}

/// The CA certificates of `origin.ca_file`.
fn ca_file_roots(path: &std::path::Path) -> Result<RootCertStore, OriginError> {
    let failed = |reason: String| {
        OriginError::Client(format!("origin.ca_file: {}: {reason}", path.display()))
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|e| failed(e.to_string()))?;
    if certificates.is_empty() {
        return Err(failed("holds no PEM CERTIFICATE block".to_owned()));
    }
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate)
            .map_err(|e| failed(format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// The system's trust store; an error when it holds no usable certificate.
fn system_roots() -> Result<RootCertStore, OriginError> {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "origin TLS: part of the system's trust store could not be read");
    }
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        return Err(OriginError::Client(
            "origin.url is https://, but the system's trust store has no CA certificate; \
             install one (ca-certificates) or set origin.ca_file"
                .to_owned(),
        ));
    }
    Ok(roots)
}

/// `origin.danger_accept_invalid_certs`: takes any certificate for any name, and still
/// checks the handshake's signatures (so the session is at least with the holder of the
/// certificate's key).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
