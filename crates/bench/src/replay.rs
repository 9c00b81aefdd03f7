//! `secondhit bench --target URL`: requests sent to a proxy already running, a deployment's
//! own, with only what a client sees to report.
//!
//! With `--trace`, the requests are the access log's own (a [`RequestLog`]): each GET and
//! HEAD with its method, its target exactly as logged (origin or absolute form) and its
//! host, so the proxy and its origin see the traffic the log recorded and nothing made up.
//! Other methods are skipped and counted: replaying a POST against production is not a
//! load test. Without `--trace`, the synthetic workload's `/obj/<id>/<size>` paths, which
//! only an origin like the bench's synthetic one answers.
//!
//! Each of `concurrency` workers keeps one HTTP/1.1 connection to the target and takes the
//! next request when it is due ([`Pace`]). The figures come from each response: its status,
//! its body's bytes, and its `Cache-Status`, read back into the proxy's own `Outcome` and
//! counted as `Outcome::result` counts it, so the hit ratio is the one the proxy's `/stats`
//! reports over the same requests; the origin load is the responses the proxy marks
//! forwarded and not collapsed into another request's fetch.

mod tally;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, USER_AGENT};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use indicatif::ProgressBar;
use tokio::time::Instant;

use super::driver::{BenchError, progress_bar};
use super::report::{PolicyReport, ReplaySummary};
use super::workload::{LoggedRequest, RequestLog, Workload};
use secondhit_proxy::cache_status::{self, CACHE_STATUS};
use tally::{Exchanged, Failure, Tally};

/// How fast requests are sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// As fast as the connections get answers (`--rate max`).
    Max,
    /// This many requests per second, the first at once (`--rate R`).
    Rate(f64),
    /// At the log's own times, `speed` times faster (`--speed`, 1 by default): a request
    /// logged a second after the first is sent a second after it.
    Logged {
        /// The factor the log's time runs faster by.
        speed: f64,
    },
}

impl Pace {
    /// When the request at `index`, logged at `at`, is due after the start; `None`: now.
    /// `first` is the first request's time; times before it count as it (a log is written
    /// as requests end, not quite in the order they came).
    fn due(self, index: usize, at: f64, first: f64) -> Option<Duration> {
        let seconds = match self {
            Pace::Max => return None,
            Pace::Rate(rate) => index as f64 / rate,
            Pace::Logged { speed } => (at - first).max(0.0) / speed,
        };
        Duration::try_from_secs_f64(seconds).ok()
    }

    /// The pace in words, for the report.
    fn describe(self) -> String {
        match self {
            Pace::Max => "as fast as answered".to_owned(),
            Pace::Rate(rate) => format!("{rate} requests/s"),
            Pace::Logged { speed: 1.0 } => "at the log's pace".to_owned(),
            Pace::Logged { speed } => format!("at {speed} times the log's pace"),
        }
    }
}

/// Where and how to send the requests.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// The proxy, as `http://host:port`.
    pub target: String,
    /// Requests in flight at once, one connection each.
    pub concurrency: usize,
    /// How fast.
    pub pace: Pace,
    /// The `Host` of requests whose log line names none and whose target is not in
    /// absolute form; without it, the target's.
    pub host: Option<String>,
    /// The longest one request may take, connecting and reading its body included.
    pub timeout: Duration,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

/// The synthetic workload's requests as a log to send: a GET of each `/obj/<id>/<size>`.
pub fn from_workload(workload: &Workload) -> RequestLog {
    RequestLog {
        name: workload.name.clone(),
        requests: (workload.requests.iter())
            .map(|request| LoggedRequest {
                at: request.at,
                method: Method::GET,
                target: request.path(),
                host: None,
            })
            .collect(),
        malformed_lines: workload.malformed_lines,
        skipped_methods: workload.ignored_lines,
    }
}

/// One request ready to go.
struct Prepared {
    due: Option<Duration>,
    method: Method,
    uri: Uri,
    host: HeaderValue,
}

/// Sends `log`'s requests to the proxy `options` names; its row and the summary.
pub async fn run(
    log: &RequestLog,
    options: &ReplayOptions,
) -> Result<(PolicyReport, ReplaySummary), BenchError> {
    let (address, default_host) = target_address(&options.target)?;
    let (prepared, unsendable) = prepare(log, options, &default_host);
    let concurrency = options.concurrency.max(1);
    let progress = progress_bar(prepared.len() as u64, "target", options.progress);
    let shared = Arc::new(Shared {
        prepared,
        next: AtomicUsize::new(0),
        address,
        timeout: options.timeout,
        started: Instant::now(),
        progress: progress.clone(),
    });
    let workers: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(worker(shared.clone())))
        .collect();
    let mut total = Tally::new();
    for worker in workers {
        // A worker only ends by running out of requests; a panic there is a bug worth seeing.
        total.add(&worker.await.map_err(std::io::Error::other)?);
    }
    let elapsed = shared.started.elapsed();
    progress.finish_and_clear();
    let summary = ReplaySummary {
        target: options.target.clone(),
        pace: options.pace.describe(),
        concurrency,
        skipped_methods: log.skipped_methods,
        unsendable,
        ..total.summary()
    };
    Ok((total.row("target", elapsed), summary))
}

/// The address to connect to and the `Host` it answers to, from `http://host[:port]`.
fn target_address(target: &str) -> Result<(String, HeaderValue), BenchError> {
    let bad = || BenchError::Target(target.to_owned());
    let uri: Uri = target.parse().map_err(|_| bad())?;
    let authority = match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(authority)) => authority,
        _ => return Err(bad()),
    };
    let port = authority.port_u16().unwrap_or(80);
    let host = HeaderValue::from_str(authority.as_str()).map_err(|_| bad())?;
    Ok((format!("{}:{port}", authority.host()), host))
}

/// The requests that can be sent as logged, each with its `Host` and when it is due; and
/// how many cannot (a target that is no origin- or absolute-form URI, a host no header
/// value can hold).
fn prepare(
    log: &RequestLog,
    options: &ReplayOptions,
    default_host: &HeaderValue,
) -> (Vec<Prepared>, u64) {
    let first = log.requests.first().map_or(0.0, |request| request.at);
    let mut unsendable = 0;
    let prepared = (log.requests.iter())
        .filter_map(|request| {
            let ready = prepare_one(request, options.host.as_deref(), default_host);
            if ready.is_none() {
                unsendable += 1;
            }
            ready
        })
        .collect::<Vec<_>>();
    let prepared = (prepared.into_iter().enumerate())
        .map(|(index, (at, mut request))| {
            request.due = options.pace.due(index, at, first);
            request
        })
        .collect();
    (prepared, unsendable)
}

/// One logged request made ready, with its logged time; `None` if it cannot be sent.
fn prepare_one(
    request: &LoggedRequest,
    host: Option<&str>,
    default_host: &HeaderValue,
) -> Option<(f64, Prepared)> {
    let uri: Uri = request.target.parse().ok()?;
    let host = match (uri.scheme(), uri.authority()) {
        // Absolute form names its host; a Host header must agree (RFC 9112 §3.2.2).
        (Some(_), Some(authority)) => HeaderValue::from_str(authority.as_str()).ok()?,
        (None, None) if request.target.starts_with('/') => match request.host.as_deref().or(host) {
            Some(host) => HeaderValue::from_str(host).ok()?,
            None => default_host.clone(),
        },
        // `*`, authority form: not a GET's or HEAD's target.
        _ => return None,
    };
    let prepared = Prepared {
        due: None,
        method: request.method.clone(),
        uri,
        host,
    };
    Some((request.at, prepared))
}

/// What every worker shares.
struct Shared {
    prepared: Vec<Prepared>,
    /// The next request to take.
    next: AtomicUsize,
    address: String,
    timeout: Duration,
    started: Instant,
    progress: ProgressBar,
}

/// Takes the next request until none is left, waits until it is due, sends it on this
/// worker's connection (opening a new one when there is none or it failed) and counts
/// what came back.
async fn worker(shared: Arc<Shared>) -> Tally {
    let mut tally = Tally::new();
    let mut connection: Option<SendRequest<Empty<Bytes>>> = None;
    loop {
        // Relaxed: the counter only hands out distinct indices.
        let index = shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(request) = shared.prepared.get(index) else {
            break;
        };
        if let Some(due) = request.due {
            tokio::time::sleep_until(shared.started + due).await;
        }
        let began = Instant::now();
        let exchanged = tokio::time::timeout(
            shared.timeout,
            exchange(&mut connection, &shared.address, request),
        )
        .await
        .unwrap_or(Err(Failure::Timeout));
        if exchanged.is_err() {
            // A connection that failed or timed out mid-exchange is not reused.
            connection = None;
        }
        tally.record(exchanged, began.elapsed());
        shared.progress.inc(1);
    }
    tally
}

/// Sends `request` on `connection` (opened first if there is none or the proxy closed it)
/// and reads the whole response.
async fn exchange(
    connection: &mut Option<SendRequest<Empty<Bytes>>>,
    address: &str,
    request: &Prepared,
) -> Result<Exchanged, Failure> {
    let sender = match connection {
        Some(sender) if !sender.is_closed() => sender,
        _ => connection.insert(connect(address).await?),
    };
    // A kept-alive connection the proxy has just closed fails here, before the request
    // went out: one fresh connection, then it counts.
    if sender.ready().await.is_err() {
        *sender = connect(address).await?;
        sender.ready().await.map_err(|_| Failure::Broken)?;
    }
    let outgoing = Request::builder()
        .method(request.method.clone())
        .uri(request.uri.clone())
        .header(HOST, request.host.clone())
        .header(
            USER_AGENT,
            concat!("secondhit-bench/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::new())
        .map_err(|_| Failure::Broken)?;
    let response = sender
        .send_request(outgoing)
        .await
        .map_err(|_| Failure::Broken)?;
    let outcome = cache_status::parse(response.headers().get_all(CACHE_STATUS));
    let status = response.status();
    let mut body = response.into_body();
    let mut bytes = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Failure::Broken)?;
        bytes += frame.data_ref().map_or(0, |data| data.len() as u64);
    }
    Ok(Exchanged {
        status,
        outcome,
        bytes,
    })
}

/// A new HTTP/1.1 connection to `address`, its driver running on its own task.
async fn connect(address: &str) -> Result<SendRequest<Empty<Bytes>>, Failure> {
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|_| Failure::Connect)?;
    // Requests are small and one at a time: Nagle would only delay them.
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|_| Failure::Connect)?;
    // The connection ends when the proxy closes it or the sender is dropped; either way
    // the sender reports it.
    tokio::spawn(connection);
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_due_at_the_log_s_pace_a_rate_or_at_once() {
        let logged = Pace::Logged { speed: 1.0 };
        assert_eq!(logged.due(0, 100.0, 100.0), Some(Duration::ZERO));
        assert_eq!(
            logged.due(5, 102.5, 100.0),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            Pace::Logged { speed: 10.0 }.due(5, 102.5, 100.0),
            Some(Duration::from_millis(250))
        );
        // A line written out of order is due with the first, not before the start.
        assert_eq!(logged.due(1, 99.0, 100.0), Some(Duration::ZERO));
        assert_eq!(
            Pace::Rate(4.0).due(6, 0.0, 0.0),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(Pace::Max.due(6, 50.0, 0.0), None);
    }

    #[test]
    fn each_request_gets_the_host_it_was_sent_with() {
        let default = HeaderValue::from_static("proxy:8080");
        let logged = |target: &str, host: Option<&str>| LoggedRequest {
            at: 0.0,
            method: Method::GET,
            target: target.to_owned(),
            host: host.map(str::to_owned),
        };
        let host = |request: &LoggedRequest, flag: Option<&str>| {
            prepare_one(request, flag, &default).map(|(_, prepared)| prepared.host)
        };
        let named = logged("/a?b=1", Some("a.example"));
        assert_eq!(host(&named, Some("flag.example")).unwrap(), "a.example");
        let unnamed = logged("/a", None);
        assert_eq!(
            host(&unnamed, Some("flag.example")).unwrap(),
            "flag.example"
        );
        assert_eq!(host(&unnamed, None).unwrap(), "proxy:8080");
        let absolute = logged("http://abs.example:81/x", Some("other"));
        let (_, prepared) = prepare_one(&absolute, None, &default).expect("sendable");
        assert_eq!(prepared.host, "abs.example:81");
        assert_eq!(prepared.uri.to_string(), "http://abs.example:81/x");
        for unsendable in ["*", "example.com:443", "/a b", "no-slash"] {
            assert!(
                host(&logged(unsendable, None), None).is_none(),
                "{unsendable}"
            );
        }
        assert!(host(&logged("/a", Some("bad\nhost")), None).is_none());
    }

    #[test]
    fn a_target_must_be_an_http_url() {
        let (address, host) = target_address("http://proxy.example").expect("valid");
        assert_eq!(
            (address.as_str(), host.to_str().ok()),
            ("proxy.example:80", Some("proxy.example"))
        );
        for bad in ["https://proxy", "proxy:8080", "http://", "ftp://x"] {
            assert!(target_address(bad).is_err(), "{bad}");
        }
    }
}
