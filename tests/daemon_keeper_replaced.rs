//! A keeper lost while the daemon runs is replaced, and the replacement is handed every
//! live generation's descriptors: after it, a crash of the daemon loses nothing. A keeper
//! whose link broke while it still lives does not go on holding copies once replaced.
//!
//! The first daemon runs under a child subreaper ([`SUBREAPER`]) and only the daemon is
//! killed: its processes are reparented to the subreaper, which reaps what ends.

mod util;

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use genward::testkit::wait;
use rustix::process::{pidfd_send_signal, Signal};
use serde_json::json;
use util::cli::gw_ok;
use util::daemon::{
    cannot_take_back_exits, fifo, output_of, release, Client, Daemon, Msg, PATIENCE, SUBREAPER,
};
use util::keeper::{await_exit, keeper_pid, pidfd, recorded_keeper, spawn};

/// How long between two looks at `hello` while a replacement is awaited.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Polls (bounded) until a keeper other than `old` is recorded and the daemon says it has
/// a keeper; returns the new keeper's pid. The record first: it exists only once the
/// daemon has given up `old`, so a `"keeper": true` seen after it is the new keeper's.
#[track_caller]
fn await_replaced(c: &mut Client, state: &Path, old: u32) -> u32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(new) = recorded_keeper(state).filter(|p| *p != old) {
            if c.ok(json!({"op": "hello"}))["keeper"] == json!(true) {
                return new;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no new keeper within {PATIENCE:?}: hello says {}",
            c.ok(json!({"op": "hello"}))
        );
        std::thread::sleep(LOOK_EVERY);
    }
}

/// Reads (bounded) the line a session writes into `fifo` once it has written its output.
#[track_caller]
fn await_line(fifo: &Path) -> String {
    // Opened without waiting for the writer; readable once it wrote.
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .expect("open the fifo");
    let deadline = Instant::now() + PATIENCE;
    let mut line = String::new();
    while !line.ends_with('\n') {
        assert!(
            wait::readable(std::os::fd::AsFd::as_fd(&reader), deadline),
            "nothing came through {}",
            fifo.display()
        );
        let mut buf = [0u8; 64];
        match reader.read(&mut buf) {
            Ok(n) => line.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("reading {}: {e}", fifo.display()),
        }
    }
    line
}

#[test]
fn a_keeper_killed_while_the_daemon_runs_is_replaced_and_a_crash_then_loses_nothing() {
    if cannot_take_back_exits() {
        return;
    }
    let mut d = Daemon::start_wrapped("keeper-replaced", &SUBREAPER, &[], None);
    let state = d.dir.join("state");
    let old = keeper_pid(&state);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Each writes a line only once the daemon is dead, says so, then echoes its input.
    let (go, done) = (fifo(&d, "go"), fifo(&d, "done"));
    let (go_pty, done_pty) = (fifo(&d, "go-pty"), fifo(&d, "done-pty"));
    let pipes =
        r#"read go < "$1"; echo while-down; echo done > "$2"; while read l; do echo got:$l; done"#;
    let (pipes_gen, pipes_pid) = spawn(
        &mut c,
        "pipes",
        json!({"argv": ["sh", "-c", pipes, "sh", go, done]}),
    );
    let pty = r#"read go < "$1"; echo pty-while-down; echo done > "$2"; exec cat"#;
    let (pty_gen, pty_pid) = spawn(
        &mut c,
        "pty",
        json!({"argv": ["sh", "-c", pty, "sh", go_pty, done_pty], "pty": {"rows": 24, "cols": 80}}),
    );

    // The keeper dies (OOM-killed, say); the daemon starts another and hands it both.
    let old_fd = pidfd(old);
    pidfd_send_signal(&old_fd, Signal::KILL).expect("kill the keeper");
    await_exit(&old_fd, "the keeper");
    let new = await_replaced(&mut c, &state, old);
    drop(c);

    // Now the daemon dies; both sessions write while none runs.
    let mut subreaper = d.crash_daemon_edit_and_restart(
        |_| {
            release(&go);
            release(&go_pty);
            assert_eq!(await_line(&done), "done\n");
            assert_eq!(await_line(&done_pty), "done\n");
        },
        &[],
        &[],
    );
    assert_eq!(
        keeper_pid(&state),
        new,
        "the replacement serves the new daemon"
    );

    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true, "from_start": true}));
    for (name, gen, pid) in [("pipes", pipes_gen, pipes_pid), ("pty", pty_gen, pty_pid)] {
        let got = c.ok(json!({"op": "get", "session": name}));
        let g = &got["session"]["generations"][0];
        assert_eq!(g["gen"], json!(gen), "{got}");
        assert_eq!(g["pid"], json!(pid), "{got}");
        assert_eq!(g["lifecycle"], "running", "{got}");
        assert_eq!(g["adopted"]["io_lost"], false, "{got}");
    }
    // What they wrote while no daemon ran reaches subscribers (both read from one stream
    // of events, in whichever order they come) and `logs`.
    let wrote = |seen: &[Msg], gen: u64, line: &str| {
        String::from_utf8_lossy(&output_of(seen, gen)).contains(line)
    };
    let mut seen = Vec::new();
    while !(wrote(&seen, pipes_gen, "while-down") && wrote(&seen, pty_gen, "pty-while-down")) {
        seen.push(c.next_event());
    }
    assert!(gw_ok(&d, &["logs", "pipes"]).contains("while-down"));
    assert!(gw_ok(&d, &["logs", "pty"]).contains("pty-while-down"));
    // And their input works again.
    c.ok(json!({"op": "write", "session": "pipes", "if_gen": pipes_gen, "data": "again\n"}));
    c.output_until(pipes_gen, "got:again");
    c.ok(json!({"op": "write", "session": "pty", "if_gen": pty_gen, "data": "typed\n"}));
    c.output_until(pty_gen, "typed");
    drop(c);

    let new_fd = pidfd(new);
    assert_eq!(d.terminate(), Some(0));
    await_exit(&new_fd, "the replacement keeper");
    let status = wait::child_exit(&mut subreaper, PATIENCE);
    assert!(
        status.is_some(),
        "the subreaper still has processes to reap"
    );
}

/// A keeper whose link broke while it still lives (as when the daemon gives up one that
/// stopped reading): it would hold its copies — here a terminal's master — for its whole
/// hold time. Once the daemon gives it up it goes, and a new one holds instead.
#[test]
fn a_keeper_whose_link_broke_while_it_lives_goes_and_is_replaced() {
    use rustix::net::{shutdown, Shutdown};
    use rustix::process::{pidfd_getfd, PidfdGetfdFlags};

    let d = Daemon::start("keeper-cut", &[]);
    let state = d.dir.join("state");
    let old = keeper_pid(&state);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (gen, _) = spawn(&mut c, "shell", json!({"argv": ["sh"], "pty": true}));
    c.ok(json!({"op": "write", "session": "shell", "if_gen": gen, "data": "echo one\n"}));
    c.output_until(gen, "one");

    // The link breaks with both ends alive: the keeper's own end (its fd 3) shut down.
    let old_fd = pidfd(old);
    let link = match pidfd_getfd(&old_fd, 3, PidfdGetfdFlags::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            util::daemon::skip_because(&format!("pidfd_getfd of the keeper's link: {e}"));
            return;
        }
    };
    shutdown(&link, Shutdown::Both).expect("shut the link down");
    drop(link);

    await_exit(&old_fd, "the keeper whose link broke");
    let new = await_replaced(&mut c, &state, old);
    assert_ne!(new, old);
    // The session never noticed: its terminal is still open and served.
    c.ok(json!({"op": "write", "session": "shell", "if_gen": gen, "data": "echo two\n"}));
    c.output_until(gen, "two");
}

/// An upgrade while a lost keeper is being replaced: the new program starts one itself,
/// and no keeper is left behind — the one being started is let go of, and every keeper
/// of the state directory exits with the daemon.
#[test]
fn an_upgrade_while_a_keeper_is_replaced_leaves_one_keeper() {
    let mut d = Daemon::start("keeper-upgrade-replace", &[]);
    let state = d.dir.join("state");
    let old = keeper_pid(&state);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let echo = json!({"argv": ["sh", "-c", "while read l; do echo got:$l; done"]});
    let (gen, _) = spawn(&mut c, "echo", echo);

    let old_fd = pidfd(old);
    pidfd_send_signal(&old_fd, Signal::KILL).expect("kill the keeper");
    await_exit(&old_fd, "the keeper");
    // At once: the replacement may be due, being started, or ready by now.
    let answer = c.ok(json!({"op": "upgrade"}));
    assert_eq!(answer["pid"], json!(d.pid), "{answer}");
    let new = await_replaced(&mut c, &state, old);
    c.ok(json!({"op": "write", "session": "echo", "if_gen": gen, "data": "after\n"}));
    c.output_until(gen, "after");
    drop(c);

    assert_eq!(d.terminate(), Some(0));
    await_exit(&pidfd(new), "the keeper");
    let keeper = [
        "/proc/self/exe",
        "__keeper",
        "600000",
        state.to_str().unwrap(),
    ];
    assert!(
        wait::exit_of_all(&keeper, Instant::now() + PATIENCE),
        "a keeper of this state directory was left behind"
    );
}
