//! The children this process started itself and has not reaped yet.
//!
//! A daemon that is PID 1 or a subreaper reaps orphans by pid ([`reap_orphans`]), and
//! must never take the exit status of a child one of its own parts waits for: a readiness
//! or liveness `command` probe, a name lookup, an upgrade's check, the log writer. Each of
//! those owners keeps its own handle; rather than the reaper asking every one of them,
//! every start of a child notes its pid here ([`started`]) and every reap of one forgets
//! it (the same [`reaped::note`] that every reap already makes), so the reaper asks one
//! set. Its size is the number of children alive or unreaped, as the kernel's own list.
//!
//! The set is the starting thread's own, as a child is its thread's to reap (the daemon
//! starts and reaps from its one thread).
//!
//! [`reap_orphans`]: super::orphans::reap_orphans
//! [`reaped::note`]: super::reaped::note

use std::cell::RefCell;
use std::collections::HashSet;

thread_local! {
    static OURS: RefCell<HashSet<i32>> = RefCell::new(HashSet::new());
}

/// We just started child `pid`: an owner of ours will reap it.
pub fn started(pid: i32) {
    OURS.with_borrow_mut(|ours| ours.insert(pid));
}

/// Child `pid` was reaped (by whoever): its pid may be a stranger's from now on.
pub fn forget(pid: i32) {
    OURS.with_borrow_mut(|ours| ours.remove(&pid));
}

/// Whether `pid` is a child this thread started and nobody has reaped yet.
pub fn is_ours(pid: i32) -> bool {
    OURS.with_borrow(|ours| ours.contains(&pid))
}
