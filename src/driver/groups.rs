//! Watching for a generation's process group to empty after its leader exited.
//!
//! The core says which groups it waits for ([`Core::groups_awaited`]); this decides when
//! to look: at the end of a turn in which a leader exited (usually the group is already
//! empty), then every [`GROUP_CHECK`] while any group is awaited. One pair of `/proc` scans
//! answers for every awaited group at once.

use std::time::{Duration, Instant};

use super::children::Children;
use crate::core::Core;

/// How often awaited groups are looked at (only while some are; an idle daemon never
/// ticks).
pub const GROUP_CHECK: Duration = Duration::from_millis(20);

/// When the next look is due.
#[derive(Debug)]
pub struct GroupWatch {
    last: Instant,
    soon: bool,
    scan_failed: bool,
}

impl GroupWatch {
    /// Nothing looked at yet.
    pub fn new() -> GroupWatch {
        GroupWatch {
            last: Instant::now(),
            soon: false,
            scan_failed: false,
        }
    }

    /// A leader exited: look at the end of this turn rather than a tick later.
    pub fn look_soon(&mut self) {
        self.soon = true;
    }

    /// How long the loop may sleep before the next look, if any group is awaited that
    /// only a look can tell about (a cgroup says when it empties).
    pub fn timeout(&self, core: &Core, children: &Children) -> Option<Duration> {
        core.groups_awaited()
            .any(|(gen, _)| children.cgroup_populated(gen).is_none())
            .then_some(GROUP_CHECK)
    }

    /// The awaited generations whose group emptied, if a look is due now.
    pub fn emptied(&mut self, core: &Core, children: &Children) -> Vec<u64> {
        if !self.soon && self.last.elapsed() < GROUP_CHECK {
            return Vec::new();
        }
        self.soon = false;
        self.last = Instant::now();
        let mut emptied = Vec::new();
        let mut awaited: Vec<(u64, u32)> = Vec::new();
        for (gen, pgid) in core.groups_awaited() {
            match children.cgroup_populated(gen) {
                Some(false) => emptied.push(gen),
                Some(true) => {} // its cgroup will say when
                None => awaited.push((gen, pgid)),
            }
        }
        if awaited.is_empty() {
            return emptied;
        }
        let pgids: Vec<i32> = awaited.iter().map(|(_, pgid)| *pgid as i32).collect();
        match crate::sys::procscan::empty_groups(&pgids) {
            Ok(empty) => {
                self.scan_failed = false;
                emptied.extend(
                    awaited
                        .into_iter()
                        .filter(|(_, pgid)| empty.contains(&(*pgid as i32)))
                        .map(|(gen, _)| gen),
                );
                emptied
            }
            Err(e) => {
                // The kill deadlines still end every generation; say so once.
                if !std::mem::replace(&mut self.scan_failed, true) {
                    log::warn!(
                        "scanning /proc for process groups: {e}; waiting for kill deadlines"
                    );
                }
                emptied
            }
        }
    }
}
