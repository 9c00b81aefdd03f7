//! What can go wrong in an exchange, by where it went wrong.

use std::io;

/// An error of the request body given to [`crate::Connection::send`], boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The connection ended (closed or reset) before any byte of a response came: the
    /// server answered nothing. `written` says whether any byte of the request went out.
    #[error("the connection ended before any response byte")]
    NothingReceived {
        /// Whether any byte of the request was written before.
        written: bool,
        /// The end as the socket reported it (`UnexpectedEof` for a close).
        #[source]
        source: io::Error,
    },
    /// The connection ended (closed or reset) in the middle of the response head.
    #[error("the connection ended in the middle of the response head")]
    HeadCut(#[source] io::Error),
    /// The connection ended (closed, reset or failed) before the end of the response body.
    #[error("the connection ended before the end of the response body")]
    BodyCut(#[source] io::Error),
    /// The response head is not valid HTTP/1.x.
    #[error("invalid response head: {0}")]
    BadHead(#[source] httparse::Error),
    /// The response head is larger than [`crate::Limits::max_head_bytes`].
    #[error("the response head is larger than {0} bytes")]
    HeadTooLarge(usize),
    /// The response's framing is invalid.
    #[error("invalid response framing: {0}")]
    Framing(#[from] Framing),
    /// The server switched protocols (101), which no request this crate sends asks for.
    #[error("the server switched protocols (101) for a request that asked for no upgrade")]
    SwitchingProtocols,
    /// The request body failed while it was sent.
    #[error("the request body failed")]
    RequestBody(#[source] BoxError),
    /// The request body does not match its `Content-Length`, or that field is invalid.
    #[error("the request body does not match its Content-Length")]
    RequestBodyLength,
}

/// What is wrong with a response's framing (RFC 9112 §6 and §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Framing {
    /// `Content-Length` is not a number, or its values differ.
    #[error("invalid Content-Length")]
    ContentLength,
    /// `Transfer-Encoding` in an HTTP/1.0 response, which cannot have one.
    #[error("Transfer-Encoding in an HTTP/1.0 response")]
    TransferEncodingInHttp10,
    /// A chunk-size line that is not one, or longer than the limit.
    #[error("invalid chunk size line")]
    ChunkSize,
    /// A chunk's data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    ChunkEnd,
    /// A trailer section that is not one, or longer than the limit.
    #[error("invalid trailer section")]
    Trailers,
}

impl From<httparse::Error> for Error {
    fn from(error: httparse::Error) -> Error {
        Error::BadHead(error)
    }
}

/// A request that got no response: why, and the request itself when it may go out again
/// as it was.
pub struct SendError<B> {
    error: Error,
    request: Option<http::Request<B>>,
}

impl<B> SendError<B> {
    pub(crate) fn new(error: Error, request: Option<http::Request<B>>) -> SendError<B> {
        SendError { error, request }
    }

    /// Why the exchange failed.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The error, and the request when nothing was received ([`Error::NothingReceived`])
    /// and none of its body was taken: it can be sent again, whole, on another connection.
    /// Whether it should be (it may have reached the server) is the caller's choice.
    pub fn into_parts(self) -> (Error, Option<http::Request<B>>) {
        (self.error, self.request)
    }
}

impl<B> std::fmt::Debug for SendError<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendError")
            .field("error", &self.error)
            .field("request_back", &self.request.is_some())
            .finish()
    }
}

impl<B> std::fmt::Display for SendError<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<B> std::error::Error for SendError<B> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
