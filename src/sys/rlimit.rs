//! The daemon's descriptor limit.
//!
//! Each pipes-mode generation holds four descriptors (stdin, stdout, stderr, pidfd) and
//! each client one, so the common soft limit of 1024 would cap a daemon at a few hundred
//! sessions. Like systemd, we raise our own soft limit to the hard one at start-up; the
//! children get the original soft limit back (see the spawn module), so programs that
//! still use `select(2)` keep working.

use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The soft limit we replaced, for children; `u64::MAX` while nothing was raised.
static ORIGINAL_SOFT: AtomicU64 = AtomicU64::new(u64::MAX);

/// `setrlimit(RLIMIT_NOFILE, {hard, hard})`—Raises the soft descriptor limit to the hard
/// limit. Returns the soft limit it replaced (what children should get), or `None` if
/// nothing changed.
///
/// # References
///  - [Linux `setrlimit(2)`](https://man7.org/linux/man-pages/man2/setrlimit.2.html)
pub fn raise_nofile_limit() -> Option<u64> {
    let old = getrlimit(Resource::Nofile);
    if old.current == old.maximum {
        return None;
    }
    let new = Rlimit {
        current: old.maximum,
        maximum: old.maximum,
    };
    match setrlimit(Resource::Nofile, new) {
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
