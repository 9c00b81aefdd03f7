//! The proxy front every candidate shares: hyper's HTTP/1 server with keep-alive, a task
//! per client connection, and the header work of a proxy on both heads.

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use http::header::{CONNECTION, HOST, HeaderName, HeaderValue, VIA};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::origin::Client;

/// The hop-by-hop fields (RFC 9110 §7.6.1), which a proxy does not forward.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// What the proxy adds to `Via` on both heads.
const VIA_SELF: HeaderValue = HeaderValue::from_static("1.1 origin_clients");

/// What a client gets: the origin's answer, or the proxy's own (405, 502).
type Answer<B> = Response<Either<B, Full<Bytes>>>;

/// Serves client connections on `listen`, forwarding their requests with `client` to
/// `origin`, until accepting fails.
pub(crate) async fn run<C: Client>(
    listen: SocketAddr,
    client: C,
    origin: SocketAddr,
) -> Result<(), Box<dyn Error>> {
    let client = Rc::new(client);
    let host = HeaderValue::try_from(origin.to_string())?;
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (client, host) = (Rc::clone(&client), host.clone());
        tokio::task::spawn_local(async move {
            let service = service_fn(move |request| {
                let (client, host) = (Rc::clone(&client), host.clone());
                async move { Ok::<_, Infallible>(forward(&*client, &host, request).await) }
            });
            // A connection's end, clean or not, concerns only that connection.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Forwards `request` to the origin (`host`) and returns its answer, with the proxy's
/// header work done on both heads.
async fn forward<C: Client>(
    client: &C,
    host: &HeaderValue,
    request: Request<Incoming>,
) -> Answer<C::Body> {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return own_answer(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    let (parts, _) = request.into_parts();
    let target = match parts.uri.path_and_query() {
        Some(target) => Uri::from(target.clone()),
        None => Uri::from_static("/"),
    };
    let mut upstream = Request::new(());
    *upstream.method_mut() = parts.method;
    *upstream.uri_mut() = target;
    *upstream.version_mut() = Version::HTTP_11;
    *upstream.headers_mut() = parts.headers;
    let headers = upstream.headers_mut();
    remove_hop_by_hop(headers);
    headers.insert(HOST, host.clone());
    headers.append(VIA, VIA_SELF);
    match client.send(upstream).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            remove_hop_by_hop(&mut parts.headers);
            parts.headers.append(VIA, VIA_SELF);
            Response::from_parts(parts, Either::Left(body))
        }
        Err(error) => own_answer(StatusCode::BAD_GATEWAY, format!("origin: {error}\n")),
    }
}

/// An answer of the proxy's own: `status` with `text`.
fn own_answer<B>(status: StatusCode, text: String) -> Answer<B> {
    let mut response = Response::new(Either::Right(Full::from(text)));
    *response.status_mut() = status;
    response
}

/// Removes the hop-by-hop fields from `headers`: the fixed ones, and those that
/// `Connection` names.
fn remove_hop_by_hop(headers: &mut HeaderMap) {
    if headers.contains_key(CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|name| HeaderName::try_from(name.trim()).ok())
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}
