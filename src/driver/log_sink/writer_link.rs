//! The daemon's side of its log writer (see `crate::log_writer`): the process, the pipe
//! that feeds it, and what waits for room in the pipe.
//!
//! The pipe's end is non-blocking and nothing here waits: a record is written at once if
//! the pipe has room, else queued behind the others, up to [`BACKLOG_BYTES`] in all.
//! Beyond that its bytes are dropped and counted per log, and the log's later output too
//! until the queue is down to half: then a note `genward: dropped N bytes` is sent into
//! each log that lost some, where the gap is, and its output flows again. A writer that
//! dies (seen as a closed pipe or its exit) is started again after a backoff that
//! doubles up to [`MAX_BACKOFF`]; what it had received but not written is lost with it,
//! what was still queued here goes to its successor.
//!
//! At the daemon's exit, [`WriterLink::close_and_wait`] passes on what is queued, closes
//! the pipe and waits for the writer to have written it all and exited, for at most
//! [`EXIT_WAIT`]: as a PID namespace's init the daemon's exit kills the writer, and a
//! service manager stops what is left of a service once its main process exits.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use rustix::event::PollFlags;

use crate::core::LogFile;
use crate::driver::signals::{ControlSignal, Signals};
use crate::driver::token::Source;
use crate::log_writer::wire::{Kind, Record, MAX_DATA};
use crate::log_writer::SUBCOMMAND;

/// Most bytes queued for the writer when its pipe is full.
pub const BACKLOG_BYTES: usize = 1 << 20;

/// The pipe's size asked for (best effort: the system may cap it).
const PIPE_BYTES: usize = 1 << 20;

/// The first wait before a dead writer is started again.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The longest wait before a dead writer is started again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The longest the daemon's exit waits for the writer to write what it received (its
/// standard output may be a pipe read slowly, or never).
pub const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How long the writer may take to finish at exit before the wait is logged.
const EXIT_QUIET: Duration = Duration::from_millis(100);

/// How the wait for the writer at the daemon's exit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitWait {
    /// No writer was running.
    NoWriter,
    /// It wrote what it received and exited.
    Finished,
    /// It was still writing at the deadline, or a further SIGTERM, SIGINT or SIGQUIT cut
    /// the wait short (`signalled`); `in_pipe` bytes were still unread in its pipe when
    /// the daemon closed it (what it had read and not yet written comes on top).
    Unfinished { in_pipe: u64, signalled: bool },
}

/// A writer that ran this long before dying is started again after [`FIRST_BACKOFF`].
const STEADY: Duration = Duration::from_secs(10);

/// The writer's process and pipe, when one runs.
#[derive(Debug)]
struct Running {
    child: Child,
    pipe: OwnedFd,
    started: Instant,
}

/// Bytes dropped for one destination, and what its note needs.
#[derive(Debug)]
struct Dropped {
    log: Option<LogFile>,
    bytes: u64,
}

/// The log writer as the daemon sees it.
#[derive(Debug)]
pub struct WriterLink {
    running: Option<Running>,
    /// Whether the writer's standard output is the daemon's (else `/dev/null`).
    stdout: bool,
    /// Records waiting for room, the first one possibly partly written.
    backlog: VecDeque<Vec<u8>>,
    /// Bytes of the first record already written.
    head_written: usize,
    backlog_bytes: usize,
    /// Dropped bytes per log path (`None`: standard output) not yet noted in it.
    dropped: HashMap<Option<Vec<u8>>, Dropped>,
    /// When the writer may be started again, after a death.
    restart_at: Option<Instant>,
    backoff: Duration,
    /// Writers that ended and are not reaped yet.
    exited: Vec<Child>,
    /// Writers started again after a death, in all.
    restarts: u64,
    /// Bytes dropped, in all.
    dropped_total: u64,
}

impl WriterLink {
    /// A link to a writer started on first use, its standard output the daemon's if
    /// `stdout`.
    pub fn new(stdout: bool) -> WriterLink {
        WriterLink {
            running: None,
            stdout,
            backlog: VecDeque::new(),
            head_written: 0,
            backlog_bytes: 0,
            dropped: HashMap::new(),
            restart_at: None,
            backoff: FIRST_BACKOFF,
            exited: Vec::new(),
            restarts: 0,
            dropped_total: 0,
        }
    }

    /// Sends `data` to the log file `log` (or standard output), in records of at most
    /// [`MAX_DATA`] bytes.
    pub fn send(&mut self, registry: &Registry, log: Option<&LogFile>, data: &[u8]) {
        for piece in data.chunks(MAX_DATA) {
            let record = match log {
                Some(log) => Record::file(Kind::Append, log, piece),
                None => Record::stdout(piece),
            };
            self.queue(&record, log);
        }
        self.flush(registry);
    }

    /// Queues a record, or drops and counts its bytes when the backlog is full. A log
    /// that lost bytes loses the rest too until its note is queued, so that the note
    /// stands where the gap is.
    fn queue(&mut self, record: &Record<'_>, log: Option<&LogFile>) {
        let len = record.wire_len();
        let full = self.backlog_bytes + len > BACKLOG_BYTES;
        if full || (!self.dropped.is_empty() && self.dropping(log)) {
            let key = log.map(|l| l.path.clone());
            let entry = self.dropped.entry(key).or_insert_with(|| {
                log::warn!(
                    "log writer behind: output for {} is being dropped (counted)",
                    log.map_or("standard output".into(), |l| String::from_utf8_lossy(
                        &l.path
                    )
                    .into_owned())
                );
                Dropped {
                    log: log.cloned(),
                    bytes: 0,
                }
            });
            entry.bytes += record.data.len() as u64;
            self.dropped_total += record.data.len() as u64;
            return;
        }
        let mut bytes = Vec::with_capacity(len);
        record.encode(&mut bytes);
        self.backlog_bytes += len;
        self.backlog.push_back(bytes);
    }

    /// Whether output for `log` (`None`: standard output) is being dropped.
    fn dropping(&self, log: Option<&LogFile>) -> bool {
        let key = log.map(|l| l.path.clone());
        self.dropped.contains_key(&key)
    }

    /// Writes what is queued as far as the pipe takes it, starting the writer if none
    /// runs and none is waiting to be started again; once the queue is down to half, the
    /// logs that lost bytes get their notes and are written again.
    pub fn flush(&mut self, registry: &Registry) {
        if self.running.is_none() && self.restart_at.is_none() && !self.backlog.is_empty() {
            self.start(registry);
        }
        loop {
            if !self.dropped.is_empty() && self.backlog_bytes <= BACKLOG_BYTES / 2 {
                self.note_drops();
            }
            let Some(run) = &self.running else {
                return;
            };
            let Some(head) = self.backlog.front() else {
                return;
            };
            match rustix::io::write(&run.pipe, &head[self.head_written..]) {
                Ok(n) => {
                    self.head_written += n;
                    if self.head_written == head.len() {
                        self.backlog_bytes -= head.len();
                        self.backlog.pop_front();
                        self.head_written = 0;
                    }
                }
                Err(rustix::io::Errno::AGAIN) => return,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    self.died(registry, &format!("its pipe: {e}"));
                    return;
                }
            }
        }
    }

    /// Queues a note into each log that lost bytes (they fit: the queue is half empty).
    fn note_drops(&mut self) {
        log::warn!(
            "log writer catching up; {} bytes of output dropped since the daemon started",
            self.dropped_total
        );
        for (_, d) in std::mem::take(&mut self.dropped) {
            let line = format!("genward: dropped {} bytes\n", d.bytes);
            let record = match &d.log {
                Some(log) => Record::file(Kind::Note, log, line.as_bytes()),
                None => Record::stdout(line.as_bytes()),
            };
            self.queue(&record, d.log.as_ref());
        }
    }

    /// The pipe's readiness: room again, or the writer gone.
    pub fn ready(&mut self, registry: &Registry) {
        self.flush(registry);
        if self.running.is_some() {
            self.check_exit(registry);
        }
    }

    /// Reaps writers that ended; notices the running one's death.
    pub fn reap(&mut self, registry: &Registry) {
        self.exited.retain_mut(still_running);
        self.check_exit(registry);
    }

    fn check_exit(&mut self, registry: &Registry) {
        let Some(run) = &mut self.running else {
            return;
        };
        match run.child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => {
                crate::sys::reaped::note(run.child.id() as i32);
                self.died(registry, &format!("it exited ({status})"))
            }
            // Not ours to wait for any more: reaped as an orphan would be.
            Err(e) => self.died(registry, &format!("it is gone ({e})")),
        }
    }

    /// What `hello` reports: the writer's pid if one runs, how often it was started
    /// again, and the bytes of output dropped.
    pub fn stats(&self) -> (Option<u32>, u64, u64) {
        let pid = self.running.as_ref().map(|r| r.child.id());
        (pid, self.restarts, self.dropped_total)
    }

    /// The daemon is exiting: passes on what is queued as the pipe takes it, closes the
    /// pipe and waits for the writer to exit (it does once it has written everything),
    /// until `deadline` or a further terminating signal. The writer's exit is seen on the
    /// SIGCHLD pipe: a wait of its own, with no pidfd needed. A writer still running at the
    /// end is left to finish on its own (a PID namespace's init takes it with it).
    pub fn close_and_wait(
        &mut self,
        registry: &Registry,
        signals: &Signals,
        deadline: Instant,
    ) -> ExitWait {
        let mut signalled = false;
        loop {
            self.flush(registry);
            let Some(run) = &self.running else { break };
            if self.backlog.is_empty() {
                break;
            }
            let fds = [
                (run.pipe.as_fd(), PollFlags::OUT),
                (signals.control.fd(), PollFlags::IN),
            ];
            match crate::sys::wait_ready::first_ready(&fds, deadline) {
                Ok(Some(0)) => {}
                Ok(Some(_)) => {
                    if terminated(signals) {
                        signalled = true;
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::warn!("log writer: waiting for room in its pipe: {e}");
                    break;
                }
            }
        }
        let Some(mut run) = self.running.take() else {
            return ExitWait::NoWriter;
        };
        let _ = registry.deregister(&mut SourceFd(&run.pipe.as_raw_fd()));
        // What it has not even read yet, as the pipe closes: the most the wait is for.
        let in_pipe = crate::sys::fd::bytes_readable(&run.pipe).unwrap_or(0);
        let pid = run.child.id();
        drop(run.pipe);
        if signalled {
            return ExitWait::Unfinished { in_pipe, signalled };
        }
        let quiet = (Instant::now() + EXIT_QUIET).min(deadline);
        let mut told = false;
        loop {
            if let Err(e) = signals.sigchld.drain() {
                log::warn!("SIGCHLD pipe: {e}");
            }
            match run.child.try_wait() {
                Ok(Some(_)) => {
                    crate::sys::reaped::note(pid as i32);
                    return ExitWait::Finished;
                }
                Ok(None) => {}
                Err(_) => return ExitWait::Finished,
            }
            let until = if told { deadline } else { quiet };
            let fds = [
                (signals.sigchld.fd(), PollFlags::IN),
                (signals.control.fd(), PollFlags::IN),
            ];
            match crate::sys::wait_ready::first_ready(&fds, until) {
                Ok(Some(0)) => {}
                Ok(Some(_)) => {
                    if terminated(signals) {
                        signalled = true;
                        break;
                    }
                }
                Ok(None) if !told && until < deadline => {
                    told = true;
                    log::info!(
                        "log writer pid {pid} is still writing; waiting up to {} s for it",
                        EXIT_WAIT.as_secs()
                    );
                }
                Ok(None) => break,
                Err(e) => {
                    log::warn!("log writer: waiting for its exit: {e}");
                    break;
                }
            }
        }
        ExitWait::Unfinished { in_pipe, signalled }
    }

    /// Bytes queued for the writer (records, framing included).
    pub fn queued(&self) -> usize {
        self.backlog_bytes - self.head_written
    }

    /// When the writer is to be started again.
    pub fn deadline(&self) -> Option<Instant> {
        self.restart_at
    }

    /// Starts the writer again once its backoff has passed.
    pub fn tick(&mut self, registry: &Registry, now: Instant) {
        if self.restart_at.is_some_and(|at| at <= now) {
            self.restart_at = None;
            self.restarts += 1;
            log::info!("log writer: starting it again (restart {})", self.restarts);
            self.start(registry);
            self.flush(registry);
        }
    }

    fn died(&mut self, registry: &Registry, why: &str) {
        let Some(run) = self.running.take() else {
            return;
        };
        let _ = registry.deregister(&mut SourceFd(&run.pipe.as_raw_fd()));
        drop(run.pipe);
        if run.started.elapsed() >= STEADY {
            self.backoff = FIRST_BACKOFF;
        }
        // A record cut in the middle cannot be finished for a new writer.
        if self.head_written > 0 {
            if let Some(head) = self.backlog.pop_front() {
                self.backlog_bytes -= head.len();
                self.dropped_total += (head.len() - self.head_written) as u64;
            }
            self.head_written = 0;
        }
        log::error!(
            "log writer pid {} failed: {why}; starting another in {} ms (what it had not written is lost)",
            run.child.id(),
            self.backoff.as_millis()
        );
        self.exited.push(run.child);
        self.exited.retain_mut(still_running);
        self.restart_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn start(&mut self, registry: &Registry) {
        match spawn(self.stdout) {
            Ok((child, pipe)) => {
                let raw = pipe.as_raw_fd();
                let token = Source::LogWriter.token().expect("a fixed token");
                if let Err(e) = registry.register(&mut SourceFd(&raw), token, Interest::WRITABLE) {
                    log::error!("log writer: registering its pipe: {e}");
                }
                log::debug!("log writer started, pid {}", child.id());
                self.running = Some(Running {
                    child,
                    pipe,
                    started: Instant::now(),
                });
            }
            Err(e) => {
                log::error!(
                    "log writer could not be started ({e}); trying again in {} ms",
                    self.backoff.as_millis()
                );
                self.restart_at = Some(Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Whether the control signals received include a terminating one (the others mean
/// nothing to a daemon that is exiting).
fn terminated(signals: &Signals) -> bool {
    match signals.control.drain() {
        Ok(received) => received.contains(&ControlSignal::Terminate),
        Err(e) => {
            log::warn!("signal pipe: {e}");
            false
        }
    }
}

/// Starts `genward __log-writer` on a new pipe; returns it and the pipe's (non-blocking)
/// write end.
fn spawn(stdout: bool) -> io::Result<(Child, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // Best effort: a larger pipe absorbs bursts while the writer is busy.
    let _ = rustix::pipe::fcntl_setpipe_size(&write, PIPE_BYTES);
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(SUBCOMMAND)
        .stdin(Stdio::from(read))
        .stdout(if stdout {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::inherit())
        .env_remove(crate::sys::tree::GEN_MARKER)
        .current_dir("/");
    for var in crate::driver::children::starts::DAEMON_ONLY_VARS {
        cmd.env_remove(var);
    }
    // SAFETY: between fork and exec the closure calls only `setsid` and `close_range`,
    // both async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // Out of the daemon's session and process group: a terminal's Ctrl-C to the
            // daemon does not end the writer before it has written what it has.
            libc::setsid();
            // Nothing else the daemon holds (child pipes, the listener) stays open in the
            // writer. Best effort: before Linux 5.11 `CLOSE_RANGE_CLOEXEC` does not exist.
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            );
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    // Ours to reap, not the orphan sweep's (its status tells a crash from a clean end).
    crate::sys::started::started(child.id() as i32);
    rustix::io::ioctl_fionbio(&write, true)?;
    Ok((child, write))
}

/// Whether an ended writer has still to be reaped: `false` once it is (its reap noted for
/// our list of children), or once it is not ours to wait for.
fn still_running(child: &mut Child) -> bool {
    match child.try_wait() {
        Ok(None) => true,
        Ok(Some(_)) => {
            crate::sys::reaped::note(child.id() as i32);
            false
        }
        Err(_) => false,
    }
}
