//! Learning that a generation's tree emptied after its leader exited, without looking at
//! the whole host.
//!
//! The core says which generations it waits for ([`Core::groups_awaited`]). A cgroup says
//! itself when it empties (`cgroup.events`, a readiness event). A session is watched
//! through the members its signals reached: their pidfds say when they exit, and the
//! session is walked again — our own subtree, not the host — only then or on a backed-off
//! timer (see `sys::tree::SessionWatch`). The first look comes at the end of the turn in
//! which a leader exited, when the tree is usually already empty.

use std::time::{Duration, Instant};

use mio::Registry;

use super::children::Children;
use crate::core::Core;

/// When the next look is due.
#[derive(Debug, Default)]
pub struct GroupWatch {
    soon: bool,
}

impl GroupWatch {
    /// Nothing to look at yet.
    pub fn new() -> GroupWatch {
        GroupWatch::default()
    }

    /// A leader exited: look at the end of this turn.
    pub fn look_soon(&mut self) {
        self.soon = true;
    }

    /// How long the loop may sleep before a session watch wants to look again.
    pub fn timeout(&self, children: &Children) -> Option<Duration> {
        if self.soon {
            return Some(Duration::ZERO);
        }
        let at = children.watch_deadline()?;
        Some(at.saturating_duration_since(Instant::now()))
    }

    /// The awaited generations whose tree emptied, looking only where a look is due.
    pub fn emptied(
        &mut self,
        core: &Core,
        children: &mut Children,
        registry: &Registry,
    ) -> Vec<u64> {
        let due = std::mem::take(&mut self.soon)
            || children
                .watch_deadline()
                .is_some_and(|at| at <= Instant::now());
        if !due {
            return Vec::new();
        }
        let awaited: Vec<u64> = core.groups_awaited().map(|(gen, _)| gen).collect();
        awaited
            .into_iter()
            .filter(|&gen| match children.cgroup_populated(gen) {
                Some(populated) => !populated,
                None => children.session_empty(registry, gen) == Some(true),
            })
            .collect()
    }
}
