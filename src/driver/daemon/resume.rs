//! The new program's side of an upgrade: the image read and checked whole before a
//! descriptor is owned (so a program that cannot resume has changed nothing, and the
//! previous one can run again on the same image), then every owner rebuilt from it.

use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::time::Instant;

use mio::Poll;

use super::start::{client_rules, core_config, hello};
use super::{Clock, Daemon};
use crate::driver::children::Children;
use crate::driver::clients::{Clients, LOSSLESS_LOG_BYTES};
use crate::driver::config::DaemonConfig;
use crate::driver::keeper_link::KeeperLink;
use crate::driver::keeper_restarts::KeeperRestarts;
use crate::driver::keeper_start::remove_keeper_files;
use crate::driver::notify::Notifier;
use crate::driver::persist::Persist;
use crate::driver::readiness::Readiness;
use crate::driver::signals::Signals;
use crate::driver::turn::Turn;
use crate::driver::upgrade::state::{mono, ConfigImage, DriverImage};
use crate::driver::upgrade::upgrader::{refused, Upgrader};
use crate::driver::upgrade::{core_section, ResumeArgs, FAULT_VAR};
use crate::driver::ContainmentMode;
use crate::proto::encode;
use crate::store::image::{Image, MAX_IMAGE};
use crate::store::lease::Lease;
use crate::sys::cgroup::CgroupRoot;
use crate::sys::process::ReaperMode;
use crate::sys::reexec;

/// Whether `fd` is an open descriptor (without owning it).
fn is_open(fd: i32) -> bool {
    // SAFETY: F_GETFD on any number only reads its flags; EBADF if not open.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

fn config(c: &ConfigImage) -> DaemonConfig {
    let mut cfg = DaemonConfig::new(c.state_dir.clone(), c.socket.clone());
    cfg.allow_uids = c.allow_uids.clone();
    cfg.reaper = match c.reaper {
        1 => ReaperMode::Fallback,
        _ => ReaperMode::Auto,
    };
    cfg.subreaper = c.subreaper;
    cfg.output_to_stdout = c.output_to_stdout;
    cfg.max_clients = c.max_clients as usize;
    cfg.client_outbox_bytes = c.outbox_bytes as usize;
    cfg.max_line = c.max_line as usize;
    cfg.max_sessions = c.max_sessions as usize;
    cfg.max_running = c.max_running as usize;
    cfg.keeper_hold = c.keeper_hold_ms.map(std::time::Duration::from_millis);
    cfg.config = c.config.clone();
    cfg.containment = match c.containment {
        1 => ContainmentMode::Cgroup,
        2 => ContainmentMode::Session,
        _ => ContainmentMode::Auto,
    };
    cfg
}

/// Each session's replay log capacity, from its spec.
fn log_capacities(
    core: &crate::core::Core,
) -> std::collections::HashMap<std::sync::Arc<str>, usize> {
    let clock = crate::core::WallClock {
        now: crate::core::Time::from_millis(0),
        unix_ms: 0,
    };
    core.session_records(clock)
        .into_iter()
        .map(|r| (r.name, r.spec.buffer_bytes))
        .collect()
}

impl Daemon {
    /// Resumes from the image an upgrading daemon left. `Err` says why it cannot; then
    /// nothing was taken or changed, and the caller runs the previous program again.
    pub fn resume(args: &ResumeArgs) -> Result<Daemon, String> {
        if !is_open(args.image_fd) || !is_open(args.previous_program_fd) {
            return Err("the image or the previous program is not open".into());
        }
        // SAFETY: checked open just above; only borrowed here.
        let image_fd = unsafe { BorrowedFd::borrow_raw(args.image_fd) };
        let bytes = reexec::read_image(image_fd, MAX_IMAGE).map_err(|e| format!("image: {e}"))?;
        if args.rolled_back.is_none() && std::env::var_os(FAULT_VAR).is_some() {
            std::env::remove_var(FAULT_VAR);
            return Err(format!("{FAULT_VAR} is set (a test of the rollback)"));
        }
        let image = Image::parse(&bytes).map_err(|e| e.to_string())?;
        let driver = DriverImage::decode(image.require("driver").map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        driver.check_descriptors().map_err(|e| e.to_string())?;
        let cfg = config(&driver.config);
        let core = core_section::import(
            image.require("core").map_err(|e| e.to_string())?,
            core_config(&cfg),
        )
        .map_err(|e| e.to_string())?;
        let reopened = Persist::reopen(&cfg.state_dir, core.next_generation().saturating_sub(1))?;
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;

        // From here on nothing fails: every descriptor is owned by one owner.
        for &fd in &driver.exec_only {
            if is_open(fd) && !driver.descriptors().contains(&fd) {
                // SAFETY: a number the image names as kept for the exec alone, open, and
                // not one of the descriptors an owner takes: closed here, once.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        let signals = match Signals::new(poll.registry()) {
            Ok(s) => s,
            Err(e) => return Err(format!("signal handlers: {e}")),
        };
        if let Err(e) = reexec::unblock_signals(&crate::driver::signals::handled()) {
            log::error!("unblocking signals: {e}");
        }
        // SAFETY: the previous program's descriptor was checked open; it is owned here
        // (kept for a later rollback when it is this program, else closed).
        let previous = unsafe { OwnedFd::from_raw_fd(args.previous_program_fd) };
        let own_program = if args.rolled_back.is_some() {
            let _ = reexec::set_close_on_exec(std::os::fd::AsFd::as_fd(&previous), true);
            Some(previous)
        } else {
            drop(previous);
            reexec::open_own_program()
                .map_err(|e| log::warn!("opening the running program: {e}"))
                .ok()
        };
        // SAFETY: checked open; owned here and closed once read.
        drop(unsafe { OwnedFd::from_raw_fd(args.image_fd) });
        // SAFETY: the lease's descriptor was checked open and named once.
        let lease_fd = unsafe { OwnedFd::from_raw_fd(driver.lease) };
        let _ = reexec::set_close_on_exec(std::os::fd::AsFd::as_fd(&lease_fd), true);
        let mut persist = reopened.leased(Lease::inherited(lease_fd));
        let keeper = driver.keeper.and_then(|raw| {
            // SAFETY: checked open and named once; owned by the link alone.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let _ = reexec::set_close_on_exec(std::os::fd::AsFd::as_fd(&fd), true);
            let linked = KeeperLink::from_fd(fd)
                .and_then(|mut link| link.register(poll.registry()).map(|()| link));
            match linked {
                Ok(link) => Some(link),
                Err(e) => {
                    log::warn!("keeper link: {e}; starting a new keeper");
                    remove_keeper_files(&cfg.state_dir);
                    None
                }
            }
        });
        // None crossed the upgrade (none served, or one was being started, which the
        // previous program let go of): one is started at once, never waited for.
        let mut keeper_restarts = KeeperRestarts::default();
        if keeper.is_none() && cfg.keeper_hold.is_some() {
            keeper_restarts.none_after_upgrade(Instant::now());
        }
        if cfg.subreaper {
            if let Err(e) = crate::sys::orphans::become_subreaper() {
                log::warn!("PR_SET_CHILD_SUBREAPER: {e}");
            }
        }
        let cgroups = match &driver.cgroup_root {
            Some(name) => CgroupRoot::reopen(name)
                .map_err(|e| log::warn!("reopening the cgroup subtree {name}: {e}; new generations get session containment"))
                .ok(),
            None => None,
        };
        let mut children = Children::new(
            cfg.reaper,
            crate::sys::orphans::adopts_orphans(),
            cgroups,
            persist.dir_id().to_owned(),
        );
        children.resume(driver.children, poll.registry());
        // The subtrees of the daemons before the one that re-executed were in its view.
        children.clear_predecessors();
        children.resume_probe_identities(driver.probe_identities);
        let hello = hello(&cfg, &children);
        let (limits, policy) = client_rules(&cfg);
        // The logs lossless subscribers follow are opened as large as they had them, or
        // what those have not read yet would be cut as they are read back.
        let mut capacities = log_capacities(&core);
        let (all_paced, paced) = driver.clients.paced_sessions();
        for (session, bytes) in &mut capacities {
            if all_paced || paced.contains(session.as_ref()) {
                *bytes = (*bytes).max(LOSSLESS_LOG_BYTES);
            }
        }
        let logs = persist.open_logs(&core, capacities, true);
        let mut clients = Clients::resume(
            driver.clients,
            poll.registry(),
            policy,
            limits,
            hello,
            &logs,
        );
        persist.save_again(driver.unsaved);
        for k in driver.unverified {
            persist.keep_unverified(k.gen);
            persist.check_again(k.gen, k.session.into(), k.pid, k.token);
        }
        let clock = Clock {
            start: mono::from_ns(driver.clock_start_ns),
            wire: encode::Clock {
                epoch_unix_ms: driver.epoch_unix_ms,
            },
        };
        if let Some(r) = driver.requester {
            let pause_ms = (mono::to_ns(Instant::now()).saturating_sub(r.paused_at_ns)) / 1_000_000;
            match &args.rolled_back {
                None => {
                    log::info!(
                        "resumed: genward {} (was {}), {} generation(s), paused {pause_ms} ms",
                        env!("CARGO_PKG_VERSION"),
                        r.previous_version,
                        core.generation_count(),
                    );
                    clients.send_upgraded(
                        r.client,
                        &r.rid,
                        &r.previous_version,
                        pause_ms,
                        bytes.len() as u64,
                    );
                }
                Some(why) => {
                    log::error!("upgrade rolled back: the new program could not resume: {why}");
                    let e = refused(format!(
                        "the new program could not resume ({why}); the previous one was run again"
                    ));
                    clients.send_error(r.client, &r.rid, &e);
                }
            }
        }
        let program_path = driver.config.program.clone();
        children.measure_descriptors(clients.count());
        let log_sink = super::start::log_sink(&cfg, &core);
        let mut daemon = Daemon {
            children,
            cfg,
            poll,
            core,
            clock,
            signals,
            clients,
            logs,
            persist,
            turn: Turn::default(),
            upgrade: Upgrader::resumed(own_program, program_path),
            keeper,
            keeper_restarts,
            log_sink,
            notify: Notifier::from_env(),
            ready: Readiness::default(),
            leftovers: Default::default(),
        };
        // What the checks of running generations need again: probes (the core goes on
        // asking for them) and output matchers; a notification pipe did not survive.
        let checks: Vec<_> = daemon.core.running_checks().collect();
        for (gen, spec, waiting) in checks {
            daemon.ready.resume(gen, &spec, waiting);
        }
        // Leaders that exited while the program was replaced: their pidfds are readable
        // (reported on registration), but a child without one is only found by asking.
        for gen in daemon.children.gens() {
            daemon.check_exit(gen);
        }
        Ok(daemon)
    }
}
