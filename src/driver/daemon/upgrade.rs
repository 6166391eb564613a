//! The daemon's side of `upgrade`: checking the program, waiting for a moment without
//! starts in flight, writing the image and executing the program (see
//! [`crate::driver::upgrade`] for the whole sequence).

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use super::Daemon;
use crate::driver::keeper_link::KeeperLink;
use crate::driver::keeper_start::remove_keeper_files;
use crate::driver::upgrade::state::{mono, ConfigImage, DriverImage, RequesterImage};
use crate::driver::upgrade::upgrader::{refused, Due};
use crate::driver::upgrade::{core_section, Pending, ResumeArgs, LAUNCH_WAIT};
use crate::driver::ContainmentMode;
use crate::proto::envelope::RequestId;
use crate::store::image::ImageBuilder;
use crate::sys::process::ReaperMode;
use crate::sys::reexec;

impl Daemon {
    /// `upgrade`: the program is opened and started to ask which images it reads; its
    /// answer is awaited without waiting ([`upgrade_checked`], [`try_upgrade`]), and the
    /// rest happens at the end of a turn without starts in flight ([`try_upgrade`]).
    pub(super) fn begin_upgrade(&mut self, id: u64, rid: RequestId, binary: Option<String>) {
        let asked = if self.core.is_shutting_down() {
            Err(refused("the daemon is shutting down"))
        } else {
            let helper = self.children.helper_start();
            self.upgrade
                .ask(self.poll.registry(), helper, id, &rid, binary)
        };
        if let Err(e) = asked {
            self.clients.send_error(id, &rid, &e);
        }
    }

    /// The program being checked had a readiness (or `SIGCHLD` came): a refusal is
    /// answered once it is decided; an accepted program waits for [`try_upgrade`].
    pub(super) fn upgrade_checked(&mut self) {
        if let Some(r) = self.upgrade.on_check(self.poll.registry()) {
            self.clients.send_error(r.client, &r.rid, &r.error);
        }
    }

    /// Refuses a check past its deadline, or under way while the daemon shuts down (its
    /// program killed and left to be reaped); runs a pending upgrade if no generation is
    /// starting; refuses it once starts kept it waiting for [`LAUNCH_WAIT`]. Called at
    /// the end of a turn, when the core's actions are all executed.
    pub(super) fn try_upgrade(&mut self) {
        let registry = self.poll.registry();
        let check = if self.core.is_shutting_down() {
            self.upgrade
                .cancel_check(registry, "the daemon is shutting down")
        } else {
            self.upgrade.overdue(registry, Instant::now())
        };
        let mut answered = false;
        if let Some(r) = check {
            self.clients.send_error(r.client, &r.rid, &r.error);
            answered = true;
        }
        match self.upgrade.due(self.children.is_launching()) {
            None => {}
            Some(Due::Run(p)) => self.execute_upgrade(p),
            Some(Due::GaveUp(p)) => {
                let why = format!("generations kept starting for {} s", LAUNCH_WAIT.as_secs());
                self.clients.send_error(p.client, &p.rid, &refused(why));
                answered = true;
            }
        }
        // Written now, not when something next wakes the loop.
        if answered {
            self.flush_clients();
        }
    }

    /// Takes the keeper link back after an upgrade that did not happen; without one (none
    /// was carried, or it cannot be taken back), a keeper is started again.
    fn restore_keeper(&mut self, fd: Option<std::os::fd::OwnedFd>) {
        let linked = fd.map(|fd| {
            KeeperLink::from_fd(fd)
                .and_then(|mut link| link.register(self.poll.registry()).map(|()| link))
        });
        match linked {
            Some(Ok(link)) => self.keeper = Some(link),
            Some(Err(e)) => self.lose_keeper(&e),
            None if self.cfg.keeper_hold.is_some() => {
                self.keeper_restarts.none_after_upgrade(Instant::now())
            }
            None => {}
        }
    }

    fn config_image(&self) -> ConfigImage {
        let c = &self.cfg;
        ConfigImage {
            state_dir: c.state_dir.clone(),
            socket: c.socket.clone(),
            allow_uids: c.allow_uids.clone(),
            reaper: match c.reaper {
                ReaperMode::Auto => 0,
                ReaperMode::Fallback => 1,
            },
            subreaper: c.subreaper,
            max_clients: c.max_clients as u64,
            outbox_bytes: c.client_outbox_bytes as u64,
            max_line: c.max_line as u64,
            max_sessions: c.max_sessions as u64,
            max_running: c.max_running as u64,
            containment: match c.containment {
                ContainmentMode::Auto => 0,
                ContainmentMode::Cgroup => 1,
                ContainmentMode::Session => 2,
            },
            program: self.upgrade.program_path().to_path_buf(),
            keeper_hold_ms: c.keeper_hold.map(|d| d.as_millis() as u64),
            output_to_stdout: c.output_to_stdout,
            config: c.config.clone(),
        }
    }

    /// Writes the image and executes the program; returns only if that failed, with
    /// everything as it was and the requester told why.
    fn execute_upgrade(&mut self, p: Pending) {
        let paused_at = Instant::now();
        // The log writer is not carried (its pipe closes at the exec): it gets what fits.
        self.log_sink.finish(self.poll.registry());
        // Kept emptied cgroups would outlive the program that knows them.
        self.children.empty_pool();
        // A keeper being started is let go of (told `Bye`): the next program, finding no
        // link in the image, starts one at once. Its first process is reaped now, as the
        // next program would not know it.
        self.keeper_restarts.cancel(self.poll.registry());
        self.keeper_restarts.reap_before_exec();
        // The keeper link goes as a bare descriptor, with what was queued for it sent.
        let keeper = self.keeper.take().and_then(|link| {
            link.into_fd(self.poll.registry())
                .map_err(|e| {
                    log::warn!("keeper link: {e}; the next program starts a new keeper");
                    remove_keeper_files(&self.cfg.state_dir);
                })
                .ok()
        });
        let driver = DriverImage {
            config: self.config_image(),
            clock_start_ns: mono::to_ns(self.clock.start),
            epoch_unix_ms: self.clock.wire.epoch_unix_ms,
            lease: self.persist.lease_fd(),
            cgroup_root: self.children.cgroup_root_name(),
            keeper: keeper.as_ref().map(AsRawFd::as_raw_fd),
            children: self.children.export(),
            clients: self.clients.export(&self.logs),
            unverified: self.persist.checks().export(),
            requester: Some(RequesterImage {
                client: p.client,
                rid: p.rid.clone(),
                previous_version: env!("CARGO_PKG_VERSION").into(),
                paused_at_ns: mono::to_ns(paused_at),
            }),
            exec_only: vec![p.program.as_raw_fd()],
            probe_identities: self.children.export_probe_identities(),
            unsaved: self.persist.unsaved(),
        };
        let mut keeper = keeper;
        let mut fail = |d: &mut Daemon, why: String| {
            log::error!("upgrade to {}: {why}", p.path.display());
            d.clients.send_error(p.client, &p.rid, &refused(why));
            d.restore_keeper(keeper.take());
        };
        let core = match core_section::export(&self.core) {
            Ok(c) => c,
            Err(why) => return fail(self, why),
        };
        let mut builder = ImageBuilder::new();
        builder.section("driver", &driver.encode());
        builder.section("core", &core);
        let bytes = builder.finish();
        let image = match reexec::sealed_image(&bytes) {
            Ok(fd) => fd,
            Err(e) => return fail(self, format!("writing the state image: {e}")),
        };
        let Some(own) = self.upgrade.own_program() else {
            return fail(self, "the running program is not open".into());
        };
        let mut keep = driver.descriptors();
        keep.push(image.as_raw_fd());
        keep.push(own.as_raw_fd());
        keep.extend(&driver.exec_only);
        if let Err(e) = reexec::keep_across_exec(&keep) {
            return fail(self, format!("keeping descriptors open: {e}"));
        }
        let args = ResumeArgs {
            image_fd: image.as_raw_fd(),
            previous_program_fd: own.as_raw_fd(),
            rolled_back: None,
        };
        let mut argv: Vec<OsString> = vec![std::env::args_os()
            .next()
            .unwrap_or_else(|| "genward".into())];
        argv.extend(args.to_args());
        log::info!(
            "upgrading: {} bytes of state, {} descriptors kept; executing {}",
            bytes.len(),
            keep.len(),
            p.path.display()
        );
        // The next program goes on where the logs end (no gap), not at ceilings reserved
        // ahead; should the exec fail, the next output past an end reserves again.
        self.logs.settle();
        let blocked = reexec::block_signals(&crate::driver::signals::handled());
        let e = match blocked {
            Ok(()) => reexec::exec(p.program.as_fd(), &argv),
            Err(e) => e,
        };
        // Still here: nothing was replaced. Undo, and carry on.
        reexec::close_on_exec(&keep);
        if let Err(e) = reexec::unblock_signals(&crate::driver::signals::handled()) {
            log::error!("unblocking signals after a failed upgrade: {e}");
        }
        fail(self, format!("executing {}: {e}", p.path.display()));
    }
}
