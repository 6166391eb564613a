//! Start and stop order between sessions (`depends_on`): a generation whose dependencies
//! are not met stays Pending with a reason; the shutdown stops dependents before what they
//! depend on.
//!
//! The gate sits where a Pending generation would start ([`Core::start_or_wait`]); a
//! blocked session is remembered, under the sessions it waits on, and looked at again after
//! an input that changed one of those (or itself), so a dependency that starts, becomes
//! ready, completes — or fails and later recovers — releases its dependents without any of
//! them being told. Cost: per input, one look per blocked session waiting on a session the
//! input changed (nothing when none is blocked).

use std::collections::HashMap;
use std::sync::Arc;

use super::action::ExitCause;
use super::depends::{find_cycle, DependOn, Dependencies};
use super::error::Error;
use super::generation::{GenInput, Phase};
use super::readiness::Readiness;
use super::session::Session;
use super::snapshot::{LastEnd, StopReason};
use super::{Core, Shutdown};

impl Core {
    /// Why a generation with dependencies `deps` may not start now, or `None` when every
    /// dependency is met (the first unmet one, in name order, is named).
    pub(super) fn unmet_dependency(&self, deps: &Dependencies) -> Option<String> {
        deps.iter()
            .find_map(|(dep, want)| self.dependency_problem(dep, *want))
    }

    /// Why `dep` does not satisfy `want` now, or `None` if it does.
    fn dependency_problem(&self, dep: &str, want: DependOn) -> Option<String> {
        let Some(d) = self.sessions.get(dep) else {
            return Some(format!("{dep}: no such session"));
        };
        let current = d.current.and_then(|g| self.gens.get(&g));
        // One being stopped (on request, or as unhealthy) is on its way down: nothing new
        // starts against it.
        let running =
            current.filter(|g| matches!(g.phase, Phase::Running { .. }) && !g.is_unverified());
        match want {
            DependOn::Started if running.is_some() => return None,
            DependOn::Ready => match running.map(|g| &g.readiness) {
                Some(Readiness::Ready) => return None,
                Some(Readiness::Failed(why)) => return Some(format!("{dep} is not ready: {why}")),
                _ => {}
            },
            DependOn::Completed
                if current.is_none()
                    && matches!(
                        d.last_end,
                        Some(LastEnd::Exited {
                            code: Some(0),
                            cause: ExitCause::Exited,
                            ..
                        })
                    ) =>
            {
                return None
            }
            DependOn::Started | DependOn::Completed => {}
        }
        let wanted = match want {
            DependOn::Started => format!("waiting for {dep} to be started"),
            DependOn::Ready => format!("waiting for {dep} to be ready"),
            DependOn::Completed => format!("waiting for {dep} to complete"),
        };
        if current.is_some() {
            return Some(wanted);
        }
        // Not running: say how it last ended, when that is why.
        let ended = match &d.last_end {
            Some(LastEnd::SpawnFailed { error, .. }) => Some(format!(
                "{dep} failed to start ({})",
                error.message.as_deref().unwrap_or(error.kind.as_str())
            )),
            Some(LastEnd::Exited {
                code: Some(c),
                cause,
                ..
            }) if !(want == DependOn::Completed && *c == 0 && *cause == ExitCause::Exited) => {
                Some(format!("{dep} ended with code {c} ({})", cause.as_str()))
            }
            Some(LastEnd::Exited { code: None, .. }) => Some(format!("{dep} was lost")),
            _ => None,
        };
        Some(match ended {
            Some(e) => format!("{wanted}: {e}"),
            None => wanted,
        })
    }

    /// Why session `s`'s current generation waits for its dependencies, for `list` and
    /// `get`: only a Pending one with no older generation left to wait for (read from the
    /// tables, so an imported core says the same).
    pub(super) fn waiting_reason(&self, s: &Session) -> Option<String> {
        let cur = s.current?;
        let g = self.gens.get(&cur)?;
        if g.phase != Phase::Pending || g.spec.depends_on.is_empty() {
            return None;
        }
        let older_live = self.gens_of(&s.name).next().is_some_and(|o| o < cur);
        if older_live && !g.overlap {
            return None;
        }
        self.unmet_dependency(&g.spec.depends_on)
    }

    /// Starts `gen` (Pending, current in `name`) if its dependencies are met; else
    /// remembers the session as blocked, to be looked at again once a session it waits on
    /// changes.
    pub(super) fn start_or_wait(&mut self, name: &Arc<str>, gen: u64) {
        let Some(g) = self.gens.get(&gen) else { return };
        if g.phase != Phase::Pending {
            return;
        }
        if g.spec.depends_on.is_empty() || self.unmet_dependency(&g.spec.depends_on).is_none() {
            self.blocked.remove(name);
            self.dispatch(gen, GenInput::Start);
        } else {
            let deps = g.depended_on();
            self.blocked.insert(name.clone(), deps);
            self.touched.insert(name.clone());
        }
    }

    /// Looks again at the blocked sessions the last input may have released (those it
    /// changed, and those waiting on a session it changed: see [`super::blocked`]): those
    /// whose dependencies are met now start.
    pub(super) fn retry_blocked(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let due = self.blocked.due(self.touched.iter());
        for name in due {
            self.blocked.remove(&name);
            let Some(s) = self.sessions.get(&name) else {
                continue;
            };
            let Some(cur) = s.current else { continue };
            // Whether it may start beside an older generation is its own (never a flag
            // left by a generation it replaced).
            let overlap = self.gens.get(&cur).is_some_and(|g| g.overlap);
            if s.removing || self.shutdown != Shutdown::Running {
                continue;
            }
            let older_live = self.gens_of(&name).next().is_some_and(|g| g < cur);
            if overlap || !older_live {
                self.start_or_wait(&name, cur);
            } else if let Some(g) = self.gens.get(&cur) {
                let deps = g.depended_on();
                self.blocked.insert(name, deps);
            }
        }
    }

    /// Refuses a spawn of `name` with `deps` that would close a dependency cycle among the
    /// sessions known, naming the cycle.
    pub(super) fn refuse_cycle(&self, name: &str, deps: &Dependencies) -> Result<(), Error> {
        if deps.is_empty() {
            return Ok(());
        }
        let edges = |n: &str| -> Option<Box<dyn Iterator<Item = &str> + '_>> {
            if n == name {
                return Some(Box::new(deps.keys().map(String::as_str)));
            }
            // A session being removed depends on nothing any more: it is going.
            self.sessions.get(n).filter(|s| !s.removing).map(|s| {
                Box::new(s.spec.depends_on.keys().map(String::as_str))
                    as Box<dyn Iterator<Item = &str>>
            })
        };
        match find_cycle(edges, [name]) {
            Some(cycle) => Err(Error::bad(format!(
                "depends_on: would close a dependency cycle: {}",
                cycle.join(" -> ")
            ))),
            None => Ok(()),
        }
    }

    /// The first shutdown: every generation is stopped, those of a session other live
    /// sessions depend on only once those have ended (dependents first, in reverse of the
    /// start order). A second shutdown stops the deferred ones too (it kills everything).
    pub(super) fn stop_in_order(&mut self, grace: Option<std::time::Duration>) {
        let gens: Vec<u64> = self.gens.keys().copied().collect();
        // Gathered once: asked per generation, a scan of every session for each made a
        // shutdown of N sessions cost N² (seconds at 10,000).
        let waited_on = self.with_live_dependents();
        for gen in gens {
            if grace.is_none() && self.waits_for_dependents(gen, &waited_on) {
                self.deferred_stops.insert(gen);
            } else {
                self.deferred_stops.remove(&gen);
                self.dispatch(gen, GenInput::Stop(StopReason::Requested, grace));
            }
        }
    }

    /// Stops the deferred generations whose dependents have all ended.
    pub(super) fn release_deferred_stops(&mut self) {
        if self.deferred_stops.is_empty() {
            return;
        }
        let waited_on = self.with_live_dependents();
        let deferred: Vec<(u64, Option<Arc<str>>)> = self
            .deferred_stops
            .iter()
            .map(|gen| (*gen, self.gens.get(gen).map(|g| g.session.clone())))
            .collect();
        // Waiting only for dependents that wait themselves, none would ever end: a cycle
        // among what is going (the dependencies of generations that run on older specs
        // than their sessions', say). Then nothing holds any of them back any more.
        let stuck = deferred.iter().all(|(_, session)| {
            session
                .as_ref()
                .is_some_and(|s| waited_on.get(s) == Some(&false))
        });
        for (gen, session) in deferred {
            let Some(session) = session else {
                self.deferred_stops.remove(&gen);
                continue;
            };
            if stuck || !waited_on.contains_key(&session) {
                self.deferred_stops.remove(&gen);
                // Replaced while it waited (its session taken back from a removal).
                let current = self.sessions.get(&session).and_then(|s| s.current);
                let reason = match current == Some(gen) {
                    true => StopReason::Requested,
                    false => StopReason::Superseded,
                };
                self.dispatch(gen, GenInput::Stop(reason, None));
            }
        }
    }

    /// The sessions that generations going away depend on — every generation in a
    /// shutdown; else those of a session being removed and those no longer their
    /// session's current (replaced, still ending) — each by its own spec, the one it runs
    /// (a session's may have changed since): their stops wait. With each, whether one of
    /// those dependents is on its way out (not itself waiting to be stopped).
    fn with_live_dependents(&self) -> HashMap<Arc<str>, bool> {
        let all_going = self.shutdown != Shutdown::Running;
        let mut waited_on: HashMap<Arc<str>, bool> = HashMap::new();
        for g in self.gens.values() {
            let going = all_going
                || self
                    .sessions
                    .get(&g.session)
                    .is_none_or(|s| s.removing || s.current != Some(g.gen));
            if !going {
                continue;
            }
            let moving = !self.deferred_stops.contains(&g.gen);
            let deps = g
                .spec
                .depends_on
                .keys()
                .filter(|d| d.as_str() != &*g.session);
            for dep in deps {
                *waited_on.entry(Arc::from(dep.as_str())).or_default() |= moving;
            }
        }
        waited_on
    }

    /// Whether stopping `gen` waits for the sessions going away that depend on its
    /// session (`waited_on`: see [`Core::with_live_dependents`]). Only a running
    /// generation waits (as an imported core rebuilds the waits): one not started yet is
    /// given up at once.
    fn waits_for_dependents(&self, gen: u64, waited_on: &HashMap<Arc<str>, bool>) -> bool {
        self.gens.get(&gen).is_some_and(|g| {
            matches!(g.phase, Phase::Running { .. }) && waited_on.contains_key(&g.session)
        })
    }

    /// Whether `gen`'s stop waits for its dependents with nothing asked of it yet: no
    /// stop noted, so no signal of ours sent (an end meanwhile is its own).
    pub(super) fn stop_waits(&self, gen: u64) -> bool {
        self.deferred_stops.contains(&gen) && self.gens.get(&gen).is_some_and(|g| g.stop.is_none())
    }

    /// Stops `gen` now, or once the sessions going away that depend on its session have
    /// ended (dependents first).
    pub(super) fn stop_after_dependents(&mut self, gen: u64, reason: StopReason) {
        if self.waits_for_dependents(gen, &self.with_live_dependents()) {
            self.deferred_stops.insert(gen);
        } else {
            self.dispatch(gen, GenInput::Stop(reason, None));
        }
    }
}
