//! What the loop learns about processes and tells the core: a start's result, input
//! written, a leader's exit, and the identity checks of generations taken back
//! unverified.

use std::sync::Arc;
use std::time::Instant;

use super::Daemon;
use crate::core::{Input, Spec, Started};
use crate::driver::children::daemon_failure;
use crate::driver::children::LeaderState;
use crate::proto::error::ProtoError;
use crate::store::StoreError;
use crate::sys::identity::{adopt, Adoption};

/// Identity checks of unverified generations per turn (one may run `ps`): the rest due
/// are checked on the next turns.
const CHECKS_PER_TURN: usize = 8;

impl Daemon {
    /// Starts a generation; its exec result arrives later as a readiness event.
    pub(super) fn spawn(&mut self, gen: u64, session: &Arc<str>, spec: &Arc<Spec>) {
        self.logs.set_buffer(session, spec.buffer_bytes);
        self.log_sink.configure(session, spec.log.as_ref());
        if self.clients.paces(session) {
            self.logs
                .ensure_capacity(session, crate::driver::clients::LOSSLESS_LOG_BYTES);
        }
        // A restart the policy asked for, or a spawn that waited for its predecessor:
        // refused like a client's spawn would be, as this generation's spawn failure.
        if let Err(e) = self.spawn_room() {
            log::warn!("gen {gen}: not spawned: {}", e.message);
            self.tell(Input::SpawnResult {
                gen,
                result: Err(daemon_failure(libc::EMFILE, e.message)),
            });
            return;
        }
        // What its readiness check needs: a notification pipe for the child, a matcher.
        let extra = match self.ready.prepare(self.poll.registry(), gen, spec) {
            Ok(extra) => extra,
            Err(e) => {
                let error = daemon_failure(
                    e.raw_os_error().unwrap_or(libc::EIO),
                    format!("readiness notification pipe: {e}"),
                );
                self.tell(Input::SpawnResult {
                    gen,
                    result: Err(error),
                });
                return;
            }
        };
        if let Err(e) = self.children.start(self.poll.registry(), gen, spec, extra) {
            self.tell(Input::SpawnResult {
                gen,
                result: Err(e),
            });
        }
    }

    /// Whether one more spawn leaves the descriptors kept in reserve (see
    /// `driver::descriptors`), emptied cgroups kept for reuse given up first if need be;
    /// if not, the `limit` error that says so.
    pub(super) fn spawn_room(&mut self) -> Result<(), ProtoError> {
        self.children.admit_spawn(self.held_besides_children())
    }

    /// Descriptors the daemon holds besides its children's and its own: one per client,
    /// and the notification pipes kept for generations whose readiness is decided.
    pub(super) fn held_besides_children(&self) -> usize {
        self.clients.count() + self.ready.kept()
    }

    pub(super) fn spawn_result(
        &mut self,
        gen: u64,
        result: Result<Started, crate::core::SpawnError>,
    ) {
        let result = result.and_then(|started| {
            log::info!("gen {gen}: spawned pid {}", started.pid);
            self.describe(gen).map(|()| started)
        });
        let spawned = result.is_ok();
        self.tell(Input::SpawnResult { gen, result });
        let early = self.ready.take_early(gen);
        if spawned {
            if let Some(signal) = early {
                self.tell(Input::Readiness { gen, signal });
            }
            // It may have exited before its pidfd was registered: edge-triggered readiness
            // still fires for a pidfd that is already readable, but look once anyway.
            self.check_exit(gen);
        }
    }

    /// Writes the descriptor of `gen`, which just started, before anyone hears of it: a
    /// successor finds it by it. One that cannot be written (a full disk) makes the
    /// start a failure, its process killed at once: a client is never told of a
    /// generation that a crash would leave unaccounted for.
    fn describe(&mut self, gen: u64) -> Result<(), crate::core::SpawnError> {
        let Some(session) = self.core.session_of(gen) else {
            return Ok(());
        };
        let Some((process, pty, cgroup)) = self.children.describe(gen) else {
            return Ok(());
        };
        let Err(e) = self.persist.describe(&session, gen, process, pty, cgroup) else {
            return Ok(());
        };
        log::error!("gen {gen}: writing its descriptor: {e}; killing it");
        self.children.withdraw(self.poll.registry(), gen);
        Err(unrecorded(&e))
    }

    /// Writes a generation's queued input as far as it goes (or closes it, its reader
    /// gone) and tells the core.
    pub(super) fn flush_input(&mut self, gen: u64) {
        let progress = self.children.flush_input(self.poll.registry(), gen);
        self.keeper_closed(gen);
        if progress.done > 0 {
            self.tell(Input::InputWritten {
                gen,
                len: progress.done,
            });
        }
        if progress.broken {
            // A leader's own end closes its input too: an exit that came first is told
            // first, and makes the closure no news (writes are `not_running` from then
            // on). Only a process still running, and not ending (its descriptors close
            // before its exit can be seen), is said to have closed its input.
            self.check_exit(gen);
            if self.core.awaits_exit(gen) && !self.children.leader_exiting(gen) {
                self.tell(Input::InputError { gen });
            }
        }
    }

    /// Before a command that stops or signals the leaders of `gens`: an exit that came
    /// before it, unseen yet, is told first — a process that ended on its own is reported
    /// so, with its own code, not as stopped.
    pub(super) fn exits_first(&mut self, gens: Vec<u64>) {
        for gen in gens {
            self.check_exit(gen);
        }
    }

    /// Tells the core if a leader it thinks is running has exited (without reaping it).
    /// An adopted leader's status may come a little after its exit (see `exits.rs`): it is
    /// told then, exactly like a child's, or as lost if it never comes.
    pub(super) fn check_exit(&mut self, gen: u64) {
        if !self.core.awaits_exit(gen) {
            self.children.forget_status(gen);
            return;
        }
        let seen_before = self.children.awaits_status(gen);
        let state = self.children.leader_state(gen, Instant::now());
        if state != LeaderState::Running
            && !seen_before
            && self.children.is_adopted(gen)
            && !self.core.leaves_group(gen)
        {
            // A process taken back after a restart: once it exited nothing pins its group,
            // so what it started is found by its marker, as soon as its exit is seen —
            // unless its spec leaves what it started (`on_exit: leave`), as a spawned
            // child's would be left. (Its cgroup, where it kept one, is not enough: under
            // the fallback reaper no signal reaches a dead leader's tree.) Looked for at
            // the end of the turn, with those of every other generation that ended in it.
            self.leftovers.add(gen);
        }
        match state {
            LeaderState::Running => {}
            LeaderState::Waiting if !seen_before => {
                log::debug!("gen {gen}: exited; its status comes once its parent reaps it");
                // Dead already: its stop must not escalate (nor call it unkillable) while
                // the status is awaited.
                self.tell(Input::LeaderGone { gen });
            }
            LeaderState::Waiting => {}
            LeaderState::Exited(status) => {
                self.tell(Input::LeaderExited { gen, status });
                self.children.look_soon(gen);
            }
            LeaderState::Lost => {
                self.tell(Input::Lost { gen });
                // A generation taken back in its cgroup waits for that cgroup to empty
                // (see `Input::Lost`), which it may have done already, unannounced.
                self.children.look_soon(gen);
            }
        }
    }

    /// Checks again the identity of the unverified generations whose check is due (a
    /// bounded number per turn): `match` — the process is held and watched like any
    /// adopted one, and the core told it is verified; `mismatch` — it is reported lost,
    /// its descriptor goes and what still carries its marker is stopped; still
    /// `unverifiable` — checked again later, less often. Nothing is ever sent to its pid
    /// before a `match`.
    pub(super) fn check_unverified(&mut self) {
        let now = Instant::now();
        let due = self.persist.checks().due(now, CHECKS_PER_TURN);
        if due.is_empty() {
            return;
        }
        for gen in due {
            let Some(kept) = self.persist.checks().get(gen) else {
                continue;
            };
            if !self.core.awaits_exit(gen) {
                // The core no longer tracks it: nothing to check it for.
                self.persist.stop_checking(gen);
                continue;
            }
            let (session, pid) = (kept.session.clone(), kept.pid);
            match adopt(pid as i32, &kept.token, self.cfg.reaper) {
                Adoption::Adopted(process) => {
                    log::info!("{session} gen {gen}: pid {pid} verified: taken back");
                    self.persist.resolved(gen);
                    self.children
                        .adopt(self.poll.registry(), gen, process, None);
                    self.tell(Input::Verified { gen });
                    // It may have exited already: its pidfd was readable when registered.
                    self.check_exit(gen);
                }
                Adoption::Mismatch => {
                    log::info!(
                        "{session} gen {gen}: pid {pid} is another process now, or none: lost"
                    );
                    self.persist.resolved(gen);
                    self.tell(Input::Lost { gen });
                    self.leftovers.add(gen);
                }
                Adoption::Unverifiable(why) => {
                    log::debug!("{session} gen {gen}: pid {pid} still cannot be verified ({why})");
                    self.persist.still_unverified(gen, now);
                }
            }
        }
        self.run_actions();
        self.flush_clients();
    }
}

/// A start whose descriptor could not be written (`e`), as its `spawn_failed`: with the
/// errno of the write that failed (`ENOSPC`, `EDQUOT`, `EACCES`, `EROFS`, ...; `EIO` only
/// when there is none) and, whatever it is, a shortage of the daemon's own — its state
/// directory, not the session's spec, is what failed — so the restart policy tries again
/// without counting it against the session (operations.md, *Limits*).
fn unrecorded(e: &StoreError) -> crate::core::SpawnError {
    let errno = e.errno().unwrap_or(libc::EIO);
    let why = format!("it could not be recorded, and was killed at once: {e}");
    daemon_failure(errno, why).as_shortage()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unrecorded_start_keeps_its_errno_and_is_a_shortage() {
        let dir = crate::testkit::scratch::ScratchDir::new("unrecorded");
        let root = crate::store::dir::Dir::open(&dir).unwrap();
        for errno in [libc::ENOSPC, libc::EACCES, libc::EROFS, libc::EDQUOT] {
            let e = StoreError::Io(root.io(rustix::io::Errno::from_raw_os_error(errno)));
            let failed = unrecorded(&e);
            assert_eq!(failed.errno, errno, "{e}");
            assert!(failed.shortage, "{e}");
        }
    }
}
