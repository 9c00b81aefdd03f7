//! The origin client: one pooled `reqwest` client for the one origin in the config.
//!
//! Set up for a proxy rather than a browser (`docs/design.md`, "Known traps"):
//! redirects are passed to the client, never followed; proxy environment variables
//! are ignored; time limits are a connect timeout and a read timeout *between* bytes,
//! never a whole-response timeout, which would cut large downloads.
//!
//! Hop-by-hop headers (RFC 9110 §7.6.1) are removed in both directions here, so the
//! proxy only ever sees end-to-end fields.

use std::sync::Arc;

use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Version, response};
use tokio::sync::Semaphore;

use crate::config::{HostHeader, OriginConfig};

/// Failure to get a response head from the origin; `error::error_response` maps it to 502/504.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// The origin could not be reached (refused, reset before a response, DNS).
    #[error("origin unreachable: {0}")]
    Connect(#[source] reqwest::Error),
    /// The origin did not answer within the connect or read timeout.
    #[error("origin timed out: {0}")]
    Timeout(#[source] reqwest::Error),
    /// Any other failure talking to the origin (e.g. a malformed response).
    #[error("origin request failed: {0}")]
    Protocol(#[source] reqwest::Error),
    /// The reqwest client could not be built from the config.
    #[error("cannot build the origin client: {0}")]
    Client(#[source] reqwest::Error),
}

impl OriginError {
    fn classify(error: reqwest::Error) -> OriginError {
        if error.is_timeout() {
            OriginError::Timeout(error)
        } else if error.is_connect() {
            OriginError::Connect(error)
        } else {
            OriginError::Protocol(error)
        }
    }
}

/// How the origin delimits a response body (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// `Content-Length`: a short body is detected as an error.
    Length(u64),
    /// Chunked or HTTP/2 framing: the end is explicit.
    Delimited,
    /// Ends when the connection closes, so a cut connection looks complete.
    UntilClose,
}

/// Reads the framing of a response head received from the origin.
fn body_framing(head: &response::Parts) -> BodyFraming {
    // 204 and 304 never have a body, whatever the fields say (RFC 9112 §6.3, rule 1).
    if head.status == http::StatusCode::NO_CONTENT || head.status == http::StatusCode::NOT_MODIFIED
    {
        return BodyFraming::Length(0);
    }
    if let Some(length) = head
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok())
    {
        return BodyFraming::Length(length);
    }
    let chunked = head
        .headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.to_ascii_lowercase().contains("chunked"));
    if chunked || head.version >= Version::HTTP_2 {
        BodyFraming::Delimited
    } else {
        BodyFraming::UntilClose
    }
}

/// Removes hop-by-hop fields (RFC 9110 §7.6.1): the fixed list and every field named in `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

/// A response head from the origin, its framing, and its still-streaming body.
pub struct OriginResponse {
    /// Status and end-to-end headers (hop-by-hop fields already removed).
    pub head: response::Parts,
    /// How the origin delimited the body, read before `Transfer-Encoding` was removed.
    pub framing: BodyFraming,
    /// The body, streamed frame by frame.
    pub body: reqwest::Body,
}

/// The pooled client for the configured origin.
pub struct Origin {
    client: reqwest::Client,
    /// `http://host:port` of the origin, without a trailing slash.
    base: String,
    /// The origin URL's authority, sent as `Host` when `host_header = "origin"`.
    origin_host: HeaderValue,
    host_header: HostHeader,
    /// Bounds requests waiting for a response head (`origin.max_in_flight`); the permit is
    /// released when the head arrives, so slow bodies do not hold it.
    in_flight: Arc<Semaphore>,
}

impl Origin {
    /// Builds the client from the validated config.
    pub fn new(config: &OriginConfig) -> Result<Origin, OriginError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .tcp_nodelay(true)
            .build()
            .map_err(OriginError::Client)?;
        // Config validation guarantees an http URI with an authority.
        let authority = config
            .url
            .authority()
            .map(|a| a.as_str())
            .unwrap_or("127.0.0.1");
        let origin_host = HeaderValue::from_str(authority)
            .unwrap_or_else(|_| HeaderValue::from_static("localhost"));
        Ok(Origin {
            client,
            base: format!("http://{authority}"),
            origin_host,
            host_header: config.host_header,
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
        })
    }

    /// Sends a request and returns the response head with its streaming body.
    ///
    /// `headers` are the client's end-to-end headers (hop-by-hop fields are removed here);
    /// `client_host` is what the client named as host, sent on when `host_header = "client"`.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        mut headers: HeaderMap,
        client_host: HeaderValue,
        body: reqwest::Body,
    ) -> Result<OriginResponse, OriginError> {
        strip_hop_by_hop(&mut headers);
        let host = match self.host_header {
            HostHeader::Client => client_host,
            HostHeader::Origin => self.origin_host.clone(),
        };
        headers.insert(HOST, host);
        let request = self
            .client
            .request(method, format!("{}{}", self.base, path_and_query))
            .headers(headers)
            .body(body)
            .build()
            .map_err(OriginError::Protocol)?;
        // The semaphore is never closed, so acquire only fails if that invariant breaks.
        let permit = self.in_flight.acquire().await;
        let response = self
            .client
            .execute(request)
            .await
            .map_err(OriginError::classify);
        drop(permit);
        let (mut head, body) = http::Response::from(response?).into_parts();
        let framing = body_framing(&head);
        strip_hop_by_hop(&mut head.headers);
        // The protocol version is per connection: the client's connection has its own
        // (an HTTP/1.0 origin must not turn the client's HTTP/1.1 response into 1.0).
        head.version = Version::default();
        Ok(OriginResponse {
            head,
            body,
            framing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(version: Version, headers: &[(&str, &str)]) -> response::Parts {
        let mut builder = http::Response::builder().version(version);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("test response").into_parts().0
    }

    #[test]
    fn framing_is_read_from_the_head() {
        assert_eq!(
            body_framing(&head(Version::HTTP_11, &[("content-length", "12")])),
            BodyFraming::Length(12)
        );
        assert_eq!(
            body_framing(&head(Version::HTTP_11, &[("transfer-encoding", "chunked")])),
            BodyFraming::Delimited
        );
        assert_eq!(
            body_framing(&head(Version::HTTP_11, &[])),
            BodyFraming::UntilClose
        );
        assert_eq!(
            body_framing(&head(Version::HTTP_2, &[])),
            BodyFraming::Delimited
        );
        let mut no_content = head(Version::HTTP_11, &[]);
        no_content.status = http::StatusCode::NO_CONTENT;
        assert_eq!(body_framing(&no_content), BodyFraming::Length(0));
    }

    #[test]
    fn hop_by_hop_fields_and_connection_named_fields_are_removed() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "close, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("cache-control", "max-age=1"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(|name| name.as_str()).collect();
        assert_eq!(left, ["cache-control"]);
    }
}
