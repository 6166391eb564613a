//! The daemon's settings, from its command line and environment.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use crate::sys::process::ReaperMode;

/// How the daemon runs.
#[derive(Debug)]
pub struct DaemonConfig {
    /// Private state directory (lease, socket by default).
    pub state_dir: PathBuf,
    /// Control socket path.
    pub socket: PathBuf,
    /// Extra uids allowed to connect (besides ours and root).
    pub allow_uids: Vec<u32>,
    /// Write a newline to this fd once ready, then close it (s6 readiness notification).
    pub ready_fd: Option<OwnedFd>,
    /// pidfds (default) or the SIGCHLD fallback.
    pub reaper: ReaperMode,
    /// Be a child subreaper (the default), so orphaned descendants are reparented to (and
    /// reaped by) the daemon, and a generation's session is found by walking the daemon's
    /// own subtree rather than the host.
    pub subreaper: bool,
    /// Most simultaneous client connections; more are accepted and closed with an error.
    pub max_clients: usize,
    /// Soft limit of each client's outgoing queue, bytes.
    pub client_outbox_bytes: usize,
    /// Longest request line, bytes.
    pub max_line: usize,
    /// Most sessions in the table (removing ones included); one more is refused with
    /// `limit`.
    pub max_sessions: usize,
    /// Most generations tracked at once — running, starting, stopping or draining; a start
    /// beyond it is refused with `limit`.
    pub max_running: usize,
    /// What holds each generation's process tree.
    pub containment: ContainmentMode,
    /// How long the keeper holds the children's descriptors after this daemon died,
    /// waiting for the next one (see [`crate::keeper`]); `None`: no keeper (a crash then
    /// loses the sessions' I/O).
    pub keeper_hold: Option<Duration>,
    /// Write every session's output to the daemon's standard output too, line by line,
    /// prefixed with the session's name (`--output-to-stdout`).
    pub output_to_stdout: bool,
    /// The declarative configuration (a file, or a directory of `NAME.json` files; see
    /// [`crate::config`]): loaded at start, again on `reload` and SIGHUP. `None`: only
    /// clients start sessions.
    pub config: Option<PathBuf>,
}

/// The keeper's default hold: long enough for a service manager, or a person, to start
/// the daemon again.
pub const DEFAULT_KEEPER_HOLD: Duration = Duration::from_secs(600);

/// Sessions by default: enough for a fleet of agents on one host; each idle session costs
/// a few KiB (docs/operations.md, *Limits*).
pub const DEFAULT_MAX_SESSIONS: usize = 100_000;

/// Live generations by default. Ten thousand running sessions need about 40,000
/// descriptors (pipes mode), which the daemon raises its limit towards.
pub const DEFAULT_MAX_RUNNING: usize = 16_384;

/// How generations are contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContainmentMode {
    /// A cgroup per generation where the daemon may create cgroups, else the session.
    #[default]
    Auto,
    /// A cgroup per generation, or the daemon refuses to start.
    Cgroup,
    /// The session only.
    Session,
}

impl DaemonConfig {
    /// Settings with defaults for everything but the paths.
    pub fn new(state_dir: PathBuf, socket: PathBuf) -> Self {
        DaemonConfig {
            state_dir,
            socket,
            allow_uids: Vec::new(),
            ready_fd: None,
            reaper: ReaperMode::Auto,
            subreaper: true,
            max_clients: 4096,
            client_outbox_bytes: 4 << 20,
            max_line: 1 << 20,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_running: DEFAULT_MAX_RUNNING,
            containment: ContainmentMode::Auto,
            keeper_hold: Some(DEFAULT_KEEPER_HOLD),
            output_to_stdout: false,
            config: None,
        }
    }
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

pub(super) fn start_err(what: &str) -> impl Fn(std::io::Error) -> StartError + '_ {
    move |e| StartError(format!("{what}: {e}"))
}
