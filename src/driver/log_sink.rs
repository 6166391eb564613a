//! Where a session's output goes besides its subscribers: its log file (the spec's
//! `log`) and, with `daemon --output-to-stdout`, the daemon's standard output. Both are
//! written by the log writer process (`writer_link.rs`), never in the loop.
//!
//! The output is what the daemon reads, as it reads it: the same bytes subscribers get,
//! in the same order, the superseded generations' included (it is the session's log).
//! While no session has a log and standard output is not asked for, the loop's only cost
//! is [`LogSink::is_active`].

mod stdout_lines;
mod writer_link;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use mio::Registry;

use crate::core::{LogFile, Stream};
use stdout_lines::StdoutLines;
use writer_link::{ExitWait, WriterLink, EXIT_WAIT};

use super::signals::Signals;

/// The log writer as `hello` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogWriterStats {
    /// Its pid while one runs (none before the first log, or while it is started again).
    pub pid: Option<u32>,
    /// How often it was started again after a death.
    pub restarts: u64,
    /// Bytes of output dropped because it was behind (or died mid-record), in all.
    pub dropped_bytes: u64,
}

/// The sessions' log files and standard output lines, and the writer they go through.
#[derive(Debug)]
pub struct LogSink {
    /// Each session's log file, from its latest spawned spec.
    files: HashMap<Arc<str>, LogFile>,
    stdout: Option<StdoutLines>,
    writer: WriterLink,
    /// A reused buffer for standard output lines.
    lines: Vec<u8>,
}

impl LogSink {
    /// A sink that also writes to standard output if `stdout` (coloured if `colour`).
    pub fn new(stdout: bool, colour: bool) -> LogSink {
        LogSink {
            files: HashMap::new(),
            stdout: stdout.then(|| StdoutLines::new(colour)),
            writer: WriterLink::new(stdout),
            lines: Vec::new(),
        }
    }

    /// Whether any output goes anywhere: checked before anything else on the output path.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.stdout.is_some() || !self.files.is_empty()
    }

    /// Takes `session`'s log file from its spec (`None`: it has none any more).
    pub fn configure(&mut self, session: &Arc<str>, log: Option<&LogFile>) {
        match log {
            Some(log) => {
                self.files.insert(session.clone(), log.clone());
            }
            None => {
                self.files.remove(session);
            }
        }
        if let Some(lines) = &mut self.stdout {
            lines.widen(session);
        }
    }

    /// Sends output `data` of `stream` of generation `gen` of `session` where it goes.
    pub fn output(
        &mut self,
        registry: &Registry,
        session: &Arc<str>,
        gen: u64,
        stream: Stream,
        data: &[u8],
    ) {
        if let Some(log) = self.files.get(session) {
            self.writer.send(registry, Some(log), data);
        }
        if let Some(lines) = &mut self.stdout {
            lines.feed(session, gen, stream, data, &mut self.lines);
            self.flush_lines(registry);
        }
    }

    /// Generation `gen` ended: its unfinished lines are written.
    pub fn ended(&mut self, registry: &Registry, gen: u64) {
        if let Some(lines) = &mut self.stdout {
            lines.end(gen, &mut self.lines);
            self.flush_lines(registry);
        }
    }

    /// `session` was removed.
    pub fn forget(&mut self, session: &str) {
        self.files.remove(session);
    }

    fn flush_lines(&mut self, registry: &Registry) {
        if !self.lines.is_empty() {
            self.writer.send(registry, None, &self.lines);
            self.lines.clear();
        }
    }

    /// The writer's pipe is ready (room, or the writer gone).
    pub fn ready(&mut self, registry: &Registry) {
        self.writer.ready(registry);
    }

    /// A child exited: reaps writers that ended, notices the running one's death.
    pub fn reap(&mut self, registry: &Registry) {
        self.writer.reap(registry);
    }

    /// The daemon is replacing its program: what is queued is written as far as the pipe
    /// takes it now (the writer then writes what it received and exits, seeing the pipe
    /// closed); what is left is logged.
    pub fn finish(&mut self, registry: &Registry) {
        self.writer.flush(registry);
        let left = self.writer.queued();
        if left > 0 {
            log::warn!("exiting with {left} bytes of log output not passed to the log writer");
        }
    }

    /// The daemon is exiting: what is queued is passed on, the pipe closed, and the
    /// writer waited for until it has written everything and exited — at most
    /// [`EXIT_WAIT`], less if a further terminating signal comes. As a PID namespace's
    /// init the daemon's exit would kill it with what it had not written yet (and a
    /// service manager stops what a service leaves behind). What may be lost is logged.
    pub fn finish_at_exit(&mut self, registry: &Registry, signals: &Signals) {
        let deadline = Instant::now() + EXIT_WAIT;
        match self.writer.close_and_wait(registry, signals, deadline) {
            ExitWait::NoWriter | ExitWait::Finished => {}
            ExitWait::Unfinished { in_pipe, signalled } => log::warn!(
                "exiting {}, the log writer still writing: what it has not written ({in_pipe} bytes unread in its pipe, and what it holds) is lost if it is killed",
                if signalled {
                    "on a further signal".to_string()
                } else {
                    format!("after waiting {} s", EXIT_WAIT.as_secs())
                }
            ),
        }
        let left = self.writer.queued();
        if left > 0 {
            log::warn!("exiting with {left} bytes of log output not passed to the log writer");
        }
    }

    /// What `hello` reports about the log writer.
    pub fn stats(&self) -> LogWriterStats {
        let (pid, restarts, dropped_bytes) = self.writer.stats();
        LogWriterStats {
            pid,
            restarts,
            dropped_bytes,
        }
    }

    /// When the writer is to be started again after a death.
    pub fn deadline(&self) -> Option<Instant> {
        self.writer.deadline()
    }

    /// Starts the writer again once due.
    pub fn tick(&mut self, registry: &Registry, now: Instant) {
        self.writer.tick(registry, now);
    }
}
