//! What to run: a session's spec, pure data, validated before it enters the table.

use std::time::Duration;

use super::config::Config;
use super::depends::{self, Dependencies};
use super::error::Error;
use super::log_spec::LogFile;
use super::readiness::ReadyCheck;
use super::run_as::RunAs;
use super::signal;

/// Everything needed to start one generation of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Program and arguments; `argv[0]` is looked up in `PATH` by the driver. Bytes, since
    /// Unix arguments need not be UTF-8.
    pub argv: Vec<Vec<u8>>,
    /// Working directory; `None` keeps the daemon's.
    pub cwd: Option<Vec<u8>>,
    /// Environment of the child.
    pub env: Env,
    /// How the child's stdin/stdout/stderr are connected.
    pub io: IoMode,
    /// First signal of a stop (default SIGTERM).
    pub stop_signal: i32,
    /// How long a stop waits after `stop_signal` before SIGKILL.
    pub grace: Duration,
    /// How long after SIGKILL before the generation is reported unkillable; also how long
    /// an orphaned group gets between TERM and KILL.
    pub kill_grace: Duration,
    /// How long after the leader's exit output may still drain (grandchildren can hold a
    /// pipe open forever) before the rest is discarded and the exit reported.
    pub drain: Duration,
    /// What happens to the rest of the process group when the leader exits.
    pub on_exit: OnExit,
    /// Whether and how the session is restarted when its process ends on its own.
    pub restart: RestartPolicy,
    /// Output bytes the driver keeps per session for late readers.
    pub buffer_bytes: usize,
    /// Limits on the generation's cgroup (cgroup containment only).
    pub limits: ResourceLimits,
    /// What a restarted daemon does with a process of this spec still running.
    pub on_recover: OnRecover,
    /// The user, groups, umask, environment file and per-process limits it runs with.
    pub run_as: RunAs,
    /// A file the output is also written to, rotated by size; `None`: none.
    pub log: Option<LogFile>,
    /// How a generation says it is ready; `None`: ready as soon as it is spawned.
    pub ready: Option<ReadyCheck>,
    /// Sessions that must have reached a state before a generation of this one starts.
    pub depends_on: Dependencies,
    /// A probe that keeps checking a running generation once its readiness is decided;
    /// failing it `failures` times in a row stops the generation as unhealthy.
    pub live: Option<super::liveness::LiveCheck>,
}

/// Limits a generation's whole tree shares, enforced by its cgroup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceLimits {
    /// `memory.max`, bytes.
    pub memory_max: Option<u64>,
    /// `pids.max`: processes and threads at once.
    pub pids_max: Option<u64>,
    /// `cpu.max`: at most this much CPU time (µs) in every period (µs).
    pub cpu_max: Option<CpuQuota>,
}

/// CPU time per period, both in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuQuota {
    /// Time allowed per period, at least 1 ms.
    pub quota_us: u64,
    /// The period, 1 ms to 1 s.
    pub period_us: u64,
}

impl ResourceLimits {
    /// Whether no limit is asked for.
    pub fn is_empty(&self) -> bool {
        *self == ResourceLimits::default()
    }

    fn validate(&self) -> Result<(), Error> {
        if self.memory_max == Some(0) || self.pids_max == Some(0) {
            return Err(Error::bad(
                "limits: a memory_max or pids_max of 0 would never run",
            ));
        }
        if let Some(c) = self.cpu_max {
            if !(1000..=1_000_000).contains(&c.period_us) || c.quota_us < 1000 {
                return Err(Error::bad(format!(
                    "limits.cpu_max: period {} µs must be 1000..=1000000 and quota {} µs at least 1000",
                    c.period_us, c.quota_us
                )));
            }
        }
        Ok(())
    }
}

impl Spec {
    /// A spec for `argv` with every other field at its default.
    pub fn new(argv: Vec<Vec<u8>>) -> Spec {
        Spec {
            argv,
            cwd: None,
            env: Env::default(),
            io: IoMode::default(),
            stop_signal: signal::SIGTERM,
            grace: Duration::from_secs(5),
            kill_grace: Duration::from_secs(5),
            drain: Duration::from_secs(2),
            on_exit: OnExit::KillGroup,
            restart: RestartPolicy::default(),
            buffer_bytes: 1 << 20,
            limits: ResourceLimits::default(),
            on_recover: OnRecover::Stop,
            run_as: RunAs::default(),
            log: None,
            ready: None,
            depends_on: Dependencies::new(),
            live: None,
        }
    }

    /// The output streams a generation of this spec produces, each of which must reach EOF.
    pub fn streams(&self) -> &'static [Stream] {
        match self.io {
            IoMode::Pipes {
                stderr: Stderr::Pipe,
            } => &[Stream::Stdout, Stream::Stderr],
            IoMode::Pipes {
                stderr: Stderr::Merge | Stderr::Null,
            } => &[Stream::Stdout],
            IoMode::Pty { .. } => &[Stream::Pty],
        }
    }

    /// Checks every field; a bad spec is refused whole, naming the field.
    pub fn validate(&self, config: &Config) -> Result<(), Error> {
        let first = self
            .argv
            .first()
            .ok_or_else(|| Error::bad("argv is empty"))?;
        if first.is_empty() {
            return Err(Error::bad("argv[0] is empty"));
        }
        if let Some(i) = self.argv.iter().position(|a| a.contains(&0)) {
            return Err(Error::bad(format!("argv[{i}] contains a NUL byte")));
        }
        self.env.validate()?;
        self.limits.validate()?;
        self.run_as.validate()?;
        if let Some(log) = &self.log {
            log.validate()?;
        }
        if self
            .cwd
            .as_ref()
            .is_some_and(|c| c.is_empty() || c.contains(&0))
        {
            return Err(Error::bad("cwd is empty or contains a NUL byte"));
        }
        let items = self.argv.len() + self.env.set.len() + self.env.unset.len();
        if items > config.max_spec_items {
            return Err(Error::bad(format!(
                "{items} argv/env entries, limit {}",
                config.max_spec_items
            )));
        }
        if self.byte_size() > config.max_spec_bytes {
            return Err(Error::bad(format!(
                "spec larger than {} bytes",
                config.max_spec_bytes
            )));
        }
        if let IoMode::Pty { rows, cols } = self.io {
            if rows == 0 || cols == 0 {
                return Err(Error::bad(format!(
                    "pty size {rows}x{cols} has a zero side"
                )));
            }
        }
        if !signal::is_valid(self.stop_signal) {
            return Err(Error::bad(format!(
                "stop_signal {} is not a signal",
                self.stop_signal
            )));
        }
        if self.buffer_bytes > config.max_buffer_bytes {
            return Err(Error::bad(format!(
                "buffer above {} bytes",
                config.max_buffer_bytes
            )));
        }
        if let Some(r) = &self.ready {
            r.validate()?;
        }
        depends::validate(None, &self.depends_on)?;
        if let Some(l) = &self.live {
            l.validate()?;
        }
        self.restart.validate()
    }

    fn byte_size(&self) -> usize {
        let argv: usize = self.argv.iter().map(Vec::len).sum();
        let set: usize = self.env.set.iter().map(|(k, v)| k.len() + v.len()).sum();
        let unset: usize = self.env.unset.iter().map(Vec::len).sum();
        let ready = match self.ready.as_ref().map(|r| &r.how) {
            Some(super::readiness::ReadyHow::Command(a)) => a.iter().map(Vec::len).sum(),
            Some(super::readiness::ReadyHow::Output(t) | super::readiness::ReadyHow::Unix(t)) => {
                t.len()
            }
            Some(super::readiness::ReadyHow::Tcp(t)) => t.len(),
            _ => 0,
        };
        let deps: usize = self.depends_on.keys().map(String::len).sum();
        argv + set
            + unset
            + self.cwd.as_ref().map_or(0, Vec::len)
            + self.run_as.byte_size()
            + self.log.as_ref().map_or(0, |l| l.path.len())
            + ready
            + deps
    }
}

/// The child's environment: start from the daemon's or from nothing, then apply changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env {
    /// Start from the daemon's environment (`true`) or an empty one.
    pub inherit: bool,
    /// Variables to set, applied after `unset`.
    pub set: Vec<(Vec<u8>, Vec<u8>)>,
    /// Variables to remove from the inherited environment.
    pub unset: Vec<Vec<u8>>,
}

impl Default for Env {
    fn default() -> Env {
        Env {
            inherit: true,
            set: Vec::new(),
            unset: Vec::new(),
        }
    }
}

impl Env {
    fn validate(&self) -> Result<(), Error> {
        let bad_key = |k: &[u8]| k.is_empty() || k.contains(&b'=') || k.contains(&0);
        for (k, v) in &self.set {
            if bad_key(k) || v.contains(&0) {
                return Err(Error::bad(format!(
                    "env {:?} is not a valid variable",
                    String::from_utf8_lossy(k)
                )));
            }
        }
        if let Some(k) = self.unset.iter().find(|k| bad_key(k)) {
            return Err(Error::bad(format!(
                "unset {:?} is not a valid name",
                String::from_utf8_lossy(k)
            )));
        }
        Ok(())
    }
}

/// How the child's standard streams are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// stdin and stdout are pipes; stderr as given.
    Pipes {
        /// Where stderr goes.
        stderr: Stderr,
    },
    /// One pseudo-terminal for all three, with an initial size.
    Pty {
        /// Terminal rows.
        rows: u16,
        /// Terminal columns.
        cols: u16,
    },
}

impl Default for IoMode {
    fn default() -> IoMode {
        IoMode::Pipes {
            stderr: Stderr::Pipe,
        }
    }
}

/// Where a piped child's stderr goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stderr {
    /// Its own pipe and stream.
    Pipe,
    /// Into the stdout pipe.
    Merge,
    /// `/dev/null`.
    Null,
}

/// One output stream of a generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// Piped stdout (with stderr when merged).
    Stdout,
    /// Piped stderr.
    Stderr,
    /// The PTY master.
    Pty,
}

impl Stream {
    /// A dense index for per-stream tables.
    pub(crate) const fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
            Stream::Pty => 2,
        }
    }

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Pty => "pty",
        }
    }
}

/// What happens to the leader's process group when the leader exits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnExit {
    /// TERM the group while the zombie leader pins its id, KILL after `kill_grace`.
    #[default]
    KillGroup,
    /// Leave the rest of the group alone and reap at once.
    Leave,
}

/// What a restarted daemon does with this session's process if it is still running
/// (verified, and adopted: its input and output are not recovered). A process resumed with
/// its input and output (a keeper held them across the crash) runs on either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnRecover {
    /// Stop it (and what it started), then follow the restart policy: the session gets a
    /// process whose input and output the daemon holds again.
    #[default]
    Stop,
    /// Leave it running; `stop` and `signal` still work on it.
    Keep,
}

/// What `spawn` does when the session already has a live current generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnBusy {
    /// Stop the old one (cause `superseded`); start the new one once the old one is gone.
    #[default]
    Replace,
    /// Start the new one at once; stop the old one concurrently.
    Overlap,
    /// Fail with `busy`.
    Reject,
}

/// When a session whose process ended on its own is started again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Restart {
    /// Never (the default: a supervisor should not guess).
    #[default]
    Never,
    /// When it ended with a non-zero code or a signal, or failed to spawn.
    OnFailure,
    /// Whenever it ended on its own.
    Always,
}

/// Restart policy with exponential backoff, as s6 and systemd users expect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// When to restart.
    pub mode: Restart,
    /// Delay before the first restart.
    pub initial: Duration,
    /// The delay doubles per consecutive restart up to this.
    pub max: Duration,
    /// A process that stayed up this long resets the count and the delay.
    pub reset_after: Duration,
    /// Consecutive restarts allowed before the session is `failed`; `None` is unlimited.
    pub max_restarts: Option<u32>,
}

impl Default for RestartPolicy {
    fn default() -> RestartPolicy {
        RestartPolicy {
            mode: Restart::Never,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            reset_after: Duration::from_secs(30),
            max_restarts: Some(5),
        }
    }
}

impl RestartPolicy {
    /// How long a restart waits after it was refused for want of room (the daemon's
    /// `--max-running`, a session's generations, a shortage of descriptors): the longest
    /// delay of the policy, at least a millisecond so that it is never spun on.
    pub fn retry_after_refusal(&self) -> Duration {
        self.max.max(Duration::from_millis(1))
    }

    fn validate(&self) -> Result<(), Error> {
        if self.initial > self.max {
            // `max` is often not given: its default is what `initial` was compared with.
            let default = RestartPolicy::default().max.as_secs();
            return Err(Error::bad(format!(
                "restart.initial: above restart.max (which is {default}s unless given)"
            )));
        }
        Ok(())
    }
}
