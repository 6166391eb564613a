//! `genward attach NAME`: this terminal connected to a session's process.
//!
//! One thread polls three descriptors: standard input (keystrokes, forwarded as `write`
//! requests carrying `if_gen`, so typing meant for one process never reaches its
//! successor), the daemon socket (output and events), and a signal pipe (`SIGWINCH`
//! becomes a `resize`; `SIGTERM`, `SIGHUP`, `SIGINT` end the attachment; on a terminal,
//! `SIGTSTP` hands the terminal back before stopping and `SIGCONT` takes it again, as
//! tmux and ssh do).
//! The end of piped input becomes a `close_input` for the generation the input went to.
//!
//! The detach key (Ctrl-\\ unless `--detach-key` says otherwise) detaches within half a
//! second ([`DOUBLE_PRESS`]); pressed twice within that time, it is sent through to the
//! session once instead (see [`DetachFilter`]).
//!
//! The generation attached to is followed, not the name: output of any other generation
//! is not shown. When the session starts a newer generation (replaced, restarted), one
//! line says so and the newer one is followed — by a terminal only once the session's
//! spec shows it has a terminal too (keystrokes wait until then): one running on pipes
//! ends the attachment, as it is refused at the start. When the attached generation ends
//! and nothing follows it, `attach` exits with its status.
//!
//! The terminal is raw while attached and restored on every way out: detach, the child's
//! end, the daemon's loss, a signal (all return through [`RawMode`]'s drop), and a panic
//! (a hook restores the saved settings, since release builds abort without unwinding).
//! The modes the session's output switched on (alternate screen, cursor keys, keypad,
//! bracketed paste, mouse reporting, a hidden cursor, a scroll region), tracked by a
//! [`ModeScanner`], are switched off on the same ways out, before our last words, so
//! detaching from `less` or `vim` returns to the shell's screen as it was.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::termios::{isatty, Termios};

use super::args::Matches;
use super::client::{str_of, u64_of, ClientError, Connection, Response};
use super::detach_key::{describe_detach_key, parse_detach_key, DEFAULT_DETACH_KEY};
use super::dispatch::{
    session_arg, write_stderr, write_stdout, CommandError, CommandResult, Context,
};
use super::term_modes::ModeScanner;
use super::wait::{describe, end_of_wait, status};
use crate::core::{Command, Scope};
use crate::proto::envelope::RequestId;
use crate::proto::event::{End, SessionState, WireEvent};
use crate::proto::framing::Message;
use crate::proto::json::{Object, Value};
use crate::proto::request::{Op, Replay, Target};
use crate::proto::signal_name::signal_name;
use crate::sys::signal_pipe::{stop_self, SignalPipe};
use crate::sys::terminal::{restore_settings, window_size, RawMode};

/// Output replayed on attach: enough to redraw a screen or two of recent work.
pub const REPLAY_BYTES: u64 = 64 * 1024;

/// Keystrokes read per turn.
const INPUT_CHUNK: usize = 4096;

/// The id of a quiet write is this and the generation it was typed for.
const QUIET_WRITE_ID: &str = "input-gen-";

/// Input queued for the daemon beyond which the terminal is not read: a huge paste waits
/// in the terminal instead of in our memory.
const MAX_QUEUED_INPUT: usize = 1 << 20;

/// Input read at once from a terminal from this size on is a paste, not keystrokes: it is
/// sent as answered writes, one at a time, so that one refused for a full input queue is
/// sent again instead of lost (a quiet write refused is lost, and what follows it may be
/// taken: input with a hole).
const PASTE_BYTES: usize = 64;

/// How long piped input refused for a full queue waits before it is sent again.
const REFUSED_INPUT_RETRY: Duration = Duration::from_millis(20);

/// How long after a press of the detach key a second press sends the key through to the
/// session instead of detaching.
pub const DOUBLE_PRESS: Duration = Duration::from_millis(500);

/// The detach key in the input: a single press detaches, a second press right after it
/// sends the key through to the session.
///
/// A press is held ([`armed`](Self::armed)) until the next input decides it: the key again
/// is forwarded once; anything else detaches (dropping what follows, as the user asked to
/// leave); nothing within [`DOUBLE_PRESS`] detaches too (the caller's timer).
///
/// # Examples
///
/// ```
/// use genward::cli::attach::DetachFilter;
/// let mut f = DetachFilter::new(Some(0x1c));
/// let mut out = Vec::new();
/// assert!(!f.filter(b"ls\r\x1c", &mut out));
/// assert!(f.armed());
/// assert!(!f.filter(b"\x1cx", &mut out));
/// assert_eq!(out, b"ls\r\x1cx");
/// assert!(f.filter(b"\x1cy", &mut out));
/// ```
#[derive(Debug, Clone)]
pub struct DetachFilter {
    key: Option<u8>,
    armed: bool,
}

impl DetachFilter {
    /// A filter for detach key `key` (`None`: every byte is forwarded).
    pub fn new(key: Option<u8>) -> Self {
        Self { key, armed: false }
    }

    /// Whether a press of the key is waiting for the next input to decide it.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// Appends to `out` the bytes of `input` to forward; `true` when the user detached
    /// (`out` then holds what came before the press).
    pub fn filter(&mut self, input: &[u8], out: &mut Vec<u8>) -> bool {
        for &b in input {
            if self.armed {
                self.armed = false;
                if Some(b) == self.key {
                    out.push(b);
                    continue;
                }
                return true;
            }
            if Some(b) == self.key {
                self.armed = true;
            } else {
                out.push(b);
            }
        }
        false
    }
}

/// Why the attachment ended.
#[derive(Debug)]
enum Outcome {
    /// The user pressed the detach key (or input ended, for a non-terminal stdin).
    Detached,
    /// The generation ended and the session has nothing newer.
    Ended(End),
    /// A terminating signal arrived.
    Signal(i32),
}

/// What a request sent from the loop was for.
#[derive(Debug, Clone, Copy)]
enum Pending {
    /// Input for generation `gen`.
    Write(u64),
    Resize,
    /// This terminal's size, sent as an attached terminal's.
    AttachedResize,
    Wait(u64),
    /// A `get` after generation `gen` ended, to learn whether something follows it.
    Successor(u64),
    /// A `get` after a terminal started following generation `gen`, to learn whether it
    /// has a terminal to type into (a replacement may run on pipes).
    Kind(u64),
    /// The end of piped input, passed on to generation `gen`.
    CloseInput(u64),
}

/// The attachment's state.
struct Attached {
    conn: Connection,
    session: String,
    /// The generation followed.
    gen: u64,
    /// Whether our terminal's size should be forwarded.
    tty: bool,
    pending: HashMap<u64, Pending>,
    /// The followed generation's end, when nothing newer was known yet.
    ended: Option<End>,
    /// The generation and error code of the last refused input reported, so a burst of
    /// refusals is reported once.
    unsent_notice: Option<(u64, String)>,
    /// The terminal modes the output shown so far left on.
    modes: ModeScanner,
    /// Watching only: nothing is typed into the session and its size is left alone.
    read_only: bool,
    /// The replay has not started yet: its first frame, when it does not start the
    /// session's output, is shown from its first new line on (never mid-line, never in
    /// the middle of an escape sequence).
    trim_replay: bool,
    /// Without a terminal: the piped input written and not answered yet, with the
    /// generation it was for. One write at a time, so that one refused while the
    /// process's input queue is full is sent again before anything read after it: the
    /// process gets every byte in order, never data with a hole in it.
    unanswered: Option<(u64, Vec<u8>)>,
    /// When to send `unanswered` again, after a refusal for a full queue.
    retry_at: Option<Instant>,
    /// On a terminal: input read and not sent yet, because an answered write (a paste,
    /// see [`PASTE_BYTES`]) is still unanswered; sent as the next write once it is, so
    /// nothing typed overtakes a paste waiting for room.
    typed: Vec<u8>,
    /// On a terminal: every write is answered from now on, since a quiet one was refused
    /// for a full input queue.
    answered_input: bool,
    /// On a terminal: the followed generation, taken on from the one attached to, is not
    /// known to have a terminal yet. What is typed meanwhile waits in `typed` (raw
    /// keystrokes must not reach a program reading a pipe).
    unverified: bool,
    /// Without a terminal: the end of the input was read while following this
    /// generation; it gets `close_input` once every byte read before is answered.
    input_end: Option<u64>,
    /// `input_end` was passed on.
    input_end_sent: bool,
    /// The terminal was handed back on `SIGTSTP` and not taken again yet.
    suspended: bool,
    /// The daemon refused an attached terminal's `resize`: sizes go as plain ones.
    plain_resize: bool,
}

/// How a full-screen program is made to redraw once attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Redraw {
    /// SIGWINCH to the terminal's foreground process group (dtach's `-r winch`).
    Winch,
    /// Ctrl-L typed into the session (what most full-screen programs and shells take as
    /// "redraw").
    CtrlL,
    None,
}

fn parse_redraw(v: &str) -> Result<Redraw, &'static str> {
    match v {
        "winch" => Ok(Redraw::Winch),
        "ctrl-l" => Ok(Redraw::CtrlL),
        "none" => Ok(Redraw::None),
        _ => Err("expected winch, ctrl-l or none"),
    }
}

/// Whether a `get` answer's session is known to run on pipes (its spec has no `pty`): a
/// raw terminal typing into pipes would send `\r` for Enter and echo nothing. A spec the
/// answer could not carry (`null`) says nothing either way.
fn runs_on_pipes(snap: &Object) -> bool {
    let spec = snap
        .get("session")
        .and_then(Value::as_object)
        .and_then(|s| s.get("spec"))
        .and_then(Value::as_object);
    spec.is_some_and(|s| !matches!(s.get("pty"), Some(Value::Bool(true) | Value::Object(_))))
}

/// `genward attach`.
pub fn attach(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let redraw = m
        .value_with("redraw", parse_redraw)?
        .unwrap_or(Redraw::Winch);
    let read_only = m.flag("read-only");
    // Without a terminal (a pipe mode for scripts) the input is data, not keystrokes:
    // no byte of it detaches unless a key was asked for.
    let stdin_is_tty = isatty(io::stdin().as_fd());
    let detach = m
        .value_with("detach-key", parse_detach_key)?
        .unwrap_or(stdin_is_tty.then_some(DEFAULT_DETACH_KEY));
    let mut conn = ctx.connect()?;
    let snap = conn.request(&Op::Core(Command::Get {
        session: session.clone(),
    }))?;
    let gen = current_gen(&snap).ok_or_else(|| not_running(&session, &snap))?;
    let pipes = runs_on_pipes(&snap);
    if stdin_is_tty && !read_only && pipes {
        return Err(CommandError::Failed(format!(
            "{session}: runs without a terminal (pipes): a terminal types only into a session started with --pty; watch it with `genward attach --read-only {session}` or `genward logs -f {session}`, write to it with `genward send {session}` (or pipe into `genward attach {session}`)"
        )));
    }
    conn.request(&Op::Subscribe {
        target: Target::Session(session.clone()),
        replay: Replay::Tail(REPLAY_BYTES),
        lossless: None,
    })?;

    let stdin = io::stdin();
    let tty = isatty(stdin.as_fd());
    let mut watched = vec![libc::SIGWINCH, libc::SIGTERM, libc::SIGHUP, libc::SIGINT];
    if tty {
        // Stopped by job control, the terminal is the shell's again until continued.
        watched.extend([libc::SIGTSTP, libc::SIGCONT]);
    }
    let signals = SignalPipe::new(&watched)
        .map_err(|e| CommandError::Failed(format!("installing signal handlers: {e}")))?;
    let mut raw = if tty {
        // Watching a program that writes to pipes: its `\n` must still start a line.
        let raw = RawMode::enter_with(stdin.as_fd(), pipes).map_err(|e| {
            CommandError::Failed(format!("cannot put the terminal in raw mode: {e}"))
        })?;
        restore_on_panic(raw.saved().clone());
        Some(raw)
    } else {
        None
    };
    let mut a = Attached {
        conn,
        session,
        gen,
        tty,
        pending: HashMap::new(),
        ended: None,
        unsent_notice: None,
        modes: ModeScanner::new(),
        read_only,
        trim_replay: true,
        unanswered: None,
        retry_at: None,
        typed: Vec::new(),
        answered_input: false,
        unverified: false,
        input_end: None,
        input_end_sent: false,
        suspended: false,
        plain_resize: false,
    };
    let result = a
        .conn
        .set_nonblocking()
        .map_err(CommandError::from)
        .and_then(|()| a.start_following())
        .and_then(|()| a.redraw(redraw))
        .and_then(|()| a.run(detach, &signals, raw.as_mut(), redraw));
    // Undone whatever the way out: the terminal is the user's again.
    let undo = a.modes.take_undo();
    if !undo.is_empty() {
        let _ = write_stdout(&undo);
    }
    if let Some(raw) = raw.as_mut() {
        let _ = raw.restore();
    }
    drop(raw);
    let (session, gen) = (&a.session, a.gen);
    match result {
        Ok(Outcome::Detached) => {
            let key = describe_detach_key(detach);
            write_stderr(
                format!("\n[genward: detached from {session} gen {gen} ({key})]\n").as_bytes(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Outcome::Ended(end)) => {
            write_stderr(
                format!(
                    "[genward: {session} gen {}: {}]\n",
                    end.gen(),
                    describe(&end)
                )
                .as_bytes(),
            )?;
            Ok(ExitCode::from(status(&end)))
        }
        Ok(Outcome::Signal(sig)) => {
            let name = signal_name(sig).unwrap_or_else(|| sig.to_string());
            write_stderr(
                format!("\n[genward: {name}: detached from {session} gen {gen}]\n").as_bytes(),
            )?;
            Ok(ExitCode::from(128u8.saturating_add(sig as u8)))
        }
        Err(e) => {
            // The cursor is wherever the session left it: start the error on a new line.
            if a.tty {
                let _ = write_stderr(b"\n");
            }
            Err(e)
        }
    }
}

fn current_gen(snap: &Response) -> Option<u64> {
    snap.get("session")
        .and_then(Value::as_object)
        .and_then(|s| u64_of(s, "current"))
}

fn not_running(session: &str, snap: &Response) -> CommandError {
    let s = snap.get("session").and_then(Value::as_object);
    let state = s.and_then(|s| str_of(s, "state")).unwrap_or("not running");
    CommandError::Failed(format!(
        "{session}: no process to attach to (it is {state}); start one with `genward restart {session}` or `genward run {session} --pty -- CMD`"
    ))
}

/// Puts the terminal back before the default panic report, so the message is readable
/// and the shell usable even when the panic aborts.
fn restore_on_panic(saved: Termios) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = restore_settings(io::stdin(), &saved);
        previous(info);
    }));
}

impl Attached {
    /// Sizes the followed generation's terminal and asks to be told when it ends.
    fn start_following(&mut self) -> Result<(), CommandError> {
        self.send_size()?;
        let id = self.conn.send(&Op::Wait {
            session: self.session.clone(),
            gen: Some(self.gen),
        })?;
        self.pending.insert(id, Pending::Wait(self.gen));
        Ok(())
    }

    /// Asks the followed program to draw its screen again, once attached: the replay of
    /// recent bytes alone cannot rebuild a full-screen program's screen. Nothing in
    /// read-only mode (a watcher changes nothing).
    fn redraw(&mut self, how: Redraw) -> Result<(), CommandError> {
        if self.read_only || !self.tty {
            return Ok(());
        }
        match how {
            Redraw::None => Ok(()),
            Redraw::CtrlL => self.forward(b"\x0c"),
            Redraw::Winch => {
                let id = self.conn.send(&Op::Core(Command::Signal {
                    session: self.session.clone(),
                    if_gen: Some(self.gen),
                    signal: libc::SIGWINCH,
                    scope: Scope::Foreground,
                }))?;
                self.pending.insert(id, Pending::Resize);
                Ok(())
            }
        }
    }

    fn send_size(&mut self) -> Result<(), CommandError> {
        if !self.tty || self.read_only {
            return Ok(());
        }
        let Ok(ws) = window_size(io::stdin()) else {
            return Ok(());
        };
        if ws.rows == 0 || ws.cols == 0 {
            return Ok(());
        }
        let resize = Command::Resize {
            session: self.session.clone(),
            if_gen: Some(self.gen),
            rows: ws.rows,
            cols: ws.cols,
        };
        // As an attached terminal's: when another terminal that resized it later goes,
        // the session gets this size back (a daemon from before that refuses the member:
        // a plain resize, the latest wins).
        let id = if self.plain_resize {
            self.conn.send(&Op::Core(resize))?
        } else {
            self.conn.send(&Op::AttachedResize(resize))?
        };
        self.pending.insert(id, Pending::AttachedResize);
        Ok(())
    }

    fn follow(&mut self, newer: u64) -> Result<(), CommandError> {
        if newer <= self.gen {
            return Ok(());
        }
        self.notice(&format!("gen {} replaced by gen {newer}", self.gen))?;
        // Typed for the generation replaced: never for its successor.
        self.typed.clear();
        self.gen = newer;
        self.ended = None;
        if self.tty && !self.read_only {
            // A replacement may run on pipes: nothing typed is sent until its spec says
            // it has a terminal.
            self.unverified = true;
            let id = self.conn.send(&Op::Core(Command::Get {
                session: self.session.clone(),
            }))?;
            self.pending.insert(id, Pending::Kind(newer));
        }
        self.start_following()
    }

    /// The answer to the `get` sent on following generation `gen` from a terminal: its
    /// keystrokes may go on (it has a terminal), or the attachment ends (it runs on pipes,
    /// which a raw terminal must not type into: the refusal `attach` gives at its start).
    fn after_kind(&mut self, gen: u64, snap: &Object) -> Result<Option<Outcome>, CommandError> {
        // The spec is the current generation's: one newer than `gen` is checked once it
        // is followed, and an older one is never current again.
        if gen != self.gen || current_gen(snap) != Some(gen) {
            return Ok(None);
        }
        if runs_on_pipes(snap) {
            let session = &self.session;
            return Err(CommandError::Failed(format!(
                "{session} gen {gen}: runs without a terminal (pipes): this terminal stopped typing into it and let go; watch it with `genward attach --read-only {session}` or `genward logs -f {session}`, write to it with `genward send {session}`"
            )));
        }
        self.unverified = false;
        self.send_typed()?;
        Ok(None)
    }

    /// One line among the session's output: on its own line on a raw terminal (where
    /// the cursor may be anywhere and `\n` does not return the carriage).
    fn notice(&self, text: &str) -> Result<(), CommandError> {
        let line = if self.tty {
            format!("\r\n[genward: {text}]\r\n")
        } else {
            format!("[genward: {text}]\n")
        };
        write_stdout(line.as_bytes())
    }

    fn forward(&mut self, bytes: &[u8]) -> Result<(), CommandError> {
        if bytes.is_empty() || self.read_only {
            return Ok(());
        }
        if !self.tty {
            return self.write_piped(self.gen, bytes.to_vec());
        }
        if self.answered_input
            || self.unverified
            || bytes.len() >= PASTE_BYTES
            || self.unanswered.is_some()
            || !self.typed.is_empty()
        {
            self.typed.extend_from_slice(bytes);
            return self.send_typed();
        }
        // Answered only if it fails, under an id naming the generation it was typed for:
        // an answer per keystroke would cost the daemon a write and this client a wake-up.
        let write = Command::Write {
            session: self.session.clone(),
            if_gen: Some(self.gen),
            bytes: bytes.to_vec(),
        };
        let rid = RequestId::Str(format!("{QUIET_WRITE_ID}{}", self.gen));
        self.conn.send_as(&rid, &Op::QuietWrite(write))?;
        Ok(())
    }

    /// Sends what was read from the terminal and not sent yet, unless a write is still
    /// unanswered (then once it is) or the followed generation is not known to have a
    /// terminal (then once it is).
    fn send_typed(&mut self) -> Result<(), CommandError> {
        if self.unanswered.is_some() || self.typed.is_empty() || self.unverified {
            return Ok(());
        }
        let n = self.typed.len().min(INPUT_CHUNK * 16);
        let bytes: Vec<u8> = self.typed.drain(..n).collect();
        self.write_piped(self.gen, bytes)
    }

    /// Passes the end of piped input on to the generation it was read for, once every
    /// byte read before it is answered: `close_input` carries that generation as `if_gen`,
    /// so it never ends the input of a successor (which never got our input either).
    fn end_input(&mut self) -> Result<(), CommandError> {
        let Some(gen) = self.input_end else {
            return Ok(());
        };
        if self.input_end_sent || self.unanswered.is_some() || self.read_only {
            return Ok(());
        }
        self.input_end_sent = true;
        let id = self.conn.send(&Op::Core(Command::CloseInput {
            session: self.session.clone(),
            if_gen: Some(gen),
        }))?;
        self.pending.insert(id, Pending::CloseInput(gen));
        Ok(())
    }

    /// Sends piped input as a write that is answered (see `unanswered`).
    fn write_piped(&mut self, gen: u64, bytes: Vec<u8>) -> Result<(), CommandError> {
        let id = self.conn.send(&Op::Core(Command::Write {
            session: self.session.clone(),
            if_gen: Some(gen),
            bytes: bytes.clone(),
        }))?;
        self.pending.insert(id, Pending::Write(gen));
        self.unanswered = Some((gen, bytes));
        Ok(())
    }

    fn run(
        &mut self,
        detach: Option<u8>,
        signals: &SignalPipe,
        mut raw: Option<&mut RawMode<impl AsFd>>,
        redraw: Redraw,
    ) -> Result<Outcome, CommandError> {
        let stdin = io::stdin();
        let mut stdin_open = true;
        let mut buf = [0u8; INPUT_CHUNK];
        let mut keys = DetachFilter::new(detach);
        let mut forwarded = Vec::with_capacity(INPUT_CHUNK);
        // When a single press of the detach key takes effect.
        let mut detach_at: Option<Instant> = None;
        loop {
            while let Some(msg) = self.conn.pop_message()? {
                if let Some(outcome) = self.handle(msg)? {
                    return Ok(outcome);
                }
            }
            if self.retry_at.is_some_and(|at| at <= Instant::now()) {
                self.retry_at = None;
                if let Some((gen, bytes)) = self.unanswered.take() {
                    self.write_piped(gen, bytes)?;
                }
            }
            let in_flags = if stdin_open
                && (if self.tty {
                    self.typed.len() < MAX_QUEUED_INPUT
                } else {
                    self.unanswered.is_none()
                })
                && self.conn.queued() < MAX_QUEUED_INPUT
            {
                PollFlags::IN
            } else {
                PollFlags::empty()
            };
            let sock_flags = if self.conn.queued() > 0 {
                PollFlags::IN | PollFlags::OUT
            } else {
                PollFlags::IN
            };
            let mut fds = [
                PollFd::from_borrowed_fd(self.conn.fd(), sock_flags),
                PollFd::from_borrowed_fd(signals.fd(), PollFlags::IN),
                PollFd::from_borrowed_fd(stdin.as_fd(), in_flags),
            ];
            if detach_at.is_some_and(|at| at <= Instant::now()) {
                return Ok(Outcome::Detached);
            }
            let timeout = detach_at.into_iter().chain(self.retry_at).min().map(|at| {
                let left = at.saturating_duration_since(Instant::now());
                rustix::event::Timespec {
                    tv_sec: left.as_secs() as _,
                    tv_nsec: left.subsec_nanos().into(),
                }
            });
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(CommandError::Failed(format!("poll: {e}"))),
            }
            let ready = |i: usize| !fds[i].revents().is_empty();
            let (sock, sig, input) = (ready(0), ready(1), !in_flags.is_empty() && ready(2));
            if fds[0].revents().contains(PollFlags::OUT) {
                if let Err(lost) = self.conn.flush() {
                    // The daemon closed the connection (a shutdown) with something of ours
                    // still to send: what it sent before is read first, as below.
                    for _ in 0..64 {
                        if !matches!(self.conn.read_available(), Ok(true)) {
                            break;
                        }
                    }
                    return self.wind_up(lost);
                }
            }
            if sig {
                let drained = signals
                    .drain()
                    .map_err(|e| CommandError::Failed(format!("signal pipe: {e}")))?;
                for (i, &s) in drained.iter().enumerate() {
                    match s {
                        libc::SIGWINCH => self.send_size()?,
                        libc::SIGTSTP => {
                            // Continued already (a SIGCONT right behind it): not stopped.
                            let continued = drained[i..].contains(&libc::SIGCONT);
                            self.suspend(raw.as_deref_mut(), !continued)?;
                        }
                        libc::SIGCONT => self.resume(raw.as_deref_mut(), redraw)?,
                        _ => return Ok(Outcome::Signal(s)),
                    }
                }
            }
            if sock {
                let lost = match self.conn.read_available() {
                    Ok(true) => None,
                    Ok(false) => Some(ClientError::Lost("the daemon closed the connection".into())),
                    Err(e) => Some(e),
                };
                if let Some(lost) = lost {
                    return self.wind_up(lost);
                }
            }
            if input {
                match rustix::io::read(stdin.as_fd(), &mut buf) {
                    Ok(0) | Err(rustix::io::Errno::IO) => {
                        // A closed terminal or the end of piped input: nothing more will
                        // be typed; stay until the process ends.
                        stdin_open = false;
                        if self.tty || keys.armed() {
                            return Ok(Outcome::Detached);
                        }
                        // The process reads to the end of its input as it would from
                        // the pipe itself (`cat`, `wc`, `sort` finish).
                        self.input_end = Some(self.gen);
                        self.end_input()?;
                    }
                    Ok(n) => {
                        forwarded.clear();
                        let leave = keys.filter(&buf[..n], &mut forwarded);
                        self.forward(&forwarded)?;
                        if leave {
                            return Ok(Outcome::Detached);
                        }
                        // Any earlier press was decided by this input's first byte: a
                        // press held now is a new one.
                        detach_at = keys.armed().then(|| Instant::now() + DOUBLE_PRESS);
                    }
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(e) => {
                        return Err(CommandError::Failed(format!("reading the terminal: {e}")))
                    }
                }
            }
        }
    }

    /// `SIGTSTP` (`kill -TSTP`, or a stop from another terminal): the terminal is handed
    /// back as on detaching — the modes the session's output switched on are switched off,
    /// the settings restored — and then, when `stop`, this process stops (as the signal's
    /// default action would have: `SIGSTOP`, since the handler replaced that action). Held
    /// raw while stopped, the terminal would leave the shell that took it back unusable.
    fn suspend(
        &mut self,
        raw: Option<&mut RawMode<impl AsFd>>,
        stop: bool,
    ) -> Result<(), CommandError> {
        let Some(raw) = raw else {
            return Ok(());
        };
        let undo = self.modes.undo();
        if !undo.is_empty() {
            write_stdout(&undo)?;
        }
        let _ = raw.restore();
        self.suspended = true;
        if stop {
            stop_self().map_err(|e| CommandError::Failed(format!("stopping: {e}")))?;
        }
        Ok(())
    }

    /// `SIGCONT` (`fg`): the terminal is made raw again, the modes the session's output
    /// had on are switched back on, its size is sent again (it may have changed while
    /// stopped) and the program is asked to redraw, as on attaching. Harmless when the
    /// terminal was never let go (a `SIGCONT` after an uncatchable `SIGSTOP`, or none).
    fn resume(
        &mut self,
        raw: Option<&mut RawMode<impl AsFd>>,
        redraw: Redraw,
    ) -> Result<(), CommandError> {
        let Some(raw) = raw else {
            return Ok(());
        };
        raw.reenter().map_err(|e| {
            CommandError::Failed(format!("cannot put the terminal in raw mode: {e}"))
        })?;
        // Only what `suspend` switched off: sent again, the alternate screen would be
        // cleared.
        if std::mem::take(&mut self.suspended) {
            let redo = self.modes.redo();
            if !redo.is_empty() {
                write_stdout(&redo)?;
            }
        }
        self.send_size()?;
        self.redraw(redraw)
    }

    /// The connection is gone (`lost`): what was read before it went is handled first.
    /// The followed generation's end told before the daemon went away (a shutdown stops
    /// it, then closes every connection) is how the attachment ended, not the loss.
    fn wind_up(&mut self, lost: ClientError) -> Result<Outcome, CommandError> {
        while let Some(msg) = self.conn.pop_message()? {
            if let Some(outcome) = self.handle(msg)? {
                return Ok(outcome);
            }
        }
        if let Some(end) = self.ended.take() {
            return Ok(Outcome::Ended(end));
        }
        Err(lost.into())
    }

    /// Acts on one message from the daemon.
    fn handle(&mut self, msg: Message) -> Result<Option<Outcome>, CommandError> {
        let obj = match &msg {
            Message::Event(WireEvent::Output(frame)) => {
                let first = std::mem::take(&mut self.trim_replay);
                if frame.gen > self.gen {
                    self.follow(frame.gen)?;
                }
                if frame.gen == self.gen {
                    let mut data: &[u8] = &frame.data;
                    if first && frame.pos > 0 {
                        if let Some(nl) = data.iter().position(|&b| b == b'\n') {
                            data = &data[nl + 1..];
                        }
                    }
                    self.modes.feed(data);
                    write_stdout(data)?;
                }
                return Ok(None);
            }
            // Followed while still pending: now it has a terminal to size.
            Message::Event(WireEvent::Spawned { gen, .. }) if *gen == self.gen => {
                self.send_size()?;
                return Ok(None);
            }
            Message::Event(WireEvent::Spawned { gen, .. }) => {
                self.follow(*gen)?;
                return Ok(None);
            }
            // Ended, and a restart we were waiting for will not come.
            Message::Event(WireEvent::State { state, .. })
                if self.ended.is_some()
                    && !matches!(
                        state,
                        SessionState::Backoff | SessionState::Starting | SessionState::Running
                    ) =>
            {
                return Ok(self.ended.take().map(Outcome::Ended));
            }
            Message::Event(_) => return Ok(None),
            Message::Response(obj) => obj,
        };
        let quiet_write = || {
            str_of(obj, "id")
                .and_then(|id| id.strip_prefix(QUIET_WRITE_ID))
                .and_then(|gen| gen.parse().ok())
                .map(Pending::Write)
        };
        let answered = u64_of(obj, "id").and_then(|id| self.pending.remove(&id));
        let quiet = answered.is_none();
        let Some(kind) = answered.or_else(quiet_write) else {
            return Ok(None);
        };
        let ok = obj.get("ok") == Some(&Value::Bool(true));
        let error = obj.get("error").and_then(Value::as_object);
        let code = error.and_then(|e| str_of(e, "code")).unwrap_or("");
        if let (Pending::Write(_), true) = (kind, quiet) {
            if code == "limit" {
                // A quiet write refused for a full queue: its bytes are lost (said below);
                // from now on every write is answered, and sent again when refused.
                self.answered_input = true;
            }
        } else if let Pending::Write(_) = kind {
            if code == "limit" && self.unanswered.is_some() {
                // The process's input queue is full: the same bytes again shortly, as a
                // writer to a full pipe waits.
                self.retry_at = Some(Instant::now() + REFUSED_INPUT_RETRY);
                return Ok(None);
            }
            self.unanswered = None;
            self.send_typed()?;
            self.end_input()?;
        }
        match kind {
            Pending::Write(g) if !ok => {
                if self.unsent_notice.as_ref() != Some(&(g, code.to_string())) {
                    self.unsent_notice = Some((g, code.to_string()));
                    let text = match code {
                        // Typed for a generation that is being replaced or has ended: the
                        // daemon refused it, as it should.
                        "stale_generation" | "not_running" => {
                            format!("gen {g} is no longer running; input not sent")
                        }
                        _ => format!(
                            "input not sent: {}",
                            error.and_then(|e| str_of(e, "message")).unwrap_or(code)
                        ),
                    };
                    self.notice(&text)?;
                }
                Ok(None)
            }
            Pending::AttachedResize if code == "bad_request" && !self.plain_resize => {
                self.plain_resize = true;
                self.send_size()?;
                Ok(None)
            }
            Pending::Write(_) | Pending::Resize | Pending::AttachedResize => Ok(None),
            Pending::Wait(g) if g == self.gen => {
                if ok {
                    self.ended = Some(end_of_wait(obj)?);
                }
                let id = self.conn.send(&Op::Core(Command::Get {
                    session: self.session.clone(),
                }))?;
                self.pending.insert(id, Pending::Successor(g));
                Ok(None)
            }
            Pending::Wait(_) => Ok(None),
            Pending::Successor(g) if g == self.gen => self.after_end(obj, ok),
            Pending::Successor(_) => Ok(None),
            Pending::Kind(g) if ok => self.after_kind(g, obj),
            Pending::Kind(_) => Ok(None),
            // Ended already (the process closed its input, or ended, or was replaced):
            // the end of input has nothing left to end.
            Pending::CloseInput(_)
                if ok || matches!(code, "stale_generation" | "not_running" | "input_closed") =>
            {
                Ok(None)
            }
            Pending::CloseInput(g) => {
                let why = error.and_then(|e| str_of(e, "message")).unwrap_or(code);
                self.notice(&format!("end of input not passed on to gen {g}: {why}"))?;
                Ok(None)
            }
        }
    }

    /// The followed generation ended: follow what comes next, or finish.
    fn after_end(&mut self, resp: &Object, ok: bool) -> Result<Option<Outcome>, CommandError> {
        let snap = resp.get("session").and_then(Value::as_object);
        let next = snap.and_then(|s| u64_of(s, "current"));
        if let Some(next) = next.filter(|&n| n > self.gen) {
            self.follow(next)?;
            return Ok(None);
        }
        let state = snap.and_then(|s| str_of(s, "state")).unwrap_or("");
        if ok && matches!(state, "backoff" | "starting") {
            // A restart is due; its `spawned` event will move us on.
            return Ok(None);
        }
        match self.ended.take() {
            Some(end) => Ok(Some(Outcome::Ended(end))),
            None => Err(CommandError::Failed(format!(
                "{} gen {}: ended, and its exit status is no longer known",
                self.session, self.gen
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` in turn; returns what was forwarded, whether it detached (and after
    /// which chunk), and whether a press is held at the end.
    fn run(key: Option<u8>, chunks: &[&[u8]]) -> (Vec<u8>, Option<usize>, bool) {
        let mut f = DetachFilter::new(key);
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            if f.filter(c, &mut out) {
                return (out, Some(i), f.armed());
            }
        }
        (out, None, f.armed())
    }

    const K: u8 = 0x1c;

    #[test]
    fn a_single_press_is_held_then_anything_else_detaches() {
        assert_eq!(run(Some(K), &[b"ab\x1c"]), (b"ab".to_vec(), None, true));
        assert_eq!(
            run(Some(K), &[b"ab\x1c", b"cd"]),
            (b"ab".to_vec(), Some(1), false)
        );
        // In one read: what follows the press is dropped.
        assert_eq!(run(Some(K), &[b"a\x1cbc"]), (b"a".to_vec(), Some(0), false));
    }

    #[test]
    fn a_double_press_is_sent_through_once_in_or_across_reads() {
        assert_eq!(
            run(Some(K), &[b"a\x1c\x1cb"]),
            (b"a\x1cb".to_vec(), None, false)
        );
        assert_eq!(
            run(Some(K), &[b"a\x1c", b"\x1c", b"b"]),
            (b"a\x1cb".to_vec(), None, false)
        );
        // A third press starts over.
        assert_eq!(
            run(Some(K), &[b"\x1c\x1c\x1c"]),
            (b"\x1c".to_vec(), None, true)
        );
        assert_eq!(
            run(Some(K), &[b"\x1c\x1c\x1c\x1c"]),
            (b"\x1c\x1c".to_vec(), None, false)
        );
    }

    #[test]
    fn without_a_key_everything_goes_through() {
        assert_eq!(
            run(None, &[b"a\x1c", b"\x1cb"]),
            (b"a\x1c\x1cb".to_vec(), None, false)
        );
        assert_eq!(run(Some(0x01), &[b"\x1c"]), (b"\x1c".to_vec(), None, false));
    }
}
