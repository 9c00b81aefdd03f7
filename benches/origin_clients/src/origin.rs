//! What every candidate client provides: a request in, a streamed response out.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use tokio::net::TcpStream;

/// Any client's error, and its response body's.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An HTTP/1.1 client to the one origin, with its idle connections.
pub(crate) trait Client: 'static {
    /// The response body: it holds its connection until its end, then pools it.
    type Body: http_body::Body<Data = Bytes, Error = BoxError> + 'static;

    /// Sends `request` (origin-form target, its header fields already those the origin
    /// is to see) and returns the response head; the body follows as it is read.
    async fn send(&self, request: Request<()>) -> Result<Response<Self::Body>, BoxError>;
}

/// A new TCP connection to `origin`, without Nagle's delay, as every candidate opens one.
pub(crate) async fn connect(origin: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(origin).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}
