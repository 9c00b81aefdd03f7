//! The man pages: secondhit(1) and a page per command from the parser's own definition,
//! so they never disagree with `--help`, with the sections an operator looks for in
//! secondhit(1) (signals, files, other pages) added; and secondhit.toml(5), built around
//! the annotated example config, so that it lists every key the example does.

use std::io::{self, Write};
use std::path::Path;

use roff::{Roff, bold, roman};

/// The annotated example config: every key, its default and what it does.
const EXAMPLE: &str = include_str!("../config/secondhit.toml");

/// The signals `serve` acts on (`lifecycle::Signals`), and what each does.
const SIGNALS: [(&str, &str); 4] = [
    (
        "SIGTERM, SIGINT",
        "Stop accepting, let open requests and the fills they leave finish within \
         server.shutdown_timeout, save the admission filters, close the access log, exit 0.",
    ),
    (
        "SIGHUP",
        "Read the config file and its include fragments again and apply what a running \
         server can change; keys that need a restart are named in a warning and keep their \
         running values; a file that does not validate is rejected whole.",
    ),
    (
        "SIGUSR1",
        "Reopen the access-log file by its path, after logrotate moved it. Without systemd, \
         server.pid_file names the process to signal.",
    ),
    (
        "SIGUSR2",
        "Upgrade: start the binary again with the same arguments on the same listening \
         sockets; once the new process is ready, stop accepting, drain as at SIGTERM and \
         exit, handing the cache directory over (the new process rewrites \
         server.pid_file). A new process that cannot start is killed and its reason \
         logged; this one serves on.",
    ),
];

/// The files of an installed secondhit, and what each is.
const FILES: [(&str, &str); 7] = [
    (
        "/etc/secondhit/secondhit.toml",
        "The config file the systemd unit serves; see secondhit.toml(5).",
    ),
    (
        "/etc/secondhit/conf.d/*.toml",
        "Fragments the packaged config includes, merged over it in name order.",
    ),
    (
        "/var/cache/secondhit",
        "The cache (cache.dir): the entries, and the admission filters' state in state/.",
    ),
    (
        "/var/log/secondhit/access.log",
        "The access log (log.access_log) of the packaged config.",
    ),
    (
        "/etc/logrotate.d/secondhit",
        "Rotates the access log daily and sends SIGUSR1.",
    ),
    (
        "/run/secondhit/secondhit.pid",
        "The process id (server.pid_file) of the packaged config, for signals without systemd.",
    ),
    (
        "/usr/share/doc/secondhit/examples/secondhit.toml",
        "Every config key, with its default and what it does.",
    ),
];

/// Renders secondhit(1) into `out`.
pub(crate) fn main_page(command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let command = command.disable_help_subcommand(true);
    clap_mangen::Man::new(command).render(out)?;
    let mut roff = Roff::new();
    roff.control("SH", ["SIGNALS"]);
    for (signal, what) in SIGNALS {
        roff.control("TP", [])
            .text([bold(signal)])
            .text([roman(what)]);
    }
    roff.control("SH", ["FILES"]);
    for (path, what) in FILES {
        roff.control("TP", [])
            .text([bold(path)])
            .text([roman(what)]);
    }
    roff.control("SH", ["SEE ALSO"]);
    see_also(
        &mut roff,
        &[
            ("secondhit.toml", "5"),
            ("secondhit\\-serve", "1"),
            ("secondhit\\-check\\-config", "1"),
            ("systemctl", "1"),
            ("logrotate", "8"),
        ],
    );
    out.write_all(without_preamble(&roff).as_bytes())
}

/// Writes secondhit(1), a page per command and secondhit.toml(5) into `dir`.
pub(crate) fn write_all(command: clap::Command, dir: &Path) -> io::Result<()> {
    clap_mangen::generate_to(command.clone(), dir)?;
    // Written again over clap_mangen's, with the operator's sections.
    let mut main = Vec::new();
    main_page(command, &mut main)?;
    std::fs::write(dir.join("secondhit.1"), main)?;
    std::fs::write(dir.join("secondhit.toml.5"), config_page().render())
}

/// secondhit.toml(5): how the file is read, then the annotated example as it is.
fn config_page() -> Roff {
    let mut roff = Roff::new();
    roff.control("TH", ["secondhit.toml", "5"]);
    roff.control("SH", ["NAME"]);
    roff.text([roman("secondhit.toml - configuration file of secondhit")]);
    roff.control("SH", ["SYNOPSIS"]);
    roff.text([bold("/etc/secondhit/secondhit.toml")]);
    roff.control("SH", ["DESCRIPTION"]);
    for paragraph in DESCRIPTION {
        roff.control("PP", []).text([roman(paragraph)]);
    }
    roff.control("SH", ["ANNOTATED EXAMPLE"]);
    roff.control("nf", []);
    for line in EXAMPLE.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
    roff.control("SH", ["SEE ALSO"]);
    see_also(&mut roff, &[("secondhit", "1"), ("secondhit\\-serve", "1")]);
    roff
}

/// secondhit.toml(5)'s description, a paragraph each.
const DESCRIPTION: [&str; 4] = [
    "secondhit serve reads its configuration from the TOML file given to --config; the \
     package's systemd unit gives /etc/secondhit/secondhit.toml. Every key is optional and \
     has a default. Sizes are strings such as \"512KiB\" or \"10GiB\", or an integer of \
     bytes; durations are strings such as \"500ms\" or \"1h\". An unknown key or a bad \
     value is an error that names the key: check a file with secondhit check-config FILE.",
    "include, a top-level list of paths before the first table, merges fragment files over \
     the main file: a relative path is taken from the main file's directory, wildcards may \
     stand in the file name only, and the files of one pattern are read sorted by name. A \
     key a later file sets replaces the earlier value; tables merge key by key; arrays \
     ([[site]] and [[rule]] included) are replaced whole. A fragment may not include \
     others. Errors name the fragment and the key.",
    "SIGHUP reloads the file and its fragments: most keys apply at once, those that need a \
     restart are named in a warning and keep their running values.",
    "The example below is /usr/share/doc/secondhit/examples/secondhit.toml: every key, \
     commented out or set, with its default and what it does.",
];

/// `.BR name (section),` for each page, the last without a comma.
fn see_also(roff: &mut Roff, pages: &[(&str, &str)]) {
    for (index, (name, section)) in pages.iter().enumerate() {
        let comma = if index + 1 < pages.len() { "," } else { "" };
        roff.control("BR", [*name, &format!("({section}){comma}")]);
    }
}

/// `roff` rendered without the preamble `Roff::render` starts every document with: the
/// sections go after a page that has one already.
fn without_preamble(roff: &Roff) -> String {
    let text = roff.render();
    let preamble = Roff::new().render();
    match text.strip_prefix(&preamble) {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}
