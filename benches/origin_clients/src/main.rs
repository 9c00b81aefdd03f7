//! The origin-client comparison harness: one HTTP/1 proxy front (hyper's server, the
//! same for every candidate) and, behind it, one of four HTTP/1.1 clients to the origin,
//! so that what a pass-through costs in CPU can be set side by side for each client.
//!
//! The candidates (`--client`):
//! - `hyper-task`: hyper's `client::conn::http1` with each connection's future spawned as
//!   a task of its own, as secondhit's origin pool runs it today;
//! - `hyper-inline`: the same connection, its future polled by the request's own task
//!   beside the response and then by the response body until its end, never spawned;
//! - `pingora` (feature `pingora`): pingora-core's HTTP/1 client session, a plain struct
//!   driven by the request's task, on a TCP stream this harness connects;
//! - `lean` (feature `lean`): the product's own client (`crates/h1`, `secondhit-h1`).
//!
//! Everything else is shared: a single-threaded tokio runtime (one secondhit worker), a
//! task per client connection (keep-alive), the header work a proxy does on both heads
//! (hop-by-hop fields removed, `Host` set to the origin's, `Via` added), the answer
//! streamed back as it comes, and origin connections kept between requests in one plain
//! list of idle connections per process (most recently used first, no lock: one thread).
//! Only `GET` and `HEAD` are forwarded (405 otherwise); a request the origin did not
//! answer gets a 502. There are no timeouts. Idle connections are not checked before
//! use: one that the origin closed meanwhile shows when it is used. The hyper candidates
//! then send the request on a new connection (hyper's sender says it closed before
//! anything was sent), and so does `lean` (it gives the request back when nothing came
//! back); pingora's session has consumed the request's head by then, so `pingora` answers
//! 502. The origin of `benches/origin_clients.sh` keeps connections open for the whole
//! run, so that no run meets one.
//!
//! Build and run (see `benches/origin_clients.sh`, which does both for every candidate):
//!
//! ```text
//! cd benches/origin_clients && cargo build --release --features pingora
//! taskset -c 0 target/release/origin_clients --client pingora \
//!     --listen 127.0.0.1:8090 --origin 127.0.0.1:8081 &
//! taskset -c 1 wrk -t1 -c64 -d10s --latency http://127.0.0.1:8090/pass/one-1k
//! ```

mod hyper_inline;
mod hyper_task;
mod idle;
#[cfg(feature = "lean")]
mod lean;
mod origin;
#[cfg(feature = "pingora")]
mod pingora;
mod pooled;
mod server;

use std::error::Error;
use std::net::SocketAddr;

/// Which origin client forwards the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Candidate {
    HyperTask,
    HyperInline,
    Pingora,
    Lean,
}

impl Candidate {
    const ALL: [Candidate; 4] = [
        Candidate::HyperTask,
        Candidate::HyperInline,
        Candidate::Pingora,
        Candidate::Lean,
    ];

    /// Its name on the command line.
    fn name(self) -> &'static str {
        match self {
            Candidate::HyperTask => "hyper-task",
            Candidate::HyperInline => "hyper-inline",
            Candidate::Pingora => "pingora",
            Candidate::Lean => "lean",
        }
    }
}

/// What the command line asks for.
struct Args {
    client: Candidate,
    listen: SocketAddr,
    origin: SocketAddr,
}

fn usage() -> String {
    let names: Vec<_> = Candidate::ALL.iter().map(|client| client.name()).collect();
    format!(
        "usage: origin_clients --client {} --listen ADDR --origin ADDR",
        names.join("|")
    )
}

/// Reads `--client NAME --listen ADDR --origin ADDR`, in any order.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut client, mut listen, mut origin) = (None, None, None);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(usage)?;
        match flag.as_str() {
            "--client" => {
                let found = Candidate::ALL.into_iter().find(|c| c.name() == value);
                client = Some(found.ok_or_else(usage)?);
            }
            "--listen" => listen = Some(value.parse().map_err(|e| format!("--listen: {e}"))?),
            "--origin" => origin = Some(value.parse().map_err(|e| format!("--origin: {e}"))?),
            _ => return Err(usage()),
        }
    }
    match (client, listen, origin) {
        (Some(client), Some(listen), Some(origin)) => Ok(Args {
            client,
            listen,
            origin,
        }),
        _ => Err(usage()),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args(std::env::args().skip(1))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    // Local tasks, on the one thread: the idle list has no lock, and no future or body
    // needs to be `Send` (pingora's body is not).
    let tasks = tokio::task::LocalSet::new();
    let (listen, origin) = (args.listen, args.origin);
    tasks.block_on(&runtime, async move {
        match args.client {
            Candidate::HyperTask => {
                server::run(listen, hyper_task::HyperTask::new(origin), origin).await
            }
            Candidate::HyperInline => {
                server::run(listen, hyper_inline::HyperInline::new(origin), origin).await
            }
            #[cfg(feature = "pingora")]
            Candidate::Pingora => server::run(listen, pingora::Pingora::new(origin), origin).await,
            #[cfg(feature = "lean")]
            Candidate::Lean => server::run(listen, lean::Lean::new(origin), origin).await,
            #[cfg(not(all(feature = "pingora", feature = "lean")))]
            other => {
                let name = other.name();
                Err(format!("built without the `{name}` feature (--features {name})").into())
            }
        }
    })
}
