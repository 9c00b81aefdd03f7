//! The floor under secondhit's pass-through path: a hyper HTTP/1 server that forwards every
//! request to one origin through hyper-util's pooled client, on one single-threaded runtime,
//! and does nothing else — no cache, no timeouts, no header hygiene, no limits.
//!
//! `benches/vs_nginx.sh` compares secondhit's pass-through with nginx's `proxy_pass`; this
//! shows how much of the difference is the HTTP stack itself. With `BARE_BIN` naming its
//! build, vs_nginx.sh measures it beside the others; by hand, run it where the bench runs
//! secondhit, and load it the same way:
//!
//! ```text
//! cargo build --release --example bare_proxy
//! taskset -c 0 target/release/examples/bare_proxy 127.0.0.1:8090 http://127.0.0.1:8081 &
//! taskset -c 1 wrk -t1 -c64 -d10s --latency http://127.0.0.1:8090/pass/one-1k
//! ```
//!
//! The figures: `benches/RESULTS.md`, "the pass-through floor".

use std::convert::Infallible;
use std::error::Error;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// The answer to a request the origin did not answer: hyper's own error, as text.
type Answer = Response<http_body_util::Either<Incoming, String>>;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(origin)) = (args.next(), args.next()) else {
        return Err("usage: bare_proxy LISTEN_ADDR ORIGIN_URL".into());
    };
    let origin: Uri = origin.parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(listen, origin))
}

async fn serve(listen: String, origin: Uri) -> Result<(), Box<dyn Error>> {
    let client: Client<HttpConnector, Incoming> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (client, origin) = (client.clone(), origin.clone());
        tokio::spawn(async move {
            let forward =
                service_fn(move |request| forward(client.clone(), origin.clone(), request));
            let io = TokioIo::new(stream);
            // A connection's end, clean or not, concerns only that connection.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, forward)
                .await;
        });
    }
}

/// Sends `request` to `origin` with its path and query, and returns the origin's answer.
async fn forward(
    client: Client<HttpConnector, Incoming>,
    origin: Uri,
    mut request: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let mut target = origin.into_parts();
    target.path_and_query = request.uri().path_and_query().cloned();
    let answer = match Uri::from_parts(target) {
        Ok(uri) => {
            *request.uri_mut() = uri;
            client
                .request(request)
                .await
                .map_err(|error| error.to_string())
        }
        Err(error) => Err(error.to_string()),
    };
    Ok(match answer {
        Ok(response) => response.map(http_body_util::Either::Left),
        Err(error) => {
            let mut response = Response::new(http_body_util::Either::Right(error));
            *response.status_mut() = http::StatusCode::BAD_GATEWAY;
            response
        }
    })
}
