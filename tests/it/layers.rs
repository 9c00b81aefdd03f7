//! Layers inside the crates (the compiler keeps the crates themselves layered: a crate names
//! only the crates it depends on). The proxy crate's modules form layers:
//! `crates/proxy/src/lib.rs` lists its top-level modules top-down, and a module may name
//! (through `crate::`, `super::` or `self::` paths) only itself and the modules listed below
//! it. In every crate, no two files name each other through a chain of such paths. Test code (`tests.rs`, `tests/` folders, a trailing
//! `#[cfg(test)] mod tests { .. }`) is left out, as is the binary's `main.rs`.
//!
//! The check reads the source as text, the way a reader follows imports: a path a macro
//! builds is not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A file's module path, e.g. `["store", "read"]` for `src/store/read.rs`.
type ModulePath = Vec<String>;

/// The workspace's crates: `crates/*/src`.
fn crate_dirs() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("read crates/")
        .map(|entry| entry.expect("dir entry").path().join("src"))
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 5, "crates/ holds {dirs:?}");
    dirs
}

/// The proxy crate's sources, whose top-level modules `lib.rs` lists top-down.
fn proxy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/proxy/src")
}

/// The top-level modules in the order `lib.rs` declares them.
fn declared_order(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            Some(rest.trim_end_matches(';').trim().to_owned())
        })
        .collect()
}

/// Every non-test `.rs` file under `dir`, with its module path.
fn source_files(dir: &Path, module: &[String], out: &mut Vec<(ModulePath, PathBuf)>) {
    let entries = std::fs::read_dir(dir).expect("read src");
    for entry in entries {
        let path = entry.expect("dir entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("utf-8 name")
            .to_owned();
        if path.is_dir() {
            if name != "tests" {
                let mut sub = module.to_vec();
                sub.push(name);
                source_files(&path, &sub, out);
            }
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem == "tests" || (module.is_empty() && (stem == "main" || stem == "lib")) {
                continue;
            }
            let mut file_module = module.to_vec();
            if stem != "mod" {
                file_module.push(stem.to_owned());
            }
            out.push((file_module, path));
        }
    }
}

/// The text without comments, string literals and a trailing test module.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    match out.find("#[cfg(test)]\nmod tests {") {
        Some(at) => out[..at].to_owned(),
        None => out,
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The absolute module paths `code` (the file of `module`) names: `crate::a::b`,
/// `super::x`, `self::y`, and the members of a `use crate::{a, b::c}` group.
fn named_paths(code: &str, module: &[String]) -> Vec<ModulePath> {
    let mut paths = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != ':';
        let rest: String = bytes[i..bytes.len().min(i + 6)].iter().collect();
        let root = ["crate", "super", "self"]
            .into_iter()
            .find(|root| rest.starts_with(root));
        let (Some(root), true) = (root, starts_word) else {
            i += 1;
            continue;
        };
        // Read `root(::segment)*`, then a `{..}` group if one follows.
        let mut j = i + root.len();
        let mut segments = vec![root.to_owned()];
        let mut grouped = false;
        while bytes.get(j) == Some(&':') && bytes.get(j + 1) == Some(&':') {
            j += 2;
            if bytes.get(j) == Some(&'{') {
                let close = (j..bytes.len()).find(|&k| bytes[k] == '}').unwrap_or(j);
                let group: String = bytes[j + 1..close].iter().collect();
                for member in group.split(',') {
                    let first: String =
                        member.trim().chars().take_while(|&c| is_ident(c)).collect();
                    if !first.is_empty() && first != "self" {
                        let mut path = segments.clone();
                        path.push(first);
                        paths.push(path);
                    }
                }
                j = close;
                grouped = true;
                break;
            }
            let segment: String = bytes[j..].iter().take_while(|&&c| is_ident(c)).collect();
            if segment.is_empty() {
                break;
            }
            j += segment.len();
            segments.push(segment);
        }
        if !grouped {
            paths.push(segments);
        }
        i = j.max(i + 1);
    }
    paths
        .into_iter()
        .filter_map(|segments| resolve(&segments, module))
        .collect()
}

/// `segments` (starting with `crate`, `super` or `self`) as an absolute path, seen from
/// the file of `module`.
fn resolve(segments: &[String], module: &[String]) -> Option<ModulePath> {
    let (base, rest): (Vec<String>, &[String]) = match segments.first()?.as_str() {
        "crate" => (Vec::new(), &segments[1..]),
        _ => {
            let mut base = module.to_vec();
            let mut k = 0;
            while k < segments.len() && (segments[k] == "super" || segments[k] == "self") {
                if segments[k] == "super" {
                    base.pop()?;
                }
                k += 1;
            }
            (base, &segments[k..])
        }
    };
    let mut path = base;
    path.extend(rest.iter().cloned());
    Some(path)
}

/// The file a path lands in: the longest prefix of it that is a module of the crate.
fn owner(path: &[String], modules: &BTreeSet<ModulePath>) -> Option<ModulePath> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// Every file's references to other files: its own children and ancestors left out.
fn file_graph(src: &Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let mut files = Vec::new();
    source_files(src, &[], &mut files);
    let modules: BTreeSet<ModulePath> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).expect("read source");
        let targets: BTreeSet<ModulePath> = named_paths(&code_of(&text), module)
            .iter()
            .filter_map(|p| owner(p, &modules))
            .filter(|t| !t.starts_with(module) && !module.starts_with(t))
            .collect();
        graph.insert(module.clone(), targets);
    }
    graph
}

/// Groups of files that reach each other (strongly connected, more than one member).
fn circles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    let reach = |from: &ModulePath| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&ModulePath, BTreeSet<ModulePath>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut found: Vec<Vec<ModulePath>> = Vec::new();
    for (module, reached) in &reaches {
        let group: Vec<ModulePath> = reached
            .iter()
            .filter(|other| reaches.get(other).is_some_and(|r| r.contains(*module)))
            .cloned()
            .collect();
        if group.len() > 1 && !found.iter().any(|g| g.contains(module)) {
            found.push(group);
        }
    }
    found
}

#[test]
fn each_top_level_module_uses_only_the_modules_listed_below_it() {
    let lib = std::fs::read_to_string(proxy_dir().join("lib.rs")).expect("read lib.rs");
    let order = declared_order(&lib);
    let rank = |name: &str| order.iter().position(|m| m == name);
    let mut upward = Vec::new();
    for (from, targets) in file_graph(&proxy_dir()) {
        let from_rank = rank(&from[0]).unwrap_or_else(|| panic!("{} not in lib.rs", from[0]));
        for target in targets {
            let target_rank = rank(&target[0]).expect("a module of lib.rs");
            if target_rank < from_rank {
                upward.push(format!("{} names {}", from.join("::"), target.join("::")));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules reaching up the list in crates/proxy/src/lib.rs:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_files_name_each_other_in_a_circle() {
    let mut shown: Vec<String> = Vec::new();
    for src in crate_dirs() {
        for group in circles(&file_graph(&src)) {
            let names: Vec<String> = group.iter().map(|m| m.join("::")).collect();
            shown.push(format!("{}: {}", src.display(), names.join(", ")));
        }
    }
    assert!(shown.is_empty(), "import circles:\n{}", shown.join("\n"));
}

#[test]
fn the_check_sees_crate_super_and_grouped_paths() {
    let module = vec!["proxy".to_owned(), "forward".to_owned()];
    let code = code_of(
        "use crate::{store::Store, key};\nuse super::collapse::Leader;\n\
         // crate::admin in a comment\nlet s = \"crate::admin\"; self::inner::f();\n\
         fn f() -> crate::origin::Origin {}\n",
    );
    let mut seen: Vec<String> = named_paths(&code, &module)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "key",
            "origin::Origin",
            "proxy::collapse::Leader",
            "proxy::forward::inner::f",
            "store"
        ]
    );
    // A two-file circle is found; a chain is not.
    let path = |s: &str| vec![s.to_owned()];
    let mut graph = BTreeMap::new();
    graph.insert(path("a"), BTreeSet::from([path("b")]));
    graph.insert(path("b"), BTreeSet::from([path("c")]));
    graph.insert(path("c"), BTreeSet::new());
    assert!(circles(&graph).is_empty());
    graph.insert(path("c"), BTreeSet::from([path("a")]));
    assert_eq!(circles(&graph), vec![vec![path("a"), path("b"), path("c")]]);
}
