//! One client connection's life beside hyper: closed when idle for `server.idle_timeout`,
//! when `server.max_connections` is reached and it has no request open, and at shutdown.
//!
//! hyper has no idle timeout of its own: a kept-alive HTTP/1 connection waiting for its
//! next request (the head guard's `header_read_timeout` runs only once a head has begun),
//! and an HTTP/2 connection with no open stream, would be kept for ever: clients that
//! only connected, or only sent the preface, could hold every connection slot.
//! [`drive`] therefore watches each connection's [`Activity`]: a request counts from its
//! head until its response body ended, was dropped or, when its length is known, handed
//! out its last byte, which costs two uncontended atomic updates per request and no clock
//! read. A timer ticks [`IDLE_TICKS`] times per `idle_timeout`; after that many ticks in
//! a row with no request open and none started, the connection is shut down gracefully —
//! HTTP/1 closes it (or after the response in flight), HTTP/2 sends GOAWAY and closes once
//! its streams are done. So an idle connection is closed between `idle_timeout` and
//! `idle_timeout` plus one tick after its last response ended.
//!
//! A response body still streaming is not idle, and a graceful shutdown (a reap's or the
//! stop's) lets it finish: only the connection's reuse is lost.
//!
//! At the stop (a shutdown, or the hand-off of an upgrade), an HTTP/1 connection is not
//! closed between two requests: its client may be sending the next one at that moment, and
//! would meet a reset (an upgrade's new process, which holds the same listening socket,
//! would have served it). It drains instead: every response from then on carries
//! `Connection: close`, after which hyper closes the connection, and the client, told so,
//! opens a new one. A connection that sends nothing for [`LAST_REQUEST_GRACE`] is closed then.
//! HTTP/2 needs none of this: its GOAWAY names the last stream served, and the client
//! retries the others on a new connection.
//!
//! A graceful shutdown has a deadline: a connection that has not finished closing after
//! [`CLOSE_GRACE`] with no request open is dropped. An HTTP/2 graceful shutdown closes
//! only once the client answered the PING sent with the GOAWAY, so a client that sent its
//! preface and then never read or answered would otherwise keep its slot until hyper's
//! keep-alive gave up on it (`idle_timeout` plus `header_read_timeout`, 70 s by default):
//! `max_connections` such clients made every new client wait that long.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http::header::CONNECTION;
use http::{HeaderValue, Request, Response, Version};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::head_guard::{self, HeadGuard};
use super::lean;
use super::send_watch::{SendProgress, Watched};
use super::side_waker::SideWaker;
use crate::body::{BoxError, ClientBody, ProxyBody};
use crate::hygiene::{ConnectionToken, REJECTION_FIELD};
use crate::key::ClientScheme;
use crate::proxy::Proxy;

/// What every client connection is served with, shared by the plain and the TLS listener.
#[derive(Clone)]
pub(super) struct Serving {
    pub(super) proxy: Arc<Proxy>,
    /// hyper-util's builder, set up once from `[server]` in `Server::run`.
    pub(super) builder: auto::Builder<TokioExecutor>,
    /// The head guard's limits.
    pub(super) limits: head_guard::Limits,
    /// `server.header_read_timeout`: each head's deadline (see `head_guard`), and the TLS
    /// handshake's.
    pub(super) header_read_timeout: Duration,
    /// `server.idle_timeout`.
    pub(super) idle_timeout: Duration,
    /// `server.send_timeout`.
    pub(super) send_timeout: Duration,
}

impl Serving {
    /// A copy for one worker, with its own handle on the proxy: every request clones the
    /// handle (and every connection this), and a count that every worker bumped would
    /// move its cache line between their cores on each request.
    pub(super) fn for_worker(&self) -> Serving {
        Serving {
            proxy: Arc::new(Proxy::clone(&self.proxy)),
            ..self.clone()
        }
    }

    /// The tick of every connection's timer ([`QuietClock`]): how often a connection
    /// looks whether its client takes what it is sent.
    pub(super) fn tick(&self) -> Duration {
        tick_of(self.timeouts().period())
    }

    fn timeouts(&self) -> Timeouts {
        Timeouts {
            idle: self.idle_timeout,
            send: self.send_timeout,
        }
    }

    /// Serves the connection `io` from `peer`, accepted on the listener of `scheme` (for a
    /// TLS connection, `io` is the decrypted stream), until it ends: through the head
    /// guard to hyper, each request to the proxy, and [`drive`] closing it when idle,
    /// reaped or stopped.
    pub(super) async fn serve<IO>(
        &self,
        io: IO,
        peer: SocketAddr,
        scheme: ClientScheme,
        token: ConnectionToken,
        signals: Signals,
    ) where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::default());
        let answering = Arc::new(Answering {
            proxy: self.proxy.clone(),
            requests: activity.clone(),
            token,
            peer,
            scheme,
        });
        let io = Watched::new(io, activity.send.clone());
        let closing = AtomicBool::new(false);
        let connection = self.connection(io, answering, &closing);
        let close = |_: Pin<&mut _>| closing.store(true, Ordering::Relaxed);
        let ended = drive(connection, close, activity, self.timeouts(), signals);
        if let Err(error) = ended.await {
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }

    /// The connection `io`, served on the lean path (`lean`) until it meets a request that
    /// path does not serve, then by hyper behind the head guard; `closing` asks it to shut
    /// down gracefully.
    ///
    /// The guard stands only in front of hyper: the lean path serves no request whose body
    /// framing could be ambiguous (it has no body), and keeps the header read timeout
    /// itself, so its heads are parsed once. The guard begins at the head the lean path
    /// handed over, which is where it would have been in sync had it seen every byte.
    async fn connection<IO>(
        &self,
        io: IO,
        answering: Arc<Answering>,
        closing: &AtomicBool,
    ) -> Result<(), BoxError>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let limits = lean::Limits {
            head: secondhit_h1::Limits {
                max_headers: self.limits.max_headers,
                max_head_bytes: self.limits.max_head_bytes,
            },
            header_read_timeout: self.header_read_timeout,
        };
        let answer = |request| answering.answer(request);
        let (io, read) = match lean::serve(io, limits, closing, answer).await? {
            lean::Ended::Closed => return Ok(()),
            lean::Ended::HandOver(io, read) => (io, read),
        };
        let token = answering.token;
        let service = service_fn(move |request: Request<Incoming>| {
            let answering = answering.clone();
            async move { Ok::<_, Infallible>(answering.answer(request.map(ClientBody::from)).await) }
        });
        let io = lean::Prefixed::new(read, io);
        let io = HeadGuard::new(io, token, self.limits, self.header_read_timeout);
        let io = TokioIo::new(io);
        let mut connection = pin!(self.builder.serve_connection(io, service));
        let mut shut_down = false;
        poll_fn(|cx| {
            if !shut_down && closing.load(Ordering::Relaxed) {
                shut_down = true;
                connection.as_mut().graceful_shutdown();
            }
            connection.as_mut().poll(cx)
        })
        .await
    }
}

/// What answers a connection's requests, whichever server read them.
struct Answering {
    proxy: Arc<Proxy>,
    requests: Arc<Activity>,
    token: ConnectionToken,
    peer: SocketAddr,
    scheme: ClientScheme,
}

impl Answering {
    /// The proxy's answer to `request`, its body tracked, with `Connection: close` once
    /// the connection drains.
    async fn answer(&self, mut request: Request<ClientBody>) -> Response<TrackedBody> {
        // Only a head carrying the marker needs the token that proves it ours
        // (`hygiene::check_request`): most requests skip the extension map's allocation.
        if crate::fields::has(request.headers(), &REJECTION_FIELD) {
            request.extensions_mut().insert(self.token);
        }
        let open = self.requests.request();
        let version = request.version();
        self.requests.saw(version);
        let mut response = self.proxy.handle(request, self.peer, self.scheme).await;
        if open.activity.closes_after(version) {
            let close = HeaderValue::from_static("close");
            response.headers_mut().insert(CONNECTION, close);
        }
        response.map(|body| TrackedBody::new(body, open))
    }
}

/// Timer ticks per `idle_timeout`: the finer, the closer a close comes to the timeout, at
/// one timer wakeup per tick and connection.
pub(super) const IDLE_TICKS: u32 = 4;

/// How long a connection being shut down gracefully may go on with no request open before
/// it is dropped. With nothing left to send, it only waits for the client's answer to
/// the GOAWAY's PING (one round trip) and for its last bytes to be written: a few seconds
/// are many round trips, and a response still streaming holds it open regardless.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// How long a draining HTTP/1 connection (see the module docs) may stay quiet before it is
/// closed: a client that keeps its connection busy sends its next request within a round
/// trip of the last response, while one that waits longer is as likely to wait for
/// `server.idle_timeout`, which should not hold a shutdown up.
pub(super) const LAST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// What the idle timer needs to know of a connection's requests.
#[derive(Debug, Default)]
pub(super) struct Activity {
    /// Requests whose response body has not ended yet.
    open: AtomicU32,
    /// A request started since the timer last looked.
    used: AtomicBool,
    /// The connection speaks HTTP/2 (seen on its first request).
    http2: AtomicBool,
    /// The server stopped: every HTTP/1 response closes the connection.
    draining: AtomicBool,
    /// Whether the client takes what it is sent (`server.send_timeout`).
    send: Arc<SendProgress>,
}

impl Activity {
    /// Marks a request as open until the returned guard drops or is closed.
    pub(super) fn request(self: &Arc<Self>) -> OpenRequest {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.used.store(true, Ordering::Relaxed);
        OpenRequest {
            activity: self.clone(),
            open: true,
        }
    }

    /// No request open now, and none started since the last look.
    fn quiet(&self) -> bool {
        let used = self.used.swap(false, Ordering::Relaxed);
        !used && self.open.load(Ordering::Relaxed) == 0
    }

    fn has_open_request(&self) -> bool {
        self.open.load(Ordering::Relaxed) > 0
    }

    /// Notes a request's protocol version.
    fn saw(&self, version: Version) {
        if version == Version::HTTP_2 {
            self.http2.store(true, Ordering::Relaxed);
        }
    }

    fn is_http2(&self) -> bool {
        self.http2.load(Ordering::Relaxed)
    }

    /// Whether a response of `version` must close its connection: an HTTP/1 one once the
    /// connection drains.
    fn closes_after(&self, version: Version) -> bool {
        version < Version::HTTP_2 && self.draining.load(Ordering::Relaxed)
    }
}

/// An open request of a connection (see [`Activity::request`]), until closed or dropped.
pub(super) struct OpenRequest {
    activity: Arc<Activity>,
    open: bool,
}

impl OpenRequest {
    /// The request no longer counts as open (once, however often it is called).
    fn close(&mut self) {
        if std::mem::take(&mut self.open) {
            self.activity.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.close();
    }
}

/// A response body that keeps its request open until it ended, failed or was dropped,
/// so that a connection streaming a response is neither idle nor reaped; and tells the
/// connection's [`SendProgress`] when it handed out a frame and when hyper asked for the
/// next one.
pub(super) struct TrackedBody {
    body: ProxyBody,
    /// Closed when the body ends: hyper may keep the body a while after its last frame.
    request: OpenRequest,
    /// Data bytes still to come, when the body's length is known: the request ends with
    /// its last byte, not when hyper next polls the body. A body teed into a fill learns
    /// its end only from the fill's pump, which may run after the client has read it all.
    left: Option<u64>,
    /// A frame was handed out and hyper has not asked for the next one yet.
    handed_out: bool,
}

impl TrackedBody {
    fn new(body: ProxyBody, request: OpenRequest) -> TrackedBody {
        TrackedBody {
            left: body.size_hint().exact(),
            body,
            request,
            handed_out: false,
        }
    }

    fn send_progress(&self) -> &SendProgress {
        &self.request.activity.send
    }

    /// Counts `sent` data bytes against the known length, closing the request at its end.
    fn sent(&mut self, sent: usize) {
        if let Some(left) = &mut self.left {
            *left = left.saturating_sub(sent as u64);
            if *left == 0 {
                self.request.close();
            }
        }
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        if self.handed_out {
            self.send_progress().frame_taken(false);
        }
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.handed_out) {
            this.send_progress().frame_taken(true);
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                this.send_progress().frame_handed_out();
                this.handed_out = true;
                if let Some(data) = frame.data_ref() {
                    this.sent(data.len());
                }
            }
            Poll::Ready(None | Some(Err(_))) => this.request.close(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The signals every connection listens to.
pub(super) struct Signals {
    /// Changes once, when the server stops accepting: shut down gracefully.
    pub(super) stop: watch::Receiver<()>,
    /// Changes whenever `server.max_connections` is reached: close if no request is open.
    pub(super) reap: watch::Receiver<()>,
}

impl Signals {
    /// The signals for a new connection: only what is sent from now on concerns it (a
    /// reap sent before it was accepted, perhaps to make room for it, does not).
    pub(super) fn for_connection(&self) -> Signals {
        let mut reap = self.reap.clone();
        reap.borrow_and_update();
        Signals {
            stop: self.stop.clone(),
            reap,
        }
    }
}

/// A connection's timeouts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timeouts {
    /// `server.idle_timeout`.
    pub(super) idle: Duration,
    /// `server.send_timeout`.
    pub(super) send: Duration,
}

impl Timeouts {
    /// What the connection's timer ticks [`IDLE_TICKS`] times over: fine enough for both
    /// timeouts.
    fn period(self) -> Duration {
        self.idle.min(self.send)
    }
}

/// Runs `connection` to its end, calling `close` (its graceful shutdown) once: when it was
/// idle for `timeouts.idle`, on a reap with no request open, or at stop (HTTP/2; an HTTP/1
/// connection drains first, see [`Phase::Draining`]). Once closing, it
/// is dropped (and `Ok` returned) if it goes on for [`CLOSE_GRACE`] with no request open.
/// It is dropped at once when it waited on its client with no progress for
/// `timeouts.send` ([`SendProgress`]), or for a tick when a reap comes.
///
/// The connection is what wakes the task nearly every time, so the idle timer and the
/// two signals are not polled on each of its wakeups (a `select!` over them created,
/// registered and dropped two watch waiters and polled the timer per request, work every
/// cache hit would pay for: `benches/RESULTS.md`, "connection driver"). They are long-lived and
/// polled with a waker of their own ([`SideWaker`]), only after it fired.
pub(super) async fn drive<C, E>(
    connection: C,
    close: impl Fn(Pin<&mut C>),
    activity: Arc<Activity>,
    timeouts: Timeouts,
    signals: Signals,
) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    let Signals { mut stop, reap } = signals;
    tokio::pin!(connection);
    let mut clock = QuietClock::new(timeouts);
    // A closed channel means the server is gone: stop too.
    let stop = stop.changed();
    tokio::pin!(stop);
    let reaps = reaps(reap);
    tokio::pin!(reaps);
    let mut signals = SignalWatch {
        stop,
        reaps,
        reaping: true,
    };
    let side = SideWaker::new();
    let side_waker = Waker::from(side.clone());
    let mut phase = Phase::Open;
    poll_fn(|cx| {
        loop {
            if let Poll::Ready(ended) = connection.as_mut().poll(cx) {
                return Poll::Ready(ended);
            }
            // A draining connection found to speak HTTP/2 closes with a GOAWAY at once.
            let h2_draining = phase == Phase::Draining && activity.is_http2();
            if !h2_draining {
                side.task.register(cx.waker());
                if !side.woken.swap(false, Ordering::Acquire) {
                    return Poll::Pending;
                }
                let mut side_cx = Context::from_waker(&side_waker);
                let timer = clock.poll(&mut side_cx, &activity, phase == Phase::Closing);
                let signal = match phase {
                    Phase::Open => signals.poll(&mut side_cx, &activity, clock.stalled()),
                    Phase::Draining | Phase::Closing => Side::Wait,
                };
                match (phase, timer, signal) {
                    (_, Side::Drop, _) | (_, _, Side::Drop) => return Poll::Ready(Ok(())),
                    (Phase::Closing, _, _) => return Poll::Pending,
                    (_, _, Side::Drain) if !activity.is_http2() => {
                        activity.draining.store(true, Ordering::Relaxed);
                        phase = Phase::Draining;
                        clock.count_to(LAST_REQUEST_GRACE);
                        side.woken.store(true, Ordering::Release);
                        continue;
                    }
                    (_, Side::Close, _) | (_, _, Side::Close | Side::Drain) => {}
                    (_, Side::Wait | Side::Drain, Side::Wait) => return Poll::Pending,
                }
            }
            close(connection.as_mut());
            phase = Phase::Closing;
            // From now on the timer counts quiet ticks toward the close's deadline; the
            // side waker is marked so that the new timer gets registered.
            clock.count_to(CLOSE_GRACE);
            side.woken.store(true, Ordering::Release);
            // The connection is polled again: its shutdown has to start.
        }
    })
    .await
}

/// Where a connection is in its life, for [`drive`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Serving.
    Open,
    /// The server stopped: an HTTP/1 connection answers what it is sent with
    /// `Connection: close`, and is closed once quiet for [`LAST_REQUEST_GRACE`].
    Draining,
    /// Shut down gracefully; dropped once quiet for [`CLOSE_GRACE`].
    Closing,
}

/// Each change of `reap`; ends when the server is gone.
fn reaps(reap: watch::Receiver<()>) -> impl Stream<Item = ()> {
    futures_util::stream::unfold(reap, |mut reap| async move {
        reap.changed().await.ok().map(|()| ((), reap))
    })
}

/// What the idle timer or the signals ask of a connection.
enum Side {
    /// Nothing: go on serving.
    Wait,
    /// The server stopped: drain it (see [`Phase::Draining`]).
    Drain,
    /// Shut it down gracefully.
    Close,
    /// Drop it now.
    Drop,
}

/// The idle timer of [`drive`]: counts quiet ticks toward a close (or, once closing,
/// toward dropping the connection), and how long the client has taken nothing.
struct QuietClock {
    timer: tokio::time::Interval,
    /// Quiet ticks in a row that close the connection (or drop it once closing).
    quiet_needed: u32,
    /// Quiet ticks in a row so far.
    quiet_ticks: u32,
    /// Since when the connection has waited on its client without progress.
    stalled_since: Option<Instant>,
    timeouts: Timeouts,
}

impl QuietClock {
    /// A clock for a connection that has just begun.
    fn new(timeouts: Timeouts) -> QuietClock {
        let period = timeouts.period();
        QuietClock {
            timer: quiet_timer(period),
            quiet_needed: ticks_in(timeouts.idle, period),
            quiet_ticks: 0,
            stalled_since: None,
            timeouts,
        }
    }

    /// Whether the client has taken nothing since the last tick or longer.
    fn stalled(&self) -> bool {
        self.stalled_since.is_some()
    }

    /// Takes the ticks that are due, until the timer is pending again (so that it is
    /// registered with `cx`): `Drop` when the client took nothing for
    /// `server.send_timeout` or a closing connection stayed quiet past [`CLOSE_GRACE`],
    /// `Close` when the connection was idle for `server.idle_timeout`.
    fn poll(&mut self, cx: &mut Context<'_>, activity: &Activity, closing: bool) -> Side {
        let mut side = Side::Wait;
        while self.timer.poll_tick(cx).is_ready() {
            let (waiting, progressed) = activity.send.look();
            self.stalled_since = match waiting && !progressed {
                true => self.stalled_since.or_else(|| Some(Instant::now())),
                false => None,
            };
            let send_timeout = self.timeouts.send;
            if self
                .stalled_since
                .is_some_and(|since| since.elapsed() >= send_timeout)
            {
                tracing::debug!(
                    ?send_timeout,
                    "dropping a connection whose client takes nothing"
                );
                return Side::Drop;
            }
            self.quiet_ticks = if activity.quiet() {
                self.quiet_ticks + 1
            } else {
                0
            };
            if self.quiet_ticks < self.quiet_needed {
                continue;
            }
            if closing {
                tracing::debug!(
                    grace = ?CLOSE_GRACE,
                    "dropping a connection that did not finish closing"
                );
                return Side::Drop;
            }
            let idle_timeout = self.timeouts.idle;
            tracing::debug!(?idle_timeout, "closing an idle connection");
            side = Side::Close;
        }
        side
    }

    /// Restarts the count for a connection that drains (closed after `span` with no
    /// request open) or is being shut down gracefully (dropped after `span`).
    fn count_to(&mut self, span: Duration) {
        self.timer = quiet_timer(span);
        self.quiet_needed = IDLE_TICKS;
        self.quiet_ticks = 0;
    }
}

/// The two signals of [`drive`], polled with its side waker.
struct SignalWatch<'a, S, R> {
    /// Completes when the server stops.
    stop: Pin<&'a mut S>,
    /// Yields at each reap; ends when the server is gone.
    reaps: Pin<&'a mut R>,
    /// `reaps` has not ended.
    reaping: bool,
}

impl<S, R> SignalWatch<'_, S, R>
where
    S: Future,
    R: Stream<Item = ()>,
{
    /// Polls both until pending (so that each is registered with `cx`): `Drain` at stop,
    /// `Close` on a reap with no request open; `Drop` on a reap when the client is
    /// `stalled`.
    fn poll(&mut self, cx: &mut Context<'_>, activity: &Activity, stalled: bool) -> Side {
        let mut side = Side::Wait;
        if self.stop.as_mut().poll(cx).is_ready() {
            side = Side::Drain;
        }
        while self.reaping {
            match self.reaps.as_mut().poll_next(cx) {
                Poll::Ready(Some(())) if !activity.has_open_request() => {
                    if !matches!(side, Side::Drain) {
                        side = Side::Close;
                    }
                }
                // Its client took nothing for a tick or more: the first to go for a
                // client that would.
                Poll::Ready(Some(())) if stalled => {
                    tracing::debug!("dropping a stalled connection to make room");
                    return Side::Drop;
                }
                Poll::Ready(Some(())) => {}
                Poll::Ready(None) => self.reaping = false,
                Poll::Pending => break,
            }
        }
        side
    }
}

/// The tick of [`quiet_timer`]`(period)`.
fn tick_of(period: Duration) -> Duration {
    // At least a millisecond: a zero period would make the interval panic.
    (period / IDLE_TICKS).max(Duration::from_millis(1))
}

/// Ticks of [`quiet_timer`]`(period)` in `span`, rounded up.
fn ticks_in(span: Duration, period: Duration) -> u32 {
    let ticks = span.as_nanos().div_ceil(tick_of(period).as_nanos());
    u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// A timer ticking [`IDLE_TICKS`] times per `period`, from one tick from now.
fn quiet_timer(period: Duration) -> tokio::time::Interval {
    let tick = tick_of(period);
    let mut timer = tokio::time::interval_at(Instant::now() + tick, tick);
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    timer
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    /// A body that hands out `frame` and then waits for ever, declaring `hint`.
    struct FrameThenWait {
        frame: Option<Bytes>,
        hint: SizeHint,
    }

    impl Body for FrameThenWait {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            match self.get_mut().frame.take() {
                Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                None => Poll::Pending,
            }
        }

        fn size_hint(&self) -> SizeHint {
            self.hint
        }
    }

    /// A tracked body of `data`, declaring its exact length or none, and its connection.
    fn tracked(data: &'static [u8], exact: bool) -> (Pin<Box<TrackedBody>>, Arc<Activity>) {
        let hint = match exact {
            true => SizeHint::with_exact(data.len() as u64),
            false => SizeHint::default(),
        };
        let body = FrameThenWait {
            frame: Some(Bytes::from_static(data)),
            hint,
        };
        let activity = Arc::new(Activity::default());
        let body = TrackedBody::new(body.boxed_unsync(), activity.request());
        (Box::pin(body), activity)
    }

    fn poll(body: &mut Pin<Box<TrackedBody>>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        body.as_mut()
            .poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_body_of_known_length_closes_its_request_with_its_last_byte() {
        let (mut body, activity) = tracked(b"whole", true);
        assert!(activity.has_open_request());
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Ok(_)))));
        assert!(
            !activity.has_open_request(),
            "every declared byte was handed out, though the body has not said it ended"
        );
        assert!(poll(&mut body).is_pending());
        drop(body);
        assert_eq!(activity.open.load(Ordering::Relaxed), 0, "closed only once");
    }

    #[test]
    fn a_body_of_unknown_length_keeps_its_request_open_until_it_ends() {
        let (mut body, activity) = tracked(b"part", false);
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Ok(_)))));
        assert!(poll(&mut body).is_pending());
        assert!(activity.has_open_request());
        drop(body);
        assert!(!activity.has_open_request());
    }
}
