//! Learning that a generation's tree emptied after its leader exited, without looking at
//! the whole host.
//!
//! The core says which generations it waits for ([`Core::groups_awaited`]). A cgroup says
//! itself when it empties (`cgroup.events`, a readiness event). A session is watched
//! through the members its signals reached: their pidfds say when they exit, and the
//! session is walked again — our own subtree, not the host — only then or on a backed-off
//! timer (see `sys::tree::SessionWatch`). The first look comes at the end of the turn in
//! which a leader exited (see [`Children::look_soon`]), when the tree is usually empty.

use std::time::{Duration, Instant};

use mio::Registry;

use super::children::Children;
use crate::core::Core;

/// How long the loop may sleep before a tree wants looking at.
pub fn timeout(children: &Children) -> Option<Duration> {
    if children.look_due_now() {
        return Some(Duration::ZERO);
    }
    let at = children.watch_deadline()?;
    Some(at.saturating_duration_since(Instant::now()))
}

/// The awaited generations whose tree emptied, looking only where a look is due.
pub fn emptied(core: &Core, children: &mut Children, registry: &Registry) -> Vec<u64> {
    let due = children.take_look_soon()
        || children
            .watch_deadline()
            .is_some_and(|at| at <= Instant::now());
    if !due {
        return Vec::new();
    }
    let mut sessions = Vec::new();
    let mut emptied = Vec::new();
    for (gen, _) in core.groups_awaited() {
        match children.cgroup_populated(gen) {
            Some(true) => {}
            Some(false) => emptied.push(gen),
            None => sessions.push(gen),
        }
    }
    emptied.extend(children.sessions_emptied(registry, &sessions));
    emptied
}
