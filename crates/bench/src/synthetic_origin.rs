//! The synthetic origin of the bench: any `/obj/<id>/<size>` path, a deterministic body of
//! that size, cacheable for an hour; it counts the requests and body bytes it served.
//!
//! Bodies are slices of one shared 64 KiB pseudo-random pattern, rotated by the object
//! id, so serving costs no allocation per byte and two objects rarely share a body.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Length of the shared body pattern.
const PATTERN_LEN: usize = 64 * 1024;

/// Requests and bytes the origin served, read by the report.
#[derive(Debug, Default)]
pub struct OriginCounters {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl OriginCounters {
    /// Requests answered (any path).
    pub fn requests(&self) -> u64 {
        // Relaxed: a plain event count, read after the run has ended.
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes sent in 200 responses.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// A running synthetic origin on 127.0.0.1; stops when dropped.
pub struct SyntheticOrigin {
    addr: SocketAddr,
    counters: Arc<OriginCounters>,
    _stop: oneshot::Sender<()>,
}

impl SyntheticOrigin {
    /// Starts the origin on an ephemeral loopback port.
    pub async fn start() -> io::Result<SyntheticOrigin> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(OriginCounters::default());
        let pattern = body_pattern();
        let (stop, mut stopped) = oneshot::channel::<()>();
        let served = counters.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = &mut stopped => return,
                };
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let (counters, pattern) = (served.clone(), pattern.clone());
                let service = service_fn(move |request: Request<Incoming>| {
                    let response = respond(&request, &pattern, &counters);
                    async move { Ok::<_, Infallible>(response) }
                });
                tokio::spawn(async move {
                    let connection = auto::Builder::new(TokioExecutor::new());
                    if let Err(error) = connection
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(%error, "synthetic origin connection ended with an error");
                    }
                });
            }
        });
        Ok(SyntheticOrigin {
            addr,
            counters,
            _stop: stop,
        })
    }

    /// Where the origin listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has served so far.
    pub fn counters(&self) -> &OriginCounters {
        &self.counters
    }
}

/// The shared pseudo-random pattern bodies are cut from.
fn body_pattern() -> Bytes {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5ec0_4d41);
    let mut pattern = vec![0u8; PATTERN_LEN];
    rng.fill_bytes(&mut pattern);
    Bytes::from(pattern)
}

/// Reads `/obj/<hex id>/<size>`.
fn parse_path(path: &str) -> Option<(u64, u64)> {
    let mut parts = path.strip_prefix("/obj/")?.split('/');
    let object = u64::from_str_radix(parts.next()?, 16).ok()?;
    let size = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((object, size))
}

/// The body of `object`: `size` bytes of the pattern, starting at an offset set by the id.
pub fn body_frames(pattern: &Bytes, object: u64, size: u64) -> Vec<Bytes> {
    let mut frames = Vec::with_capacity((size as usize / PATTERN_LEN) + 2);
    let mut offset = (object % PATTERN_LEN as u64) as usize;
    let mut left = size as usize;
    while left > 0 {
        let take = left.min(PATTERN_LEN - offset);
        frames.push(pattern.slice(offset..offset + take));
        left -= take;
        offset = 0;
    }
    frames
}

fn respond(
    request: &Request<Incoming>,
    pattern: &Bytes,
    counters: &OriginCounters,
) -> Response<BoxBody<Bytes, Infallible>> {
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let Some((object, size)) = parse_path(request.uri().path()) else {
        let mut response =
            Response::new(http_body_util::Full::new(Bytes::from_static(b"not found\n")).boxed());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    if request.method() != http::Method::HEAD {
        counters.bytes.fetch_add(size, Ordering::Relaxed);
    }
    let frames = body_frames(pattern, object, size)
        .into_iter()
        .map(|data| Ok(Frame::data(data)));
    let mut response = Response::new(StreamBody::new(futures_util::stream::iter(frames)).boxed());
    let headers = response.headers_mut();
    headers.insert(
        CACHE_CONTROL,
        http::HeaderValue::from_static("public, max-age=3600"),
    );
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(CONTENT_LENGTH, http::HeaderValue::from(size));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_carry_id_and_size() {
        assert_eq!(parse_path("/obj/00000000000000ff/1234"), Some((255, 1234)));
        assert_eq!(parse_path("/obj/zz/1"), None);
        assert_eq!(parse_path("/obj/1/2/3"), None);
        assert_eq!(parse_path("/other"), None);
    }

    #[test]
    fn bodies_have_the_exact_size_and_depend_on_the_object() {
        let pattern = body_pattern();
        for size in [0u64, 1, 65_535, 65_536, 200_000] {
            let total: usize = body_frames(&pattern, 12_345, size)
                .iter()
                .map(Bytes::len)
                .sum();
            assert_eq!(total as u64, size);
        }
        assert_ne!(body_frames(&pattern, 1, 100), body_frames(&pattern, 2, 100));
        assert_eq!(body_frames(&pattern, 1, 100), body_frames(&pattern, 1, 100));
    }

    #[tokio::test]
    async fn serves_cacheable_bodies_and_counts_them() {
        let origin = SyntheticOrigin::start().await.expect("origin starts");
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        let url = format!("http://{}/obj/{:016x}/{}", origin.addr(), 7, 70_000);
        let response = client.get(&url).send().await.expect("response");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()[CACHE_CONTROL], "public, max-age=3600");
        let body = response.bytes().await.expect("body");
        assert_eq!(body.len(), 70_000);
        let missing = client
            .get(format!("http://{}/nope", origin.addr()))
            .send()
            .await
            .expect("response");
        assert_eq!(missing.status(), 404);
        assert_eq!(origin.counters().requests(), 2);
        assert_eq!(origin.counters().bytes(), 70_000);
    }
}
