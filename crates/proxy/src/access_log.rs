//! The access log: one line per request, to a file, stdout or nowhere (`log.access_log`),
//! as nginx's `combined` format plus `Cache-Status` and duration, or as JSON lines
//! (`log.access_format`).
//!
//! ```text
//! 127.0.0.1 - - [23/Nov/2026:10:15:02 +0000] "GET /page HTTP/1.1" 200 15 "-" "curl/8.5.0" "secondhit; fwd=uri-miss; fwd-status=200; stored" 0.001234
//! ```
//!
//! The request path does as little as it can: when a response's body is done (sent whole,
//! or dropped because the client went away) its [`Record`] — the request's method, target
//! and a few header values moved or reference-counted out of the request, the status, the
//! body bytes sent and the time taken — goes into a bounded queue with a non-blocking
//! `try_send`. A writer thread (`writer`) formats the queued records into one reused buffer
//! and writes them in one call every 50 ms. When the queue is full (the disk stalls, or
//! requests come faster than lines can be written), the record is dropped and counted, and
//! the writer warns with the count: a request is never slowed down or made to wait for the
//! log, and memory stays bounded ([`CAPACITY`] records).
//!
//! The file is opened for appending and reopened by path on [`AccessLog::reopen`]
//! (SIGUSR1), so logrotate's move-then-signal works as with nginx.
//!
//! Each destination has its own queue and writer thread, opened by [`Writers::open`]; the
//! live snapshot holds its [`AccessLog`] handle, so a request is logged where the config
//! it was served under says. A reload that changes the destination or format opens a new
//! one (a path that cannot be opened rejects the reload) and swaps it in with the rest of
//! the snapshot; the old writer goes on writing what its requests give it, and when its
//! last handle is gone it writes out its queue and ends. [`Writers::close`] stops them
//! all at shutdown, after writing what they hold.
//!
//! `secondhit simulate --trace` reads the log directly, in either format: the request
//! target is the key, and the body bytes of a full `200` to a GET are the object's size.

pub(crate) mod line;
mod writer;

use std::net::IpAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, Uri, Version};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::body::{BoxError, ProxyBody};
use crate::config::{AccessLog as Destination, LogConfig};
use crate::origin::Upstream;
use crate::outcome::Outcome;
use line::LineFormat;
use writer::{Control, Output};

/// Records the queue holds; beyond them, records are dropped and counted. At 50 ms between
/// writes this absorbs 160,000 requests a second, several times what one node serves.
pub(crate) const CAPACITY: usize = 8192;

/// What one line says about a request; built on the request path, formatted by the writer.
pub struct Record {
    /// When the request arrived.
    pub received: SystemTime,
    /// The client's address.
    pub peer: IpAddr,
    /// The request method.
    pub method: Method,
    /// The request target as received.
    pub target: Uri,
    /// The request's HTTP version.
    pub version: Version,
    /// The response status.
    pub status: StatusCode,
    /// The request's `Referer`.
    pub referer: Option<HeaderValue>,
    /// The request's `User-Agent`.
    pub user_agent: Option<HeaderValue>,
    /// What became of the request; the line shows it as the `Cache-Status` sent.
    pub outcome: Outcome,
    /// The host the client named (`Host`, or HTTP/2's `:authority`).
    pub host: Option<HeaderValue>,
    /// The request's `X-Forwarded-For`, every line joined in order
    /// (`hygiene::take_list`): the client, when the peer is a trusted proxy.
    pub forwarded_for: Option<HeaderValue>,
    /// The origin server asked for the response, when one was.
    pub upstream: Option<Upstream>,
    /// Body bytes sent to the client (set when the body is done).
    pub bytes: u64,
    /// From arrival to the body being done (set then).
    pub duration: Duration,
}

/// Why the access log cannot be started or switched.
#[derive(Debug, thiserror::Error)]
pub enum AccessLogError {
    /// The file named by `log.access_log` cannot be opened for appending.
    #[error("log.access_log: cannot open {} for appending: {source}", path.display())]
    Open {
        /// The configured path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The writer thread cannot be started.
    #[error("log.access_log: cannot start the writer thread: {0}")]
    Thread(std::io::Error),
}

/// One destination's log: its queue and writer thread. Cloned into the live snapshot and
/// each logged body; when the last clone is gone, the writer writes out its queue and ends.
#[derive(Clone)]
pub struct AccessLog {
    inner: Arc<Inner>,
}

struct Inner {
    queue: SyncSender<Record>,
    /// Whether lines are written anywhere; when not, the proxy builds no record at all.
    on: bool,
    control: Arc<Control>,
    /// The writer, woken for a reopen and when the last handle goes.
    thread: Thread,
}

/// Every writer thread started and not yet seen to end, so that shutdown can have each
/// write what it holds before the process exits; cloned into the server and the reloader.
#[derive(Clone, Default)]
pub struct Writers {
    started: Arc<Mutex<Vec<Started>>>,
}

/// A writer thread and what its handles share with it.
type Started = (Arc<Control>, JoinHandle<()>);

impl Writers {
    /// Opens the destination `[log]` names (creating the file when missing) and starts its
    /// writer thread.
    pub fn open(&self, config: &LogConfig) -> Result<AccessLog, AccessLogError> {
        let output = match &config.access_log {
            Destination::Off => Output::Off,
            Destination::Stdout => Output::Stdout,
            Destination::File(path) => {
                Output::open(path).map_err(|source| AccessLogError::Open {
                    path: path.clone(),
                    source,
                })?
            }
        };
        let (queue, receiver) = mpsc::sync_channel(CAPACITY);
        let control = Arc::new(Control::default());
        let on = !matches!(output, Output::Off);
        let lines = LineFormat::new(config.access_format.clone(), config.trusted_proxies.clone());
        let thread = writer::spawn(receiver, control.clone(), output, lines)
            .map_err(AccessLogError::Thread)?;
        let log = AccessLog {
            inner: Arc::new(Inner {
                queue,
                on,
                control: control.clone(),
                thread: thread.thread().clone(),
            }),
        };
        let mut started = self.lock();
        started.retain(|(_, thread)| !thread.is_finished());
        started.push((control, thread));
        Ok(log)
    }

    /// Has every writer write what is queued and stop, waiting for each: the last lines
    /// reach their files before the process exits. Records sent later are discarded.
    pub async fn close(&self) {
        let started = std::mem::take(&mut *self.lock());
        for (control, thread) in started {
            control.closing.store(true, Ordering::Release);
            thread.thread().unpark();
            match tokio::task::spawn_blocking(move || thread.join()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => tracing::error!("the access log writer panicked"),
                Err(error) => tracing::warn!(%error, "cannot wait for the access log writer"),
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Started>> {
        // The list stays consistent across a panic: entries are pushed and taken whole.
        self.started.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl AccessLog {
    /// Reopens the file by its path at the writer's next round (SIGUSR1, after logrotate
    /// moved it away); nothing happens for stdout.
    pub fn reopen(&self) {
        self.inner.control.reopen.store(true, Ordering::Release);
        self.inner.thread.unpark();
    }

    /// Records dropped since the start because the queue was full.
    pub fn dropped(&self) -> u64 {
        // Relaxed: a count; no other memory depends on it.
        self.inner.control.dropped.load(Ordering::Relaxed)
    }

    /// Whether requests are logged: the proxy builds a record only then.
    pub fn is_on(&self) -> bool {
        self.inner.on
    }

    /// `body` as it is sent to the client, logging `record` when it is done or dropped,
    /// with the bytes sent and the time since `started`.
    pub fn wrap_body(&self, record: Record, started: Instant, body: ProxyBody) -> ProxyBody {
        Logged {
            inner: body,
            record: Some(record),
            started,
            log: self.clone(),
        }
        .boxed_unsync()
    }

    /// Queues `record` unless the queue is full, in which case it is counted as dropped.
    fn send(&self, record: Record) {
        match self.inner.queue.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                // Relaxed: a count the writer reports; no other memory depends on it.
                self.inner.control.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The log is closed: the server is stopping.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl Drop for Inner {
    /// The last handle is gone: the queue's sender drops with it, and the writer, woken,
    /// writes what is left and ends.
    fn drop(&mut self) {
        self.control.closing.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// A response body that counts the bytes it passes and logs its record when dropped —
/// after its last frame, or early when the client went away (then with the bytes sent so
/// far, as nginx logs them).
struct Logged {
    inner: ProxyBody,
    record: Option<Record>,
    started: Instant,
    log: AccessLog,
}

impl Body for Logged {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && let Some(record) = &mut self.record
        {
            record.bytes += data.len() as u64;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            record.duration = self.started.elapsed();
            self.log.send(record);
        }
    }
}

#[cfg(test)]
mod tests;
