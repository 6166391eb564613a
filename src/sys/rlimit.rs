//! The daemon's descriptor limit.
//!
//! Each pipes-mode generation holds four descriptors (stdin, stdout, stderr, pidfd) and
//! each client one, so the common soft limit of 1024 would cap a daemon at a few hundred
//! sessions. Like systemd, we raise our own soft limit to the hard one at start-up — and,
//! where we may (root, or `CAP_SYS_RESOURCE`), the hard limit first up to the kernel's
//! ceiling `fs.nr_open`: 10,000 running sessions need about 40,000 descriptors. The
//! children get the original soft limit back (see the spawn module), so programs that
//! still use `select(2)` keep working.

use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The soft limit we replaced, for children; `u64::MAX` while nothing was raised.
static ORIGINAL_SOFT: AtomicU64 = AtomicU64::new(u64::MAX);

/// Where the kernel says how far any process's descriptor limit may go.
const NR_OPEN: &str = "/proc/sys/fs/nr_open";

/// `setrlimit(RLIMIT_NOFILE, {max, max})`—Raises the descriptor limit as far as it may go:
/// both limits to `fs.nr_open` when allowed to raise the hard limit, else the soft limit
/// to the hard one. Returns the soft limit it replaced (what children should get), or
/// `None` if nothing changed.
///
/// # References
///  - [Linux `setrlimit(2)`](https://man7.org/linux/man-pages/man2/setrlimit.2.html)
///  - [Linux `proc_sys_fs(5)`](https://man7.org/linux/man-pages/man5/proc_sys_fs.5.html)
pub fn raise_nofile_limit() -> Option<u64> {
    let old = getrlimit(Resource::Nofile);
    let ceiling = std::fs::read_to_string(NR_OPEN)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let higher_hard = match (ceiling, old.maximum) {
        (Some(c), Some(hard)) if c > hard => Some(c),
        _ => None,
    };
    // Raising the hard limit needs privilege; without it, EPERM, and the hard one it is.
    let raised_hard = higher_hard.is_some_and(|c| {
        let all = Rlimit {
            current: Some(c),
            maximum: Some(c),
        };
        setrlimit(Resource::Nofile, all).is_ok()
    });
    if let (Some(c), false) = (higher_hard, raised_hard) {
        log::info!(
            "descriptor limit stays at the hard limit {}: raising it towards fs.nr_open ({c}) \
             needs CAP_SYS_RESOURCE (a running session holds up to five)",
            old.maximum.unwrap_or(u64::MAX)
        );
    }
    let result = if raised_hard {
        Ok(())
    } else if old.current == old.maximum {
        return None;
    } else {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: old.maximum,
                maximum: old.maximum,
            },
        )
    };
    match result {
        Ok(()) => {
            if let Some(soft) = old.current {
                ORIGINAL_SOFT.store(soft, Ordering::Relaxed);
            }
            old.current
        }
        Err(e) => {
            log::warn!("cannot raise the descriptor limit: {e}");
            None
        }
    }
}

/// The current soft descriptor limit (`None`: unlimited).
pub fn nofile_soft_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// The `RLIMIT_NOFILE` a child should get: the soft limit we had before raising ours, with
/// the current hard limit; `None` when ours was never raised.
pub fn child_nofile_limit() -> Option<libc::rlimit> {
    let soft = ORIGINAL_SOFT.load(Ordering::Relaxed);
    if soft == u64::MAX {
        return None;
    }
    let hard = getrlimit(Resource::Nofile)
        .maximum
        .unwrap_or(libc::RLIM_INFINITY);
    Some(libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    })
}
