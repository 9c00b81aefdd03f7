//! Candidate `hyper-inline`: hyper's `client::conn::http1` with no task of its own. The
//! request's task polls the connection's future beside the answer's until the head has
//! come, then the response body polls it between two polls of its own whenever it has
//! nothing, until the body ends, when sender and connection go back to the idle list
//! together. An idle
//! connection is polled by nobody: whatever happened to it shows when it is taken.

use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::task::Context;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::idle::Idle;
use crate::origin::{self, BoxError};
use crate::pooled::{Lease, Pooled};

/// One connection: where requests go, and the future that does its I/O.
pub(crate) struct Connection {
    sender: http1::SendRequest<Empty<Bytes>>,
    /// `None` once it has ended (the origin closed it, or it failed).
    io: Option<http1::Connection<TokioIo<TcpStream>, Empty<Bytes>>>,
}

impl Connection {
    /// Lets the connection do what it can (write the request, read what came), with the
    /// caller's waker; notes its end.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(io) = &mut self.io
            && Pin::new(io).poll(cx).is_ready()
        {
            // Ended, cleanly or not: the request or body using it sees that itself.
            self.io = None;
        }
    }

    /// Polls `future` with the connection driven before it, until it is ready.
    async fn beside<F: Future>(&mut self, future: F) -> F::Output {
        let mut future = pin!(future);
        poll_fn(|cx| {
            self.drive(cx);
            future.as_mut().poll(cx)
        })
        .await
    }
}

/// The client: idle connections, and where to open new ones.
pub(crate) struct HyperInline {
    origin: SocketAddr,
    idle: Idle<Connection>,
}

impl HyperInline {
    /// A client of `origin` with no connection yet.
    pub(crate) fn new(origin: SocketAddr) -> Self {
        HyperInline {
            origin,
            idle: Idle::new(),
        }
    }

    /// An idle connection that takes a request now, or a new one.
    async fn ready_connection(&self) -> Result<Connection, BoxError> {
        loop {
            let (mut connection, reused) = match self.idle.take() {
                Some(connection) => (connection, true),
                None => {
                    let io = TokioIo::new(origin::connect(self.origin).await?);
                    let (sender, io) = http1::handshake(io).await?;
                    let io = Some(io);
                    (Connection { sender, io }, false)
                }
            };
            let ready = poll_fn(|cx| {
                connection.drive(cx);
                connection.sender.poll_ready(cx)
            })
            .await;
            match ready {
                Ok(()) => return Ok(connection),
                // Closed while idle: nothing was sent, another connection will do.
                Err(_) if reused => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }
}

impl origin::Client for HyperInline {
    type Body = Pooled<Incoming, Connection>;

    async fn send(&self, request: Request<()>) -> Result<Response<Self::Body>, BoxError> {
        let mut connection = self.ready_connection().await?;
        let sending = connection
            .sender
            .send_request(request.map(|()| Empty::new()));
        let response = connection.beside(sending).await?;
        Ok(response.map(|body| Pooled::new(body, connection, self.idle.clone())))
    }
}

/// The body drives its connection as it is read; the connection goes back with its
/// sender unless it has ended. What is left of the exchange (the end of the message)
/// is done when it is next taken.
impl Lease<Incoming> for Connection {
    type Idle = Connection;

    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        let live = self.io.is_some();
        Connection::drive(self, cx);
        live
    }

    fn reusable(self, _: &mut Incoming) -> Option<Connection> {
        self.io.is_some().then_some(self)
    }
}
