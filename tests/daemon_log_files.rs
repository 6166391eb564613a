//! A session's `log`: its output written to a file by the daemon's log writer, exactly,
//! rotated by size, never blocking the daemon, and written on after the writer dies.

mod util;

use std::path::Path;

use serde_json::{json, Value};
use util::daemon::{fifo, Client, Daemon};
use util::log_files::{await_contents, await_exit, await_file, writer_pid};

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Spawns `argv` as `session` with its log `log` and waits for its end.
fn run_to_end(c: &mut Client, session: &str, log: Value, argv: &[&str]) {
    let gen = c.ok(json!({"op": "spawn", "session": session, "argv": argv, "log": log}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
}

#[test]
fn the_output_reaches_the_file_byte_for_byte() {
    let d = Daemon::start("log-bytes", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let log = d.dir.join("web.log");
    let script = r"printf 'one\n\000\377 two\r\n'; printf 'no newline' >&2";
    run_to_end(
        &mut c,
        "web",
        json!({"path": path(&log)}),
        &["sh", "-c", script],
    );
    let first: &[u8] = b"one\n\x00\xff two\r\n";
    // stdout and stderr are read as they come: both are in the file, each whole.
    let got = await_file(&log, |b| b.len() == first.len() + 10);
    assert!(
        got == [first, b"no newline"].concat() || got == [b"no newline", first].concat(),
        "{got:?}"
    );
    // The next generation appends to the same file.
    run_to_end(
        &mut c,
        "web",
        json!({"path": path(&log)}),
        &["printf", "three\n"],
    );
    await_file(&log, |b| b.len() == got.len() + 6);
    assert!(std::fs::read(&log).unwrap().ends_with(b"three\n"));
}

#[test]
fn the_file_is_rotated_by_size_keeping_keep_files() {
    let d = Daemon::start("log-rotate", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let dir = d.dir.join("logs");
    std::fs::create_dir(&dir).unwrap();
    let log = dir.join("web.log");
    // Ten lines of 1000 bytes, each one write (so read whole), into files of at most
    // 4096 bytes: four lines fit in each, cut at line boundaries.
    let script = "for i in 0 1 2 3 4 5 6 7 8 9; do printf '%0999d\\n' $i; done";
    let spec = json!({"path": path(&log), "max_size": 4096, "keep": 2});
    run_to_end(&mut c, "web", spec, &["sh", "-c", script]);
    let line = |i: usize| format!("{i:0999}\n").into_bytes();
    let lines = |r: std::ops::Range<usize>| r.flat_map(line).collect::<Vec<u8>>();
    await_contents(&log, &lines(8..10));
    assert_eq!(std::fs::read(dir.join("web.log.1")).unwrap(), lines(4..8));
    assert_eq!(std::fs::read(dir.join("web.log.2")).unwrap(), lines(0..4));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["web.log", "web.log.1", "web.log.2"],
        "keep 2: the oldest is gone"
    );
}

#[test]
fn a_log_that_would_block_leaves_the_daemon_and_other_logs_alone() {
    let d = Daemon::start("log-fifo", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // A FIFO nobody reads: opening it to write would wait for a reader forever.
    let stuck = fifo(&d, "stuck.log");
    let script = "i=0; while [ $i -lt 200 ]; do echo line $i; i=$((i+1)); done";
    run_to_end(
        &mut c,
        "stuck",
        json!({"path": path(&stuck)}),
        &["sh", "-c", script],
    );
    // The daemon answers at once, and another session's log is written.
    c.ok(json!({"op": "hello"}));
    c.ok(json!({"op": "list"}));
    let ok = d.dir.join("ok.log");
    run_to_end(
        &mut c,
        "ok",
        json!({"path": path(&ok)}),
        &["echo", "written"],
    );
    await_contents(&ok, b"written\n");
    let mut other = d.client();
    other.ok(json!({"op": "hello"}));
}

#[test]
fn a_killed_writer_is_started_again_and_later_output_arrives() {
    let d = Daemon::start("log-writer-killed", &[]);
    let mut c = d.client();
    let log = d.dir.join("cat.log");
    let gen = c.ok(json!({"op": "spawn", "session": "cat", "argv": ["cat"],
        "log": {"path": path(&log)}}))["gen"]
        .as_u64()
        .unwrap();
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "one\n"}));
    await_contents(&log, b"one\n");
    let first = writer_pid(d.pid).expect("a log writer runs");
    // SAFETY: kill with the pid of a live process (the daemon's unreaped child).
    assert_eq!(unsafe { libc::kill(first as i32, libc::SIGKILL) }, 0);
    // Gone (or a zombie): its end of the pipe is closed.
    await_exit(first);
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "two\n"}));
    await_contents(&log, b"one\ntwo\n");
    let second = writer_pid(d.pid).expect("a new log writer runs");
    assert_ne!(second, first);
    let hello = c.ok(json!({"op": "hello"}));
    assert_eq!(hello["log_writer"]["pid"], json!(second), "{hello}");
    assert_eq!(hello["log_writer"]["restarts"], json!(1), "{hello}");
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "three\n"}));
    await_contents(&log, b"one\ntwo\nthree\n");
}

#[test]
fn bad_log_members_are_refused_by_name_and_change_nothing() {
    let d = Daemon::start("log-bad", &[]);
    let mut c = d.client();
    for (log, field) in [
        (json!({"path": "relative.log"}), "log.path"),
        (json!({"path": "/tmp/x\u{0}y"}), "log.path"),
        (json!({"max_size": 4096}), "log.path"),
        (
            json!({"path": "/tmp/x.log", "max_size": 10}),
            "log.max_size",
        ),
        (
            json!({"path": "/tmp/x.log", "max_size": "big"}),
            "log.max_size",
        ),
        (json!({"path": "/tmp/x.log", "keep": 100000}), "log.keep"),
        (json!({"path": "/tmp/x.log", "colour": true}), "log.colour"),
        (json!("/tmp/x.log"), "log"),
    ] {
        let r = c.err(
            json!({"op": "spawn", "session": "bad", "argv": ["true"], "log": log}),
            "bad_request",
        );
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{log}: {message}");
    }
    c.err(json!({"op": "get", "session": "bad"}), "no_such_session");
}

#[test]
fn the_log_is_written_on_across_an_upgrade() {
    let d = Daemon::start("log-upgrade", &[]);
    let mut c = d.client();
    let log = d.dir.join("cat.log");
    let gen = c.ok(json!({"op": "spawn", "session": "cat", "argv": ["cat"],
        "log": {"path": path(&log), "max_size": 8192}}))["gen"]
        .as_u64()
        .unwrap();
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "one\n"}));
    await_contents(&log, b"one\n");
    let before = writer_pid(d.pid).expect("a log writer runs");
    c.ok(json!({"op": "upgrade"}));
    // The new program has the session's log from its spec, and a writer of its own.
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "two\n"}));
    await_contents(&log, b"one\ntwo\n");
    // The previous program's writer saw its pipe close, and exited.
    await_exit(before);
    let after = writer_pid(d.pid).expect("a log writer runs after the upgrade");
    assert_ne!(before, after);
    let spec = &c.ok(json!({"op": "get", "session": "cat"}))["session"]["spec"];
    assert_eq!(
        spec["log"],
        json!({"path": path(&log), "max_size": 8192}),
        "{spec}"
    );
}

#[test]
fn after_a_crash_the_next_daemon_writes_on() {
    let mut d = Daemon::start("log-crash", &[]);
    let mut c = d.client();
    let log = d.dir.join("cat.log");
    let gen = c.ok(json!({"op": "spawn", "session": "cat", "argv": ["cat"],
        "log": {"path": path(&log)}}))["gen"]
        .as_u64()
        .unwrap();
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "one\n"}));
    await_contents(&log, b"one\n");
    let before = writer_pid(d.pid).expect("a log writer runs");
    drop(c);
    d.crash_and_restart(&[]);
    // The writer outlived the daemon, wrote what it had, and exited at the end of its
    // pipe; the next daemon (with the session back from the keeper) starts its own.
    await_exit(before);
    let mut c = d.client();
    c.ok(json!({"op": "write", "session": "cat", "if_gen": gen, "data": "two\n"}));
    await_contents(&log, b"one\ntwo\n");
}

/// The service manager's variables are the daemon's own: its log writer does not inherit
/// them (it would be one more process that may notify as if it were the daemon).
#[test]
fn the_log_writer_does_not_inherit_the_service_managers_variables() {
    let scratch = genward::testkit::scratch::ScratchDir::new("log-writer-env");
    let notify = scratch.join("notify");
    let _sock = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    let env = [("NOTIFY_SOCKET", notify.as_os_str())];
    let d = Daemon::start_env("log-writer-env", &[], &env);
    let mut c = d.client();
    let log = d.dir.join("echo.log");
    c.ok(
        json!({"op": "spawn", "session": "echo", "argv": ["echo", "written"],
        "log": {"path": path(&log)}}),
    );
    await_contents(&log, b"written\n");
    let writer = writer_pid(d.pid).expect("a log writer runs");
    let environ = std::fs::read(format!("/proc/{writer}/environ")).unwrap();
    assert!(
        !environ
            .split(|&b| b == 0)
            .any(|var| var.starts_with(b"NOTIFY_SOCKET=")),
        "the log writer has NOTIFY_SOCKET"
    );
}
