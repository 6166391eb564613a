//! A daemon that does not answer — stopped, or a socket whose owner accepts and says
//! nothing, or accepts nothing with its backlog full — is given up on after
//! `GENWARD_TIMEOUT` with a message naming the socket; a
//! socket that answers with something other than genward's protocol is an error at
//! once; a path that is not a socket is named as such.

mod util;

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genward::testkit::scratch::ScratchDir;
use util::cli::{command, genward, gw_ok, run_cmd, wait_bounded, Out};
use util::daemon::Daemon;

/// Every command that asks the daemon something, as a test runs it.
const ASKING: &[&[&str]] = &[
    &["ls"],
    &["ls", "web"],
    &["run", "web", "--", "true"],
    &["run", "--no-wait", "web", "--", "true"],
    &["stop", "web"],
    &["kill", "web"],
    &["send", "web", "hi"],
    &["logs", "web"],
    &["logs", "-f", "web"],
    &["wait", "web"],
    &["wait", "--ready", "web"],
    &["rm", "web"],
    &["restart", "web"],
    &["events"],
    &["shutdown"],
    &["reload"],
    &["upgrade"],
    &["attach", "web"],
];

/// A listener at `dir/name` that accepts every connection and, for each, writes `first`
/// (if any) then keeps it open, reading nothing: a daemon that never answers.
fn fake_server(dir: &Path, name: &str, first: &'static [u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let mut open: Vec<UnixStream> = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = std::io::Write::write_all(&mut conn, first);
            open.push(conn);
        }
    });
    path
}

fn at(socket: &Path, args: &[&str], timeout: &str) -> Out {
    let mut cmd = genward(&["--socket", socket.to_str().unwrap()]);
    cmd.args(args).env("GENWARD_TIMEOUT", timeout);
    run_cmd(cmd, b"")
}

#[track_caller]
fn gives_up(out: &Out, socket: &Path, what: &str) {
    let expected = format!(
        "genward: the daemon at {} has not answered in 1s",
        socket.display()
    );
    assert_eq!(out.code, Some(1), "{what}: {out:?}");
    assert!(out.stderr.starts_with(&expected), "{what}: {out:?}");
    assert!(out.stderr.contains("GENWARD_TIMEOUT"), "{what}: {out:?}");
}

#[test]
fn a_silent_socket_is_given_up_on_after_genward_timeout() {
    let dir = ScratchDir::new("cli-silent-socket");
    let socket = fake_server(&dir, "silent.sock", b"");
    for args in ASKING {
        gives_up(&at(&socket, args, "1s"), &socket, &args.join(" "));
    }
}

#[test]
fn a_stopped_daemon_is_given_up_on_and_answers_again_once_continued() {
    let d = Daemon::start("cli-stopped-daemon", &[]);
    gw_ok(&d, &["run", "web", "--", "sleep", "600"]);
    /// Continues the daemon when dropped, even if an assertion failed meanwhile.
    struct Continued(i32);
    impl Drop for Continued {
        fn drop(&mut self) {
            // SAFETY: the daemon is our own child.
            unsafe { libc::kill(self.0, libc::SIGCONT) };
        }
    }
    // SAFETY: the daemon is our own child.
    unsafe { libc::kill(d.pid as i32, libc::SIGSTOP) };
    let continued = Continued(d.pid as i32);
    for args in [
        &["ls"][..],
        &["ls", "web"],
        &["wait", "web"],
        &["logs", "web"],
    ] {
        let mut cmd = command(&d, args);
        cmd.env("GENWARD_TIMEOUT", "1s");
        gives_up(&run_cmd(cmd, b""), &d.socket, &args.join(" "));
    }
    // `ls --timeout 0` waits without limit, as GENWARD_TIMEOUT=0 does: not even
    // GENWARD_TIMEOUT's bound on each answer gives up on the stopped daemon. It is
    // continued once the listing waits for its answer.
    let mut cmd = command(&d, &["ls", "--timeout", "0"]);
    cmd.env("GENWARD_TIMEOUT", "1ms")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let ls = cmd.spawn().unwrap();
    let wchan = format!("/proc/{}/wchan", ls.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&wchan).unwrap_or_default() != "unix_stream_read_generic" {
        assert!(Instant::now() < deadline, "ls never waited for the answer");
        std::thread::yield_now();
    }
    drop(continued);
    let out = wait_bounded(ls);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("running"), "{stdout}");
    // 0: no limit, as before.
    let mut cmd = command(&d, &["ls", "web"]);
    cmd.env("GENWARD_TIMEOUT", "0");
    assert!(run_cmd(cmd, b"").ok().contains("running"));
    gw_ok(&d, &["stop", "web"]);
}

#[test]
fn a_socket_that_speaks_something_else_is_named_at_once() {
    let dir = ScratchDir::new("cli-foreign-socket");
    let garbage = fake_server(&dir, "garbage.sock", b"220 mail.example ESMTP ready\r\n");
    let object = fake_server(&dir, "object.sock", b"{\"hello\":\"world\"}\n");
    for socket in [&garbage, &object] {
        for args in [&["ls"][..], &["wait", "web"], &["run", "web", "--", "true"]] {
            // No limit: the error must not depend on one.
            let out = at(socket, args, "0");
            let expected = format!(
                "genward: {} does not speak genward's protocol: ",
                socket.display()
            );
            assert_eq!(out.code, Some(1), "{out:?}");
            assert!(out.stderr.starts_with(&expected), "{out:?}");
        }
    }
}

#[test]
fn a_path_that_is_not_a_socket_is_named_as_such() {
    let dir = ScratchDir::new("cli-not-a-socket");
    let file = dir.join("file");
    std::fs::write(&file, b"").unwrap();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for path in [&file, &fifo, &dir.to_path_buf()] {
        let out = at(path, &["ls"], "1s");
        assert_eq!(out.code, Some(1), "{out:?}");
        assert_eq!(
            out.stderr,
            format!(
                "genward: {} is not a socket: point --socket / GENWARD_SOCKET at a daemon's socket\n",
                path.display()
            )
        );
    }
    // Nothing there at all is still "no daemon".
    let out = at(&dir.join("absent"), &["ls"], "1s");
    assert!(out.stderr.contains("no daemon at "), "{out:?}");
}

#[test]
fn bad_timeouts_are_usage_errors() {
    let dir = ScratchDir::new("cli-bad-timeouts");
    let socket = dir.join("absent.sock");
    for bad in ["soon", "-1s", "1ns", "999us"] {
        let out = at(&socket, &["ls"], bad);
        assert_eq!(out.code, Some(2), "{bad}: {out:?}");
        assert!(out.stderr.contains("GENWARD_TIMEOUT"), "{bad}: {out:?}");
    }
    // Commands that ask no daemon do not care.
    let mut man: Command = genward(&["man"]);
    man.env("GENWARD_TIMEOUT", "soon");
    run_cmd(man, b"").ok();
    for bad in ["1ns", "0.5ms"] {
        let out = at(&socket, &["ls", "--timeout", bad], "1s");
        assert_eq!(out.code, Some(2), "{bad}: {out:?}");
        assert!(out.stderr.contains("--timeout"), "{bad}: {out:?}");
    }
}

/// A listener that accepts nothing (a daemon stopped with SIGSTOP) once its backlog is
/// full holds a connect(2) itself: that too is given up on after `GENWARD_TIMEOUT`, with
/// a message naming the socket and the time waited.
#[test]
fn a_socket_whose_backlog_is_full_is_given_up_on_after_genward_timeout() {
    let dir = ScratchDir::new("cli-full-backlog");
    let socket = dir.join("full.sock");
    let full = genward::testkit::full_listener::full_listener(&socket);
    for args in [
        &["ls"][..],
        &["run", "web", "--", "true"],
        &["logs", "-f", "web"],
    ] {
        let out = at(&socket, args, "200ms");
        let what = args.join(" ");
        assert_eq!(out.code, Some(1), "{what}: {out:?}");
        let expected = format!(
            "genward: cannot connect to {}: not accepted in 200ms",
            socket.display()
        );
        assert!(out.stderr.starts_with(&expected), "{what}: {out:?}");
        assert!(out.stderr.contains("GENWARD_TIMEOUT"), "{what}: {out:?}");
    }
    drop(full);
}
