//! A measurement, not a proxy: how fast a hand-written HTTP/1.1 forwarder on tokio goes
//! where secondhit's pass-through runs on hyper. It parses heads with `httparse`,
//! rebuilds them as a proxy must (hop-by-hop fields out, `Via`, `X-Forwarded-For` and
//! `X-Forwarded-Proto` in), keeps origin connections in a plain list and does their I/O
//! in the client's own task, so a request never crosses to another task.
//!
//! It handles what `benches/vs_nginx.sh`'s pass-through case sends and nothing more:
//! requests without a body, answers framed by `Content-Length`. Anything else ends the
//! client's connection. With `examples/bare_proxy.rs` (hyper on both sides, nothing
//! else) it brackets what the HTTP engine costs, for the decision whether secondhit's
//! pass-through should leave hyper. Run it where the bench runs secondhit:
//!
//! ```text
//! cargo build --release --example raw_forward
//! taskset -c 0 target/release/examples/raw_forward 127.0.0.1:8090 127.0.0.1:8081 &
//! taskset -c 1 wrk -t1 -c64 -d10s --latency http://127.0.0.1:8090/pass/one-1k
//! ```
//!
//! The figures: `benches/RESULTS.md`, "the pass-through floor".

use std::cell::RefCell;
use std::error::Error;
use std::io::{self, Write};
use std::net::IpAddr;
use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The hop-by-hop fields (RFC 9110 §7.6.1), which a proxy does not forward.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The most header fields a head may have.
const MAX_FIELDS: usize = 64;

/// The longest request head read.
const MAX_HEAD: usize = 64 * 1024;

/// Idle origin connections, shared by the client tasks of the one thread.
type Pool = Rc<RefCell<Vec<TcpStream>>>;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(origin)) = (args.next(), args.next()) else {
        return Err("usage: raw_forward LISTEN_ADDR ORIGIN_HOST:PORT".into());
    };
    // The bench's config names the origin as a URL.
    let origin = origin.trim_start_matches("http://").to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Local tasks: the pool is one thread's, with no lock.
    let tasks = tokio::task::LocalSet::new();
    tasks.block_on(&runtime, async move {
        let pool = Pool::default();
        let listener = TcpListener::bind(&listen).await?;
        loop {
            let (client, peer) = listener.accept().await?;
            client.set_nodelay(true)?;
            let (pool, origin) = (pool.clone(), origin.clone());
            tokio::task::spawn_local(async move {
                // A connection's end, clean or not, concerns only that connection.
                let _ = serve(client, peer.ip(), &pool, &origin).await;
            });
        }
    })
}

/// Forwards the requests of one client connection until it closes or sends something
/// this forwarder does not handle.
async fn serve(mut client: TcpStream, peer: IpAddr, pool: &Pool, origin: &str) -> io::Result<()> {
    let mut request = Vec::with_capacity(8192);
    let mut response = Vec::with_capacity(16384);
    let mut out = Vec::with_capacity(4096);
    loop {
        let Some(head_len) = read_request(&mut client, &mut request, &mut out, peer).await? else {
            return Ok(());
        };
        request.drain(..head_len);
        let taken = pool.borrow_mut().pop();
        let mut upstream = match taken {
            Some(upstream) => upstream,
            None => {
                let upstream = TcpStream::connect(origin).await?;
                upstream.set_nodelay(true)?;
                upstream
            }
        };
        upstream.write_all(&out).await?;
        read_response(&mut upstream, &mut response, &mut out).await?;
        pool.borrow_mut().push(upstream);
        client.write_all(&out).await?;
    }
}

/// Reads one request head into `buffer` and writes the head to send to the origin into
/// `out`; returns the head's length, or `None` when the client closed or sent a request
/// this forwarder does not handle (a body, or a malformed head).
async fn read_request(
    client: &mut TcpStream,
    buffer: &mut Vec<u8>,
    out: &mut Vec<u8>,
    peer: IpAddr,
) -> io::Result<Option<usize>> {
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let mut head = httparse::Request::new(&mut fields);
        match head.parse(buffer) {
            Ok(httparse::Status::Complete(len)) => {
                let (Some(method), Some(target)) = (head.method, head.path) else {
                    return Ok(None);
                };
                let has_body = (head.headers.iter()).any(|f| {
                    ["content-length", "transfer-encoding"]
                        .iter()
                        .any(|n| f.name.eq_ignore_ascii_case(n))
                });
                if has_body {
                    return Ok(None);
                }
                out.clear();
                write!(out, "{method} {target} HTTP/1.1\r\n")?;
                copy_end_to_end(head.headers, out);
                write!(out, "Via: 1.1 secondhit\r\nX-Forwarded-For: {peer}\r\n")?;
                out.extend_from_slice(b"X-Forwarded-Proto: http\r\n\r\n");
                return Ok(Some(len));
            }
            Ok(httparse::Status::Partial) if buffer.len() >= MAX_HEAD => return Ok(None),
            Ok(httparse::Status::Partial) => {
                if fill(client, buffer).await? == 0 {
                    return Ok(None);
                }
            }
            Err(_) => return Ok(None),
        }
    }
}

/// Reads one whole response from the origin into `buffer` and writes the response for
/// the client into `out`. An answer without `Content-Length` is an error: this
/// forwarder does not frame any other.
async fn read_response(
    upstream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    buffer.clear();
    let unsupported = |what: &str| io::Error::new(io::ErrorKind::Unsupported, what.to_owned());
    let (head_len, body_len) = loop {
        if fill(upstream, buffer).await? == 0 {
            return Err(unsupported("the origin closed mid-response"));
        }
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let mut head = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(head_len)) = head.parse(buffer) else {
            continue;
        };
        let length = (head.headers.iter())
            .find(|f| f.name.eq_ignore_ascii_case("content-length"))
            .and_then(|f| {
                std::str::from_utf8(f.value)
                    .ok()?
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .ok_or_else(|| unsupported("an answer without Content-Length"))?;
        out.clear();
        let (code, reason) = (head.code.unwrap_or(502), head.reason.unwrap_or(""));
        write!(out, "HTTP/1.1 {code} {reason}\r\n")?;
        copy_end_to_end(head.headers, out);
        out.extend_from_slice(b"Via: 1.1 secondhit\r\n\r\n");
        break (head_len, length);
    };
    while buffer.len() < head_len + body_len {
        if fill(upstream, buffer).await? == 0 {
            return Err(unsupported("the origin closed mid-body"));
        }
    }
    out.extend_from_slice(&buffer[head_len..head_len + body_len]);
    Ok(())
}

/// Appends the end-to-end fields of `fields` to `out`, one line each.
fn copy_end_to_end(fields: &[httparse::Header<'_>], out: &mut Vec<u8>) {
    let end_to_end = fields
        .iter()
        .filter(|f| !HOP_BY_HOP.iter().any(|n| f.name.eq_ignore_ascii_case(n)));
    for field in end_to_end {
        out.extend_from_slice(field.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(field.value);
        out.extend_from_slice(b"\r\n");
    }
}

/// Reads what `stream` has into the spare room of `buffer` (growing it when full);
/// returns how many bytes came, 0 at the end of the stream.
async fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<usize> {
    if buffer.len() == buffer.capacity() {
        buffer.reserve(buffer.capacity().max(4096));
    }
    stream.read_buf(buffer).await
}
