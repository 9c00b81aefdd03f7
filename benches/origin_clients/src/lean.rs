//! Candidate `lean`: the product's own HTTP/1.1 client (`crates/h1`, package
//! `secondhit-h1`). `Connection::send` takes the connection and gives a response whose
//! body reads the socket in the polling task; once the body has ended, and if the
//! connection can take another request, `ResponseBody::take_connection` gives it back.

use std::net::SocketAddr;
use std::task::Context;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use secondhit_h1::{Connection, ResponseBody};
use tokio::net::TcpStream;

use crate::idle::Idle;
use crate::origin::{self, BoxError};
use crate::pooled::{Lease, Pooled};

/// The client: idle connections, and where to open new ones.
pub(crate) struct Lean {
    origin: SocketAddr,
    idle: Idle<Connection<TcpStream>>,
}

impl Lean {
    /// A client of `origin` with no connection yet.
    pub(crate) fn new(origin: SocketAddr) -> Self {
        Lean {
            origin,
            idle: Idle::new(),
        }
    }
}

impl origin::Client for Lean {
    type Body = Pooled<ResponseBody<TcpStream>, ()>;

    async fn send(&self, request: Request<()>) -> Result<Response<Self::Body>, BoxError> {
        let mut request = request.map(|()| Empty::<Bytes>::new());
        loop {
            let (connection, reused) = match self.idle.take() {
                Some(connection) => (connection, true),
                None => (Connection::new(origin::connect(self.origin).await?), false),
            };
            match connection.send(request).await {
                Ok(response) => {
                    return Ok(response.map(|body| Pooled::new(body, (), self.idle.clone())));
                }
                Err(failed) => match failed.into_parts() {
                    // Closed while idle: nothing came back, and the request did; it goes
                    // out on another connection.
                    (_, Some(unsent)) if reused => request = unsent,
                    (error, _) => return Err(error.into()),
                },
            }
        }
    }
}

/// The body holds the connection itself, and gives it back once ended if it can take
/// another request: the lease is nothing.
impl Lease<ResponseBody<TcpStream>> for () {
    type Idle = Connection<TcpStream>;

    fn drive(&mut self, _: &mut Context<'_>) -> bool {
        false
    }

    fn reusable(self, body: &mut ResponseBody<TcpStream>) -> Option<Connection<TcpStream>> {
        body.take_connection()
    }
}
