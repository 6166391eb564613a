//! One spawned generation as the driver holds it: the process handle, our ends of its
//! stdio, and the input the core accepted but the child has not read yet.
//!
//! Nothing here decides anything about the generation's lifecycle; the core does. A
//! `Child` only knows how to move bytes and signals, and registers what it owns.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Instant;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::token::Source;
use super::upgrade::state::ChildImage;
use crate::core::{self, Spec, Stream};
use crate::keeper::wire::{Role, Roles};
use crate::sys::cgroup::GenCgroup;
use crate::sys::fd::{write_nonblocking, WriteOutcome};
use crate::sys::process::{Process, ReaperMode, SignalError};
use crate::sys::spawn::{self, Env, IoMode, SpawnRequest, StderrMode};
use crate::sys::tree::{self, SessionWatch, WatchState};

/// The byte a PTY's line discipline turns into end-of-file (VEOF, Ctrl-D).
const PTY_EOF: u8 = 0x04;

/// What writing queued input achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct InputProgress {
    /// Bytes that left the queue: written, or dropped because there is nowhere to write.
    pub done: usize,
    /// The child stopped reading (EPIPE or another write error): the queue was dropped.
    pub broken: bool,
}

/// One spawned generation.
#[derive(Debug)]
pub struct Child {
    gen: u64,
    process: Process,
    /// Output descriptors still open, by [`Stream::index`]. For a PTY the master is also
    /// where input goes and what a resize addresses.
    outputs: [Option<OwnedFd>; 3],
    stdin: Option<OwnedFd>,
    /// A PTY master whose every slave descriptor closed (EIO): no longer read, but kept
    /// open until the generation is released — closing it would hang up the terminal and
    /// send SIGHUP to a process that merely closed its stdio.
    hung_up_pty: Option<OwnedFd>,
    pidfd_watched: bool,
    input: Vec<u8>,
    close_input_when_written: bool,
    /// Its own cgroup (cgroup containment), watched for emptiness.
    cgroup: Option<GenCgroup>,
    /// Session containment: the members its tree signals reached, watched until the
    /// session is empty. Boxed: only a generation being stopped has one, and every
    /// child's record is as large as its largest field.
    watch: Option<Box<SessionWatch>>,
    /// Descriptors closed since [`Child::take_closed`] was last called.
    closed: Roles,
}

fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

/// Variables a service manager gives the daemon itself (readiness, socket activation,
/// watchdog): a child inheriting them would talk to the daemon's manager as if it were
/// the daemon. Removed from an inherited environment unless the spec sets them.
const DAEMON_ONLY_VARS: &[&str] = &[
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
];

/// The operating system's spawn request for generation `gen` of a core spec.
///
/// Every child carries `GENWARD_GEN=<state dir id>:<gen>` in its environment, inherited by
/// whatever it starts: a process knows its generation, one that left its session can
/// still be told apart, and after a crash one that was started but not yet described is
/// found (and told from another directory's).
pub fn spawn_request(gen: u64, spec: &Spec, reaper: ReaperMode, dir_id: &str) -> SpawnRequest {
    let mut unset: Vec<OsString> = spec.env.unset.iter().map(|k| os(k)).collect();
    if spec.env.inherit {
        let set_by_spec = |v: &str| spec.env.set.iter().any(|(k, _)| k == v.as_bytes());
        unset.extend(
            DAEMON_ONLY_VARS
                .iter()
                .filter(|v| !set_by_spec(v))
                .map(OsString::from),
        );
    }
    let mut set: Vec<(OsString, OsString)> =
        spec.env.set.iter().map(|(k, v)| (os(k), os(v))).collect();
    set.retain(|(k, _)| k != tree::GEN_MARKER);
    set.push((tree::GEN_MARKER.into(), format!("{dir_id}:{gen}").into()));
    SpawnRequest {
        argv: spec.argv.iter().map(|a| os(a)).collect(),
        cwd: spec.cwd.as_ref().map(|c| PathBuf::from(os(c))),
        env: Env {
            inherit: spec.env.inherit,
            set,
            unset,
        },
        io: match spec.io {
            core::IoMode::Pipes { stderr } => IoMode::Pipes {
                stderr: match stderr {
                    core::Stderr::Pipe => StderrMode::Pipe,
                    core::Stderr::Merge => StderrMode::Merge,
                    core::Stderr::Null => StderrMode::Null,
                },
            },
            core::IoMode::Pty { rows, cols } => IoMode::Pty {
                rows,
                cols,
                term: None,
            },
        },
        reaper,
    }
}

/// Kernel buffer asked for each output pipe (see [`crate::sys::fd::grow_pipe`]).
const OUTPUT_PIPE_BYTES: usize = 1 << 20;

fn register(registry: &Registry, fd: BorrowedFd<'_>, source: Source, interest: Interest) -> bool {
    let Some(token) = source.token() else {
        return false;
    };
    match registry.register(&mut SourceFd(&fd.as_raw_fd()), token, interest) {
        Ok(()) => true,
        Err(e) => {
            log::error!("register {source:?}: {e}");
            false
        }
    }
}

/// The keeper's role of an output stream's descriptor.
fn role_of(stream: Stream) -> Role {
    match stream {
        Stream::Stdout => Role::Stdout,
        Stream::Stderr => Role::Stderr,
        Stream::Pty => Role::Pty,
    }
}

/// Stops watching a descriptor before it is closed ("deregister before drop").
fn deregister(registry: &Registry, fd: &OwnedFd) {
    let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
}

impl Child {
    /// Takes over a freshly spawned process and registers its descriptors.
    pub fn new(
        gen: u64,
        spawned: spawn::Child,
        cgroup: Option<GenCgroup>,
        registry: &Registry,
    ) -> Child {
        let mut child = Child {
            gen,
            process: spawned.process,
            outputs: [spawned.stdout, spawned.stderr, spawned.pty],
            stdin: spawned.stdin,
            hung_up_pty: None,
            pidfd_watched: false,
            input: Vec::new(),
            close_input_when_written: false,
            cgroup,
            watch: None,
            closed: Roles::NONE,
        };
        child.register_all(registry, true);
        child
    }

    /// Registers every descriptor it holds: its cgroup's events, its open output streams
    /// (pipes grown if `grow`: a pipe taken back across an upgrade already was), its
    /// stdin, its pidfd.
    fn register_all(&mut self, registry: &Registry, grow: bool) {
        if let Some(cg) = &self.cgroup {
            // The kernel flags a change of `populated` as priority data on this file.
            let source = Source::CgroupEvents { gen: self.gen };
            register(registry, cg.events_fd(), source, Interest::PRIORITY);
        }
        self.watch_io(registry, grow);
    }

    /// Registers its streams (pipes grown if `grow`), stdin and pidfd.
    fn watch_io(&mut self, registry: &Registry, grow: bool) {
        let gen = self.gen;
        for stream in [Stream::Stdout, Stream::Stderr, Stream::Pty] {
            let Some(fd) = &self.outputs[stream.index()] else {
                continue;
            };
            let interest = if stream == Stream::Pty {
                Interest::READABLE | Interest::WRITABLE
            } else {
                if grow {
                    crate::sys::fd::grow_pipe(fd, OUTPUT_PIPE_BYTES);
                }
                Interest::READABLE
            };
            register(
                registry,
                fd.as_fd(),
                Source::Output { gen, stream },
                interest,
            );
        }
        if let Some(fd) = &self.stdin {
            register(
                registry,
                fd.as_fd(),
                Source::Stdin { gen },
                Interest::WRITABLE,
            );
        }
        if let Some(pidfd) = self.process.pidfd() {
            self.pidfd_watched =
                register(registry, pidfd, Source::Pidfd { gen }, Interest::READABLE);
        }
    }

    /// A process a previous daemon started, taken back with the descriptors a keeper
    /// held for it: its streams (by [`Stream::index`]) and stdin are registered and used
    /// exactly like a spawned child's. They are the same open files the previous daemon
    /// read and wrote (already non-blocking; made so again in case).
    pub fn adopted_with_io(
        gen: u64,
        process: Process,
        outputs: [Option<OwnedFd>; 3],
        stdin: Option<OwnedFd>,
        registry: &Registry,
    ) -> Child {
        for fd in outputs.iter().chain([&stdin]).flatten() {
            if let Err(e) = crate::sys::fd::set_nonblocking(fd) {
                log::warn!("gen {gen}: a descriptor taken back: {e}");
            }
        }
        let mut child = Child {
            gen,
            process,
            outputs,
            stdin,
            hung_up_pty: None,
            pidfd_watched: false,
            input: Vec::new(),
            close_input_when_written: false,
            cgroup: None,
            watch: None,
            closed: Roles::NONE,
        };
        child.watch_io(registry, true);
        child
    }

    /// The descriptors a keeper is to hold for it, in role order: its pidfd, stdin and
    /// open output streams.
    pub fn keepable(&self) -> (Roles, Vec<BorrowedFd<'_>>) {
        let all = [
            (Role::Pidfd, self.process.pidfd()),
            (Role::Stdin, self.stdin.as_ref().map(AsFd::as_fd)),
            (Role::Stdout, self.output(Stream::Stdout)),
            (Role::Stderr, self.output(Stream::Stderr)),
            (Role::Pty, self.output(Stream::Pty)),
        ];
        let mut roles = Roles::NONE;
        let mut fds = Vec::with_capacity(all.len());
        for (role, fd) in all {
            if let Some(fd) = fd {
                roles = roles.with(role);
                fds.push(fd);
            }
        }
        (roles, fds)
    }

    /// The roles a keeper holds for it that it has closed since the last call (EOF, the
    /// drain deadline, its input closed): the keeper's copies are to go too, or a child
    /// would never see its stdin close, nor a grandchild its pipe's reader go.
    pub fn take_closed(&mut self) -> Roles {
        std::mem::take(&mut self.closed)
    }

    /// A process a previous daemon started, taken back: watched through its pidfd, with
    /// no streams of ours.
    pub fn adopted(gen: u64, process: Process, registry: &Registry) -> Child {
        Child::adopted_with_io(gen, process, [None, None, None], None, registry)
    }

    /// Its state for an upgrade image: its process and the numbers of the descriptors
    /// it holds, its unwritten input, its cgroup's path. A session watch is not carried:
    /// the next program walks the session afresh when asked.
    pub fn export(&self) -> ChildImage {
        let raw = |fd: &Option<OwnedFd>| fd.as_ref().map(AsRawFd::as_raw_fd);
        ChildImage {
            gen: self.gen,
            pid: self.process.pid(),
            pidfd: self.process.pidfd().map(|fd| fd.as_raw_fd()),
            token: self.process.token().map(str::to_owned),
            is_child: self.process.is_child(),
            outputs: [
                raw(&self.outputs[0]),
                raw(&self.outputs[1]),
                raw(&self.outputs[2]),
            ],
            stdin: raw(&self.stdin),
            hung_up_pty: raw(&self.hung_up_pty),
            input: self.input.clone(),
            close_input_when_written: self.close_input_when_written,
            cgroup: self
                .cgroup
                .as_ref()
                .map(|cg| (cg.path().to_owned(), cg.name_in_hierarchy().to_owned())),
            awaits_status: false,
        }
    }

    /// A generation carried across an upgrade, on its inherited descriptors (checked
    /// open and named once), registered again. A cgroup that cannot be opened again is
    /// logged: the generation then has session containment's view of its tree.
    pub fn resumed(image: ChildImage, registry: &Registry) -> Child {
        let own = |fd: Option<i32>| {
            fd.map(|raw| {
                // SAFETY: the image's descriptors were checked open and named once; each
                // is taken by exactly one owner.
                let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
                let _ = crate::sys::reexec::set_close_on_exec(fd.as_fd(), true);
                fd
            })
        };
        let gen = image.gen;
        let pid = rustix::process::Pid::from_raw(image.pid).expect("checked positive");
        let process = Process::resumed(pid, own(image.pidfd), image.token, image.is_child);
        let cgroup = image.cgroup.and_then(|(path, name)| {
            GenCgroup::reopen(path, name)
                .map_err(|e| log::warn!("gen {gen}: opening its cgroup again: {e}"))
                .ok()
        });
        let mut child = Child {
            gen,
            process,
            outputs: [
                own(image.outputs[0]),
                own(image.outputs[1]),
                own(image.outputs[2]),
            ],
            stdin: own(image.stdin),
            hung_up_pty: own(image.hung_up_pty),
            pidfd_watched: false,
            input: image.input,
            close_input_when_written: image.close_input_when_written,
            cgroup,
            watch: None,
            closed: Roles::NONE,
        };
        child.register_all(registry, false);
        child
    }

    /// The process handle.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// The process handle, for reaping.
    pub fn process_mut(&mut self) -> &mut Process {
        &mut self.process
    }

    /// Whether its exit is learned from its pidfd (otherwise from SIGCHLD).
    pub fn pidfd_watched(&self) -> bool {
        self.pidfd_watched
    }

    /// An open output stream.
    pub fn output(&self, stream: Stream) -> Option<BorrowedFd<'_>> {
        self.outputs[stream.index()].as_ref().map(AsFd::as_fd)
    }

    /// Stops reading one output stream (it reached end of file). A PTY master stays open
    /// (see `hung_up_pty`); input still queued for it has nowhere to go.
    pub fn close_output(&mut self, registry: &Registry, stream: Stream) {
        if let Some(fd) = self.outputs[stream.index()].take() {
            deregister(registry, &fd);
            if stream == Stream::Pty {
                self.hung_up_pty = Some(fd);
            } else {
                self.closed = self.closed.with(role_of(stream));
            }
        }
    }

    /// The terminal, for a resize: read or hung up.
    pub fn pty(&self) -> Option<BorrowedFd<'_>> {
        self.outputs[Stream::Pty.index()]
            .as_ref()
            .or(self.hung_up_pty.as_ref())
            .map(AsFd::as_fd)
    }

    /// Closes every output stream, returning how many bytes they still held unread.
    pub fn close_outputs(&mut self, registry: &Registry) -> u64 {
        let mut unread = 0;
        for stream in [Stream::Stdout, Stream::Stderr, Stream::Pty] {
            let Some(fd) = self.outputs[stream.index()].take() else {
                continue;
            };
            unread += crate::sys::fd::bytes_readable(&fd).unwrap_or(0);
            deregister(registry, &fd);
            self.closed = self.closed.with(role_of(stream));
        }
        unread
    }

    /// Stops watching the pidfd (the process was reaped).
    pub fn unwatch_pidfd(&mut self, registry: &Registry) {
        if std::mem::take(&mut self.pidfd_watched) {
            if let Some(pidfd) = self.process.pidfd() {
                let _ = registry.deregister(&mut SourceFd(&pidfd.as_raw_fd()));
            }
        }
    }

    /// Its cgroup, if it has one.
    pub fn cgroup(&self) -> Option<&GenCgroup> {
        self.cgroup.as_ref()
    }

    /// Signals every member of its session (not the leader) and watches them: found by
    /// walking our own subtree, each verified before it is signalled.
    pub fn signal_session(
        &mut self,
        registry: &Registry,
        others: &[i32],
        sig: rustix::process::Signal,
    ) -> Result<(), SignalError> {
        let now = Instant::now();
        let watch = match &mut self.watch {
            Some(w) => w,
            None => {
                let w = Box::new(SessionWatch::new(&self.process, now).map_err(SignalError::Os)?);
                let source = Source::TreeWatch { gen: self.gen };
                register(registry, w.fd(), source, Interest::READABLE);
                self.watch.insert(w)
            }
        };
        let counts = watch.signal(&self.process, others, sig, now)?;
        log::debug!("gen {}: session members signalled: {counts:?}", self.gen);
        self.report_escapees();
        Ok(())
    }

    /// Whether its session is proven empty (leader aside); starts watching if nothing did.
    pub fn session_empty(&mut self, registry: &Registry, others: &[i32]) -> bool {
        let now = Instant::now();
        if self.watch.is_none() {
            match SessionWatch::new(&self.process, now) {
                Ok(w) => {
                    let source = Source::TreeWatch { gen: self.gen };
                    register(registry, w.fd(), source, Interest::READABLE);
                    self.watch = Some(Box::new(w));
                }
                Err(e) => {
                    log::warn!("gen {}: watching its session: {e}", self.gen);
                    return false;
                }
            }
        }
        let Some(watch) = &mut self.watch else {
            return false;
        };
        let state = watch.poll(&self.process, others, now);
        self.report_escapees();
        match state {
            Ok(WatchState::Empty) => true,
            Ok(WatchState::Waiting) => false,
            Err(e) => {
                log::warn!("gen {}: walking its session: {e}", self.gen);
                false
            }
        }
    }

    /// When its session watch wants to look again.
    pub fn watch_deadline(&self) -> Option<Instant> {
        self.watch.as_ref().and_then(|w| w.deadline())
    }

    /// Processes that left the session (`setsid`, a double fork) cannot be reached by a
    /// session's signals: they are reported, once each.
    fn report_escapees(&mut self) {
        let Some(watch) = &mut self.watch else { return };
        for e in watch.take_escapees() {
            log::warn!(
                "gen {}: pid {} left its session (now session {}); it is out of reach of the generation's stop",
                self.gen,
                e.member.pid,
                e.member.sid
            );
        }
    }

    /// Closes and deregisters everything it holds; its cgroup goes once empty.
    pub fn release(mut self, registry: &Registry) {
        if let Some(w) = self.watch.take() {
            let _ = registry.deregister(&mut SourceFd(&w.fd().as_raw_fd()));
        }
        if let Some(mut cg) = self.cgroup.take() {
            let _ = registry.deregister(&mut SourceFd(&cg.events_fd().as_raw_fd()));
            if let Err(e) = cg.remove() {
                log::info!("gen {}: cgroup not removed yet: {e}", self.gen);
            }
        }
        self.close_outputs(registry);
        self.hung_up_pty = None;
        self.close_stdin(registry);
        self.unwatch_pidfd(registry);
    }

    /// Queues input for the child.
    pub fn queue_input(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// Closes the child's input once the queued bytes are written.
    pub fn close_input_when_written(&mut self) {
        self.close_input_when_written = true;
    }

    fn close_stdin(&mut self, registry: &Registry) {
        if let Some(fd) = self.stdin.take() {
            deregister(registry, &fd);
            self.closed = self.closed.with(Role::Stdin);
        }
    }

    /// Writes queued input as far as the descriptor accepts without blocking.
    pub fn flush_input(&mut self, registry: &Registry) -> InputProgress {
        let fd = match (&self.stdin, &self.outputs[Stream::Pty.index()]) {
            (Some(fd), _) | (None, Some(fd)) => fd.as_raw_fd(),
            (None, None) => {
                // Nowhere to write any more: what is queued leaves the queue unwritten.
                let done = std::mem::take(&mut self.input).len();
                return InputProgress {
                    done,
                    broken: false,
                };
            }
        };
        // SAFETY: `fd` belongs to an OwnedFd held by `self`, and nothing below closes it
        // before the last use of `borrowed` (closing happens after the loop).
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut progress = InputProgress::default();
        while !self.input.is_empty() {
            match write_nonblocking(borrowed, &self.input) {
                Ok(WriteOutcome::Written(n)) => {
                    self.input.drain(..n);
                    progress.done += n;
                }
                Ok(WriteOutcome::WouldBlock) => break,
                Ok(WriteOutcome::Closed) | Err(_) => {
                    progress.done += std::mem::take(&mut self.input).len();
                    progress.broken = true;
                    break;
                }
            }
        }
        let eof_now = !progress.broken && self.input.is_empty() && self.close_input_when_written;
        if eof_now {
            self.close_input_when_written = false;
            if self.stdin.is_none() {
                // A PTY has no write side to close: send the line discipline's EOF.
                let _ = write_nonblocking(borrowed, &[PTY_EOF]);
            }
        }
        if eof_now || progress.broken {
            self.close_stdin(registry);
        }
        if progress.broken {
            log::info!("gen {}: input closed by the child", self.gen);
        }
        progress
    }
}
