//! The soak's origin: serves the objects of `content`, answers revalidations, and can be
//! made to hang (accept, never answer, as a stopped process does) or go down (refuse
//! connections and drop the open ones) for a while.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::content::{GROUPS, LANGUAGES, Representation, Traits, object_of};

/// How the origin behaves now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Answers every request.
    Serving,
    /// Accepts connections and reads requests but never answers.
    Hung,
    /// Refuses connections; open ones are closed.
    Down,
}

/// The origin's shared state.
pub(crate) struct Origin {
    /// Where it listens (the same address across a `Down` spell).
    pub addr: SocketAddr,
    versions: Vec<AtomicU64>,
    mode: watch::Sender<Mode>,
    /// Requests answered.
    pub answered: AtomicU64,
}

impl Origin {
    /// Starts the origin on 127.0.0.1:0.
    pub(crate) async fn start() -> std::io::Result<Arc<Origin>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let origin = Arc::new(Origin {
            addr: listener.local_addr()?,
            versions: (0..GROUPS).map(|_| AtomicU64::new(1)).collect(),
            mode: watch::Sender::new(Mode::Serving),
            answered: AtomicU64::new(0),
        });
        tokio::spawn(accept_loop(Arc::clone(&origin), listener));
        Ok(origin)
    }

    /// Switches the origin to `mode`.
    pub(crate) fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// The current version of the objects of tag group `group`.
    pub(crate) fn version(&self, group: u64) -> u64 {
        self.versions[group as usize].load(Ordering::SeqCst)
    }

    /// Publishes a new version of the objects of `group` (before they are purged).
    pub(crate) fn bump(&self, group: u64) {
        self.versions[group as usize].fetch_add(1, Ordering::SeqCst);
    }

    fn answer(&self, head: &http::request::Parts) -> Response<Full<Bytes>> {
        let Some(object) = object_of(head.uri.path()) else {
            return plain(StatusCode::NOT_FOUND);
        };
        let traits = Traits::of(object);
        let client = client_of(&head.headers);
        let rep = Representation {
            object,
            version: self.version(object % GROUPS),
            variant: variant_of(traits, &head.headers),
            client: if traits.private {
                client.clone()
            } else {
                "-".into()
            },
        };
        let etag = rep.etag();
        let matches = head
            .headers
            .get(http::header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|tag| tag.trim().trim_start_matches("W/") == etag)
            });
        let mut response = if matches {
            let mut response = plain(StatusCode::NOT_MODIFIED);
            if traits.refreshes_cookie {
                append(
                    &mut response,
                    "set-cookie",
                    &format!("sid={client}; Path=/"),
                );
            }
            response
        } else {
            let mut response = Response::new(Full::new(Bytes::from(rep.body())));
            if traits.sets_cookie {
                append(
                    &mut response,
                    "set-cookie",
                    &format!("sid={client}; Path=/"),
                );
            }
            if rep.variant == "deflate" {
                append(&mut response, "content-encoding", "deflate");
            }
            response
        };
        let cache_control = match (traits.private, object % 3) {
            (true, _) => "private, max-age=5",
            (false, 0) => "max-age=2, stale-while-revalidate=2, stale-if-error=30",
            (false, 1) => "max-age=5",
            (false, _) => "max-age=10, must-revalidate",
        };
        append(&mut response, "cache-control", cache_control);
        append(&mut response, "etag", &etag);
        append(
            &mut response,
            "surrogate-key",
            &format!("g{}", object % GROUPS),
        );
        match (traits.by_language, traits.by_encoding) {
            (true, _) => append(&mut response, "vary", "accept-language"),
            (false, true) => append(&mut response, "vary", "accept-encoding"),
            _ => {}
        }
        response
    }
}

/// The client a request comes from: its `sid` cookie, or `-`.
pub(crate) fn client_of(headers: &HeaderMap) -> String {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix("sid=").map(str::to_owned))
        .unwrap_or_else(|| "-".into())
}

/// The variant of an object with `traits` that a request with `headers` selects.
pub(crate) fn variant_of(traits: Traits, headers: &HeaderMap) -> String {
    let field = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    if traits.by_language {
        let asked = field(http::header::ACCEPT_LANGUAGE);
        let lang = LANGUAGES.iter().find(|lang| asked.starts_with(*lang));
        return lang.unwrap_or(&LANGUAGES[0]).to_string();
    }
    if traits.by_encoding {
        let deflate = field(http::header::ACCEPT_ENCODING)
            .split(',')
            .any(|coding| coding.trim() == "deflate");
        return if deflate { "deflate" } else { "identity" }.into();
    }
    "-".into()
}

fn plain(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

fn append(response: &mut Response<Full<Bytes>>, name: &'static str, value: &str) {
    if let Ok(value) = http::HeaderValue::from_str(value) {
        response.headers_mut().append(name, value);
    }
}

/// Accepts connections while the origin is not `Down`; while it is, the listener is
/// closed (connections are refused) and bound again on the same address afterwards.
async fn accept_loop(origin: Arc<Origin>, listener: TcpListener) {
    let mut listener = Some(listener);
    let mut mode = origin.mode.subscribe();
    loop {
        let Some(open) = &listener else {
            if mode.wait_for(|m| *m != Mode::Down).await.is_err() {
                return;
            }
            listener = TcpListener::bind(origin.addr).await.ok();
            continue;
        };
        tokio::select! {
            accepted = open.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(serve(Arc::clone(&origin), stream));
                }
            }
            _ = mode.wait_for(|m| *m == Mode::Down) => listener = None,
        }
    }
}

async fn serve(origin: Arc<Origin>, stream: tokio::net::TcpStream) {
    let mut down = origin.mode.subscribe();
    let service = {
        let origin = Arc::clone(&origin);
        service_fn(move |request: Request<Incoming>| {
            let origin = Arc::clone(&origin);
            async move {
                let (head, _body) = request.into_parts();
                let mut mode = origin.mode.subscribe();
                // A hung origin holds the request until it recovers (or goes down).
                let _ = mode.wait_for(|m| *m != Mode::Hung).await;
                origin.answered.fetch_add(1, Ordering::Relaxed);
                Ok::<_, Infallible>(origin.answer(&head))
            }
        })
    };
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        _ = down.wait_for(|m| *m == Mode::Down) => {}
    }
}
