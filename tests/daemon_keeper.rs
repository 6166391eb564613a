//! A crash that loses nothing: the daemon's keeper holds every child's descriptors while no
//! daemon runs, and the next daemon on the same state directory resumes each generation
//! with its I/O — the same pids and generation numbers, every byte written meanwhile
//! (byte-exact, at contiguous offsets), input and resize working again, and the exact
//! exit code of a process that ended meanwhile. With the keeper killed too, the
//! durable-state recovery takes over. The keeper exits with a clean shutdown, and at the
//! end of its hold when no daemon comes.
//!
//! The first daemon runs under a child subreaper ([`SUBREAPER`]) and only the daemon is
//! killed: its processes are reparented to the subreaper, which reaps the one that ends —
//! the reap is what makes the kernel publish its status.

mod util;

use std::process::Child;

use genward::store::keeper_file::KEEPER_FILE;
use genward::testkit::wait;
use serde_json::json;
use util::daemon::{
    cannot_take_back_exits, fifo, output_of, release, Client, Daemon, Msg, PATIENCE, SUBREAPER,
};
use util::keeper::{await_exit, keeper_pid, pidfd, spawn};

/// `seq 1 n` as the shell prints it.
fn seq(n: u32) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect()
}

/// Reads (bounded) until `gen`'s stdout holds `len` bytes; checks its offsets are
/// contiguous from 0 and returns the bytes, and every event read.
fn stdout_of(c: &mut Client, gen: u64, len: usize) -> (Vec<u8>, Vec<Msg>) {
    let mut out = Vec::new();
    let seen = c.events_until(|m| {
        if let Msg::Output(v, data) = m {
            if v["gen"] == json!(gen) && v["stream"] == "stdout" {
                assert_eq!(v["offset"], json!(out.len()), "offsets not contiguous");
                out.extend_from_slice(data);
            }
        }
        assert!(!m.is("dropped", gen), "output dropped: {m:?}");
        out.len() >= len
    });
    (out, seen)
}

/// Everything the first daemon left has ended and been reaped: the subreaper has no child
/// left and exits.
fn assert_nothing_left(mut subreaper: Child) {
    let status = wait::child_exit(&mut subreaper, PATIENCE);
    assert!(
        status.is_some(),
        "the subreaper still has processes to reap"
    );
}

const FLOOD_FIRST: u32 = 20_000;
const FLOOD_ALL: u32 = 300_000;

#[test]
fn a_crash_with_the_keeper_alive_loses_nothing() {
    if cannot_take_back_exits() {
        return;
    }
    let mut d = Daemon::start_wrapped("keeper-crash", &SUBREAPER, &[], None);
    let state = d.dir.join("state");
    let keeper = keeper_pid(&state);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let go_flood = fifo(&d, "go-flood");
    let go_end = fifo(&d, "go-end");
    // Part of the flood now, the rest (over a megabyte: more than the pipe holds) only
    // once the daemon is dead; then it waits on its stdin.
    let flood = format!(
        r#"seq 1 {FLOOD_FIRST}; read go < "$1"; seq {} {FLOOD_ALL}; read x"#,
        FLOOD_FIRST + 1
    );
    // The flood last: every output event of it is read by `stdout_of`.
    let specs = [
        (
            "reader",
            json!({"argv": ["sh", "-c", "while read l; do echo got:$l; done"]}),
        ),
        (
            "shell",
            json!({"argv": ["sh"], "pty": {"rows": 24, "cols": 80}}),
        ),
        (
            "ender",
            json!({"argv": ["sh", "-c", r#"read go < "$1"; echo bye; exit 7"#, "sh", go_end]}),
        ),
        (
            "flood",
            json!({"argv": ["sh", "-c", flood, "sh", go_flood], "buffer": 16 << 20}),
        ),
    ];
    let mut before = Vec::new();
    for (name, spec) in specs {
        before.push((name, spawn(&mut c, name, spec)));
    }
    let (reader_gen, _) = before[0].1;
    let (shell_gen, _) = before[1].1;
    let (ender_gen, ender_pid) = before[2].1;
    let (flood_gen, _) = before[3].1;
    let ender = pidfd(ender_pid);
    stdout_of(&mut c, flood_gen, seq(FLOOD_FIRST).len());
    drop(c);

    // The daemon dies; while none runs the flood goes on and the ender ends.
    let subreaper = d.crash_daemon_edit_and_restart(
        |_| {
            release(&go_flood);
            release(&go_end);
            await_exit(&ender, "the ender");
        },
        &[],
        &[],
    );
    assert_eq!(
        keeper_pid(&state),
        keeper,
        "the same keeper serves the new daemon"
    );

    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true, "from_start": true}));
    let list = c.ok(json!({"op": "list"}));
    for (name, (gen, pid)) in &before {
        let s = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == *name)
            .unwrap_or_else(|| panic!("{name} not listed: {list}"));
        let g = &s["generations"][0];
        if *name == "ender" {
            continue;
        }
        assert_eq!(s["current"], json!(gen), "{list}");
        assert_eq!(g["pid"], json!(pid), "{list}");
        assert_eq!(g["lifecycle"], "running", "{list}");
        assert_eq!(g["adopted"]["io_lost"], false, "{list}");
    }

    // Every byte of the flood, the part written while no daemon ran included.
    let all = seq(FLOOD_ALL);
    let (got, mut seen) = stdout_of(&mut c, flood_gen, all.len());
    assert!(
        got == all,
        "the flood's output differs ({} bytes)",
        got.len()
    );

    // The process that ended meanwhile: its output, then its own exit code.
    c.seen_or_until(&mut seen, |m| m.is("exited", ender_gen));
    assert_eq!(output_of(&seen, ender_gen), b"bye\n");
    let end = seen
        .iter()
        .find(|m| m.is("exited", ender_gen))
        .unwrap()
        .json()
        .clone();
    assert_eq!(end["code"], 7, "{end}");
    assert_eq!(end["cause"], "exited", "{end}");

    // Input reaches the reader again; resize reaches the terminal.
    c.ok(json!({"op": "write", "session": "reader", "if_gen": reader_gen, "data": "hello\n"}));
    c.output_until(reader_gen, "got:hello");
    c.ok(json!({"op": "resize", "session": "shell", "if_gen": shell_gen, "rows": 33, "cols": 77}));
    c.ok(json!({"op": "write", "session": "shell", "data": "stty size\n"}));
    c.output_until(shell_gen, "33 77");

    // Numbers go on above every one taken back.
    let (next, _) = spawn(&mut c, "next", json!({"argv": ["true"]}));
    assert!(before.iter().all(|(_, (g, _))| next > *g));
    drop(c);

    // A clean shutdown ends the keeper too.
    let keeper_fd = pidfd(keeper);
    assert_eq!(d.terminate(), Some(0));
    await_exit(&keeper_fd, "the keeper");
    assert!(
        !state.join(KEEPER_FILE).exists(),
        "the keeper's record stayed"
    );
    assert_nothing_left(subreaper);
}

#[test]
fn with_the_keeper_killed_too_the_durable_state_takes_over() {
    if cannot_take_back_exits() {
        return;
    }
    let mut d = Daemon::start_wrapped("keeper-killed", &SUBREAPER, &[], None);
    let state = d.dir.join("state");
    let keeper = keeper_pid(&state);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let spec = json!({"argv": ["sh", "-c", "echo up; exec sleep 1000"], "on_recover": "keep"});
    let (gen, pid) = spawn(&mut c, "job", spec);
    c.output_until(gen, "up");
    drop(c);
    let keeper_fd = pidfd(keeper);
    let subreaper = d.crash_daemon_edit_and_restart(
        |_| {
            rustix::process::pidfd_send_signal(&keeper_fd, rustix::process::Signal::KILL)
                .expect("kill the keeper");
            await_exit(&keeper_fd, "the keeper");
        },
        &[],
        &[],
    );
    let mut c = d.client();
    let got = c.ok(json!({"op": "get", "session": "job"}));
    let g = &got["session"]["generations"][0];
    assert_eq!(g["gen"], json!(gen), "{got}");
    assert_eq!(g["pid"], json!(pid), "{got}");
    assert_eq!(g["adopted"]["io_lost"], true, "{got}");
    // A fresh keeper serves the new daemon.
    assert_ne!(keeper_pid(&state), keeper);
    drop(c);
    assert_eq!(d.terminate(), Some(0));
    assert_nothing_left(subreaper);
}

#[test]
fn the_keeper_gives_up_after_its_hold_when_no_daemon_comes() {
    let mut d = Daemon::start("keeper-expires", &["--keeper-hold", "300ms"]);
    let state = d.dir.join("state");
    let keeper = pidfd(keeper_pid(&state));
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // A shell on a terminal: while the keeper holds its master, it lives on.
    let (gen, pid) = spawn(&mut c, "shell", json!({"argv": ["sh"], "pty": true}));
    let shell = pidfd(pid);
    c.ok(json!({"op": "write", "session": "shell", "if_gen": gen, "data": "echo ready\n"}));
    c.output_until(gen, "ready");
    drop(c);
    d.kill();
    // No daemon comes: the keeper closes everything (the shell's terminal hangs up) and
    // exits, its record gone.
    await_exit(&keeper, "the keeper");
    assert!(
        !state.join(KEEPER_FILE).exists(),
        "the keeper's record stayed"
    );
    await_exit(&shell, "the shell whose terminal hung up");
}

#[test]
fn a_keeper_record_that_cannot_be_trusted_is_replaced() {
    let mut d = Daemon::start("keeper-stale", &[]);
    let state = d.dir.join("state");
    assert_eq!(d.terminate(), Some(0));
    // A record naming a live process that is no keeper (this test), with a made-up token.
    let record = format!(
        "{{\"genward_state\":1,\"kind\":\"keeper\"}}\n{{\"pid\":{},\"identity\":\"linux1:00000000-0000-0000-0000-000000000000:0:1\",\"since_unix_ms\":1}}\n",
        std::process::id()
    );
    std::fs::write(state.join(KEEPER_FILE), record).unwrap();
    d.restart_wrapped(&[], &[]);
    let fresh = keeper_pid(&state);
    assert_ne!(
        fresh,
        std::process::id(),
        "a stranger was taken for the keeper"
    );
    let fresh = pidfd(fresh);
    assert_eq!(d.terminate(), Some(0));
    await_exit(&fresh, "the fresh keeper");
}

#[test]
fn the_keeper_hands_nothing_to_a_process_that_does_not_hold_the_lease() {
    use genward::keeper::wire::{Kind, Message};
    use genward::store::keeper_file::KEEPER_SOCKET;
    use genward::sys::fdpass::{recv_with_fds, send_with_fds, Received};
    use rustix::net::{
        connect, socket_with, AddressFamily, SocketAddrUnix, SocketFlags, SocketType,
    };

    let d = Daemon::start("keeper-stranger", &[]);
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (gen, _) = spawn(
        &mut c,
        "job",
        json!({"argv": ["sh", "-c", "echo up; exec sleep 1000"]}),
    );
    c.output_until(gen, "up");
    // This test is of the keeper's uid, but not the lease holder: it is closed at once.
    let fd = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    connect(
        &fd,
        &SocketAddrUnix::new(state.join(KEEPER_SOCKET)).unwrap(),
    )
    .unwrap();
    rustix::net::sockopt::set_socket_timeout(
        &fd,
        rustix::net::sockopt::Timeout::Recv,
        Some(PATIENCE),
    )
    .unwrap();
    // Garbage first, then a well-formed `Take`: neither gets anything back.
    let _ = send_with_fds(&fd, b"not a keeper message at all", &[], false);
    let _ = send_with_fds(&fd, &Message::plain(Kind::Take, 0).encode(), &[], false);
    let mut buf = [0u8; 64];
    match recv_with_fds(&fd, &mut buf, false) {
        Ok(Received::Eof) | Err(_) => {}
        other => panic!("the keeper answered a stranger: {other:?}"),
    }
    // The keeper still serves its daemon: the process is still held, the daemon works.
    let got = c.ok(json!({"op": "get", "session": "job"}));
    assert_eq!(got["session"]["state"], "running", "{got}");
}

/// The keeper link crosses an upgrade: generations spawned before and after it are both
/// held, and a crash after the upgrade resumes both with their I/O.
#[test]
fn the_keeper_keeps_holding_across_an_upgrade() {
    if cannot_take_back_exits() {
        return;
    }
    let mut d = Daemon::start_wrapped("keeper-upgrade", &SUBREAPER, &[], None);
    let state = d.dir.join("state");
    let keeper = keeper_pid(&state);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let echo = json!({"argv": ["sh", "-c", "while read l; do echo got:$l; done"]});
    let before = spawn(&mut c, "before", echo.clone());
    assert_eq!(c.ok(json!({"op": "hello"}))["keeper"], json!(true));
    let answer = c.ok(json!({"op": "upgrade"}));
    assert_eq!(answer["pid"], json!(d.pid), "{answer}");
    assert_eq!(
        c.ok(json!({"op": "hello"}))["keeper"],
        json!(true),
        "after the upgrade"
    );
    let after = spawn(&mut c, "after", echo);
    c.ok(json!({"op": "write", "session": "before", "data": "one\n"}));
    c.output_until(before.0, "got:one");
    drop(c);

    let subreaper = d.crash_daemon_edit_and_restart(|_| {}, &[], &[]);
    assert_eq!(keeper_pid(&state), keeper, "the same keeper");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let list = c.ok(json!({"op": "list"}));
    for (name, (gen, pid)) in [("before", before), ("after", after)] {
        let s = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {list}"));
        let g = &s["generations"][0];
        assert_eq!(s["current"], json!(gen), "{list}");
        assert_eq!(g["pid"], json!(pid), "{list}");
        assert_eq!(g["adopted"]["io_lost"], false, "{list}");
        c.ok(json!({"op": "write", "session": name, "data": "two\n"}));
        c.output_until(gen, "got:two");
    }
    drop(c);
    assert_eq!(d.terminate(), Some(0));
    assert_nothing_left(subreaper);
}

/// Generations taken back after a crash — with their I/O (keeper) or without (lost) —
/// cross an upgrade as they are: still adopted, the kept I/O still working, and each
/// one's end reported once it is stopped.
#[test]
fn generations_taken_back_cross_an_upgrade() {
    if cannot_take_back_exits() {
        return;
    }
    let mut d = Daemon::start_wrapped("keeper-then-upgrade", &SUBREAPER, &[], None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let echo = json!({"argv": ["sh", "-c", "while read l; do echo got:$l; done"]});
    let (kept, kept_pid) = spawn(&mut c, "kept", echo);
    drop(c);
    let subreaper = d.crash_daemon_edit_and_restart(|_| {}, &[], &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let answer = c.ok(json!({"op": "upgrade"}));
    assert_eq!(answer["ok"], json!(true), "{answer}");
    let list = c.ok(json!({"op": "list"}));
    let s = &list["sessions"][0];
    assert_eq!(s["current"], json!(kept), "{list}");
    assert_eq!(s["generations"][0]["pid"], json!(kept_pid), "{list}");
    assert_eq!(s["generations"][0]["adopted"]["io_lost"], false, "{list}");
    c.ok(json!({"op": "write", "session": "kept", "data": "after\n"}));
    c.output_until(kept, "got:after");
    c.ok(json!({"op": "stop", "session": "kept"}));
    let end = c.events_until(|m| m.is("exited", kept));
    assert_eq!(end.last().unwrap().json()["cause"], "stopped");
    drop(c);
    assert_eq!(d.terminate(), Some(0));
    assert_nothing_left(subreaper);
}
