//! Starting afresh: the state directory claimed, what a previous daemon left taken back
//! (with what its keeper held), then every owner built.

use std::time::Instant;

use mio::Poll;

use super::{Clock, Daemon};
use crate::core::{Config as CoreConfig, Core};
use crate::driver::children::Children;
use crate::driver::clients::{ClientLimits, Clients, Hello};
use crate::driver::config::{start_err, DaemonConfig, StartError};
use crate::driver::containment::cgroup_root;
use crate::driver::keeper_restarts::KeeperRestarts;
use crate::driver::keeper_start::{find_or_start, remove_keeper_files};
use crate::driver::listener::{self, PeerPolicy};
use crate::driver::log_sink::LogSink;
use crate::driver::notify::Notifier;
use crate::driver::persist::{claim_directories, unix_ms, Persist};
use crate::driver::readiness::Readiness;
use crate::driver::recover::{take_back, TakenBack};
use crate::driver::signals::Signals;
use crate::driver::turn::Turn;
use crate::driver::upgrade::upgrader::Upgrader;
use crate::proto::encode;
use crate::sys::process::ReaperMode;

/// A path for a message; `-` for none.
fn display_path(path: Option<&std::path::Path>) -> String {
    path.map_or_else(|| "-".to_owned(), |p| p.display().to_string())
}

/// What `hello` says about this daemon.
pub(super) fn hello(cfg: &DaemonConfig, children: &Children) -> Hello {
    let fallback =
        cfg.reaper == ReaperMode::Fallback || !crate::sys::pidfd_probe::pidfd_supported();
    let identity = match crate::sys::identity::observe(std::process::id() as i32, None) {
        crate::sys::identity::Observed::Token(t) => t,
        _ => String::new(),
    };
    Hello {
        identity,
        reaper: if fallback { "sigchld" } else { "pidfd" },
        containment: children.containment().as_str(),
    }
}

/// The log sink, with every session's log file from its spec, and standard output if
/// asked (coloured when it is a terminal and `NO_COLOR` is not set, as no-color.org asks).
pub(super) fn log_sink(cfg: &DaemonConfig, core: &Core) -> LogSink {
    let colour = cfg.output_to_stdout
        && rustix::termios::isatty(std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut sink = LogSink::new(cfg.output_to_stdout, colour);
    let clock = crate::core::WallClock {
        now: crate::core::Time::from_millis(0),
        unix_ms: 0,
    };
    for r in core.session_records(clock) {
        sink.configure(&r.name, r.spec.log.as_ref());
    }
    sink
}

/// The limits of every connection and who may connect.
pub(super) fn client_rules(cfg: &DaemonConfig) -> (ClientLimits, PeerPolicy) {
    let limits = ClientLimits {
        max_clients: cfg.max_clients,
        max_line: cfg.max_line,
        outbox_bytes: cfg.client_outbox_bytes,
    };
    (limits, PeerPolicy::new(cfg.allow_uids.clone()))
}

/// The core's limits, from the daemon's configuration (which an upgrade carries, so the
/// resumed daemon checks the imported core against the same).
pub(super) fn core_config(cfg: &DaemonConfig) -> CoreConfig {
    CoreConfig {
        max_sessions: cfg.max_sessions,
        max_generations: cfg.max_running,
        ..CoreConfig::default()
    }
}

impl Daemon {
    /// Prepares the state directory, lease, socket and signal handling.
    pub fn new(cfg: DaemonConfig) -> Result<Daemon, StartError> {
        // Before anything is claimed: a bad configuration fails the start, changing nothing.
        let configured = match &cfg.config {
            Some(path) => Some(
                super::reload::load_checked(path, &core_config(&cfg))
                    .map_err(|e| StartError(e.message))?,
            ),
            None => None,
        };
        listener::check_path(&cfg.socket)
            .map_err(|e| StartError(format!("socket {}: {e}", cfg.socket.display())))?;
        let shared = !cfg.allow_uids.is_empty();
        let (lease, socket_dir) = claim_directories(&cfg.state_dir, &cfg.socket, shared)?;
        if let Some(old) = crate::sys::rlimit::raise_nofile_limit() {
            log::debug!(
                "descriptor limit raised from {old} to {:?}",
                crate::sys::rlimit::nofile_soft_limit()
            );
        }
        let poll = Poll::new().map_err(start_err("epoll"))?;
        let listener = listener::open(&cfg.socket, shared, poll.registry())?;
        socket_dir.settle()?;
        let signals = Signals::new(poll.registry()).map_err(start_err("signal handlers"))?;
        if cfg.subreaper {
            crate::sys::orphans::become_subreaper().map_err(start_err("PR_SET_CHILD_SUBREAPER"))?;
        }
        let epoch_unix_ms = unix_ms();
        let (mut persist, left) = Persist::open(&cfg.state_dir, lease).map_err(StartError)?;
        let cgroups = cgroup_root(cfg.containment, persist.dir_id()).map_err(StartError)?;
        let mut children = Children::new(
            cfg.reaper,
            crate::sys::orphans::adopts_orphans(),
            cgroups,
            persist.dir_id().to_owned(),
        );
        let hello = hello(&cfg, &children);
        let (limits, policy) = client_rules(&cfg);
        let clock = Clock {
            start: Instant::now(),
            wire: encode::Clock { epoch_unix_ms },
        };
        let mut core = Core::new(core_config(&cfg), left.first_gen);
        // Before taking back: what the previous daemon's keeper held comes back with it.
        let (mut keeper, mut kept) = match cfg.keeper_hold {
            Some(hold) => find_or_start(&cfg.state_dir, hold),
            None => (None, Default::default()),
        };
        let handed: Vec<u64> = kept.keys().copied().collect();
        let TakenBack { logs, with_io } = take_back(
            &mut core,
            &mut children,
            &mut persist,
            left,
            &mut kept,
            &poll,
            clock.now(),
            cfg.reaper,
        );
        // What the previous daemons' cgroups hold is known now: the empty ones go.
        children.clear_predecessors();
        if let Some(link) = &mut keeper {
            // Its copies of what was not resumed with its I/O are no longer needed.
            let forgotten = handed.iter().filter(|g| !with_io.contains(g));
            let result = forgotten
                .copied()
                .try_for_each(|gen| link.forget(gen))
                .and_then(|()| link.register(poll.registry()));
            if let Err(e) = result {
                log::error!("keeper link: {e}; starting a new keeper later");
                keeper = None;
                remove_keeper_files(&cfg.state_dir);
            }
        }
        // None could be had: one is tried again after a while, never waited for.
        let mut keeper_restarts = KeeperRestarts::default();
        if keeper.is_none() && cfg.keeper_hold.is_some() {
            keeper_restarts.none_at_start(Instant::now());
        }
        // The configuration's sessions, reconciled with what was taken back as a reload
        // does: one persisted with an equal spec runs on untouched.
        if let Some(sessions) = configured {
            let plan = match core.reload(clock.now(), sessions) {
                Ok(plan) => Some(plan),
                // The file was checked before anything was claimed; what refuses it now is
                // what was taken back (its limits, its dependencies). Exiting would leave
                // its processes unsupervised and its sessions unserved (a backoff never
                // ending), and every start after refused the same way.
                Err(e) if core.session_count() > 0 => {
                    log::error!(
                        "{}: not applied next to what was taken back, which runs on: {}; reload once it can be",
                        display_path(cfg.config.as_deref()),
                        e.message
                    );
                    None
                }
                Err(e) => {
                    // A keeper holding nothing has nothing to keep for the next daemon:
                    // it goes with this one (one holding sessions' I/O waits for it).
                    if core.generation_count() == 0 {
                        if let Some(link) = keeper.take() {
                            link.bye(poll.registry());
                        }
                    }
                    return Err(StartError(format!(
                        "{}: {}",
                        display_path(cfg.config.as_deref()),
                        e.message
                    )));
                }
            };
            if let Some(plan) = plan {
                super::reload::log_plan(&plan, false);
            }
        }
        let clients = Clients::new(listener, policy, limits, hello);
        children.measure_descriptors(clients.count());
        let log_sink = log_sink(&cfg, &core);
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
            upgrade: Upgrader::started(),
            keeper,
            keeper_restarts,
            log_sink,
            notify: Notifier::from_env(),
            ready: Readiness::default(),
            leftovers: Default::default(),
        };
        // Generations taken back after a crash are taken as ready, so their liveness
        // probes go on (the core asks for them): each needs its watch again.
        let checks: Vec<_> = daemon.core.running_checks().collect();
        for (gen, spec, _) in checks {
            daemon.ready.resume(gen, &spec, false);
        }
        Ok(daemon)
    }
}
