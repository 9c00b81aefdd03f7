//! How many entry files the store may keep open (`cache.open_files`), within the
//! process's open-file limit: every client and origin connection needs a descriptor
//! too, and running out of them makes `accept` fail.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use tracing::{debug, warn};

/// `configured` open entry files, or half the open-file limit if that is lower
/// (the other half stays for connections, logs and the store's own work).
///
/// The soft limit is raised to the hard one first, as nginx's `worker_rlimit_nofile`
/// and Go's runtime do: a shell's default soft limit of 1024 is a leftover of
/// `select(2)`, which nothing here uses, while the hard limit is what the operator
/// (or the systemd unit's `LimitNOFILE`) granted.
pub(super) fn budget(configured: usize) -> usize {
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    if current != maximum {
        match setrlimit(
            Resource::Nofile,
            Rlimit {
                current: maximum,
                maximum,
            },
        ) {
            Ok(()) => debug!(
                ?current,
                ?maximum,
                "open-file limit raised to the hard limit"
            ),
            Err(error) => debug!(%error, "open-file limit left as it was"),
        }
    }
    // `None`: unlimited.
    let Some(limit) = getrlimit(Resource::Nofile).current else {
        return configured;
    };
    let half = usize::try_from(limit / 2).unwrap_or(usize::MAX);
    if configured > half {
        warn!(
            open_files = configured,
            limit,
            using = half,
            "cache.open_files exceeds half the open-file limit (RLIMIT_NOFILE); \
             raise the limit (systemd: LimitNOFILE) to keep that many open"
        );
        return half;
    }
    configured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_what_was_asked_within_half_the_open_file_limit() {
        // After the first call, the soft limit is what `budget` raised it to.
        let small = budget(8);
        let Some(limit) = getrlimit(Resource::Nofile).current else {
            eprintln!("skipped the clamp check: this process has no open-file limit");
            assert_eq!(budget(usize::MAX), usize::MAX);
            return;
        };
        assert_eq!(
            small,
            8.min(usize::try_from(limit / 2).unwrap_or(usize::MAX))
        );
        let half = usize::try_from(limit / 2).unwrap_or(usize::MAX);
        assert_eq!(budget(usize::MAX), half);
        assert_eq!(budget(half), half);
    }
}
