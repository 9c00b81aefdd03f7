//! The listening sockets: bound from the config, or inherited from systemd.
//!
//! With socket activation (`secondhit.socket` beside `secondhit.service`), systemd binds the
//! sockets itself and passes them on file descriptors 3, 4, … with `LISTEN_FDS` (how many)
//! and `LISTEN_PID` (for which process) in the environment, as `sd_listen_fds(3)` describes.
//! The sockets then outlive a restart of the service: clients that connect while no
//! secondhit runs wait in the kernel's backlog and are answered by the next one, instead of
//! being refused.
//!
//! Which inherited socket is which: by the names systemd passes in `LISTEN_FDNAMES`
//! (`FileDescriptorName=` in the socket unit), `proxy`, `admin` and `tls`; without those
//! names, in order, the first is the proxy's listener and the second (if any) the admin
//! listener (a TLS socket must be named). Several sockets may be named `proxy` (or `tls`):
//! one per worker, as an upgrade (`upgrade`) passes a set bound with `SO_REUSEPORT`; their
//! count must then be the number of workers. A listener the config asks for that was not
//! inherited is bound from the config (`server.listen`, `server.admin_listen`,
//! `server.tls.listen`) as without socket activation; a socket for a listener the config
//! turns off (`admin_listen = "off"`, no `[server.tls]`) is refused at start, naming the
//! mismatch.
//!
//! Sockets are opened before the async runtime and before privileges are dropped, so a
//! port below 1024 can be bound by a process that then runs as `server.user`.
//!
//! With several workers (`server.workers`), each worker accepts on sockets of its own, so
//! no worker hands a connection to another. A bound proxy or TLS listener is then bound
//! once per worker with `SO_REUSEPORT`, and the kernel spreads new connections over them
//! by their address hash, as nginx's `reuseport` does. Before that, the address is bound
//! once without it: another process listening there already is an error, as with one
//! worker, rather than a silent share of its port. An inherited socket cannot get
//! `SO_REUSEPORT` after systemd bound it, so every worker accepts on a duplicate of it.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;

use socket2::{Domain, Protocol, Socket, Type};

use super::{StartError, runtime};
use crate::config::ServerConfig;

/// The sockets a server listens on, not yet registered with the async runtime.
#[derive(Debug)]
pub struct Listeners {
    /// Clients of the proxy (`server.listen`).
    pub proxy: TcpListener,
    /// The admin API (`server.admin_listen`); `None` when it is `"off"`.
    pub admin: Option<TcpListener>,
    /// TLS clients (`server.tls.listen`); `None` without `[server.tls]`.
    pub tls: Option<TcpListener>,
    /// The sockets of the second and later workers, one entry per worker.
    pub workers: Vec<WorkerSockets>,
}

/// The sockets one more worker accepts on: siblings of the proxy's and the TLS listener.
#[derive(Debug)]
pub struct WorkerSockets {
    /// Beside [`Listeners::proxy`].
    pub proxy: TcpListener,
    /// Beside [`Listeners::tls`].
    pub tls: Option<TcpListener>,
}

/// What each inherited socket serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Proxy,
    Admin,
    Tls,
}

impl Listeners {
    /// The listeners `config` asks for: the ones systemd passed (see the module docs),
    /// the others bound here.
    pub fn open(config: &ServerConfig) -> Result<Listeners, StartError> {
        let mut inherited = inherited()?;
        let workers = runtime::own_runtimes(config);
        let (proxy, proxy_siblings) = match std::mem::take(&mut inherited.proxy) {
            passed if !passed.is_empty() => spread(passed, workers)?,
            _ => bound(config.listen, workers, |addr, source| StartError::Bind {
                addr,
                source,
            })?,
        };
        let admin = match (config.admin_listen, inherited.admin.take()) {
            (None, Some(_)) => {
                return Err(StartError::Inherited(
                    "a socket named \"admin\" was passed, but server.admin_listen is \"off\""
                        .to_owned(),
                ));
            }
            (None, None) => None,
            (Some(_), Some(listener)) => Some(listener),
            (Some(addr), None) => Some(bind(addr, |addr, source| StartError::AdminBind {
                addr,
                source,
            })?),
        };
        let tls = match (&config.tls, std::mem::take(&mut inherited.tls)) {
            (None, passed) if !passed.is_empty() => {
                return Err(StartError::Inherited(
                    "a socket named \"tls\" was passed, but there is no [server.tls]".to_owned(),
                ));
            }
            (None, _) => None,
            (Some(_), passed) if !passed.is_empty() => Some(spread(passed, workers)?),
            (Some(tls), _) => Some(bound(tls.listen, workers, |addr, source| {
                StartError::TlsBind { addr, source }
            })?),
        };
        let (tls, mut tls_siblings) = match tls {
            Some((listener, siblings)) => {
                (Some(listener), siblings.into_iter().map(Some).collect())
            }
            None => (None, Vec::new()),
        };
        tls_siblings.resize_with(proxy_siblings.len(), || None);
        let workers = proxy_siblings
            .into_iter()
            .zip(tls_siblings)
            .map(|(proxy, tls)| WorkerSockets { proxy, tls })
            .collect();
        Ok(Listeners {
            proxy,
            admin,
            tls,
            workers,
        })
    }

    /// Duplicates of the listening sockets, each with its role's name in `LISTEN_FDNAMES`
    /// (`proxy`, `admin`, `tls`), for the process an upgrade starts (`upgrade`). Each
    /// socket is passed once, however many workers accept on it: the siblings of an
    /// inherited socket are duplicates of it, while those bound with `SO_REUSEPORT` are
    /// sockets of their own, and each must be passed, or the connections the kernel
    /// queued on it would be reset when this process closes it.
    pub fn passable(&self) -> std::io::Result<Vec<(&'static str, OwnedFd)>> {
        let siblings = |tls: bool| {
            self.workers.iter().filter_map(move |worker| match tls {
                false => Some(&worker.proxy),
                true => worker.tls.as_ref(),
            })
        };
        let proxy = std::iter::once(&self.proxy).chain(siblings(false));
        let tls = self.tls.iter().chain(siblings(true));
        let named = (proxy.map(|socket| ("proxy", socket)))
            .chain(self.admin.iter().map(|socket| ("admin", socket)))
            .chain(tls.map(|socket| ("tls", socket)));
        let mut seen = Vec::new();
        let mut passed = Vec::new();
        for (name, socket) in named {
            // Duplicates share the socket's inode; sockets of their own do not.
            let stat = rustix::fs::fstat(socket)?;
            if seen.contains(&stat.st_ino) {
                continue;
            }
            seen.push(stat.st_ino);
            passed.push((name, OwnedFd::from(socket.try_clone()?)));
        }
        Ok(passed)
    }
}

/// Binds `addr` for the runtime: non-blocking, as tokio requires of a socket it adopts.
fn bind(
    addr: SocketAddr,
    error: impl Fn(SocketAddr, std::io::Error) -> StartError,
) -> Result<TcpListener, StartError> {
    let listener = TcpListener::bind(addr).map_err(|source| error(addr, source))?;
    listener
        .set_nonblocking(true)
        .map_err(|source| error(addr, source))?;
    Ok(listener)
}

/// A listener on `addr` for each of `workers`: the first, and its siblings (see the
/// module docs).
fn bound(
    addr: SocketAddr,
    workers: usize,
    error: impl Fn(SocketAddr, std::io::Error) -> StartError,
) -> Result<(TcpListener, Vec<TcpListener>), StartError> {
    if workers <= 1 {
        return Ok((bind(addr, error)?, Vec::new()));
    }
    if addr.port() != 0 {
        // Fails when anyone listens there, whatever their options: then so do we.
        drop(bind(addr, &error)?);
    }
    let first = bind_shared(addr).map_err(|source| error(addr, source))?;
    // With port 0, the siblings join the port the first one got.
    let addr = first.local_addr().map_err(|source| error(addr, source))?;
    let siblings = (1..workers)
        .map(|_| bind_shared(addr).map_err(|source| error(addr, source)))
        .collect::<Result<_, _>>()?;
    Ok((first, siblings))
}

/// Binds `addr` with `SO_REUSEPORT`, non-blocking.
fn bind_shared(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The listen backlog of a worker's socket; the kernel caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: i32 = 1024;

/// The passed sockets of one role spread over `workers`: one socket shared by all (a
/// duplicate for each worker after the first), or one socket per worker.
fn spread(
    mut passed: Vec<TcpListener>,
    workers: usize,
) -> Result<(TcpListener, Vec<TcpListener>), StartError> {
    if passed.len() == 1 {
        return duplicated(passed.remove(0), workers);
    }
    if passed.len() != workers {
        return Err(StartError::Inherited(format!(
            "{} sockets of one listener were passed, one per worker of the process that passed \
             them, but server.workers makes {workers} workers; change server.workers with a \
             restart, not an upgrade",
            passed.len()
        )));
    }
    let first = passed.remove(0);
    Ok((first, passed))
}

/// An inherited `listener` and a duplicate of it for each worker after the first.
fn duplicated(
    listener: TcpListener,
    workers: usize,
) -> Result<(TcpListener, Vec<TcpListener>), StartError> {
    let siblings = (1..workers)
        .map(|_| {
            listener.try_clone().map_err(|error| {
                StartError::Inherited(format!("cannot share a passed socket: {error}"))
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((listener, siblings))
}

/// The sockets systemd (or the process upgraded from) passed, by role.
#[derive(Default)]
struct Inherited {
    proxy: Vec<TcpListener>,
    admin: Option<TcpListener>,
    tls: Vec<TcpListener>,
}

/// Takes the sockets of `LISTEN_FDS` (none when it is unset or meant for another process).
fn inherited() -> Result<Inherited, StartError> {
    let mut fds = listenfd::ListenFd::from_env();
    let count = fds.len();
    if count == 0 {
        return Ok(Inherited::default());
    }
    let names = std::env::var("LISTEN_FDNAMES").ok();
    let roles = roles(count, names.as_deref()).map_err(StartError::Inherited)?;
    let mut taken = Inherited::default();
    for (index, role) in roles.into_iter().enumerate() {
        let fd = 3 + index;
        let listener = fds
            .take_tcp_listener(index)
            .map_err(|error| {
                StartError::Inherited(format!("file descriptor {fd} (LISTEN_FDS): {error}"))
            })?
            .ok_or_else(|| {
                StartError::Inherited(format!("file descriptor {fd} (LISTEN_FDS) is not open"))
            })?;
        listener.set_nonblocking(true).map_err(|error| {
            StartError::Inherited(format!("file descriptor {fd} (LISTEN_FDS): {error}"))
        })?;
        match role {
            Role::Proxy => taken.proxy.push(listener),
            Role::Admin => taken.admin = Some(listener),
            Role::Tls => taken.tls.push(listener),
        }
    }
    Ok(taken)
}

/// What each of `count` inherited sockets serves: by `LISTEN_FDNAMES` (colon-separated) when
/// it names any socket `proxy` or `admin`, otherwise by order. (systemd names a socket
/// after its unit, e.g. `secondhit.socket`, when the unit sets no `FileDescriptorName=`.)
fn roles(count: usize, names: Option<&str>) -> Result<Vec<Role>, String> {
    let names: Option<Vec<&str>> = names
        .map(|names| names.split(':').collect::<Vec<_>>())
        .filter(|names| {
            names
                .iter()
                .any(|name| matches!(*name, "proxy" | "admin" | "tls"))
        });
    let roles = match names {
        None => match count {
            1 => vec![Role::Proxy],
            2 => vec![Role::Proxy, Role::Admin],
            _ => {
                return Err(format!(
                    "{count} sockets were passed (LISTEN_FDS) without names; secondhit takes \
                     one (the proxy) or two (the proxy, then the admin listener), or sockets \
                     named \"proxy\", \"admin\" and \"tls\" (FileDescriptorName=)"
                ));
            }
        },
        Some(names) => {
            if names.len() != count {
                return Err(format!(
                    "LISTEN_FDS is {count} but LISTEN_FDNAMES names {}",
                    names.len()
                ));
            }
            let mut roles = Vec::with_capacity(count);
            for name in names {
                let role = match name {
                    "proxy" => Role::Proxy,
                    "admin" => Role::Admin,
                    "tls" => Role::Tls,
                    other => {
                        return Err(format!(
                            "a socket named {other:?} was passed (LISTEN_FDNAMES); secondhit \
                             knows \"proxy\", \"admin\" and \"tls\""
                        ));
                    }
                };
                // Only the admin listener has no per-worker sockets.
                if role == Role::Admin && roles.contains(&role) {
                    return Err(format!(
                        "two sockets named {name:?} were passed (LISTEN_FDNAMES)"
                    ));
                }
                roles.push(role);
            }
            roles
        }
    };
    Ok(roles)
}

#[cfg(test)]
mod tests {
    use super::{Role, roles};

    #[test]
    fn sockets_are_taken_by_name_or_else_by_order() {
        assert_eq!(roles(1, None), Ok(vec![Role::Proxy]));
        assert_eq!(roles(2, None), Ok(vec![Role::Proxy, Role::Admin]));
        assert_eq!(
            roles(2, Some("secondhit.socket:secondhit.socket")),
            Ok(vec![Role::Proxy, Role::Admin])
        );
        assert_eq!(
            roles(2, Some("admin:proxy")),
            Ok(vec![Role::Admin, Role::Proxy])
        );
        assert_eq!(roles(1, Some("admin")), Ok(vec![Role::Admin]));
        assert_eq!(
            roles(2, Some("tls:proxy")),
            Ok(vec![Role::Tls, Role::Proxy])
        );
        // One per worker, as an upgrade passes sockets bound with SO_REUSEPORT.
        assert_eq!(
            roles(4, Some("proxy:proxy:admin:tls")),
            Ok(vec![Role::Proxy, Role::Proxy, Role::Admin, Role::Tls])
        );
    }

    #[test]
    fn sockets_that_cannot_be_placed_are_refused_with_the_reason() {
        let three = roles(3, None).expect_err("three unnamed sockets");
        assert!(three.contains("3 sockets"), "{three}");
        let stranger = roles(2, Some("proxy:https")).expect_err("unknown name");
        assert!(stranger.contains("\"https\""), "{stranger}");
        let twice = roles(2, Some("admin:admin")).expect_err("duplicate name");
        assert!(twice.contains("two sockets named \"admin\""), "{twice}");
        let mismatch = roles(2, Some("proxy")).expect_err("count mismatch");
        assert!(mismatch.contains("LISTEN_FDNAMES names 1"), "{mismatch}");
    }
}
