//! Deadlines: the minimum over every generation's and session's timer, and the walk over
//! the expired ones.

use super::generation::GenInput;
use super::time::Time;
use super::Core;

/// Passes over the timers per `handle_timeout`. Each pass clears or pushes forward every
/// timer it fires, so a handful of passes settle even zero-length graces; this bound only
/// guarantees the loop cannot spin.
const MAX_PASSES: usize = 16;

impl Core {
    /// The earliest instant at which [`handle_timeout`](Core::handle_timeout) has work.
    pub fn next_deadline(&self) -> Option<Time> {
        let gens = self.gens.values().filter_map(|g| g.deadline());
        let restarts = self.sessions.values().filter_map(|s| s.restart_at);
        gens.chain(restarts).min()
    }

    /// Fires every deadline due at `now`: stop escalation, drain deadline, group KILL,
    /// restart after backoff. Harmless when nothing is due.
    pub fn handle_timeout(&mut self, now: Time) {
        self.advance_clock(now);
        for _ in 0..MAX_PASSES {
            let due_gens: Vec<u64> = self
                .gens
                .values()
                .filter(|g| g.deadline().is_some_and(|t| t <= self.now))
                .map(|g| g.gen)
                .collect();
            let due_sessions: Vec<_> = self
                .sessions
                .values()
                .filter(|s| s.restart_at.is_some_and(|t| t <= self.now))
                .map(|s| s.name.clone())
                .collect();
            if due_gens.is_empty() && due_sessions.is_empty() {
                break;
            }
            for gen in due_gens {
                self.dispatch(gen, GenInput::Timeout);
            }
            for name in due_sessions {
                self.fire_restart(&name);
            }
        }
        self.announce_states();
    }

    /// Starts the session again after its backoff, unless a stop or remove intervened.
    /// With the generation table full it retries after the longest backoff.
    fn fire_restart(&mut self, name: &std::sync::Arc<str>) {
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        s.restart_at = None;
        self.dirty.insert(name.clone());
        if !s.want_up || s.removing || s.current.is_some() {
            return;
        }
        let spec = s.spec.clone();
        match self.allocate(name, spec) {
            Ok(gen) => {
                if let Some(s) = self.sessions.get_mut(name) {
                    s.current = Some(gen);
                }
                self.advance_session(name);
            }
            Err(_) => {
                let now = self.now;
                if let Some(s) = self.sessions.get_mut(name) {
                    s.restart_at = Some(now.saturating_add(
                        s.spec.restart.max.max(std::time::Duration::from_millis(1)),
                    ));
                }
            }
        }
    }
}
