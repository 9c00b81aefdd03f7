//! The `secondhit` command line: `serve`, `check-config`, `completions` and `man`, and with
//! the `bench` feature (on by default) `bench` and `simulate`; the work happens in the
//! crates: `secondhit-proxy`, and `secondhit-bench` for those two.

mod alloc;
mod man;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
#[cfg(feature = "bench")]
use secondhit_bench::cli::{BenchArgs, SimulateArgs};
use secondhit_proxy::config::Config;
use secondhit_proxy::lifecycle::{PidFile, Reloader, Signals};
use secondhit_proxy::logging::LogReload;

use secondhit_proxy::server::StartError;
use secondhit_proxy::server::{Listeners, Server};
use secondhit_proxy::upgrade::{Handoff, Upgrader};

/// mimalloc instead of the system allocator: a request allocates and frees dozens of
/// small buffers (header maps, bytes, futures), and glibc's malloc spent more CPU time on
/// them (`benches/RESULTS.md`, "mimalloc as the allocator"). Called as [`alloc`] says.
#[global_allocator]
static GLOBAL: alloc::MiMalloc = alloc::MiMalloc;

/// How often the memory-release thread asks mimalloc to return freed memory.
const RELEASE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Starts a thread that asks mimalloc every [`RELEASE_EVERY`] to return the memory it
/// has freed. mimalloc returns freed pages lazily, on later allocations, so a proxy that
/// went idle after a burst kept the memory of every closed connection until its next
/// traffic (`benches/conn_memory.sh`; figures in `benches/RESULTS.md`). A thread of its
/// own, because a runtime worker that has gone idle is not woken to do it; nothing on the
/// request path pays for it.
fn spawn_memory_release() {
    let spawned = std::thread::Builder::new()
        .name("secondhit-mem".to_owned())
        .spawn(|| {
            loop {
                std::thread::sleep(RELEASE_EVERY);
                // SAFETY: `mi_collect` may be called from any thread at any time; with
                // `force` it also purges the freed pages other threads left to the arenas.
                unsafe { libmimalloc_sys::mi_collect(true) };
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the memory-release thread; freed memory returns to the system only with later traffic");
    }
}

/// Turns transparent huge pages off for this process. mimalloc asks for them on its
/// arenas, and it hands the pages of freed buffers back to the system (after a delay, and
/// every [`RELEASE_EVERY`]): each buffer later carved from such a page then faulted in a
/// whole 2 MiB page, zeroed, and on the CDN mix that zeroing was a tenth of the proxy's
/// CPU time (`benches/RESULTS.md`, "huge pages off"). Set before the runtime starts, so no
/// worker faults one in; a failure only costs that time, and is logged.
fn without_huge_pages() {
    if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::warn!(%error, "cannot turn transparent huge pages off for this process; freed memory reused costs a zeroed huge page");
    }
}

/// What `--version` prints after the name: the version, the git commit the binary was built
/// from ("unknown" when it was built outside a git checkout) and the cargo features built
/// in ("none" for `--no-default-features`), from `build.rs`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SECONDHIT_COMMIT"),
    "; features: ",
    env!("SECONDHIT_FEATURES"),
    ")"
);

/// A reverse-proxy cache that writes an object to disk only on its second request.
#[derive(Parser)]
#[command(name = "secondhit", version = VERSION, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy in front of the origin named in the config (defaults without one).
    Serve(ConfigFile),
    /// Validate a config file: prints the verdict, exits 0 when valid and 1 when not.
    #[command(group = clap::ArgGroup::new("the_file").args(["file", "config"]).required(true))]
    CheckConfig(ConfigFile),
    /// Load-test on loopback: a synthetic origin, the real proxy once per admission
    /// policy, a CDN-like workload (or your trace); prints a side-by-side table.
    #[cfg(feature = "bench")]
    Bench(Box<BenchArgs>),
    /// Replay a workload through the admission policies and the store's index without
    /// HTTP or disk, to choose expected_urls and the cache size from your own logs.
    #[cfg(feature = "bench")]
    Simulate(Box<SimulateArgs>),
    /// Print the shell completion script for SHELL on stdout (the package installs bash's,
    /// zsh's and fish's).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page secondhit(1) on stdout, or with --dir write it, one page per
    /// command (secondhit-serve(1), ...) and the config file's, secondhit.toml(5), into a
    /// directory.
    Man {
        /// Write secondhit.1, a page per command and secondhit.toml.5 into this existing
        /// directory instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The config file, given either way: `serve FILE` and `serve --config FILE` (and the same
/// for `check-config`) mean the same, so neither command punishes the other's habit.
#[derive(clap::Args)]
struct ConfigFile {
    /// The TOML config file (every key optional; see config/secondhit.toml).
    #[arg(value_name = "FILE", conflicts_with = "config")]
    file: Option<PathBuf>,
    /// The same file, given as an option.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ConfigFile {
    /// The file, whichever way it was given.
    fn path(self) -> Option<PathBuf> {
        self.file.or(self.config)
    }
}

fn main() -> ExitCode {
    secondhit_proxy::build::set(secondhit_proxy::build::BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("SECONDHIT_COMMIT"),
        features: env!("SECONDHIT_FEATURES"),
    });
    match Cli::parse().command {
        #[cfg(feature = "bench")]
        Command::Bench(args) => {
            // Its proxy and clients run in this process, and it times them: see `serve`.
            if let Err(error) = secondhit_proxy::server::reserve_descriptor_table() {
                eprintln!(
                    "secondhit bench: cannot grow the descriptor table ahead ({error}): some latencies may include the kernel's waits to grow it"
                );
            }
            print_outcome(secondhit_bench::cli::bench(&args))
        }
        #[cfg(feature = "bench")]
        Command::Simulate(args) => print_outcome(secondhit_bench::cli::simulate(&args)),
        Command::Serve(file) => serve(file.path()),
        Command::CheckConfig(file) => check_config(file.path()),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir),
    }
}

/// Prints the completion script for `shell`; an error (such as a closed pipe) is reported,
/// not a panic.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    use clap_complete::Generator;
    let mut command = Cli::command();
    command.set_bin_name("secondhit");
    command.build();
    match shell.try_generate(&command, &mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("secondhit: cannot write the {shell} completions: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Renders the man pages (see `man`): secondhit(1) on stdout, or every page into `dir`.
fn man(dir: Option<PathBuf>) -> ExitCode {
    let command = Cli::command();
    let written = match &dir {
        Some(dir) => man::write_all(command, dir),
        None => man::main_page(command, &mut std::io::stdout()),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let place = dir.map_or("stdout".to_owned(), |dir| dir.display().to_string());
            eprintln!("secondhit: cannot write the man page to {place}: {error}");
            ExitCode::FAILURE
        }
    }
}

fn check_config(path: Option<PathBuf>) -> ExitCode {
    // clap's group makes the file required; this only guards against that changing.
    let Some(path) = path else {
        eprintln!("secondhit: check-config needs a config file");
        return ExitCode::FAILURE;
    };
    let checked = Config::load(&path)
        .map_err(|error| error.to_string())
        .and_then(|config| {
            check_files(&config)?;
            // What serve would refuse on this machine, beyond the file itself.
            secondhit_proxy::preflight::check(&config).map_err(|error| error.to_string())?;
            Ok(config)
        });
    match checked {
        Ok(config) => {
            for warning in config.warnings() {
                eprintln!("{}: warning: {warning}", path.display());
            }
            println!("{}: OK", path.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{}: {error}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// Reads the files a start would read that the config only names: the TLS listener's
/// certificates and keys, and each https origin's CA file (or the system's trust store),
/// `[origin]`'s and every `[[site]]`'s.
fn check_files(config: &Config) -> Result<(), String> {
    if let Some(tls) = &config.server.tls {
        secondhit_proxy::server::tls::check(tls).map_err(|e| e.to_string())?;
    }
    let sites = config.sites.iter().map(|site| &site.origin);
    for origin in std::iter::once(&config.origin).chain(sites) {
        if origin.url.scheme_str() == Some("https") {
            secondhit_proxy::origin::tls::client_config(origin).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Prints a command's output, or its error on stderr with exit code 1.
#[cfg(feature = "bench")]
fn print_outcome(outcome: Result<String, String>) -> ExitCode {
    match outcome {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("secondhit: {error}");
            ExitCode::FAILURE
        }
    }
}

fn serve(path: Option<PathBuf>) -> ExitCode {
    // While this is the only thread: the table then grows without a wait.
    let descriptors = secondhit_proxy::server::reserve_descriptor_table();
    // First: a process an upgrade started must answer on its pipe whatever happens next.
    let handoff = match Handoff::from_env() {
        None => None,
        Some(Ok(handoff)) => Some(handoff),
        Some(Err(error)) => return refuse(None, &error),
    };
    let config = match &path {
        Some(path) => match Config::load(path) {
            Ok(config) => config,
            Err(error) => return refuse(handoff, &format!("{}: {error}", path.display())),
        },
        None => Config::default(),
    };
    let log_reload = secondhit_proxy::logging::init(&config.log);
    match descriptors {
        Ok(room) => tracing::debug!(room, "descriptor table grown ahead"),
        Err(error) => {
            tracing::warn!(%error, "cannot grow the descriptor table ahead: the first time the process needs more than 64, 128, 256, ... descriptors, the system call that needs the room waits for the kernel, with the requests of its worker")
        }
    }
    let listeners = match open_listeners(&config) {
        Ok(listeners) => listeners,
        Err(error) => {
            tracing::error!(%error, "cannot start");
            return refuse(handoff, &error.to_string());
        }
    };
    let upgrader = upgrader(&listeners);
    without_huge_pages();
    spawn_memory_release();
    let runtime = match secondhit_proxy::server::runtime::build(&config.server) {
        Ok(runtime) => runtime,
        Err(error) => {
            let error = format!("cannot start the async runtime: {error}");
            return refuse(handoff, &error);
        }
    };
    let started = Started {
        path,
        log_reload,
        handoff,
        upgrader,
    };
    runtime.block_on(run_server(&config, listeners, started))
}

/// Reports `error` on stderr (and to the process that started this one for an upgrade,
/// which serves on); the exit code of a failed start.
fn refuse(handoff: Option<Handoff>, error: &str) -> ExitCode {
    eprintln!("secondhit: {error}");
    if let Some(handoff) = handoff {
        handoff.failed(error);
    }
    ExitCode::FAILURE
}

/// What SIGUSR2 needs to start this binary again with these sockets: the binary's path as
/// it was started (`argv[0]` made absolute, so that a package upgrade that replaced the
/// file, or a link that now points at a new version, starts the new binary; the
/// executable's own path when `argv[0]` was found on `PATH`) and the same arguments.
/// `None`, logged, when either cannot be had: SIGUSR2 is then refused.
fn upgrader(listeners: &Listeners) -> Option<Upgrader> {
    let mut args = std::env::args_os();
    let program = args.next().map(PathBuf::from);
    let program = match program {
        Some(program) if program.components().count() > 1 => std::path::absolute(program),
        _ => std::env::current_exe(),
    };
    let upgrader = program.and_then(|program| {
        let sockets = listeners.passable()?;
        Ok(Upgrader::new(program, args.collect(), sockets))
    });
    match upgrader {
        Ok(upgrader) => Some(upgrader),
        Err(error) => {
            tracing::warn!(%error, "SIGUSR2 will not upgrade: cannot prepare the hand-off");
            None
        }
    }
}

/// Checks the machine, binds the sockets (or takes systemd's) as whoever started the
/// process, then drops root for good: in this order, before any thread exists.
fn open_listeners(config: &Config) -> Result<Listeners, StartError> {
    secondhit_proxy::preflight::check(config)
        .map_err(StartError::from)
        .and_then(|run_as| {
            let listeners = Listeners::open(&config.server)?;
            if let Some(run_as) = &run_as {
                secondhit_proxy::server::privileges::drop_to(run_as)?;
            }
            Ok(listeners)
        })
}

/// What `serve` set up before the runtime, for [`run_server`].
struct Started {
    /// The config file, which SIGHUP reloads.
    path: Option<PathBuf>,
    log_reload: LogReload,
    /// Set when an upgrade started this process: told once it is ready.
    handoff: Option<Handoff>,
    /// What SIGUSR2 upgrades with.
    upgrader: Option<Upgrader>,
}

/// Starts the server on `listeners`, installs the signal handlers and serves until a
/// signal stops it; a SIGHUP reloads the config file (see [`Reloader`]), a SIGUSR2
/// upgrades.
async fn run_server(config: &Config, listeners: Listeners, started: Started) -> ExitCode {
    // Before "listening": a signal sent once that line is out must find its handler.
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            tracing::error!(%error, "cannot install signal handlers");
            let error = format!("cannot install signal handlers: {error}");
            return refuse(started.handoff, &error);
        }
    };
    let server = match start_server(config, listeners, started.handoff).await {
        Ok(server) => server,
        Err(error) => {
            tracing::error!(%error, "cannot start");
            eprintln!("secondhit: {error}");
            return ExitCode::FAILURE;
        }
    };
    // After the handlers: a signal sent to the pid the file names must find them.
    let pid_file = match config
        .server
        .pid_file
        .as_deref()
        .map(|path| (path, PidFile::write(path)))
    {
        Some((path, Err(error))) => {
            let path = path.display();
            tracing::error!(%error, %path, "server.pid_file: cannot write it");
            eprintln!("secondhit: server.pid_file: cannot write {path}: {error}");
            return ExitCode::FAILURE;
        }
        Some((_, Ok(written))) => Some(written),
        None => None,
    };
    log_listening(&server, config);
    let reloader = Reloader::new(started.path, server.live_parts(), Some(started.log_reload));
    server
        .run(signals.until_stopped(reloader, started.upgrader))
        .await;
    drop(pid_file);
    ExitCode::SUCCESS
}

/// Prepares the server and opens its cache directory. A process an upgrade started
/// reports ready in between, once only the cache directory is left, which the process it
/// replaces then hands over as soon as its fills committed or were dropped (a few seconds
/// at most): it waits for it for `server.shutdown_timeout` on top of `cache.lock_timeout`,
/// a bound that process's grace for its fills never exceeds.
async fn start_server(
    config: &Config,
    listeners: Listeners,
    handoff: Option<Handoff>,
) -> Result<Server, String> {
    let prepared = match Server::prepare(config, listeners) {
        Ok(prepared) => prepared,
        Err(error) => {
            let error = error.to_string();
            if let Some(handoff) = handoff {
                handoff.failed(&error);
            }
            return Err(error);
        }
    };
    let mut lock_timeout = config.cache.lock_timeout;
    if let Some(handoff) = handoff {
        handoff
            .ready()
            .map_err(|error| format!("upgrade: cannot report ready: {error}"))?;
        lock_timeout += config.server.shutdown_timeout;
        tracing::info!(
            ?lock_timeout,
            "upgrade: ready; waiting for the previous process to hand over the cache \
             directory"
        );
    }
    prepared
        .open(lock_timeout)
        .await
        .map_err(|error| error.to_string())
}

/// Logs the "listening" line, with the admin listener's and the TLS listener's
/// addresses too: with port 0 in the config, the log is the only place a script (or a
/// test) can learn them.
fn log_listening(server: &Server, config: &Config) {
    let admin = address_text(server.admin_addr());
    let tls = address_text(server.tls_addr());
    // Every server of `[origin]`'s pool, space-separated.
    let origins: Vec<String> = (config.origin.pool().iter())
        .map(|server| server.url.to_string())
        .collect();
    match server.local_addr() {
        Ok(addr) => tracing::info!(
            %addr,
            %tls,
            %admin,
            origin = %origins.join(" "),
            cache_dir = %config.cache.dir.display(),
            workers = secondhit_proxy::server::runtime::workers(&config.server),
            "listening"
        ),
        Err(error) => tracing::warn!(%error, "listening, but the bound address is unknown"),
    }
}

/// An optional listener's address as the "listening" line shows it: `off` when there is
/// no such listener, `unknown` when its address cannot be read.
fn address_text(addr: Option<std::io::Result<SocketAddr>>) -> String {
    match addr {
        Some(Ok(addr)) => addr.to_string(),
        Some(Err(_)) => "unknown".to_owned(),
        None => "off".to_owned(),
    }
}
