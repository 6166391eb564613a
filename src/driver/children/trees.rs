//! A generation's process tree: signals to its leader, its whole tree (cgroup, adopted
//! process group, or session) or its terminal's foreground group — never to a process
//! whose identity was not verified — and whether the tree has emptied.

use std::io;
use std::time::Instant;

use mio::Registry;

use super::Children;
use crate::core::Scope;
use crate::driver::child::Child;
use crate::driver::launch::Launch;
use crate::sys::process::SignalError;
use crate::sys::spare_fd::is_shortage;
use crate::sys::tree;
use crate::sys::tree::{pid_set, Observed, PidSet, Reach, SessionWatch, Survey};

/// Most surveys one look takes: a freeze before a SIGKILL (see `SessionWatch`) that needs
/// more goes on in the next turns, so the loop is never held for long.
const LOOK_ROUNDS: usize = 8;

/// `Signal::from_named_raw` covers the named signals; real-time ones are valid too.
fn to_signal(sig: i32) -> Option<rustix::process::Signal> {
    if let Some(s) = rustix::process::Signal::from_named_raw(sig) {
        return Some(s);
    }
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) {
        // SAFETY: `sig` is a real-time signal number in the range the C library reports as
        // usable by applications, so it is a valid signal and not one libc reserves.
        return Some(unsafe { rustix::process::Signal::from_raw_unchecked(sig) });
    }
    None
}

impl Children {
    /// Sends `signal` to `gen`'s leader, tree or terminal's foreground group, never to a
    /// process whose identity was not verified. A signal to the tree that fails for want
    /// of descriptors or memory is put off and tried again until it goes through (see
    /// [`Children::retry_shortages`]); one asked while others wait goes behind them.
    pub fn signal(&mut self, gen: u64, signal: i32, scope: Scope) {
        if let Some(launch) = self.launching.get_mut(&gen) {
            launch.hold_signal(signal, scope);
            return;
        }
        // In order: behind those put off (a SIGKILL needs no order, and ends them).
        if scope == Scope::Tree && signal != libc::SIGKILL && self.retries.has_signals(gen) {
            self.retries.defer_signal(gen, signal, Instant::now());
            return;
        }
        self.signal_now(gen, signal, scope, false);
    }

    /// [`Children::signal`], sent now; `again` for a try of one put off.
    fn signal_now(&mut self, gen: u64, signal: i32, scope: Scope, again: bool) {
        let Some(sig) = to_signal(signal) else {
            log::warn!("gen {gen}: signal {signal} is not deliverable");
            return;
        };
        let Some(result) = self.send(gen, sig, signal, scope) else {
            // No process held (released, or taken back unverified): a pid alone is never
            // signalled.
            log::debug!("gen {gen}: no process held; signal {signal} not sent");
            return;
        };
        match &result {
            Err(SignalError::Os(e)) if scope == Scope::Tree && is_shortage(e) => {
                if !again {
                    log::warn!(
                        "gen {gen}: signal {signal} to its tree not sent yet: {e}; tried again until it goes through"
                    );
                }
                self.retries.defer_signal(gen, signal, Instant::now());
            }
            Ok(()) if again => {
                log::info!("gen {gen}: signal {signal} sent to its tree, put off before")
            }
            Ok(()) => log::debug!("gen {gen}: sent signal {signal} to {scope:?}"),
            Err(e) => log::info!("gen {gen}: signal {signal} to {scope:?} not sent: {e}"),
        }
        if result.is_ok() && scope == Scope::Tree && signal == libc::SIGKILL {
            // Whatever waited behind it is moot.
            self.retries.forget_signals(gen);
        }
        // An adopted process without a pidfd: a signal may end it, so it is looked at
        // again soon; one that found another process (or none) on its pid, at once.
        if self.rechecks.is_watched(gen) {
            match result {
                Ok(()) => self.rechecks.watch(gen, Instant::now()),
                Err(SignalError::Mismatch | SignalError::Exited) => {
                    self.rechecks.now(gen, Instant::now())
                }
                Err(_) => {}
            }
        }
    }

    /// Sends `sig` (`signal`) to `gen`'s `scope`; `None` when no process of it is held.
    fn send(
        &mut self,
        gen: u64,
        sig: rustix::process::Signal,
        signal: i32,
        scope: Scope,
    ) -> Option<Result<(), SignalError>> {
        // Only a walk of a session or a foreground group needs them (a cgroup does not).
        let others = match scope {
            Scope::Foreground => self.others(gen),
            Scope::Leader | Scope::Tree => Vec::new(),
        };
        let child = self.table.get_mut(&gen)?;
        let result = match (scope, child.cgroup()) {
            (Scope::Leader, _) => child.process().signal(sig),
            // The whole cgroup, escaped processes included: SIGKILL at once through
            // `cgroup.kill` (with the descriptor held back for it if none is left), any
            // other signal to each member through a verified pidfd, followed by SIGCONT
            // to those found stopped (as under session containment).
            (Scope::Tree, Some(cg)) if signal == libc::SIGKILL => {
                self.spare.lend(|| cg.kill()).map_err(SignalError::Os)
            }
            (Scope::Tree, Some(cg)) => cg.signal(sig).map(|_| ()).map_err(SignalError::Os),
            // Taken back after a restart: its process group, leader included, through its
            // pidfd while it runs (one call, no scan of the host; its session's other
            // groups, a job-control shell's jobs, are found by their marker when it ends).
            (Scope::Tree, None) if !child.process().is_child() => {
                child.process().signal_adopted_group(sig)
            }
            // The session: the leader now (woken if stopped, as the members are); its
            // members with the next survey, at the end of this turn, and then watched
            // until it is empty.
            (Scope::Tree, None) => {
                self.watched.insert(gen);
                self.look_soon = true;
                child.signal_session(sig).and_then(|()| {
                    match child.process().signal(sig) {
                        Ok(()) => {
                            tree::wake_leader(child.process(), sig);
                            Ok(())
                        }
                        // Already exited (the usual case at its exit): its members matter.
                        Err(SignalError::Exited) => Ok(()),
                        other => other,
                    }
                })
            }
            (Scope::Foreground, _) => match child.pty() {
                Some(tty) => tree::signal_foreground(child.process(), tty, &others, sig).map(drop),
                None => Err(SignalError::Os(io::Error::from_raw_os_error(libc::ENOTTY))),
            },
        };
        Some(result)
    }

    /// Tries again, if their time came, what a shortage of descriptors put off: signals
    /// to trees (in the order asked) and the removal of released generations' cgroups.
    /// What fails again for the same reason is put off anew, silently.
    pub fn retry_shortages(&mut self, now: Instant) {
        let Some(due) = self.retries.take_due(now) else {
            return;
        };
        for (gen, signals) in due.signals {
            for signal in signals {
                if self.retries.has_signals(gen) {
                    // The one before failed again: the rest stays behind it.
                    self.retries.defer_signal(gen, signal, now);
                } else {
                    self.signal_now(gen, signal, Scope::Tree, true);
                }
            }
        }
        for (gen, mut cg) in due.cgroups {
            match cg.remove() {
                Ok(()) => log::info!("gen {gen}: cgroup removed, put off before"),
                Err(e) if is_shortage(&e) => self.retries.defer_removal(gen, cg, now),
                // Dropping it tries once more.
                Err(e) => log::info!("gen {gen}: cgroup not removed: {e}"),
            }
        }
    }

    /// Under session containment: looks at every watched session that wants it — members
    /// to signal, watched members gone, a leader that just exited, a timer due — and at
    /// the `awaited` ones not watched yet, with one survey of our subtree for all of them
    /// (a second, at once, for those it found empty: emptiness needs two walks in a row).
    /// Returns the `awaited` generations whose session is proven empty.
    pub fn sessions_emptied(&mut self, registry: &Registry, awaited: &[u64]) -> Vec<u64> {
        let now = Instant::now();
        let woken = std::mem::take(&mut self.woken);
        let ended = std::mem::take(&mut self.leaders_ended);
        for &gen in awaited {
            if self.table.get(&gen).is_some_and(|c| c.cgroup().is_none()) {
                self.table.get_mut(&gen).map(Child::session_watch);
                self.watched.insert(gen);
            }
        }
        let mut want = Vec::new();
        let (mut before, mut after) = (0, 0);
        for &gen in &self.watched {
            let Some(child) = self.table.get_mut(&gen) else {
                continue;
            };
            before += child.watch().map_or(0, SessionWatch::descriptors);
            let watch = child.session_watch();
            match watch.wants_walk(now, woken.contains(&gen), ended.contains(&gen)) {
                Ok(true) => want.push(gen),
                Ok(false) => {}
                Err(e) => log::warn!("gen {gen}: watching its session: {e}"),
            }
            after += watch.descriptors();
        }
        self.recount_watch(before, after);
        self.look(registry, want, now);
        awaited
            .iter()
            .copied()
            .filter(|gen| {
                let child = self.table.get(gen);
                child
                    .and_then(Child::watch)
                    .is_some_and(SessionWatch::is_empty)
            })
            .collect()
    }

    /// A session watch went from holding `before` descriptors to `after`.
    pub(super) fn recount_watch(&mut self, before: usize, after: usize) {
        self.watch_fds = (self.watch_fds + after).saturating_sub(before);
    }

    /// Whether `gen`'s session members have a signal marked for them and not sent yet.
    pub fn members_signal_pending(&self, gen: u64) -> bool {
        let watch = self.table.get(&gen).and_then(Child::watch);
        watch.is_some_and(SessionWatch::signal_pending)
    }

    /// Sends every signal marked for sessions' members now, with one survey for all:
    /// before a reap that would unpin a session they are still meant for.
    pub fn send_members_signals(&mut self, registry: &Registry) {
        let pending: Vec<u64> = self
            .watched
            .iter()
            .copied()
            .filter(|&gen| self.members_signal_pending(gen))
            .collect();
        if pending.is_empty() {
            return;
        }
        self.look(registry, pending.clone(), Instant::now());
        // A survey that failed (no descriptor left, `/proc` unreadable) sent nothing: what
        // waits for it must still go on, or the reap held for it would wait forever.
        for gen in pending {
            if let Some(watch) = self.table.get_mut(&gen).and_then(Child::watch_mut) {
                if watch.drop_marked() {
                    log::warn!("gen {gen}: its session's members were not signalled (walk failed)");
                }
            }
        }
    }

    /// Surveys the sessions of `want`, and again at once those found empty for the first
    /// time or being frozen before their SIGKILL (a few times: a freeze that needs more
    /// goes on in the next turns, its deadline due at once).
    fn look(&mut self, registry: &Registry, mut want: Vec<u64>, now: Instant) {
        // Nothing is reaped until the look ends: the second survey reads our list of
        // children on from where the first left it.
        self.own_children.begin();
        let leaders = self.leaders();
        for _round in 0..LOOK_ROUNDS {
            if want.is_empty() {
                break;
            }
            want = self.survey(registry, &want, &leaders, now);
        }
        self.own_children.end();
    }

    /// One survey per reach for the sessions of `gens`, each handed its result; returns
    /// those that want another walk at once (found empty for the first time, or being
    /// frozen).
    fn survey(
        &mut self,
        registry: &Registry,
        gens: &[u64],
        leaders: &PidSet,
        now: Instant,
    ) -> Vec<u64> {
        let mut again = Vec::new();
        for reach in [Reach::Subtree, Reach::Host] {
            let of_reach: Vec<u64> = gens
                .iter()
                .copied()
                .filter(|gen| {
                    let watch = self.table.get(gen).and_then(Child::watch);
                    watch.is_some_and(|w| w.reach() == reach)
                })
                .collect();
            if of_reach.is_empty() {
                continue;
            }
            let sids = pid_set(
                of_reach
                    .iter()
                    .filter_map(|gen| Some(self.table.get(gen)?.watch()?.sid())),
            );
            let survey = match Survey::take(reach, &sids, leaders, &mut self.own_children) {
                Ok(s) => s,
                Err(e) => {
                    // A shortage is waited out on the watches' timers (marked signals kept,
                    // members found later get the last one): logged once, not per walk.
                    let quiet = is_shortage(&e) && !self.retries.walk_failed();
                    for gen in &of_reach {
                        if !quiet {
                            log::warn!("gen {gen}: walking its session: {e}");
                        }
                        if let Some(c) = self.table.get_mut(gen) {
                            c.session_watch().walk_failed(now);
                        }
                    }
                    continue;
                }
            };
            if self.retries.walk_ok() {
                log::info!("walking sessions again");
            }
            for &gen in &of_reach {
                let Some(child) = self.table.get_mut(&gen) else {
                    continue;
                };
                let before = child.watch().map_or(0, SessionWatch::descriptors);
                if matches!(
                    child.observe(registry, &survey, now),
                    Observed::Unconfirmed | Observed::Freezing
                ) {
                    again.push(gen);
                }
                let after = child.watch().map_or(0, SessionWatch::descriptors);
                self.recount_watch(before, after);
            }
            if reach == Reach::Subtree {
                self.report_escapees(&survey, leaders);
            }
        }
        again
    }

    /// Processes that left their session (`setsid`, a double fork) cannot be reached by
    /// its signals: they are reported, once each, for the generation they came from
    /// (their ancestor's session, or their marker). A walk also meets processes of the
    /// daemon's own (its keeper, its log writer), which are no generation's.
    fn report_escapees(&mut self, survey: &Survey, leaders: &PidSet) {
        for e in self.escapees.new_in(survey.walk(), leaders) {
            let by_sid = e.from_sid.and_then(|sid| {
                self.table
                    .iter()
                    .find(|(_, c)| c.process().pid() == sid && !c.process().is_reaped())
                    .map(|(g, _)| *g)
            });
            let Some(gen) = by_sid.or(e.marker.filter(|g| self.table.contains_key(g))) else {
                continue;
            };
            log::warn!(
                "gen {gen}: pid {} left its session (now session {}); it is out of reach of the generation's stop",
                e.member.pid,
                e.member.sid
            );
        }
    }

    /// The soonest a session watch wants to look again.
    pub fn watch_deadline(&self) -> Option<std::time::Instant> {
        self.watched
            .iter()
            .filter_map(|gen| self.table.get(gen)?.watch_deadline())
            .min()
    }

    /// Whether `gen`'s cgroup still holds a process; `None` without a cgroup. Reading it
    /// also re-arms the kernel's notification.
    pub fn cgroup_populated(&self, gen: u64) -> Option<bool> {
        let cg = self.table.get(&gen)?.cgroup()?;
        match cg.is_populated() {
            Ok(populated) => Some(populated),
            // Removed (an earlier daemon's emptied subtree cleared, say): only an empty
            // cgroup can be, and nothing enters one removed.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Some(false),
            Err(e) => {
                log::warn!("gen {gen}: reading cgroup.events: {e}");
                Some(true)
            }
        }
    }

    /// The leaders of every other generation not reaped yet (and of those starting):
    /// a walk of one generation's session need not enter theirs.
    fn others(&self, gen: u64) -> Vec<i32> {
        let own = self.table.get(&gen).map(|c| c.process().pid());
        let leaders = self.leaders().into_iter();
        leaders.filter(|&p| Some(p) != own).collect()
    }

    /// The leaders of every generation not reaped yet, and of those starting: a survey
    /// enters only those of the sessions it looks at.
    fn leaders(&self) -> PidSet {
        let running = self
            .table
            .values()
            .filter(|c| !c.process().is_reaped())
            .map(|c| c.process().pid());
        let mut leaders = PidSet::with_capacity_and_hasher(
            self.table.len() + self.launching.len(),
            Default::default(),
        );
        leaders.extend(running.chain(self.launching.values().map(Launch::pid)));
        leaders
    }
}
