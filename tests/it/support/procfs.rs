//! Lines of a process's `/proc` files, for the tests that check what a process was given
//! or set up for itself (limits, ids, flags, memory).

use std::fmt::Display;

/// The rest of the first line of `/proc/<pid>/<file>` that begins with `label`, trimmed;
/// `None` once the process or the line is gone. `pid` may be `"self"`.
pub(crate) fn line(pid: impl Display, file: &str, label: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    let rest = text.lines().find_map(|line| line.strip_prefix(label))?;
    Some(rest.trim().to_owned())
}

/// The first word of that [`line`]: a value, where the line goes on with its unit or
/// with more columns.
pub(crate) fn value(pid: impl Display, file: &str, label: &str) -> Option<String> {
    let line = line(pid, file, label)?;
    line.split_whitespace().next().map(str::to_owned)
}
