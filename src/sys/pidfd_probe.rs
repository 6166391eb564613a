//! Whether this kernel gives out pidfds (Linux 5.3+), decided once at start-up.

use rustix::process::{getpid, pidfd_open, PidfdFlags};

/// `pidfd_open(getpid(), 0)`—Whether pidfds are available here.
///
/// When they are not (old kernels, other systems, seccomp filters), the daemon watches
/// children through SIGCHLD and verifies identities before every signal instead.
///
/// # References
///  - [Linux `pidfd_open(2)`](https://man7.org/linux/man-pages/man2/pidfd_open.2.html)
pub fn pidfd_supported() -> bool {
    pidfd_open(getpid(), PidfdFlags::empty()).is_ok()
}
