//! What the caller feeds the core: client commands and what happened to processes.

use std::sync::Arc;
use std::time::Duration;

use super::action::Scope;
use super::spec::{OnBusy, Spec, Stream};

/// One input. Process-side inputs name the generation they are about; the core applies
/// them to that generation only, and ignores them if it is gone or the input makes no
/// sense in its state (sporadic events happen).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A client command; answered by exactly one [`Action::Reply`](super::Action::Reply)
    /// carrying `request`.
    Command {
        /// Caller-chosen id, echoed in the reply.
        request: u64,
        /// What the client asks.
        command: Command,
    },
    /// Outcome of an [`Action::Spawn`](super::Action::Spawn).
    SpawnResult {
        gen: u64,
        /// The running leader, or why the spawn failed.
        result: Result<Started, SpawnError>,
    },
    /// A stream of `gen` reached end of file (or EIO on a PTY master).
    Eof { gen: u64, stream: Stream },
    /// The leader of `gen` exited, observed with `WNOWAIT`: it is a zombie, not reaped,
    /// so its pid and process group id cannot be reused yet.
    LeaderExited {
        gen: u64,
        /// How it ended.
        status: ExitStatus,
    },
    /// The leader of `gen` has exited, and its status is not known yet: its status follows
    /// as `LeaderExited`, or `Lost` if it never comes. (A process taken back after a
    /// restart is not the driver's child: its pidfd says it exited, but the status is
    /// published only once its real parent reaps it.) The generation's stop sequence ends
    /// here — no more escalation, no `unkillable` for a process that is gone — and
    /// commands that address its process (`write`, `signal`, `resize`, ...) answer
    /// `not_running`; a later stop changes nothing (its cause is decided by the stops
    /// asked before). Ignored unless its leader is running or stopping.
    LeaderGone { gen: u64 },
    /// The driver closed `gen`'s output streams as asked by
    /// [`Action::CloseOutput`](super::Action::CloseOutput), leaving `unread` bytes unread.
    OutputClosed {
        gen: u64,
        /// Bytes still buffered in the streams when they were closed.
        unread: u64,
    },
    /// No process is left in `gen`'s process group besides the zombie leader.
    GroupEmpty { gen: u64 },
    /// The driver wrote `len` bytes of pending input to `gen`'s stdin.
    InputWritten { gen: u64, len: usize },
    /// The driver can no longer observe `gen`'s leader (e.g. `waitid` says ECHILD: it was
    /// reaped elsewhere, or a recovered pid could not be verified). The generation is
    /// reported `lost` if it was not reported yet, and forgotten without a reap or any
    /// further signal: its pid and group may already belong to a stranger.
    Lost { gen: u64 },
    /// A process a previous daemon started as generation `gen` of `session` was found at
    /// start-up (its descriptor, or a sweep for its `GENWARD_GEN` marker), and its identity
    /// checked; fed between `Core::restore` and `Core::resume`, which decides whether it
    /// keeps running. It becomes `gen`, Running,
    /// without a spawn, an event or a signal. Its output and stdin stayed with the old
    /// daemon, unless a keeper held them across the crash (`io`). Its end is reported once, from a later `LeaderExited` (when the driver can
    /// learn the status, e.g. `PIDFD_INFO_EXIT`) or `Lost` (when it cannot, and at once
    /// when the identity check said `mismatch`). It is not the driver's child: the `Reap`
    /// the core asks for after its exit has nothing to reap, and after its leader exits
    /// only a cgroup is signalled (a session's group id is no longer pinned for us).
    ///
    /// Ignored for a session that was not restored, a number at or above
    /// [`Core::next_generation`](super::Core::next_generation) (it could be allocated
    /// again), a generation tracked or already ended, or a session already tracking as many
    /// generations as one may (never for the `--max-running` limit: what runs is taken back);
    /// [`Core::awaits_exit`](super::Core::awaits_exit) says whether it was taken. The
    /// whole start-up is on [`Core::restore`](super::Core::restore).
    Adopt {
        gen: u64,
        session: Arc<str>,
        /// The leader's pid (its process group and session id too).
        pid: u32,
        /// What holds its process tree, as described.
        containment: Containment,
        /// Whether its identity check said `match`. An unverified one (`unverifiable`: it
        /// could not be told whether the pid is still the recorded process) is listed,
        /// kept and never signalled: a stop is noted and walks its sequence only once
        /// `Verified` comes; commands that address its process answer `not_running`; its
        /// end is `Lost` (a later check said `mismatch`). Until then every other input
        /// about it is ignored: nothing about that process can be known.
        verified: bool,
        /// What of its I/O came back with it (a keeper held its descriptors while no
        /// daemon ran); `None`: it was lost with the old daemon. Ignored unless `verified`.
        io: Option<AdoptedIo>,
        /// When it started, in Unix milliseconds, as its descriptor recorded: before this
        /// daemon's clock began, so listed as is, never read as a [`Time`].
        started_unix_ms: u64,
    },
    /// Generation `gen` of `session`, whose end was reported before a crash (its record
    /// holds it), left processes in the cgroup the previous daemon made for it (the
    /// driver holds that cgroup again): fed between `Core::restore` and `Core::resume`,
    /// it is tracked again, reported already, its whole tree sent SIGKILL (through its
    /// cgroup, at `Core::resume`) and awaited: released once the driver says it emptied
    /// ([`Input::GroupEmpty`]), `unkillable` after `kill_grace` (at once if the record
    /// says it was), as it would have been without the crash.
    ///
    /// Ignored (see [`Core::would_adopt_tree`](super::Core::would_adopt_tree)) for a
    /// session not restored, a generation whose end is not recorded or that is tracked,
    /// a number the core may allocate, a spec that leaves what a generation started
    /// (`on_exit: leave`), or a session tracking as many generations as one may.
    AdoptTree {
        gen: u64,
        session: Arc<str>,
        /// Its leader's pid, as described (gone now).
        pid: u32,
    },
    /// A later identity check of `gen`, adopted unverified, said `match`: the driver holds
    /// the process now, and it is an adopted generation like any other (a stop asked
    /// while it was unverified starts now). Ignored for any other generation.
    Verified { gen: u64 },
    /// Writing to `gen`'s stdin failed (EPIPE): the process stopped reading. Pending input
    /// is dropped and further writes fail with `input_closed`.
    InputError { gen: u64 },
    /// What the driver saw about `gen`'s readiness: its signal, or a probe's result.
    /// Ignored unless `gen` still waits to be ready (and, for a probe, unless it answers
    /// the probe in flight).
    Readiness {
        gen: u64,
        signal: super::readiness::ReadySignal,
    },
    /// Liveness probe number `probe` of `gen` finished: `ok` when the connection was
    /// accepted or the command exited 0. Ignored unless it answers the probe in flight.
    Liveness { gen: u64, probe: u64, ok: bool },
}

/// A client command. Commands addressing a session's process take `if_gen`: when given
/// and not the current generation, they fail with `stale_generation` and change nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Start a new generation of `session` (creating it), per `on_busy`.
    Spawn {
        session: String,
        /// Precondition on the current generation, as for the commands that address a
        /// process: with `Some(g)`, refused (`stale_generation`, nothing changed) unless the
        /// session exists and its current generation is `g`; whatever `on_busy` says.
        if_gen: Option<u64>,
        /// What to run; becomes the session's spec. Boxed: it dwarfs every other command.
        spec: Box<Spec>,
        /// What to do when the session is busy.
        on_busy: OnBusy,
    },
    /// Send bytes to the current generation's stdin (or PTY).
    Write {
        session: String,
        /// Precondition on the current generation.
        if_gen: Option<u64>,
        bytes: Vec<u8>,
    },
    /// Close the current generation's stdin (EOF for the child).
    CloseInput {
        session: String,
        /// Precondition on the current generation.
        if_gen: Option<u64>,
    },
    /// Resize the current generation's PTY.
    Resize {
        session: String,
        /// Precondition on the current generation.
        if_gen: Option<u64>,
        /// Rows, non-zero.
        rows: u16,
        /// Columns, non-zero.
        cols: u16,
    },
    /// Send a signal to the current generation's leader.
    Signal {
        session: String,
        /// Precondition on the current generation.
        if_gen: Option<u64>,
        /// Signal number, 1..=64.
        signal: i32,
        /// Who receives it.
        scope: Scope,
    },
    /// Stop the session: cancel any pending restart and walk the stop sequence.
    Stop {
        session: String,
        /// Precondition on the current generation.
        if_gen: Option<u64>,
        /// Overrides the spec's `grace` for this stop.
        grace: Option<Duration>,
    },
    /// Replace the current generation with a new one of the same spec, clearing `failed`.
    Restart {
        session: String,
        /// Precondition on the current generation.
        if_gen: Option<u64>,
    },
    /// Stop every generation of the session and forget it once they are gone.
    Remove { session: String },
    /// The daemon's shutdown. The first one stops every live generation of every session
    /// (superseded ones included), cancels pending spawns and restarts, and refuses new
    /// spawns and restarts from then on; a second one kills at once (SIGKILL now, for the
    /// leaders and for groups being drained). [`Core::is_shut_down`](super::Core::is_shut_down)
    /// says when nothing is left.
    Shutdown,
    /// Snapshot every session.
    List,
    /// Snapshot one session.
    Get { session: String },
}

/// The I/O of an adopted generation that came back with it: which of its streams are
/// still open, and where each one's offsets go on, so that a subscriber sees them
/// contiguous across the crash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdoptedIo {
    /// For each output stream (by [`Stream::index`]) still open: the offset its next byte
    /// gets (where the retained output of that stream ended). `None`: at end of file, or
    /// not handed over (it then counts as at end of file).
    pub outputs: [Option<u64>; 3],
    /// Whether its input (stdin pipe, or PTY master) is open: `write`, `close_input` and,
    /// for a PTY, `resize` work again.
    pub input: bool,
}

/// How a leader ended, as `waitid` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit(code)`.
    Code(i32),
    /// Killed by a signal.
    Signal(i32),
}

impl ExitStatus {
    /// Shell convention: the code, or 128 + signal.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128i32.saturating_add(s),
        }
    }

    /// The signal, if killed by one.
    pub fn signal(self) -> Option<i32> {
        match self {
            ExitStatus::Code(_) => None,
            ExitStatus::Signal(s) => Some(s),
        }
    }
}

/// A generation's process once it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// The leader's pid (also its process group and session id).
    pub pid: u32,
    /// What holds its whole process tree.
    pub containment: Containment,
}

impl Started {
    /// A leader whose tree is its session.
    pub fn in_session(pid: u32) -> Started {
        Started {
            pid,
            containment: Containment::Session,
        }
    }
}

/// What holds a generation's process tree, so that a stop reaches all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    /// Its own cgroup: every descendant, however it detached (`setsid`, double fork), is
    /// in it until it exits; emptiness is announced by the kernel.
    Cgroup,
    /// Its session (the leader calls `setsid`): every process whose session id is the
    /// leader's; a process that calls `setsid` again leaves it.
    Session,
}

impl Containment {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Containment::Cgroup => "cgroup",
            Containment::Session => "session",
        }
    }
}

/// Why a generation never ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnError {
    /// The class of failure.
    pub kind: SpawnErrorKind,
    /// The OS error number, 0 when there is none.
    pub errno: i32,
    /// What failed, for people: the step and the path (`chdir to working directory
    /// "/srv/x": no such file or directory`), or why a start was cancelled.
    pub message: Option<Arc<str>>,
    /// The daemon or the system was short of what every start needs (descriptors,
    /// processes, memory), through no fault of this session's spec: its restart policy
    /// tries again after its longest delay without counting the failure, as for a start
    /// refused at the daemon's `--max-running`. Not on the wire (`errno` says which).
    pub shortage: bool,
}

impl SpawnError {
    /// A failure of `kind` with `errno` and no more to say.
    pub fn new(kind: SpawnErrorKind, errno: i32) -> SpawnError {
        SpawnError {
            kind,
            errno,
            message: None,
            shortage: false,
        }
    }

    /// The failure as events and records keep it: the [`shortage`](SpawnError::shortage)
    /// mark is for the restart policy's decision only, never stored or sent.
    pub fn recorded(&self) -> SpawnError {
        SpawnError {
            shortage: false,
            ..self.clone()
        }
    }

    /// The same failure, marked as a [`shortage`](SpawnError::shortage).
    pub fn as_shortage(mut self) -> SpawnError {
        self.shortage = true;
        self
    }

    /// The same failure, explained.
    pub fn with_message(mut self, message: impl Into<Arc<str>>) -> SpawnError {
        self.message = Some(message.into());
        self
    }
}

/// Classes of spawn failure clients act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnErrorKind {
    /// The program does not exist (exec ENOENT; shell code 127).
    NotFound,
    /// The program may not be executed (EACCES/EPERM; shell code 126).
    PermissionDenied,
    /// Anything else the driver saw.
    Other,
    /// The generation was stopped, replaced or removed before it was spawned.
    Cancelled,
}

impl SpawnErrorKind {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            SpawnErrorKind::NotFound => "not_found",
            SpawnErrorKind::PermissionDenied => "permission_denied",
            SpawnErrorKind::Other => "other",
            SpawnErrorKind::Cancelled => "cancelled",
        }
    }
}
