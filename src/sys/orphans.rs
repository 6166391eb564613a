//! Orphans: processes that are not ours but were reparented to us — because we are PID 1
//! of a container, or a child subreaper — and must be reaped or they stay zombies.
//!
//! They are reaped one by one, by pid, after a look at our own children (our `children`
//! files in `/proc`, not a scan of every process on the host); never with `waitpid(-1)`,
//! which would also take the exit statuses of the children we track (djinn#2700).

use std::io;

use rustix::io::Errno;
use rustix::process::{getpid, waitpid, Pid, WaitOptions};

use crate::sys::tree::OwnChildren;

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`—Makes orphaned descendants reparent to us instead of
/// to init, so a grandchild that daemonizes stays ours to reap and account.
///
/// # References
///  - [Linux `prctl(2)`](https://man7.org/linux/man-pages/man2/prctl.2.html)
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(getpid()))?;
    Ok(())
}

/// Whether orphans will be reparented to us (PID 1, or a subreaper).
pub fn adopts_orphans() -> bool {
    getpid().is_init()
        || rustix::process::child_subreaper()
            .map(|p| p.is_some())
            .unwrap_or(false)
}

/// Reaps every zombie child of ours whose pid `is_tracked` does not claim, and that this
/// process did not start itself ([`started`](super::started): a probe's or a lookup's
/// status belongs to its owner, however far from the generations). Returns how many.
///
/// Our children are read from our own `children` files (see [`OwnChildren::all`]: read on
/// from where `own` left them), and each one not tracked is asked with `waitpid(pid, WNOHANG)`: a child that still runs
/// answers "not yet", a zombie is reaped. The cost grows with our children, never with the
/// host's processes; `is_tracked` is asked once per child, so it should answer in constant
/// time (a set built once, not a scan of a table).
pub fn reap_orphans(
    mut is_tracked: impl FnMut(i32) -> bool,
    own: &mut OwnChildren,
) -> io::Result<usize> {
    let mut reaped = 0;
    for raw in own.all()? {
        if is_tracked(raw) || crate::sys::started::is_ours(raw) {
            continue;
        }
        let Some(pid) = Pid::from_raw(raw) else {
            continue;
        };
        // Our child, which only we can reap, so its pid cannot have been reused between
        // the look and this call.
        match waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some(_)) => {
                crate::sys::reaped::note(raw);
                reaped += 1
            }
            Ok(None) | Err(Errno::CHILD) => {}
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(reaped)
}
