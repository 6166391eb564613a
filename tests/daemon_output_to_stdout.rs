//! `daemon --output-to-stdout`: every session's output on the daemon's standard output,
//! line by line, as `NAME | line`, names padded to a common width, partial lines joined,
//! and no colour when standard output is a pipe.

mod util;

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Instant;

use genward::testkit::scratch::ScratchDir;
use serde_json::json;
use util::daemon::{daemon_binary, Daemon, PATIENCE};

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
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 returned two new descriptors, owned here.
    let (ready_r, ready_w) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let ready_w_raw = ready_w.as_raw_fd();
    let mut cmd = Command::new(daemon_binary());
    cmd.args([
        "daemon",
        "--output-to-stdout",
        "--ready-fd",
        "3",
        "--state-dir",
    ])
    .arg(&state)
    .env("RUST_LOG", "warn")
    .envs(env.iter().copied())
    .stdin(Stdio::null())
    .stdout(Stdio::piped());
    // SAFETY: `place_at` makes only async-signal-safe calls; `ready_w_raw` is open in the
    // child.
    unsafe {
        cmd.pre_exec(move || util::daemon::place_at(ready_w_raw, 3));
    }
    let mut child = cmd.spawn().expect("spawn genward daemon");
    drop(ready_w);
    let mut byte = [0u8; 1];
    let n = std::fs::File::from(ready_r).read(&mut byte).unwrap();
    assert_eq!(n, 1, "daemon exited before becoming ready");
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
fn pty_output_passes_through_unmangled() {
    let (d, rx) = start("stdout-pty", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "t", "pty": true,
        "argv": ["printf", r"\033[1mbold\033[0m\n"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
    let mut seen = Vec::new();
    // The terminal turns `\n` into `\r\n`; the escape sequences are the program's own.
    until_lines(&rx, &mut seen, &["t | \x1b[1mbold\x1b[0m\r"]);
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
