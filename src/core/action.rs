//! What the core asks the caller to do: plain data, so the driver is a thin executor.

use std::sync::Arc;

use super::error::Error;
use super::input::SpawnError;
use super::snapshot::SessionSnapshot;
use super::spec::Spec;

/// One thing for the driver to do, pulled with [`Core::poll_action`](super::Core::poll_action)
/// in order. Every action naming a generation concerns that generation only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start `gen` (setsid, its io mode, its env); answer with `Input::SpawnResult`.
    Spawn {
        gen: u64,
        session: Arc<str>,
        spec: Arc<Spec>,
    },
    /// Give up starting `gen` (a stop arrived before its spawn was confirmed); answer with
    /// `Input::SpawnResult`: the running process if it had already started (it is then
    /// stopped like any other), else a `cancelled` error.
    CancelSpawn { gen: u64 },
    /// Send `signal` to `gen`'s leader or to its process group. Only ever asked while the
    /// leader is unreaped, so neither the pid nor the group id can have been reused.
    Signal { gen: u64, signal: i32, scope: Scope },
    /// Reap `gen`'s leader (`waitid` without `WNOWAIT`). Asked exactly once per spawned
    /// generation; after it, nothing about `gen` is ever signalled.
    Reap { gen: u64 },
    /// Queue bytes for `gen`'s stdin; answer with `InputWritten` / `InputError`.
    WriteInput { gen: u64, bytes: Vec<u8> },
    /// Close `gen`'s stdin once the queued bytes are written.
    CloseInput { gen: u64 },
    /// Set `gen`'s PTY size.
    Resize { gen: u64, rows: u16, cols: u16 },
    /// Stop reading `gen`'s output: its drain deadline passed with a stream still open.
    /// Answer with `Input::OutputClosed`, saying how many bytes were left unread; the exit
    /// is reported then, with those bytes counted as discarded.
    CloseOutput { gen: u64 },
    /// `gen` is gone: close its fds and pidfd, forget its buffers.
    Release { gen: u64 },
    /// Run readiness probe number `probe` of `gen` (its spec's `ready`: a connection or a
    /// command); answer with `Input::Readiness` carrying `ReadySignal::Probed`.
    Probe {
        gen: u64,
        probe: u64,
        /// A liveness probe (the spec's `live`) rather than a readiness one (`ready`).
        live: bool,
    },
    /// Give up probe `probe` of `gen` (it outlived its interval): kill its command or drop
    /// its connection attempt. No answer is expected; a late one is ignored.
    CancelProbe { gen: u64, probe: u64, live: bool },
    /// `gen`'s readiness is decided: stop watching its notification descriptor and its
    /// output for the ready signal, and give up any probe in flight.
    ReadySettled { gen: u64 },
    /// Tell subscribers.
    Emit(Event),
    /// Answer the command with this request id. Exactly one per command.
    Reply {
        request: u64,
        result: Result<Response, Error>,
    },
}

/// Who a signal goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The leader only (through its pidfd).
    Leader,
    /// Every process of the generation's tree: its cgroup where it has one, else every
    /// process of its session (job-control groups included). Only asked while the leader
    /// is alive or a zombie, which pins the session id. The driver follows a signal that
    /// neither kills, stops nor continues with SIGCONT to each process of the tree found
    /// stopped, so that it acts on it (a stop's SIGCONT to the leader alone is asked by
    /// the core itself, as a `Leader` signal).
    Tree,
    /// The terminal's foreground process group (what Ctrl-C at the terminal reaches),
    /// within the generation's tree. PTY generations only.
    Foreground,
}

impl Scope {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Leader => "leader",
            Scope::Tree => "tree",
            Scope::Foreground => "foreground",
        }
    }
}

/// A successful command's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Done; nothing to return.
    Ok,
    /// The generation the command created (spawn, restart) or addressed.
    Gen(u64),
    /// Every session, each with its live generations.
    List(Vec<SessionSnapshot>),
    /// One session.
    Session(Box<SessionSnapshot>),
}

/// Something subscribers are told. Every event about a process names its generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `gen` is running as `pid`.
    Spawned {
        session: Arc<str>,
        gen: u64,
        pid: u32,
    },
    /// `gen` never ran. Terminal: nothing about `gen` follows.
    SpawnFailed {
        session: Arc<str>,
        gen: u64,
        error: SpawnError,
    },
    /// `gen` ended and its output is drained. Terminal: nothing about `gen` follows.
    Exited {
        session: Arc<str>,
        gen: u64,
        /// Exit code, 128 + signal when signalled; `None` when lost (nobody saw it end).
        code: Option<i32>,
        /// The signal that ended it, if any.
        signal: Option<i32>,
        /// Why it ended.
        cause: ExitCause,
        /// Output bytes refused because they came for a closed stream.
        discarded: u64,
        /// Whether output was cut at the drain deadline (some stream never reached EOF).
        truncated: bool,
    },
    /// The session's state changed; `gen` is its current (or last) generation.
    State {
        session: Arc<str>,
        gen: Option<u64>,
        state: SessionState,
    },
    /// `gen` survived SIGKILL for `kill_grace`. It is still tracked and watched.
    Unkillable { session: Arc<str>, gen: u64 },
    /// `gen` stopped reading its input (EPIPE); later writes fail with `input_closed`.
    InputClosed { session: Arc<str>, gen: u64 },
    /// `gen` is ready (its spec's `ready` check passed).
    Ready { session: Arc<str>, gen: u64 },
    /// `gen` failed its liveness probe `failures` times in a row: it is being stopped, and
    /// its end counts as a failure for the restart policy.
    Unhealthy {
        session: Arc<str>,
        gen: u64,
        failures: u32,
    },
    /// `gen`'s readiness check failed; the process is left running.
    ReadyFailed {
        session: Arc<str>,
        gen: u64,
        /// Why, for people ("timed out after 60s").
        reason: Arc<str>,
    },
}

impl Action {
    /// The generation the action is about, if it is about one.
    pub fn gen(&self) -> Option<u64> {
        match self {
            Action::Emit(e) => e.gen(),
            Action::Spawn { gen, .. }
            | Action::CancelSpawn { gen }
            | Action::Signal { gen, .. }
            | Action::Reap { gen }
            | Action::WriteInput { gen, .. }
            | Action::CloseInput { gen }
            | Action::Resize { gen, .. }
            | Action::CloseOutput { gen }
            | Action::Release { gen }
            | Action::Probe { gen, .. }
            | Action::CancelProbe { gen, .. }
            | Action::ReadySettled { gen } => Some(*gen),
            Action::Reply { .. } => None,
        }
    }
}

impl Event {
    /// The generation the event is about, if it is about one.
    pub fn gen(&self) -> Option<u64> {
        match self {
            Event::Spawned { gen, .. }
            | Event::SpawnFailed { gen, .. }
            | Event::Exited { gen, .. }
            | Event::Unkillable { gen, .. }
            | Event::InputClosed { gen, .. }
            | Event::Ready { gen, .. }
            | Event::Unhealthy { gen, .. }
            | Event::ReadyFailed { gen, .. } => Some(*gen),
            Event::State { .. } => None,
        }
    }

    /// The session the event is about.
    pub fn session(&self) -> &Arc<str> {
        match self {
            Event::Spawned { session, .. }
            | Event::SpawnFailed { session, .. }
            | Event::Exited { session, .. }
            | Event::State { session, .. }
            | Event::Unkillable { session, .. }
            | Event::InputClosed { session, .. }
            | Event::Ready { session, .. }
            | Event::Unhealthy { session, .. }
            | Event::ReadyFailed { session, .. } => session,
        }
    }

    /// Whether it answers a `wait` for readiness: `ready`, or the `ready_failed` of a check
    /// that failed while its leader ran. A check that failed only because the leader ended
    /// first leaves the answer to the terminal event, which says how it ended.
    pub fn settles_ready_wait(&self) -> bool {
        match self {
            Event::Ready { .. } => true,
            Event::ReadyFailed { reason, .. } => !super::readiness::ended_first(reason),
            _ => false,
        }
    }

    /// Whether this is a generation's one terminal event: nothing about it follows.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Event::Exited { .. } | Event::SpawnFailed { .. })
    }
}

/// Where output bytes accepted by [`Core::output`](super::Core::output) belong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputAt {
    /// The session of the generation that produced them.
    pub session: Arc<str>,
    /// Offset of the first byte within the generation's stream.
    pub offset: u64,
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCause {
    /// It exited on its own with a code.
    Exited,
    /// A signal we did not send as part of a stop ended it.
    Signaled,
    /// Our stop sequence ended it (so 143 after our SIGTERM is not a crash).
    Stopped,
    /// Our stop sequence needed SIGKILL.
    Killed,
    /// It was stopped because a newer generation replaced it.
    Superseded,
    /// A restarted daemon could not keep track of it (set by recovery).
    Lost,
}

impl ExitCause {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ExitCause::Exited => "exited",
            ExitCause::Signaled => "signaled",
            ExitCause::Stopped => "stopped",
            ExitCause::Killed => "killed",
            ExitCause::Superseded => "superseded",
            ExitCause::Lost => "lost",
        }
    }
}

/// A session's state, as listed and as announced by `State` events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Its current generation is waiting to spawn or spawning.
    Starting,
    /// Its current generation is running.
    Running,
    /// Its current generation is walking the stop sequence.
    Stopping,
    /// Its current generation's leader exited; output is draining.
    Exiting,
    /// Waiting for a restart's backoff delay.
    Backoff,
    /// Not running, by request (stop) or because its spawn was cancelled.
    Stopped,
    /// Not running: its process exited with code 0 and no restart applies.
    Exited,
    /// Not running: it ended badly and no restart applies (or restarts ran out).
    Failed,
    /// Being removed: its generations are stopping; it disappears once they are gone.
    Removing,
    /// Removed from the table.
    Removed,
}

impl SessionState {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionState::Starting => "starting",
            SessionState::Running => "running",
            SessionState::Stopping => "stopping",
            SessionState::Exiting => "exiting",
            SessionState::Backoff => "backoff",
            SessionState::Stopped => "stopped",
            SessionState::Exited => "exited",
            SessionState::Failed => "failed",
            SessionState::Removing => "removing",
            SessionState::Removed => "removed",
        }
    }
}
