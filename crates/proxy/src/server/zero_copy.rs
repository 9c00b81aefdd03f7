//! The client socket, sending mapped bodies straight from their files.
//!
//! hyper writes a response as slices of `Bytes` (`poll_write_vectored`). When one of
//! them is (part of) a body the memory tier holds as a sealed memory file
//! ([`store::mapped::with_file_span`]), [`ZeroCopyStream`] sends it with `sendfile(2)`
//! from that file instead of copying it from memory into the socket, as nginx does
//! with `sendfile on`; the kernel then hands the file's pages to the socket.
//! Slices before it are written first, with `MSG_MORE`, and hyper asks again for the
//! rest, so a response head and its body take two system calls but leave in one
//! packet. Any other slice (heads, heap bodies) is written as it would be without this
//! stream. TLS connections are not wrapped in it at all: rustls must encrypt every
//! byte, so it reads a mapped body from memory like any other. A short `sendfile` is a
//! short write, which hyper continues like any other.
//!
//! [`store::mapped::with_file_span`]: crate::store::mapped::with_file_span

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Slices shorter than this are written from memory without asking whether they are
/// mapped: the copy costs less than the lookup and the extra system call.
const SENDFILE_MIN: usize = 16 * 1024;

/// A client TCP connection that sends mapped bodies with `sendfile(2)`.
pub(super) struct ZeroCopyStream {
    io: TcpStream,
}

impl ZeroCopyStream {
    /// Wraps an accepted connection.
    pub(super) fn new(io: TcpStream) -> ZeroCopyStream {
        ZeroCopyStream { io }
    }

    /// Sends `len` bytes of `file` from `offset` once the socket can take them.
    #[cfg(target_os = "linux")]
    fn poll_sendfile(
        &self,
        cx: &mut Context<'_>,
        file: &std::fs::File,
        mut offset: u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, || {
            rustix::fs::sendfile(&self.io, file, Some(&mut offset), len)
        })
    }

    /// Writes `bufs` with `MSG_MORE`: the body that `sendfile` sends next leaves in the
    /// same packet instead of the head going out alone, which saves the loopback or
    /// network a packet (and its ACK) per response. `sendfile`'s last chunk pushes both.
    #[cfg(target_os = "linux")]
    fn poll_write_more(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        use rustix::net::{SendAncillaryBuffer, SendFlags};
        self.poll_send(cx, || {
            let flags = SendFlags::MORE | SendFlags::NOSIGNAL;
            rustix::net::sendmsg(&self.io, bufs, &mut SendAncillaryBuffer::default(), flags)
        })
    }

    /// Runs the non-blocking `send` once the socket can take bytes, again after each
    /// spurious readiness.
    #[cfg(target_os = "linux")]
    fn poll_send(
        &self,
        cx: &mut Context<'_>,
        mut send: impl FnMut() -> rustix::io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            std::task::ready!(self.io.poll_write_ready(cx))?;
            let sent = self.io.try_io(tokio::io::Interest::WRITABLE, || {
                send().map_err(io::Error::from)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                sent => return Poll::Ready(sent),
            }
        }
    }
}

impl AsyncRead for ZeroCopyStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for ZeroCopyStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(data)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        #[cfg(target_os = "linux")]
        for (index, buf) in bufs.iter().enumerate() {
            if buf.len() < SENDFILE_MIN {
                continue;
            }
            let sent = crate::store::mapped::with_file_span(buf, |file, offset| {
                (index == 0).then(|| this.poll_sendfile(cx, file, offset, buf.len()))
            });
            match sent {
                Some(Some(sent)) => return sent,
                // What comes before goes first; hyper calls again for the rest.
                Some(None) => return this.poll_write_more(cx, &bufs[..index]),
                None => {}
            }
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
