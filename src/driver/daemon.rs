//! The loop: one thread, one `mio::Poll`, in the style of mio's own tcp_server example —
//! constant tokens for the fixed sources, a map for the rest, drain each ready source until
//! it would block, retry `EINTR`, ignore unknown tokens, deregister before closing.
//!
//! Each readiness becomes a core [`Input`]; after every input the core's actions are
//! drained and executed (`exec.rs`). The poll timeout is the core's next deadline, so an
//! idle daemon never wakes.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::UnixListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use super::children::Child;
use super::client::Client;
use super::config::DaemonConfig;
use super::fanout::Logs;
use super::listener::{self, PeerPolicy};
use super::ready::notify_ready;
use super::signals::{ControlSignal, ControlSignals};
use crate::core::{Config as CoreConfig, Core, Input, Time};
use crate::proto::encode::Clock;
use crate::proto::envelope::RequestId;
use crate::store::lease::Lease;
use crate::store::state_dir::ensure_private_dir;
use crate::sys::process::ReaperMode;
use crate::sys::sigchld::SigchldPipe;

pub(super) const LISTENER: Token = Token(0);
pub(super) const SIGNALS: Token = Token(1);
pub(super) const SIGCHLD: Token = Token(2);
const FIRST_DYNAMIC: usize = 16;

/// How often generations whose leader exited are checked for an emptied process group
/// (only while some are waiting; an idle daemon never ticks).
pub(super) const GROUP_CHECK: Duration = Duration::from_millis(20);

/// What a dynamic token stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    Client,
    /// An output descriptor of generation `gen` (for a PTY also its input).
    Output {
        gen: u64,
    },
    /// Stdin pipe of generation `gen`.
    Stdin {
        gen: u64,
    },
    /// pidfd of generation `gen`.
    Pidfd {
        gen: u64,
    },
}

/// Stops watching a descriptor and forgets its token: "deregister before drop".
pub(super) fn unwatch(
    poll: &Poll,
    sources: &mut HashMap<Token, Source>,
    fd: std::os::fd::RawFd,
    token: Token,
) {
    let _ = poll.registry().deregister(&mut SourceFd(&fd));
    sources.remove(&token);
}

/// The exit of a generation, kept for `wait` requests that arrive later.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub session: Arc<str>,
    pub line: Vec<u8>,
}

/// Shutdown progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shutdown {
    Running,
    Stopping,
    Killing,
}

/// Everything the loop owns.
#[derive(Debug)]
pub struct Daemon {
    pub(super) cfg: DaemonConfig,
    pub(super) poll: Poll,
    pub(super) core: Core,
    pub(super) start: Instant,
    pub(super) clock: Clock,
    pub(super) listener: UnixListener,
    pub(super) policy: PeerPolicy,
    pub(super) signals: ControlSignals,
    pub(super) sigchld: SigchldPipe,
    /// Children are watched through SIGCHLD (no pidfds).
    pub(super) fallback: bool,
    /// Orphans are reparented to us (PID 1 or subreaper) and must be reaped.
    pub(super) orphans: bool,
    pub(super) next_token: usize,
    pub(super) sources: HashMap<Token, Source>,
    pub(super) children: HashMap<u64, Child>,
    pub(super) clients: HashMap<Token, Client>,
    pub(super) logs: Logs,
    pub(super) all_subscribers: BTreeSet<Token>,
    pub(super) subscribers: HashMap<Arc<str>, BTreeSet<Token>>,
    /// Core request id → the client and the id it used.
    pub(super) requests: HashMap<u64, (Token, RequestId)>,
    pub(super) next_request: u64,
    /// Generation → `wait` requests to answer when it ends.
    pub(super) waiters: HashMap<u64, Vec<(Token, RequestId)>>,
    /// Recently ended generations, bounded, for late `wait`s.
    pub(super) ended: HashMap<u64, Ended>,
    pub(super) ended_order: VecDeque<u64>,
    /// Sources with data left after a bounded read: serviced again before sleeping.
    pub(super) again: Vec<Token>,
    pub(super) read_buf: Vec<u8>,
    pub(super) shutdown: Shutdown,
    /// When process groups were last scanned (see [`GROUP_CHECK`]).
    pub(super) last_group_check: Instant,
    /// A leader exited this turn: scan groups before sleeping.
    pub(super) group_check_due: bool,
    pub(super) identity: String,
    _lease: Lease,
}

/// Why the daemon could not start.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

fn start_err(what: &str) -> impl Fn(io::Error) -> StartError + '_ {
    move |e| StartError(format!("{what}: {e}"))
}

/// One read from a child or a client: large enough to empty a grown pipe buffer in a few
/// calls, small enough that one frame stays well under the protocol's 1 MiB payload limit.
const READ_BUF_BYTES: usize = 256 * 1024;

/// Ended generations remembered for late `wait`s.
const ENDED_MEMORY: usize = 4096;

impl Daemon {
    /// Prepares the state directory, lease, socket and signal handling.
    pub fn new(cfg: DaemonConfig) -> Result<Daemon, StartError> {
        ensure_private_dir(&cfg.state_dir).map_err(|e| StartError(e.to_string()))?;
        let lease = Lease::acquire(&cfg.state_dir)
            .map_err(|e| StartError(format!("{}: {e}", cfg.state_dir.display())))?;
        if let Some(parent) = cfg.socket.parent() {
            if parent != cfg.state_dir {
                ensure_private_dir(parent).map_err(|e| StartError(format!("socket {e}")))?;
            }
        }
        if let Some(old) = crate::sys::rlimit::raise_nofile_limit() {
            log::debug!(
                "descriptor limit raised from {old} to {:?}",
                crate::sys::rlimit::nofile_soft_limit()
            );
        }
        let poll = Poll::new().map_err(start_err("epoll"))?;
        let mut listener = listener::bind(&cfg.socket)
            .map_err(|e| StartError(format!("socket {}: {e}", cfg.socket.display())))?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(start_err("register socket"))?;
        let signals = ControlSignals::new().map_err(start_err("signal handlers"))?;
        poll.registry()
            .register(
                &mut SourceFd(&signals.fd().as_raw_fd()),
                SIGNALS,
                Interest::READABLE,
            )
            .map_err(start_err("register signals"))?;
        if cfg.subreaper {
            crate::sys::orphans::become_subreaper().map_err(start_err("PR_SET_CHILD_SUBREAPER"))?;
        }
        let orphans = crate::sys::orphans::adopts_orphans();
        let fallback =
            cfg.reaper == ReaperMode::Fallback || !crate::sys::pidfd_probe::pidfd_supported();
        // Always watched: the fallback reaper and orphans need it, and so does any child
        // that ended up without a watched pidfd (pidfd_open or registration failed).
        let sigchld = SigchldPipe::new().map_err(start_err("SIGCHLD handler"))?;
        poll.registry()
            .register(
                &mut SourceFd(&sigchld.fd().as_raw_fd()),
                SIGCHLD,
                Interest::READABLE,
            )
            .map_err(start_err("register SIGCHLD"))?;
        let epoch_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let identity = match crate::sys::identity::observe(std::process::id() as i32, None) {
            crate::sys::identity::Observed::Token(t) => t,
            _ => String::new(),
        };
        Ok(Daemon {
            policy: PeerPolicy::new(cfg.allow_uids.clone()),
            cfg,
            poll,
            core: Core::new(
                CoreConfig {
                    max_sessions: 4096,
                    max_generations: 8192,
                    ..CoreConfig::default()
                },
                1,
            ),
            start: Instant::now(),
            clock: Clock { epoch_unix_ms },
            listener,
            signals,
            sigchld,
            fallback,
            orphans,
            next_token: FIRST_DYNAMIC,
            sources: HashMap::new(),
            children: HashMap::new(),
            clients: HashMap::new(),
            logs: Logs::default(),
            all_subscribers: BTreeSet::new(),
            subscribers: HashMap::new(),
            requests: HashMap::new(),
            next_request: 1,
            waiters: HashMap::new(),
            ended: HashMap::new(),
            ended_order: VecDeque::new(),
            again: Vec::new(),
            read_buf: vec![0; READ_BUF_BYTES],
            shutdown: Shutdown::Running,
            last_group_check: Instant::now(),
            group_check_due: false,
            identity,
            _lease: lease,
        })
    }

    /// The core's clock: milliseconds since the daemon started.
    pub(super) fn now(&self) -> Time {
        Time::from_millis(self.start.elapsed().as_millis() as u64)
    }

    /// A fresh token for a dynamic source.
    pub(super) fn token(&mut self, source: Source) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        self.sources.insert(t, source);
        t
    }

    /// Feeds one input to the core and executes what it asks.
    pub(super) fn feed(&mut self, input: Input) {
        let now = self.now();
        self.core.handle(now, input);
        self.run_actions(None);
    }

    /// Runs the loop until shutdown completes.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        log::info!(
            "genward {} listening on {} (reaper: {})",
            env!("CARGO_PKG_VERSION"),
            self.cfg.socket.display(),
            if self.fallback {
                "sigchld fallback"
            } else {
                "pidfd"
            }
        );
        notify_ready(self.cfg.ready_fd.take());
        loop {
            if self.shutdown != Shutdown::Running && self.core.generation_count() == 0 {
                self.flush_all_clients();
                log::info!("all sessions stopped; exiting");
                let _ = std::fs::remove_file(&self.cfg.socket);
                return Ok(());
            }
            let timeout = self.poll_timeout();
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let again = std::mem::take(&mut self.again);
            for event in events.iter() {
                self.dispatch(
                    event.token(),
                    event.is_readable() || event.is_read_closed() || event.is_error(),
                    event.is_writable() || event.is_write_closed(),
                );
            }
            for token in again {
                self.dispatch(token, true, false);
            }
            let now = self.now();
            self.core.handle_timeout(now);
            self.run_actions(None);
            if self.group_check_due || self.last_group_check.elapsed() >= GROUP_CHECK {
                self.group_check_due = false;
                self.last_group_check = Instant::now();
                self.check_groups();
            }
        }
    }

    fn poll_timeout(&self) -> Option<Duration> {
        if !self.again.is_empty() {
            return Some(Duration::ZERO);
        }
        let now = self.now();
        let mut timeout = self.core.next_deadline().map(|d| d.since(now));
        if self.children.values().any(|c| c.awaiting_group) {
            timeout = Some(timeout.map_or(GROUP_CHECK, |t| t.min(GROUP_CHECK)));
        }
        // Round up so a deadline is never polled a millisecond early and spun on.
        timeout.map(|t| t + Duration::from_micros(500))
    }

    fn dispatch(&mut self, token: Token, readable: bool, writable: bool) {
        match token {
            LISTENER => self.accept_clients(),
            SIGNALS => self.on_signals(),
            SIGCHLD => self.on_sigchld(),
            token => match self.sources.get(&token).copied() {
                Some(Source::Client) => {
                    if writable {
                        self.client_writable(token);
                    }
                    if readable {
                        self.client_readable(token);
                    }
                }
                Some(Source::Output { gen }) => {
                    if writable {
                        self.flush_input(gen);
                    }
                    if readable {
                        self.read_output(gen, token);
                    }
                }
                Some(Source::Stdin { gen }) => self.flush_input(gen),
                Some(Source::Pidfd { gen }) => self.check_exit(gen),
                // Sporadic events for a source already gone.
                None => {}
            },
        }
    }

    fn on_signals(&mut self) {
        let received = match self.signals.drain() {
            Ok(s) => s,
            Err(e) => {
                log::error!("signal pipe: {e}");
                return;
            }
        };
        for sig in received {
            match sig {
                ControlSignal::Terminate => self.begin_shutdown(),
                ControlSignal::Hangup => log::info!("SIGHUP received; nothing to reload"),
            }
        }
    }

    fn on_sigchld(&mut self) {
        if let Err(e) = self.sigchld.drain() {
            log::error!("SIGCHLD pipe: {e}");
        }
        // Children watched through a pidfd report there; the others are asked here.
        let gens: Vec<u64> = self
            .children
            .iter()
            .filter(|(_, c)| !c.exit_seen && c.pidfd_token.is_none())
            .map(|(g, _)| *g)
            .collect();
        for gen in gens {
            self.check_exit(gen);
        }
        if self.orphans {
            let children = &self.children;
            let tracked = |pid: i32| children.values().any(|c| c.process.pid() == pid);
            match crate::sys::orphans::reap_orphans(tracked) {
                Ok(0) => {}
                Ok(n) => log::debug!("reaped {n} orphaned process(es)"),
                Err(e) => log::warn!("reaping orphans: {e}"),
            }
        }
    }

    /// Stops every session (first request) or kills everything at once (second).
    pub(super) fn begin_shutdown(&mut self) {
        let grace = match self.shutdown {
            Shutdown::Running => {
                log::info!("shutting down: stopping every session");
                self.shutdown = Shutdown::Stopping;
                None
            }
            Shutdown::Stopping | Shutdown::Killing => {
                log::warn!("shutting down now: killing every session");
                self.shutdown = Shutdown::Killing;
                Some(Duration::ZERO)
            }
        };
        let request = self.internal_request();
        self.feed(Input::Command {
            request,
            command: crate::core::Command::StopAll { grace },
        });
    }

    /// A request id whose reply nobody waits for.
    pub(super) fn internal_request(&mut self) -> u64 {
        let id = self.next_request;
        self.next_request += 1;
        id
    }

    pub(super) fn remember_end(&mut self, session: &Arc<str>, gen: u64, line: Vec<u8>) {
        if self.ended_order.len() >= ENDED_MEMORY {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
        self.ended_order.push_back(gen);
        self.ended.insert(
            gen,
            Ended {
                session: session.clone(),
                line,
            },
        );
    }
}
