//! One spawned generation as the driver holds it: the process handle, our ends of its
//! stdio, and the input the core accepted but the child has not read yet.
//!
//! Nothing here decides anything about the generation's lifecycle; the core does. A
//! `Child` only knows how to move bytes and signals, and registers what it owns; how it is
//! taken back, kept by the keeper and carried across an upgrade is in `handover.rs`.

mod handover;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::token::Source;
use crate::core::Stream;
use crate::keeper::wire::{Role, Roles};
use crate::sys::cgroup::GenCgroup;
use crate::sys::fd::{write_nonblocking, WriteOutcome};
use crate::sys::process::{Process, SignalError};
use crate::sys::spawn;
use crate::sys::tree::{Observed, SessionWatch, Survey};

/// The byte a PTY's line discipline turns into end-of-file (VEOF, Ctrl-D).
const PTY_EOF: u8 = 0x04;

/// What ends a PTY's input: its end-of-file character (the terminal's `VEOF` in canonical
/// mode, Ctrl-D otherwise), twice when the last byte sent left a line open: the first
/// hands the partial line to the reader, only the second reads as the end of file.
fn pty_eof(master: BorrowedFd<'_>, last: Option<u8>) -> Vec<u8> {
    // On Linux the termios of a PTY master's ioctls are its peer's: the program's modes.
    let (canonical, eof) = match rustix::termios::tcgetattr(master) {
        Ok(t) => {
            let c = t.special_codes[rustix::termios::SpecialCodeIndex::VEOF];
            let canonical = t.local_modes.contains(rustix::termios::LocalModes::ICANON);
            (canonical, if c == 0 { PTY_EOF } else { c })
        }
        Err(_) => (true, PTY_EOF),
    };
    let open = matches!(last, Some(b) if b != b'\n' && b != b'\r' && b != eof);
    if canonical && open {
        vec![eof, eof]
    } else {
        vec![eof]
    }
}

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
    /// The PTY master reported a hang-up (every slave descriptor closed): reading it on
    /// reports the end even when nothing is queued. Not carried across an upgrade:
    /// registering the master again reports the hang-up again.
    pty_hangup_seen: bool,
    /// The stdin pipe reported an error: no process holds its read end any more (the
    /// child closed its input, or ended). Seen from the readiness itself, so the closure
    /// is told at once rather than at the next write, which would be taken and dropped.
    stdin_reader_gone: bool,
    /// The PTY master is polled for writability too only while input (or its end) waits
    /// for room. Always asked, it woke the loop once more per keystroke for nothing (the
    /// terminal has room again as soon as the program reads the key), and that wake-up's
    /// poll of the master, finding no output yet, waited in the kernel for the terminal's
    /// worker to deliver the echo — behind every flooding terminal's work.
    pty_writable_watched: bool,
    pidfd_watched: bool,
    input: Vec<u8>,
    close_input_when_written: bool,
    /// The last byte written to a PTY's input (not carried across an upgrade): whether a
    /// line the line discipline still holds is open when the end of input is sent.
    last_written: Option<u8>,
    /// Its own cgroup (cgroup containment), watched for emptiness.
    cgroup: Option<GenCgroup>,
    /// Session containment: the members its tree signals reached, watched until the
    /// session is empty. Boxed: only a generation being stopped has one, and every
    /// child's record is as large as its largest field.
    watch: Option<Box<SessionWatch>>,
    /// Descriptors closed since [`Child::take_closed`] was last called.
    closed: Roles,
    /// Descriptors it held when taken in (see [`Child::count_descriptors`]).
    counted: usize,
    /// Output pipes still at the kernel's default size, grown on their first data
    /// ([`Child::grow_on_data`]): most short-lived children write nothing, and growing a
    /// pipe (a resize of its ring) was a notable part of the daemon's cost per spawn.
    small_pipes: [bool; 3],
}

/// Kernel buffer asked for each output pipe once data comes through it (see
/// [`crate::sys::fd::grow_pipe`]).
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

/// What a PTY master is polled for: its output, and room for input while some waits.
fn pty_interest(writable: bool) -> Interest {
    if writable {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::READABLE
    }
}

/// Stops watching a descriptor before it is closed ("deregister before drop").
fn deregister(registry: &Registry, fd: &OwnedFd) {
    let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
}

impl Child {
    /// Takes over a freshly spawned process and registers its descriptors, with the
    /// `input` (and the end of input, if `close_input`) held for it while it started: a
    /// terminal is then polled for room at once, and its room writes them.
    pub fn new(
        gen: u64,
        spawned: spawn::Child,
        cgroup: Option<GenCgroup>,
        input: Vec<u8>,
        close_input: bool,
        registry: &Registry,
    ) -> Child {
        let mut child = Child {
            gen,
            process: spawned.process,
            outputs: [spawned.stdout, spawned.stderr, spawned.pty],
            stdin: spawned.stdin,
            hung_up_pty: None,
            pty_hangup_seen: false,
            stdin_reader_gone: false,
            pty_writable_watched: false,
            pidfd_watched: false,
            input,
            close_input_when_written: close_input,
            last_written: None,
            cgroup,
            watch: None,
            closed: Roles::NONE,
            counted: 0,
            small_pipes: [false; 3],
        };
        child.register_all(registry, true);
        child
    }

    /// Registers every descriptor it holds: its cgroup's events, its open output streams
    /// (pipes grown on their first data if `grow`: a pipe taken back across an upgrade
    /// is left as it is), its
    /// stdin, its pidfd.
    fn register_all(&mut self, registry: &Registry, grow: bool) {
        if let Some(cg) = &self.cgroup {
            // The kernel flags a change of `populated` as priority data on this file.
            let source = Source::CgroupEvents { gen: self.gen };
            register(registry, cg.events_fd(), source, Interest::PRIORITY);
        }
        self.watch_io(registry, grow);
    }

    /// Registers its streams (pipes grown on their first data if `grow`), stdin and pidfd.
    fn watch_io(&mut self, registry: &Registry, grow: bool) {
        let gen = self.gen;
        for stream in [Stream::Stdout, Stream::Stderr, Stream::Pty] {
            let Some(fd) = &self.outputs[stream.index()] else {
                continue;
            };
            let interest = if stream == Stream::Pty {
                // Writability only while input waits (held while it started, or carried
                // across an upgrade).
                self.pty_writable_watched = self.input_waits();
                pty_interest(self.pty_writable_watched)
            } else {
                // Grown when its first data is read, not now.
                self.small_pipes[stream.index()] = grow;
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
            // Writability (room for queued input) and, with it at no further cost, the
            // error a pipe's write end reports once its last reader is gone: epoll always
            // reports errors, for as long as the pipe is registered, queue or no queue.
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

    /// Counts the descriptors it holds now, to be given back by [`Child::counted`] when it
    /// is released: what it closes meanwhile stays counted, so a count of what children
    /// hold is never short (see `driver::descriptors`).
    pub fn count_descriptors(&mut self) -> usize {
        let streams = self.outputs.iter().chain([&self.stdin, &self.hung_up_pty]);
        let pidfd = usize::from(self.process.pidfd().is_some());
        // A cgroup's `cgroup.events`.
        let cgroup = usize::from(self.cgroup.is_some());
        self.counted = streams.flatten().count() + pidfd + cgroup;
        self.counted
    }

    /// Data was just read from output pipe `stream`: grows it to [`OUTPUT_PIPE_BYTES`] if
    /// it is still at its default size, so that a child that writes keeps writing while
    /// the loop serves others (a refusal leaves it as it was, and is not asked again).
    pub fn grow_on_data(&mut self, stream: Stream) {
        let small = &mut self.small_pipes[stream.index()];
        if !std::mem::take(small) {
            return;
        }
        if let Some(fd) = &self.outputs[stream.index()] {
            crate::sys::fd::grow_pipe(fd, OUTPUT_PIPE_BYTES);
        }
    }

    /// What [`Child::count_descriptors`] counted.
    pub fn counted(&self) -> usize {
        self.counted
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
    pub fn pty_hangup_seen(&self) -> bool {
        self.pty_hangup_seen
    }

    pub fn saw_pty_hangup(&mut self) {
        self.pty_hangup_seen = true;
    }

    /// Notes that its stdin pipe reported an error: nobody reads it any more. The next
    /// [`Child::flush_input`] closes it and reports the input broken.
    pub fn saw_stdin_reader_gone(&mut self) {
        if self.stdin.is_some() {
            self.stdin_reader_gone = true;
        }
    }

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

    /// Notes `sig` for every member of its session (not the leader): the next survey of
    /// the sessions (see `children/trees.rs`) sends it, verifying each member, and watches
    /// them; later surveys send it to newcomers.
    pub fn signal_session(&mut self, sig: rustix::process::Signal) -> Result<(), SignalError> {
        let now = Instant::now();
        let process = &self.process;
        let watch = self
            .watch
            .get_or_insert_with(|| Box::new(SessionWatch::new(process, now)));
        watch.mark(process, sig, now)
    }

    /// Its session watch, started if it had none (its first look is due at once).
    pub fn session_watch(&mut self) -> &mut SessionWatch {
        let process = &self.process;
        self.watch
            .get_or_insert_with(|| Box::new(SessionWatch::new(process, Instant::now())))
    }

    /// Its session watch, if it has one.
    pub fn watch(&self) -> Option<&SessionWatch> {
        self.watch.as_deref()
    }

    /// Its session watch, if it has one, to change.
    pub fn watch_mut(&mut self) -> Option<&mut SessionWatch> {
        self.watch.as_deref_mut()
    }

    /// Hands its session watch a survey that included it; registers the watch's
    /// descriptor once it has one.
    pub fn observe(&mut self, registry: &Registry, survey: &Survey, now: Instant) -> Observed {
        let Some(watch) = &mut self.watch else {
            return Observed::Members(Default::default());
        };
        let had_fd = watch.fd().is_some();
        let observed = match watch.observe(&self.process, survey, now) {
            Ok(o) => o,
            Err(e) => {
                log::info!("gen {}: session members not signalled: {e}", self.gen);
                Observed::Members(Default::default())
            }
        };
        if let (false, Some(fd)) = (had_fd, watch.fd()) {
            register(
                registry,
                fd,
                Source::TreeWatch { gen: self.gen },
                Interest::READABLE,
            );
        }
        observed
    }

    /// When its session watch wants to look again.
    pub fn watch_deadline(&self) -> Option<Instant> {
        self.watch.as_ref().and_then(|w| w.deadline())
    }

    /// Closes and deregisters everything it holds; returns its cgroup, deregistered, for
    /// the owner of cgroups to remove or keep (see `cgroup_pool.rs`).
    pub fn release(self, registry: &Registry) -> Option<GenCgroup> {
        self.into_process(registry).1
    }

    /// [`Child::release`], giving back its process too: one that may not have been
    /// reaped, for its owner to reap.
    pub fn into_process(mut self, registry: &Registry) -> (Process, Option<GenCgroup>) {
        if let Some(fd) = self.watch.take().as_ref().and_then(|w| w.fd()) {
            let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
        let cgroup = self.cgroup.take();
        if let Some(cg) = &cgroup {
            let _ = registry.deregister(&mut SourceFd(&cg.events_fd().as_raw_fd()));
        }
        self.close_outputs(registry);
        self.hung_up_pty = None;
        self.close_stdin(registry);
        self.unwatch_pidfd(registry);
        (self.process, cgroup)
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

    /// Whether bytes, or the end of input, wait to be written.
    fn input_waits(&self) -> bool {
        !self.input.is_empty() || self.close_input_when_written
    }

    /// Polls the PTY master for room exactly while input waits for it (after each flush;
    /// registration asks for it too while input waits).
    fn watch_pty_room(&mut self, registry: &Registry) {
        let wants = self.input_waits();
        if self.stdin.is_some() || wants == self.pty_writable_watched {
            return;
        }
        let Some(fd) = &self.outputs[Stream::Pty.index()] else {
            return;
        };
        let source = Source::Output {
            gen: self.gen,
            stream: Stream::Pty,
        };
        let Some(token) = source.token() else {
            return;
        };
        let raw = fd.as_raw_fd();
        match registry.reregister(&mut SourceFd(&raw), token, pty_interest(wants)) {
            Ok(()) => self.pty_writable_watched = wants,
            Err(e) => log::error!("gen {}: poll the terminal for room: {e}", self.gen),
        }
    }

    /// Writes queued input as far as the descriptor accepts without blocking.
    pub fn flush_input(&mut self, registry: &Registry) -> InputProgress {
        let fd = match (&self.stdin, &self.outputs[Stream::Pty.index()]) {
            (Some(fd), _) | (None, Some(fd)) => fd.as_raw_fd(),
            (None, None) => {
                // Nowhere to write any more: what is queued leaves the queue unwritten. A
                // terminal every descriptor of which the program closed no longer takes
                // input, as a stdin pipe it closed does not: that is said (`input_closed`)
                // rather than input being taken and dropped.
                let done = std::mem::take(&mut self.input).len();
                return InputProgress {
                    done,
                    broken: self.hung_up_pty.is_some(),
                };
            }
        };
        // SAFETY: `fd` belongs to an OwnedFd held by `self`, and nothing below closes it
        // before the last use of `borrowed` (closing happens after the loop).
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        if self.stdin.is_none() && self.close_input_when_written {
            // A PTY has no write side to close: its end of input is the line discipline's
            // end-of-file character, queued behind the input so that a terminal with no
            // room delays it (written when it has room) instead of losing it.
            self.close_input_when_written = false;
            let eof = pty_eof(borrowed, self.input.last().copied().or(self.last_written));
            self.input.extend_from_slice(&eof);
        }
        let mut progress = InputProgress::default();
        if self.stdin.is_some() && std::mem::take(&mut self.stdin_reader_gone) {
            // Nothing queued would ever be read: dropped, and the pipe closed below, as
            // for a write refused with EPIPE.
            progress.done = std::mem::take(&mut self.input).len();
            progress.broken = true;
        }
        while !progress.broken && !self.input.is_empty() {
            match write_nonblocking(borrowed, &self.input) {
                Ok(WriteOutcome::Written(n)) => {
                    if n > 0 {
                        self.last_written = Some(self.input[n - 1]);
                    }
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
        }
        if eof_now || progress.broken {
            self.close_stdin(registry);
        }
        if progress.broken {
            log::info!("gen {}: input closed by the child", self.gen);
        }
        self.watch_pty_room(registry);
        progress
    }
}
