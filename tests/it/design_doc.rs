//! `docs/design.md` names the code it describes, in backticks: every path it names
//! (`proxy::routing::site_of`, `Proxy::look_up`, `outcome::Detail::ALL`) must exist, so
//! that a rename that leaves the design behind fails here rather than misleading its next
//! reader.
//!
//! A name is resolved as a reader would: its leading lower-case segments are modules
//! (`src/a/b.rs` or `src/a/b/`, from the proxy crate's root, or from another crate's
//! when the first segment names it: `store::entry` is `crates/store/src/entry.rs`), the first segment after them an item
//! defined in those files (a `fn`, type, trait, constant, module, an enum variant or a
//! re-export), and any further segment (a method, a variant, an associated constant) an
//! item defined anywhere in the workspace. A name whose first segment is a type is looked
//! up across the workspace. Names of other crates (`std::`, `tokio::` …) are not checked.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Crates the design names whose items are not this crate's.
const FOREIGN: &[&str] = &[
    "std",
    "core",
    "alloc",
    "tokio",
    "tokio_util",
    "hyper",
    "hyper_util",
    "http",
    "http_body",
    "http_body_util",
    "bytes",
    "futures",
    "futures_util",
    "rustls",
    "tokio_rustls",
    "serde",
    "serde_json",
    "tracing",
    "arc_swap",
    "quick_cache",
    "xxhash_rust",
    "libc",
    "nix",
    "h2",
    "mimalloc",
    "memmap2",
    "toml",
    "clap",
    "listenfd",
    "reqwest",
    "prometheus_client",
    // Types of std and of dependencies, named with a method of theirs.
    "File",
    "LruCache",
];

/// Every `.rs` file under `dir`, or `dir` itself with `.rs` when it is a file module.
fn module_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = dir.with_extension("rs");
    if file.is_file() {
        files.push(file);
    }
    if dir.is_dir() {
        files.extend(
            crate::support::files_under(dir)
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "rs")),
        );
    }
    files
}

/// The code of `files` without line comments, so a name only mentioned does not count.
fn code_of(files: &[PathBuf]) -> String {
    files
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|text| {
            text.lines()
                .map(|line| line.split("//").next().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `code` defines `name`: as an item, an enum variant, a field, or a re-export (`pub use`).
fn defines(code: &str, name: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut rest = code;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + name.len()..].chars().next();
        if before.is_none_or(|c| !is_word(c)) && after.is_none_or(|c| !is_word(c)) {
            let head = rest[..at].trim_end();
            let tail = rest[at + name.len()..].trim_start();
            let keyword = [
                "fn",
                "struct",
                "enum",
                "trait",
                "type",
                "const",
                "static",
                "mod",
                "macro_rules!",
            ]
            .iter()
            .any(|k| head.ends_with(k));
            // A variant or a field starts its line; a re-export lists it after `use`.
            let line_start = rest[..at]
                .rsplit('\n')
                .next()
                .is_some_and(|l| l.trim().is_empty());
            let variant =
                line_start && (tail.starts_with(['(', '{', ',', ':', '=']) || tail.is_empty());
            let reexport = head.ends_with("::") || head.ends_with('{') || head.ends_with(',');
            let reexport = reexport
                && rest[..at]
                    .rsplit('\n')
                    .next()
                    .is_some_and(|l| l.trim_start().starts_with("pub"));
            if keyword || variant || reexport {
                return true;
            }
        }
        rest = &rest[at + name.len()..];
    }
    false
}

/// Why `name` does not resolve, or `None` when it does. Its leading module segments are
/// read from the proxy crate's root, or, when the first names another crate of the
/// workspace (`store::…`, `secondhit_store::…`), from that crate's root.
fn unresolved(name: &str, crate_code: &str) -> Option<String> {
    let segments: Vec<&str> = name.split("::").collect();
    let crates = Path::new(ROOT).join("crates");
    let first = segments[0]
        .strip_prefix("secondhit_")
        .unwrap_or(segments[0]);
    let from_proxy = unresolved_from(&crates.join("proxy/src"), &segments, crate_code);
    let other = crates.join(first).join("src");
    if from_proxy.is_none() || first == "proxy" || !other.is_dir() {
        return from_proxy;
    }
    if segments.len() == 1 {
        return None;
    }
    unresolved_from(&other, &segments[1..], crate_code).and(from_proxy)
}

/// Why `segments` do not resolve from the crate root `root`, or `None` when they do.
fn unresolved_from(root: &Path, segments: &[&str], crate_code: &str) -> Option<String> {
    let mut dir = root.to_path_buf();
    let mut modules = 0;
    for segment in segments {
        let starts_lower = segment
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase());
        if starts_lower && !module_files(&dir.join(segment)).is_empty() {
            dir = dir.join(segment);
            modules += 1;
        } else {
            break;
        }
    }
    let items = &segments[modules..];
    let (first, further) = items.split_first()?;
    let scope = match modules {
        0 if dir == root && root.ends_with("proxy/src") => crate_code.to_owned(),
        _ => code_of(&module_files(&dir)),
    };
    if !defines(&scope, first) {
        return Some(format!("{first} is not defined in {}", dir.display()));
    }
    further
        .iter()
        .find(|segment| !defines(crate_code, segment))
        .map(|segment| format!("{segment} is defined nowhere in crates/"))
}

/// The code of every crate of the workspace.
fn workspace_code() -> String {
    code_of(&module_files(&Path::new(ROOT).join("crates")))
}

/// The backticked spans of `text` that are paths (`a::b`), without call parentheses.
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|span| span.trim_end_matches("()").to_owned())
        .filter(|span| {
            span.contains("::")
                && span
                    .split("::")
                    .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
        })
        .filter(|span| !FOREIGN.iter().any(|c| span.starts_with(&format!("{c}::"))))
        .collect()
}

#[test]
fn every_path_the_design_names_exists() {
    let design = std::fs::read_to_string(Path::new(ROOT).join("docs/design.md"))
        .expect("read docs/design.md");
    let crate_code = workspace_code();
    let names = named_paths(&design);
    assert!(
        names.len() > 50,
        "only {} names found: the reader is broken",
        names.len()
    );
    let broken: Vec<String> = names
        .iter()
        .filter_map(|name| unresolved(name, &crate_code).map(|why| format!("`{name}`: {why}")))
        .collect();
    assert!(
        broken.is_empty(),
        "docs/design.md names what is not there:\n{}",
        broken.join("\n")
    );
}

#[test]
fn a_renamed_item_is_caught() {
    let crate_code = "pub struct Proxy;\nimpl Proxy {\n    fn look_up() {}\n}\n";
    assert_eq!(unresolved("Proxy::look_up", crate_code), None);
    assert!(unresolved("Proxy::route_and_look_up", crate_code).is_some());
    assert!(unresolved("store::NoSuchThing", crate_code).is_some());
    assert_eq!(unresolved("store::Store", crate_code), None);
    // Against the crate itself: names the design once carried, since renamed or moved.
    let code = workspace_code();
    assert!(unresolved("cache_status::Detail", &code).is_some());
    assert!(unresolved("Proxy::route_request", &code).is_some());
    assert_eq!(unresolved("outcome::Detail::ALL", &code), None);
}
