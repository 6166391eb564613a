//! The daemon's descriptor limit.
//!
//! Each pipes-mode generation holds four descriptors (stdin, stdout, stderr, pidfd) and
//! each client one, so the common soft limit of 1024 would cap a daemon at a few hundred
//! sessions. Like systemd, we raise our own soft limit to the hard one at start-up; the
//! children get the original soft limit back (see the spawn module), so programs that
//! still use `select(2)` keep working.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

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
        Ok(()) => old.current,
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
