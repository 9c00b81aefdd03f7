//! The TLS keys on both sides: `[server.tls]` (the TLS listener and its certificates) and
//! the `origin.url` scheme with `origin.ca_file` and `origin.danger_accept_invalid_certs`.
//!
//! Only the values are checked here; the files are read where they are used
//! (`server::tls`, `origin`), at start, on reload and by `check-config`, so a file that
//! changes between a check and a start is judged as it is then.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use http::Uri;
use serde::Deserialize;

use super::super::{CertificateFiles, ConfigError, TlsConfig};
use super::values::invalid;

/// `[server.tls]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default, expecting = "a [server.tls] table")]
pub(super) struct RawTls {
    listen: Option<String>,
    certificates: Option<Vec<RawCertificate>>,
}

/// One entry of `server.tls.certificates` as written. Both fields are optional here only
/// so that a missing one is reported naming the key (toml's own error for a field missing
/// from an inline table in an array names none).
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table { chain = \"PEM file\", key = \"PEM file\" }"
)]
pub(super) struct RawCertificate {
    chain: Option<String>,
    key: Option<String>,
}

/// Validates `[server.tls]` beside the plain listener `listen` and the admin listener.
pub(super) fn server_tls(
    raw: RawTls,
    listen: SocketAddr,
    admin_listen: Option<SocketAddr>,
) -> Result<TlsConfig, ConfigError> {
    const LISTEN: &str = "server.tls.listen";
    let example = r#"(example: "0.0.0.0:8443")"#;
    let text = raw.listen.ok_or_else(|| {
        invalid(
            LISTEN,
            format!("is required when [server.tls] is present {example}"),
        )
    })?;
    let tls_listen: SocketAddr = text.parse().map_err(|_| {
        invalid(
            LISTEN,
            format!("{text:?} is not a socket address {example}"),
        )
    })?;
    // Port 0 asks the system for a free port, so two of them never clash (tests bind so).
    if tls_listen.port() != 0 && [Some(listen), admin_listen].contains(&Some(tls_listen)) {
        let reason =
            format!("{tls_listen} is also server.listen or server.admin_listen; give it its own");
        return Err(invalid(LISTEN, reason));
    }
    const CERTIFICATES: &str = "server.tls.certificates";
    let certificates = raw.certificates.unwrap_or_default();
    if certificates.is_empty() {
        let reason = r#"needs at least one { chain = "PEM file", key = "PEM file" }"#;
        return Err(invalid(CERTIFICATES, reason.to_owned()));
    }
    let certificates = certificates
        .into_iter()
        .enumerate()
        .map(|(index, raw)| {
            let path = |field: &str, text: Option<String>| {
                let text = text.ok_or_else(|| {
                    let reason = format!("entry {index}: {field} is required");
                    invalid(CERTIFICATES, reason)
                })?;
                absolute_file(&text).ok_or_else(|| {
                    let reason =
                        format!("entry {index}: {field} {text:?} must be an absolute file path");
                    invalid(CERTIFICATES, reason)
                })
            };
            Ok(CertificateFiles {
                chain: path("chain", raw.chain)?,
                key: path("key", raw.key)?,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Ok(TlsConfig {
        listen: tls_listen,
        certificates,
    })
}

/// `text` as an absolute path: a relative one would depend on the directory the service
/// happens to start in (as for `log.access_log`).
fn absolute_file(text: &str) -> Option<PathBuf> {
    Path::new(text).is_absolute().then(|| PathBuf::from(text))
}

/// `origin.ca_file` and `origin.danger_accept_invalid_certs` for the origin at `url`.
pub(super) fn origin_tls(
    url: &Uri,
    ca_file: Option<String>,
    danger_accept_invalid_certs: bool,
) -> Result<Option<PathBuf>, ConfigError> {
    const CA_FILE: &str = "origin.ca_file";
    const DANGER: &str = "origin.danger_accept_invalid_certs";
    let https = url.scheme_str() == Some("https");
    if !https && (ca_file.is_some() || danger_accept_invalid_certs) {
        let key = if ca_file.is_some() { CA_FILE } else { DANGER };
        let reason = format!("is set, but origin.url {url} is not https://");
        return Err(invalid(key, reason));
    }
    if ca_file.is_some() && danger_accept_invalid_certs {
        let reason = "verifies nothing, so origin.ca_file would be ignored; set only one";
        return Err(invalid(DANGER, reason.to_owned()));
    }
    ca_file
        .map(|text| {
            absolute_file(&text)
                .ok_or_else(|| invalid(CA_FILE, format!("{text:?} must be an absolute file path")))
        })
        .transpose()
}

/// `origin.url` must be `http://` or `https://host[:port]` with at most a "/" path,
/// because the request path is appended to it unchanged.
pub(super) fn origin_url(text: &str) -> Result<Uri, ConfigError> {
    const KEY: &str = "origin.url";
    let bad = |rule: &str| invalid(KEY, format!("{text:?} {rule}"));
    let uri: Uri = text
        .parse()
        .map_err(|e| bad(&format!("is not a URI ({e})")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(bad(&format!(
                "has scheme {other:?}; only http:// and https:// are supported"
            )));
        }
        None => {
            return Err(bad(
                r#"is not an absolute http:// or https:// URL (example: "http://127.0.0.1:8081")"#,
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if !matches!(uri.path(), "" | "/") {
        return Err(bad("has a path; give only scheme, host and port"));
    }
    if uri.query().is_some() {
        return Err(bad("has a query; give only scheme, host and port"));
    }
    Ok(uri)
}
