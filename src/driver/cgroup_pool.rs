//! Emptied generation cgroups kept for the next spawns: making a cgroup (`mkdir` in
//! cgroupfs, opening its `cgroup.events`) and removing it (`rmdir`) cost the daemon
//! more than anything else per spawn, and a generation without limits needs nothing a
//! used, emptied one does not offer.
//!
//! A cgroup comes here only when [`GenCgroup::reusable`] says it is as a new one would
//! be: no limit ever set on it, no process inside, no cgroup below. One that is not is
//! removed as before. A spawn with limits always gets a cgroup of its own, made for it.
//! Pooled cgroups keep the name they were made with (`gen-<N>`, `N` the generation that
//! first used it).
//!
//! The pool is bounded ([`MAX_POOLED`]); each pooled cgroup holds one descriptor, counted
//! in the daemon's descriptor budget. Those descriptors are lent, not spent: when a spawn
//! would be refused for want of descriptors, kept cgroups are removed first, one at a
//! time, until it fits (see [`CgroupPool::shed_one`]), so a daemon that ran and removed
//! many sessions admits as many spawns as a fresh one.

use crate::sys::cgroup::GenCgroup;
use crate::sys::spare_fd::is_shortage;

/// Most emptied cgroups kept: about as many as generations start in one burst; beyond
/// that they are removed.
pub const MAX_POOLED: usize = 64;

/// Descriptors a pooled cgroup holds (its `cgroup.events`).
pub const POOLED_DESCRIPTORS: usize = 1;

/// The emptied cgroups ready for another generation.
#[derive(Debug, Default)]
pub struct CgroupPool {
    free: Vec<GenCgroup>,
}

impl CgroupPool {
    /// A cgroup for a generation without limits, if one is kept and still empty: one
    /// that something entered or removed while it was kept (only a privileged hand can)
    /// is dropped — removed if it can be — and the next one is looked at.
    pub fn take(&mut self) -> Option<GenCgroup> {
        while let Some(cg) = self.free.pop() {
            if matches!(cg.is_populated(), Ok(false)) {
                return Some(cg);
            }
            log::info!("a kept cgroup changed meanwhile: {}", cg.path().display());
        }
        None
    }

    /// Takes back the cgroup of generation `gen`, which is over (its events descriptor
    /// already deregistered from the loop): kept if reusable and there is room, else
    /// removed (logged if it cannot be yet; dropping it tries once more). Handed back
    /// when its removal failed for want of descriptors or memory, to be tried again.
    #[must_use]
    pub fn give(&mut self, gen: u64, mut cg: GenCgroup) -> Option<GenCgroup> {
        if self.free.len() < MAX_POOLED && cg.reusable() {
            self.free.push(cg);
            return None;
        }
        match cg.remove() {
            Ok(()) => None,
            Err(e) if is_shortage(&e) => {
                log::warn!("gen {gen}: cgroup not removed yet: {e}; tried again until it is");
                Some(cg)
            }
            Err(e) => {
                log::info!("gen {gen}: cgroup not removed yet: {e}");
                None
            }
        }
    }

    /// Removes one kept cgroup, closing its descriptors, to give them back; `false` if
    /// none is kept. Kept cgroups are a cache: a spawn that would be refused for want of
    /// descriptors comes first (see `Children::admit_spawn`).
    pub fn shed_one(&mut self) -> bool {
        // Dropping it closes its descriptors and removes its directory (it is empty).
        self.free.pop().is_some()
    }

    /// Descriptors the pooled cgroups hold.
    pub fn descriptors(&self) -> usize {
        self.free.len() * POOLED_DESCRIPTORS
    }

    /// Removes every pooled cgroup (each is empty), e.g. before the daemon re-executes
    /// itself, whose successor would not know them.
    pub fn clear(&mut self) {
        self.free.clear();
    }
}
