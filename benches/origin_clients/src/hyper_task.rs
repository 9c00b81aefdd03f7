//! Candidate `hyper-task`: hyper's `client::conn::http1`, each connection's future a
//! task of its own, as secondhit's origin pool (crates/proxy/src/origin/pool.rs) runs it.
//! A request goes to that task through hyper's dispatch channel and its answer comes back
//! through a oneshot; the body's bytes through the body's channel.

use std::net::SocketAddr;
use std::task::Context;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use crate::idle::Idle;
use crate::origin::{self, BoxError};
use crate::pooled::{Lease, Pooled};

/// Where requests go on one connection; its task does the I/O.
type Sender = http1::SendRequest<Empty<Bytes>>;

/// The client: idle senders, and where to open new connections.
pub(crate) struct HyperTask {
    origin: SocketAddr,
    idle: Idle<Sender>,
}

impl HyperTask {
    /// A client of `origin` with no connection yet.
    pub(crate) fn new(origin: SocketAddr) -> Self {
        HyperTask {
            origin,
            idle: Idle::new(),
        }
    }

    /// An idle connection that its task has not seen closed, or a new one; and whether it
    /// was idle.
    async fn connection(&self) -> Result<(Sender, bool), BoxError> {
        while let Some(sender) = self.idle.take() {
            if !sender.is_closed() {
                return Ok((sender, true));
            }
        }
        let io = TokioIo::new(origin::connect(self.origin).await?);
        let (sender, connection) = http1::handshake(io).await?;
        tokio::task::spawn_local(async move {
            // A failure also reaches the request or body that was using the connection.
            let _ = connection.await;
        });
        Ok((sender, false))
    }
}

impl origin::Client for HyperTask {
    type Body = Pooled<Incoming, Sender>;

    async fn send(&self, request: Request<()>) -> Result<Response<Self::Body>, BoxError> {
        let mut sender = loop {
            let (mut sender, reused) = self.connection().await?;
            match sender.ready().await {
                Ok(()) => break sender,
                // Closed while idle: nothing was sent, another connection will do.
                Err(_) if reused => continue,
                Err(error) => return Err(error.into()),
            }
        };
        let response = sender.send_request(request.map(|()| Empty::new())).await?;
        Ok(response.map(|body| Pooled::new(body, sender, self.idle.clone())))
    }
}

/// A sender is all a body holds: its connection's task does the I/O.
impl Lease<Incoming> for Sender {
    type Idle = Sender;

    fn drive(&mut self, _: &mut Context<'_>) -> bool {
        false
    }

    fn reusable(self, _: &mut Incoming) -> Option<Sender> {
        Some(self)
    }
}
