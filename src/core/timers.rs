//! Deadlines: the earliest of every generation's and session's timer, read from the
//! deadline index, and the walk over the expired ones.

use std::sync::Arc;

use super::deadlines::Owner;
use super::generation::GenInput;
use super::spec::OnBusy;
use super::time::Time;
use super::Core;

/// Passes over the timers per `handle_timeout`. Each pass clears or pushes forward every
/// timer it fires, so a handful of passes settle even zero-length graces; this bound only
/// guarantees the loop cannot spin.
const MAX_PASSES: usize = 16;

impl Core {
    /// The earliest instant at which [`handle_timeout`](Core::handle_timeout) has work.
    /// O(1): read from the deadline index, whatever the number of sessions.
    pub fn next_deadline(&self) -> Option<Time> {
        self.deadlines.first()
    }

    /// What [`next_deadline`](Core::next_deadline) must equal: the minimum over a scan of
    /// every generation and session. The oracle of the invariant checker and the tests.
    pub fn scan_deadline(&self) -> Option<Time> {
        let gens = self.gens.values().filter_map(|g| g.deadline());
        let restarts = self.sessions.values().filter_map(|s| s.restart_at);
        gens.chain(restarts).min()
    }

    /// Fires every deadline due at `now`: stop escalation, drain deadline, group KILL,
    /// restart after backoff. Harmless when nothing is due; costs O(due · log n).
    pub fn handle_timeout(&mut self, now: Time) {
        self.advance_clock(now);
        for _ in 0..MAX_PASSES {
            let mut due_gens = Vec::new();
            let mut due_sessions = Vec::new();
            for owner in self.deadlines.due(self.now) {
                match owner {
                    Owner::Gen(gen) => due_gens.push(*gen),
                    Owner::Restart(name) => due_sessions.push(name.clone()),
                }
            }
            if due_gens.is_empty() && due_sessions.is_empty() {
                break;
            }
            // The order a scan of the tables gave: generations by number, then sessions
            // by name.
            due_gens.sort_unstable();
            due_sessions.sort_unstable();
            for gen in due_gens {
                self.dispatch(gen, GenInput::Timeout);
            }
            for name in due_sessions {
                self.fire_restart(&name);
            }
        }
        self.follow_order();
        self.announce_states();
    }

    /// Re-reads `gen`'s deadline into the index: called wherever the generation may have
    /// changed phase or group, or was added or removed.
    pub(super) fn sync_gen(&mut self, gen: u64) {
        let at = self.gens.get(&gen).and_then(|g| g.deadline());
        self.deadlines.set(Owner::Gen(gen), at);
    }

    /// Re-reads the session's restart time into the index: called wherever `restart_at`
    /// may have changed, or the session was added or removed.
    pub(super) fn sync_restart(&mut self, name: &Arc<str>) {
        let at = self.sessions.get(name).and_then(|s| s.restart_at);
        self.deadlines.set(Owner::Restart(name.clone()), at);
    }

    /// Builds the index from the tables (after importing an image).
    pub(super) fn index_deadlines(&mut self) {
        let gens: Vec<u64> = self.gens.keys().copied().collect();
        for gen in gens {
            self.sync_gen(gen);
        }
        let names: Vec<Arc<str>> = self.sessions.keys().cloned().collect();
        for name in names {
            self.sync_restart(&name);
        }
    }

    /// Starts the session again after its backoff, unless a stop or remove intervened,
    /// counting the restart as its generation is created. With the generation table full
    /// it retries after the longest backoff (and counts it when that one starts).
    fn fire_restart(&mut self, name: &Arc<str>) {
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        s.restart_at = None;
        self.sync_restart(name);
        self.mark_dirty(name.clone());
        let Some(s) = self.sessions.get(name) else {
            return;
        };
        if !s.want_up || s.removing || s.current.is_some() {
            return;
        }
        let spec = s.spec.clone();
        match self.allocate(name, spec, OnBusy::Replace) {
            Ok(gen) => {
                if let Some(s) = self.sessions.get_mut(name) {
                    s.current = Some(gen);
                    // The restart happens: counted now (unless it retries a start the
                    // daemon was short of resources for).
                    if !std::mem::take(&mut s.restart_uncounted) {
                        s.restarts = s.restarts.saturating_add(1);
                    }
                }
                self.advance_session(name);
            }
            Err(_) => {
                let now = self.now;
                if let Some(s) = self.sessions.get_mut(name) {
                    s.restart_at = Some(now.saturating_add(s.spec.restart.retry_after_refusal()));
                }
                self.sync_restart(name);
            }
        }
    }
}
