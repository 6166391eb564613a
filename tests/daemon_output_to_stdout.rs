//! `daemon --output-to-stdout`: every session's output on the daemon's standard output,
//! line by line, as `NAME | line`, names padded to a common width, partial lines joined,
//! and no colour when standard output is a pipe; as a PID namespace's init, the daemon
//! exits only once the log writer has written everything.

mod util;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Instant;

use genward::testkit::{proc, scratch::ScratchDir, wait};
use serde_json::json;
use util::daemon::{daemon_binary, Client, Daemon, PATIENCE};
use util::pidns::in_new_pid_namespace;

/// A daemon with `--output-to-stdout` whose standard output is a pipe read here, and what
/// it writes there as it comes.
fn start(tag: &str, env: &[(&str, &str)]) -> (Daemon, Receiver<Vec<u8>>) {
    let (d, stdout) = start_unread(tag, env);
    (d, reader(stdout))
}

/// A daemon with `--output-to-stdout` whose standard output is a pipe nobody reads yet.
fn start_unread(tag: &str, env: &[(&str, &str)]) -> (Daemon, ChildStdout) {
    let dir = ScratchDir::new(tag);
    let state = dir.join("state");
    let mut cmd = Command::new(daemon_binary());
    cmd.env("RUST_LOG", "warn").envs(env.iter().copied());
    let mut child = spawn_ready(cmd, &state);
    let stdout = child.stdout.take().unwrap();
    let pid = child.id();
    let socket = state.join("genward.sock");
    (
        Daemon {
            child,
            dir,
            socket,
            pid,
        },
        stdout,
    )
}

/// Runs `cmd` (the daemon's program, or a wrapper given it as its first argument) with
/// `daemon --output-to-stdout --state-dir STATE` and its standard output piped; returns
/// once the daemon is ready.
fn spawn_ready(mut cmd: Command, state: &Path) -> Child {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 returned two new descriptors, owned here.
    let (ready_r, ready_w) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let ready_w_raw = ready_w.as_raw_fd();
    cmd.args([
        "daemon",
        "--output-to-stdout",
        "--ready-fd",
        "3",
        "--state-dir",
    ])
    .arg(state)
    .stdin(Stdio::null())
    .stdout(Stdio::piped());
    // SAFETY: `place_at` makes only async-signal-safe calls; `ready_w_raw` is open in the
    // child (a wrapper passes it on).
    unsafe {
        cmd.pre_exec(move || util::daemon::place_at(ready_w_raw, 3));
    }
    let child = cmd.spawn().expect("spawn genward daemon");
    drop(ready_w);
    let mut byte = [0u8; 1];
    let n = std::fs::File::from(ready_r).read(&mut byte).unwrap();
    assert_eq!(n, 1, "daemon exited before becoming ready");
    child
}

/// Passes on each line of the daemon's standard error (`Disconnected` once every holder
/// of it is gone: the daemon and its log writer).
fn log_lines(stderr: ChildStderr) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A session that prints [`BYE_LINES`] lines and then `LAST` when it is stopped, started
/// through a client that is then let go (so that the exit waits for no subscriber); once
/// its `TERM` trap is set.
fn start_bye_session(socket: &Path) {
    let mut c = Client::connect(socket);
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!(
        "trap 'i=0; while [ $i -lt {BYE_LINES} ]; do echo bye-$i-{pad}; i=$((i+1)); done; \
         echo LAST; exit 0' TERM; echo up; sleep 1000 & wait",
        pad = "x".repeat(60)
    );
    let gen = c.ok(json!({"op": "spawn", "session": "a", "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "up");
}

/// Reads the daemon's log until a line with `needle`, or until it ends; what it read before.
fn log_until(log: &Receiver<String>, needle: &str) -> (Option<String>, Vec<String>) {
    let deadline = Instant::now() + PATIENCE;
    let mut said = Vec::new();
    loop {
        match log.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains(needle) => return (Some(line), said),
            Ok(line) => said.push(line),
            Err(RecvTimeoutError::Disconnected) => return (None, said),
            Err(RecvTimeoutError::Timeout) => panic!("no {needle:?} in the daemon's log: {said:?}"),
        }
    }
}

/// Reads `stdout` to its end on a thread of its own, passing on each piece.
fn reader(mut stdout: ChildStdout) -> Receiver<Vec<u8>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    rx
}

/// What has come on standard output once it holds every line of `want`.
fn until_lines(rx: &Receiver<Vec<u8>>, seen: &mut Vec<u8>, want: &[&str]) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = String::from_utf8_lossy(seen).into_owned();
        // Split at `\n` only: a `\r` before it is part of the line.
        if want.iter().all(|w| text.split('\n').any(|l| l == *w)) {
            return text;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(piece) => seen.extend(piece),
            Err(_) => panic!("standard output never had all of {want:?}; it has {text:?}"),
        }
    }
}

#[test]
fn every_line_is_prefixed_partial_lines_are_joined_and_no_colour_in_a_pipe() {
    // Even with a colour-friendly environment: a pipe gets none.
    let (d, rx) = start("stdout-lines", &[("TERM", "xterm-256color")]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // The longer name first, so the shorter one is padded to it.
    let gen = c.ok(json!({"op": "spawn", "session": "db-main",
        "argv": ["sh", "-c", "echo ready >&2"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
    let script = r"printf 'one\ntw'; printf 'o\nthree'";
    let gen = c.ok(json!({"op": "spawn", "session": "web", "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
    let mut seen = Vec::new();
    let text = until_lines(
        &rx,
        &mut seen,
        &[
            "db-main | ready",
            "web     | one",
            "web     | two",
            // Unfinished when the generation ended: written then, as a line.
            "web     | three",
        ],
    );
    assert!(!text.contains('\x1b'), "colour in a pipe: {text:?}");
    let web: Vec<&str> = text.lines().filter(|l| l.starts_with("web ")).collect();
    assert_eq!(web, ["web     | one", "web     | two", "web     | three"]);
}

#[test]
fn pty_output_passes_through_with_its_line_ends_made_plain() {
    let (d, rx) = start("stdout-pty", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "t", "pty": true,
        "argv": ["printf", r"\033[1mbold\033[0m\n"]}))["gen"]
        .as_u64()
        .unwrap();
    let events = c.events_until(|m| m.is("exited", gen));
    // Subscribers get the terminal's bytes as they are: it turns `\n` into `\r\n`.
    let sent = String::from_utf8(util::daemon::output_of(&events, gen)).unwrap();
    assert!(sent.ends_with("\x1b[0m\r\n"), "{sent:?}");
    let mut seen = Vec::new();
    // On standard output the escape sequences are the program's own, but the `\r` before
    // the `\n` is taken off (a line-oriented collector would show it as `^M`).
    let text = until_lines(&rx, &mut seen, &["t | \x1b[1mbold\x1b[0m"]);
    assert!(!text.contains('\r'), "{text:?}");
}

#[test]
fn a_stdout_nobody_reads_never_blocks_the_daemon_and_drops_are_counted() {
    let (d, stdout) = start_unread("stdout-blocked", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Far more than the pipes and the daemon's queue hold: the rest is dropped.
    let flood = "head -c 6000000 /dev/zero | tr '\\0' x | fold -w 99";
    let gen = c.ok(json!({"op": "spawn", "session": "flood", "argv": ["sh", "-c", flood]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
    // The daemon read it all and answers at once, its standard output still full.
    c.ok(json!({"op": "hello"}));
    let mut other = d.client();
    other.ok(json!({"op": "list"}));
    // Once read, what was kept comes out whole, and then the count of what was not.
    let rx = reader(stdout);
    let mut seen = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    let text = loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if text.contains("genward: dropped ") {
            break text;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        seen.extend(rx.recv_timeout(left).expect("a count of dropped bytes"));
    };
    let line = text
        .split('\n')
        .find(|l| l.starts_with("genward: dropped "))
        .unwrap();
    let dropped: u64 = line["genward: dropped ".len()..]
        .trim_end_matches(" bytes")
        .parse()
        .unwrap();
    assert!(dropped > 0 && dropped < 6_000_000 + 60_000 * 8, "{line}");
    let total = c.ok(json!({"op": "hello"}))["log_writer"]["dropped_bytes"]
        .as_u64()
        .unwrap();
    assert!(total >= dropped, "hello counts {total}, the note {dropped}");
    let first = text.split('\n').next().unwrap();
    assert_eq!(first, format!("flood | {}", "x".repeat(99)));
}

/// Lines the session prints when it is stopped: far more than a pipe holds (64 KiB), less
/// than the daemon's queue and the writer's pipe take (1 MiB each), so none is dropped.
const BYE_LINES: usize = 4000;

#[test]
fn as_pid_1_the_daemon_exits_once_the_log_writer_has_written_everything() {
    let test = "as_pid_1_the_daemon_exits_once_the_log_writer_has_written_everything";
    let mut cmd = match in_new_pid_namespace() {
        Ok(cmd) => cmd,
        Err(why) => {
            util::sys::skip(test, &why);
            return;
        }
    };
    let dir = ScratchDir::new("stdout-pid1");
    let state = dir.join("state");
    cmd.arg(daemon_binary())
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped());
    let mut unshare = spawn_ready(cmd, &state);
    let stdout = unshare.stdout.take().unwrap();
    let log = log_lines(unshare.stderr.take().unwrap());
    let init = *proc::children(unshare.id())
        .first()
        .expect("unshare's child, the namespace's init");
    start_bye_session(&state.join("genward.sock"));

    // `docker stop`. The session's last words fill the pipe nobody reads yet, and the
    // writer waits for room with the rest.
    // SAFETY: kill with the pid of the namespace's init, which lives until unshare (our
    // unreaped child) has reaped it.
    unsafe { libc::kill(init as i32, libc::SIGTERM) };
    // Standard output is read once the daemon says it waits for the writer — or, had it
    // not waited, once everything in the namespace is gone (its standard error closed).
    let (_, said) = log_until(&log, "is still writing");
    let text = String::from_utf8(read_to_end(stdout)).unwrap();
    let bye = text.lines().filter(|l| l.starts_with("a | bye-")).count();
    assert_eq!(
        (bye, text.lines().last()),
        (BYE_LINES, Some("a | LAST")),
        "standard output lost the session's last lines; the daemon said {said:?}"
    );
    let status = wait::child_exit(&mut unshare, PATIENCE).expect("PID 1 exits");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_exit_waits_for_the_log_writer_only_so_long() {
    let dir = ScratchDir::new("stdout-exit-bound");
    let state = dir.join("state");
    let mut cmd = Command::new(daemon_binary());
    cmd.env("RUST_LOG", "info").stderr(Stdio::piped());
    let mut daemon = spawn_ready(cmd, &state);
    // Held and never read: the writer cannot finish.
    let stdout = daemon.stdout.take().unwrap();
    let log = log_lines(daemon.stderr.take().unwrap());
    start_bye_session(&state.join("genward.sock"));
    // SAFETY: kill with the pid of our own, unreaped child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let (line, said) = log_until(&log, "the log writer still writing");
    let line = line.unwrap_or_else(|| panic!("no word of what may be lost: {said:?}"));
    assert!(line.contains("after waiting 5 s"), "{line}");
    let status = wait::child_exit(&mut daemon, PATIENCE).expect("the daemon exits");
    assert_eq!(status.code(), Some(0), "{said:?}");
    // The writer, left to finish on its own, writes the rest once read.
    let text = String::from_utf8(read_to_end(stdout)).unwrap();
    assert_eq!(text.lines().last(), Some("a | LAST"));
}

/// Reads `stdout` until every holder of it has closed it.
fn read_to_end(stdout: ChildStdout) -> Vec<u8> {
    let rx = reader(stdout);
    let mut seen = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(piece) => seen.extend(piece),
            Err(RecvTimeoutError::Disconnected) => return seen,
            Err(RecvTimeoutError::Timeout) => panic!("standard output never closed"),
        }
    }
}
