//! `include`: fragment files merged over the main config file, so that a piece of
//! configuration (what `simulate --recommend` prints, a site's `[[site]]`) can be dropped
//! into a directory instead of edited into the main file.
//!
//! `include` is a top-level list of paths, relative ones taken from the main file's
//! directory, each of which may have wildcards (`*`, `?`, `[a-z]`, `{a,b}`) in its file
//! name only. The files are read in the list's order, those one pattern matches sorted
//! by name; a pattern with wildcards that matches nothing (or names a directory that does
//! not exist) adds nothing, a path without wildcards must exist. Each file's tables are
//! merged key by key over what came before it: a key a later file sets replaces the
//! earlier value, tables merge, and any other value (an array, `[[site]]` and `[[rule]]`
//! included) is replaced whole. A fragment may not include others.
//!
//! Every file is read on its own first, so an unknown key or a value of the wrong type
//! is named with its file and line; an invalid value of the merged config is named with
//! the file that set it last.

use std::path::{Path, PathBuf};

use super::validate::{parse_merged, read_raw};
use super::{Config, ConfigError};

/// The key, in the main file and in errors.
const INCLUDE: &str = "include";

/// Loads the config file at `path`, whose text is `text`, with the fragments its
/// `include` names merged over it.
pub(super) fn load(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let patterns = read_raw(text)?.include.unwrap_or_default();
    if patterns.is_empty() {
        return super::validate::parse(text);
    }
    let mut merged = table(text)?;
    merged.remove(INCLUDE);
    let base = path.parent().unwrap_or(Path::new(""));
    let mut set_by = Vec::new();
    for file in fragments(base, &patterns)? {
        let named = |error| in_file(&file, error);
        let text = std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
            path: file.clone(),
            source,
        })?;
        if read_raw(&text).map_err(named)?.include.is_some() {
            let reason = "a fragment may not include others: list every pattern in the main \
                          file"
                .to_owned();
            return Err(named(ConfigError::Invalid {
                key: INCLUDE,
                reason,
            }));
        }
        merge(&mut merged, table(&text).map_err(named)?, "", &mut |key| {
            set_by.push((key, file.clone()));
        });
    }
    parse_merged(merged).map_err(|error| attributed(error, &set_by))
}

/// `error` of the merged config, with the fragment that last set its key named, if a
/// fragment did; `set_by` lists the dotted keys each fragment set, in reading order.
fn attributed(error: ConfigError, set_by: &[(String, PathBuf)]) -> ConfigError {
    let key = match &error {
        ConfigError::Invalid { key, .. } => (*key).to_owned(),
        ConfigError::InvalidAt { key, .. } => key.clone(),
        _ => return error,
    };
    // The key itself, a table or array it lies in (`site` for `site[1].hosts`), or a key
    // inside it (a `[server.tls]` error set by `server.tls.listen`).
    let covers = |set: &str| {
        let within = |outer: &str, inner: &str| {
            inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        within(set, &key) || within(&key, set)
    };
    match set_by.iter().rev().find(|(set, _)| covers(set)) {
        Some((_, file)) => in_file(file, error),
        None => error,
    }
}

/// `error`, named with the fragment it is in.
fn in_file(file: &Path, error: ConfigError) -> ConfigError {
    ConfigError::InFile {
        file: file.to_owned(),
        source: Box::new(error),
    }
}

/// TOML text as a table; `read_raw` has read it already, so a syntax error is reported
/// the way it reports one.
fn table(text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string().trim_end().to_owned()))
}

/// Merges `over` into `base`, table by table; `set` is told the dotted key of every value
/// taken from `over`.
fn merge(base: &mut toml::Table, over: toml::Table, prefix: &str, set: &mut impl FnMut(String)) {
    for (key, value) in over {
        let dotted = match prefix {
            "" => key.clone(),
            _ => format!("{prefix}.{key}"),
        };
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(value)) => {
                merge(inner, value, &dotted, set);
            }
            (_, value) => {
                set(dotted);
                base.insert(key, value);
            }
        }
    }
}

/// The files `patterns` name, relative ones under `base`, in reading order, each once.
fn fragments(base: &Path, patterns: &[String]) -> Result<Vec<PathBuf>, ConfigError> {
    let mut files: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        for file in matches(&base.join(pattern), pattern)? {
            if !files.contains(&file) {
                files.push(file);
            }
        }
    }
    Ok(files)
}

/// The files `path` (the pattern as given: `pattern`) names, sorted by name.
fn matches(path: &Path, pattern: &str) -> Result<Vec<PathBuf>, ConfigError> {
    let bad = |reason: String| ConfigError::Invalid {
        key: INCLUDE,
        reason: format!("{pattern:?} {reason}"),
    };
    let wild = |text: &str| text.contains(['*', '?', '[', '{']);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(bad("names no file".to_owned()));
    };
    if wild(&dir.to_string_lossy()) {
        return Err(bad("may have wildcards in its file name only".to_owned()));
    }
    if !wild(name) {
        return Ok(vec![path.to_owned()]);
    }
    let glob = globset::Glob::new(name).map_err(|e| bad(format!("is not a pattern: {e}")))?;
    let matcher = glob.compile_matcher();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            let path = dir.to_owned();
            return Err(ConfigError::Read { path, source });
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConfigError::Read {
            path: dir.to_owned(),
            source,
        })?;
        let file = entry.path();
        // Followed through symlinks, as a `conf.d` of links to shared files has them.
        if matcher.is_match(entry.file_name()) && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}
