//! TLS for the tests: a test CA made in the test with rcgen, certificates it issues
//! written as PEM files, and a client that speaks TLS (tokio-rustls) and then HTTP/1.1 or
//! HTTP/2 (hyper) to a given address with a given SNI name.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use secondhit_proxy::config::CertificateFiles;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{PATIENCE, ParsedCacheStatus};

/// A certificate authority made for one test.
pub(crate) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate the test CA issued, as DER (to compare with what a server sent) and as
/// the two PEM files a config names.
pub(crate) struct IssuedCertificate {
    pub der: CertificateDer<'static>,
    pub files: CertificateFiles,
}

impl TestCa {
    /// A new CA with a fresh key.
    pub(crate) fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "secondhit test CA");
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA certificate, PEM.
    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Writes the CA certificate to `dir/<name>` and returns the path.
    pub(crate) fn write_pem(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.pem()).expect("write CA file");
        path
    }

    /// Issues a certificate for `names` (DNS names, wildcards allowed) and writes its chain
    /// and key to `dir/<stem>.pem` and `dir/<stem>.key`.
    pub(crate) fn issue(&self, dir: &Path, stem: &str, names: &[&str]) -> IssuedCertificate {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate params");
        params.distinguished_name.push(DnType::CommonName, stem);
        let key = KeyPair::generate().expect("certificate key");
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("sign certificate");
        let files = CertificateFiles {
            chain: dir.join(format!("{stem}.pem")),
            key: dir.join(format!("{stem}.key")),
        };
        std::fs::write(&files.chain, certificate.pem()).expect("write chain");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
        IssuedCertificate {
            der: certificate.der().clone(),
            files,
        }
    }

    /// A TLS client that trusts this CA only and offers `alpn` (e.g. `[b"h2"]`).
    pub(crate) fn client(&self, alpn: &[&[u8]]) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.issuer.der().clone()).expect("trust the CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

/// What a request over TLS saw: the handshake's outcome and the response.
pub(crate) struct TlsSeen {
    /// The certificate the server sent first (its own).
    pub certificate: CertificateDer<'static>,
    /// The protocol ALPN settled on, if any.
    pub alpn: Option<Vec<u8>>,
    pub version: Version,
    pub status: u16,
    pub body: Vec<u8>,
    pub cache: ParsedCacheStatus,
}

/// GET `path` from `addr` over TLS with `connector`, naming `sni` in the handshake and as
/// the host; HTTP/2 when ALPN picked `h2`, else HTTP/1.1. The certificate must verify.
pub(crate) async fn tls_get(
    connector: &TlsConnector,
    addr: SocketAddr,
    sni: &str,
    path: &str,
) -> TlsSeen {
    tokio::time::timeout(PATIENCE, tls_get_now(connector, addr, sni, path))
        .await
        .expect("the TLS request took longer than PATIENCE")
}

async fn tls_get_now(connector: &TlsConnector, addr: SocketAddr, sni: &str, path: &str) -> TlsSeen {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).expect("server name");
    let stream = connector.connect(name, tcp).await.expect("TLS handshake");
    let (_, session) = stream.get_ref();
    let certificate = session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .expect("a server certificate")
        .clone()
        .into_owned();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    let io = TokioIo::new(stream);
    let empty = Empty::<Bytes>::new();
    let response = if alpn.as_deref() == Some(b"h2") {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("h2 handshake");
        tokio::spawn(connection);
        let request = Request::get(format!("https://{sni}{path}"))
            .version(Version::HTTP_2)
            .body(empty)
            .expect("request");
        sender.send_request(request).await.expect("h2 response")
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .expect("HTTP/1.1 handshake");
        tokio::spawn(connection);
        let request = Request::get(path)
            .header("host", sni)
            .body(empty)
            .expect("request");
        sender
            .send_request(request)
            .await
            .expect("HTTP/1.1 response")
    };
    let (head, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .expect("whole body")
        .to_bytes()
        .to_vec();
    TlsSeen {
        certificate,
        alpn,
        version: head.version,
        status: head.status.as_u16(),
        cache: ParsedCacheStatus::from_headers(&head.headers),
        body,
    }
}

/// A TLS server side serving `certificate` (for an `https://` test origin), offering
/// HTTP/1.1 only as the origin client does.
pub(crate) fn server_acceptor(certificate: &IssuedCertificate) -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let key = PrivateKeyDer::from_pem_file(&certificate.files.key).expect("read key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![certificate.der.clone()], key)
        .expect("server certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}
