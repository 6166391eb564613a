//! The daemon's side of its keeper while the loop runs: what is sent to it, what happens
//! when its link is lost, and its replacement (see `keeper_restarts.rs`) — handed every
//! live generation's descriptors once it is ready, so that a crash after that loses
//! nothing.

use std::io;
use std::time::Instant;

use super::Daemon;
use crate::driver::keeper_link::KeeperLink;
use crate::driver::keeper_start::remove_keeper_files;

impl Daemon {
    /// Sends one message to the keeper, if there is one; a failure gives it up.
    pub(super) fn keeper_do(&mut self, send: impl FnOnce(&mut KeeperLink) -> io::Result<()>) {
        if let Some(Err(e)) = self.keeper.as_mut().map(send) {
            self.lose_keeper(&e);
        }
    }

    /// Tells the keeper to close its copies of what `gen` just closed (its stdin, a
    /// stream at EOF or cut at the drain deadline).
    pub(super) fn keeper_closed(&mut self, gen: u64) {
        if self.keeper.is_none() {
            return;
        }
        let closed = self.children.take_closed(gen);
        self.keeper_do(|k| k.drop_roles(gen, closed));
    }

    /// The keeper link failed (its end of file: the keeper died; or a send failed, with
    /// the keeper perhaps alive and stuck). Its record and socket are removed — a keeper
    /// still alive sees its socket go and exits at once, closing its copies, which would
    /// otherwise keep children's stdin and terminals open for its whole hold time and
    /// could be taken by a next daemon though it missed messages — and a fresh keeper is
    /// started without waiting (see [`Daemon::tend_keeper`]), unless the daemon is
    /// shutting down. Until it is ready, a crash loses the sessions' I/O.
    pub(super) fn lose_keeper(&mut self, e: &io::Error) {
        if let Some(mut k) = self.keeper.take() {
            k.deregister(self.poll.registry());
        }
        remove_keeper_files(&self.cfg.state_dir);
        if self.core.is_shutting_down() || self.cfg.keeper_hold.is_none() {
            log::error!("keeper link: {e}; carrying on without a keeper (shutting down)");
            return;
        }
        let when = match self.keeper_restarts.lost(Instant::now()).as_secs() {
            0 => "now".to_owned(),
            n => format!("in {n} s (it was lost soon after the last one started)"),
        };
        log::error!(
            "keeper link: {e}; starting a new keeper {when} — until it holds, a crash loses the sessions' I/O"
        );
    }

    /// The loop's timer for the replacement: starts the attempt that is due, gives up
    /// one not ready in time. Nothing at all while shutting down.
    pub(super) fn tend_keeper(&mut self) {
        let Some(hold) = self.cfg.keeper_hold else {
            return;
        };
        let registry = self.poll.registry();
        if self.core.is_shutting_down() {
            self.keeper_restarts.cancel(registry);
            return;
        }
        let now = Instant::now();
        (self.keeper_restarts).tick(registry, &self.cfg.state_dir, hold, now);
    }

    /// The keeper being started said something (or closed its link). Once it is ready it
    /// is handed every live generation's descriptors, as if each had just been spawned.
    pub(super) fn keeper_started(&mut self) {
        let registry = self.poll.registry();
        let Some((link, pid)) = self.keeper_restarts.ready(registry, Instant::now()) else {
            return;
        };
        // Even if a shutdown began meanwhile: it is then told `Bye` with the rest.
        self.keeper = Some(link);
        let held = self.hold_all();
        if self.keeper.is_some() {
            log::info!("keeper started again, pid {pid}: it holds {held} generation(s)");
        }
    }

    /// Sends the keeper a `Hold` for every generation it is to hold, with the
    /// descriptors still open (the roles already closed are not sent, nor dropped
    /// later). Generations taken back without their I/O stay unheld. Returns how many.
    fn hold_all(&mut self) -> usize {
        let mut held = 0;
        for gen in self.children.gens() {
            if !self.core.keeper_holds(gen) {
                continue;
            }
            // What it closed before this keeper existed: nothing of it is sent.
            self.children.take_closed(gen);
            let sent = {
                let Some((roles, fds)) = self.children.keepable(gen) else {
                    continue;
                };
                if roles.is_empty() {
                    continue;
                }
                let Some(keeper) = self.keeper.as_mut() else {
                    return held;
                };
                keeper.hold(gen, roles, &fds)
            };
            if let Err(e) = sent {
                self.lose_keeper(&e);
                return held;
            }
            held += 1;
        }
        held
    }

    /// `SIGCHLD`: a keeper's first (detaching) process may have exited.
    pub(super) fn reap_keeper_starts(&mut self) {
        (self.keeper_restarts).reap(self.poll.registry(), Instant::now());
    }
}
