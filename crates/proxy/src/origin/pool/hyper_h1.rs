//! The pool's connections as hyper's `client::conn::http1` runs them (the default): a
//! sender per connection, whose spawned task does the connection's I/O.

use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body::Frame;
use hyper::client::conn::http1;

use super::super::first_byte;
use super::super::{OriginError, RequestBody};
use super::{Failed, Io, List, Pool, PooledBody, Usable};
use crate::config::RetryReason;

/// Where requests go on one connection; its connection task does the I/O.
pub(super) type Conn = http1::SendRequest<RequestBody>;

/// What an idle sender can do now.
pub(super) fn usable(sender: &mut Conn) -> Usable {
    if sender.is_closed() {
        Usable::Closed
    } else if sender.is_ready() {
        Usable::Ready
    } else {
        Usable::Busy
    }
}

/// Whether a sender whose body ended may be pooled: its connection is still open.
pub(super) fn may_keep(sender: &Conn) -> bool {
    !sender.is_closed()
}

/// [`Pool::send`] on hyper's connections, from `list`.
pub(super) async fn send(
    pool: &Pool,
    list: &Arc<List>,
    origin: &Uri,
    mut request: Request<RequestBody>,
) -> Result<Response<PooledBody>, Failed> {
    let progress = first_byte::watch(&mut request);
    loop {
        let (mut sender, reused) = match list.take() {
            Some(sender) => (sender, true),
            None => match pool.connect(origin).await {
                Ok(sender) => (sender, false),
                Err(error) => return Err(Failed::unsent(error, request)),
            },
        };
        // A new connection takes requests once its task has run.
        if sender.ready().await.is_err() {
            if reused {
                continue;
            }
            let closed = "the new origin connection closed before the request was sent";
            return Err(Failed::unsent(OriginError::Connect(closed.into()), request));
        }
        let sending = sender.try_send_request(request);
        let first_byte = pool.timeouts.first_byte;
        let Some(sent) = first_byte::within(sending, progress.as_deref(), first_byte).await else {
            return Err(Failed::timed_out(first_byte));
        };
        match sent {
            // The proxy forwards no upgrade: a switch nobody asked for breaks the
            // exchange, and relayed it would end the client's connection.
            Ok(response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
                return Err(Failed::switched());
            }
            Ok(response) => {
                let list = Arc::downgrade(list);
                return Ok(response.map(|body| PooledBody::new(body, Some(sender), list)));
            }
            Err(mut failed) => match failed.take_message() {
                // The origin closed the idle connection before the request was
                // written: nothing was sent, so it goes out on another one.
                Some(unsent) if reused => request = unsent,
                _ => return Err(sent_failed(failed.into_error())),
            },
        }
    }
}

/// The exchange failed after (some of) the request was written.
fn sent_failed(error: hyper::Error) -> Failed {
    let reason = if error.is_user() {
        // The client's body failed as it streamed: no server would do better.
        None
    } else if error.is_parse() {
        Some(RetryReason::InvalidHeader)
    } else {
        // Reset, closed (a reused connection the server closed under the request),
        // or cut before a complete head.
        Some(RetryReason::Error)
    };
    Failed::sent(error, reason)
}

/// Starts the task of a new connection over `io`.
pub(super) async fn open(io: Io) -> Result<Conn, OriginError> {
    let (sender, connection) = http1::handshake(io)
        .await
        .map_err(|error| OriginError::Connect(error.into()))?;
    tokio::spawn(async move {
        // A failure also reaches the request or body that was using the connection.
        if let Err(error) = connection.await {
            tracing::debug!(%error, "origin connection ended");
        }
    });
    Ok(sender)
}

/// A response body's own type: hyper's, which its connection's task feeds.
pub(super) type Incoming = hyper::body::Incoming;

/// What a [`PooledBody`] holds beside its body: the connection's sender, until it went
/// back to the pool or the body broke.
pub(super) type Held = Option<Conn>;

/// The body's error.
pub(super) type BodyError = hyper::Error;

/// Whether the body's connection is free after `frame`: at the body's end. A broken body
/// leaves its connection mid-message: it is never reused.
pub(super) fn frees(
    _: &Incoming,
    held: &mut Held,
    frame: &Poll<Option<Result<Frame<Bytes>, BodyError>>>,
) -> bool {
    match frame {
        Poll::Ready(None) => true,
        Poll::Ready(Some(Err(_))) => {
            *held = None;
            false
        }
        Poll::Ready(Some(Ok(_))) | Poll::Pending => false,
    }
}

/// The connection of a body that has ended, to pool again.
pub(super) fn give_back(_: &mut Incoming, held: &mut Held) -> Option<Conn> {
    held.take()
}
