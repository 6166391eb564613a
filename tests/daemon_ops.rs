//! Every operation and event against a real daemon, in pipes and PTY mode.

mod util;

use serde_json::{json, Value};
use util::daemon::{output_of, Daemon, Msg};

#[test]
fn hello_reports_protocol_and_identity() {
    let d = Daemon::start("hello", &[]);
    let mut c = d.client();
    let r = c.ok(json!({"op": "hello"}));
    assert_eq!(r["protocol"], 1);
    assert_eq!(r["pid"], json!(d.child.id()));
    assert!(
        r["identity"].as_str().unwrap().starts_with("linux1:"),
        "{r}"
    );
}

#[test]
fn pipes_spawn_output_exit_and_wait() {
    let d = Daemon::start("pipes", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let r = c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sh", "-c", "printf out; printf err >&2; exit 3"]}));
    let gen = r["gen"].as_u64().unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    let exited = seen.last().unwrap().json();
    assert_eq!(exited["code"], 3);
    assert_eq!(exited["cause"], "exited");
    assert!(seen.iter().any(|m| m.is("spawned", gen)));
    let stdout: Vec<u8> = seen
        .iter()
        .filter_map(|m| match m {
            Msg::Output(h, data) if h["stream"] == "stdout" => Some(data.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(stdout, b"out");
    let mut w = d.client();
    let r = w.ok(json!({"op": "wait", "session": "a", "gen": gen}));
    assert_eq!(r["end"]["code"], 3);
}

#[test]
fn stdin_round_trip_and_close_input_through_cat() {
    let d = Daemon::start("stdin", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "cat", "argv": ["cat"]}))["gen"]
        .as_u64()
        .unwrap();
    c.ok(json!({"op": "write", "session": "cat", "data": "hello\n"}));
    c.ok(json!({"op": "write", "session": "cat", "data_b64": "AP8K"}));
    c.ok(json!({"op": "close_input", "session": "cat", "if_gen": gen}));
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(output_of(&seen, gen), b"hello\n\x00\xff\n");
    assert_eq!(seen.last().unwrap().json()["code"], 0);
}

#[test]
fn a_few_bytes_then_an_exit_are_read_to_their_end_in_both_modes() {
    // The writer is gone before the daemon reads: its few bytes and the end of the
    // stream come in one readiness, and the end must still be seen (not the drain
    // deadline's `truncated`).
    let d = Daemon::start("short-writer", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    for (i, pty) in [false, true, false, true].into_iter().enumerate() {
        let session = format!("short{i}");
        let gen = c.ok(
            json!({"op": "spawn", "session": session, "argv": ["printf", "a\\nb"], "pty": pty}),
        )["gen"]
            .as_u64()
            .unwrap();
        let seen = c.events_until(|m| m.is("exited", gen));
        let end = seen.last().unwrap().json();
        assert_eq!(end["truncated"], false, "pty: {pty}: {end}");
        let want: &[u8] = if pty { b"a\r\nb" } else { b"a\nb" };
        assert_eq!(output_of(&seen, gen), want, "pty: {pty}");
    }
}

#[test]
fn a_quiet_write_is_answered_only_when_it_fails() {
    let d = Daemon::start("quiet-write", &[]);
    let mut c = d.client();
    let hello = c.ok(json!({"op": "hello"}));
    assert!(hello["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("quiet_write")));
    let gen = c.ok(json!({"op": "spawn", "session": "cat", "argv": ["cat"]}))["gen"]
        .as_u64()
        .unwrap();
    let mut watcher = d.client();
    watcher.ok(json!({"op": "subscribe", "session": "cat"}));
    // Written and not answered; typed for an older generation: refused, and answered
    // under its own id; a bad `quiet` is a bad request. Responses come in order, so the
    // first answer read being the refusal proves the good write had none.
    c.send_raw(
        format!(
            concat!(
                r#"{{"id":"q1","op":"write","session":"cat","if_gen":{gen},"data":"typed\n","quiet":true}}"#,
                "\n",
                r#"{{"id":"q2","op":"write","session":"cat","if_gen":{old},"data":"stale\n","quiet":true}}"#,
                "\n",
                r#"{{"id":"q3","op":"write","session":"cat","data":"x","quiet":"yes"}}"#,
                "\n",
                r#"{{"id":"q4","op":"write","session":"cat","data":"loud\n","quiet":false}}"#,
                "\n",
            ),
            gen = gen,
            old = gen - 1
        )
        .as_bytes(),
    );
    let answers: Vec<Value> = (0..3).map(|_| c.read_msg().json().clone()).collect();
    assert_eq!(answers[0]["id"], "q2", "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], "stale_generation");
    assert_eq!(answers[1]["id"], "q3");
    assert_eq!(answers[1]["error"]["code"], "bad_request");
    assert!(
        answers[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("quiet"),
        "{answers:?}"
    );
    assert_eq!(answers[2]["id"], "q4");
    assert_eq!(answers[2]["ok"], true);
    let seen = watcher.output_until(gen, "loud\n");
    assert_eq!(output_of(&seen, gen), b"typed\nloud\n");
}

#[test]
fn pty_mode_terminal_resize_and_signal() {
    let d = Daemon::start("pty", &[]);
    // The session does not exist yet: subscribing to it is an error.
    let mut c = d.client();
    c.err(
        json!({"op": "subscribe", "session": "t"}),
        "no_such_session",
    );
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "trap 'stty size' WINCH; trap 'echo got-int; exit 7' INT; \
                  [ -t 0 ] && echo is-a-tty; stty size; echo ready; \
                  while :; do sleep 0.05; done";
    let gen = c.ok(
        json!({"op": "spawn", "session": "t", "pty": {"rows": 30, "cols": 100},
        "argv": ["sh", "-c", script]}),
    )["gen"]
        .as_u64()
        .unwrap();
    let seen = c.output_until(gen, "ready");
    let text = String::from_utf8_lossy(&output_of(&seen, gen)).to_string();
    assert!(text.contains("is-a-tty"), "{text}");
    assert!(text.contains("30 100"), "{text}");
    c.ok(json!({"op": "resize", "session": "t", "rows": 50, "cols": 132}));
    c.output_until(gen, "50 132");
    c.ok(json!({"op": "signal", "session": "t", "signal": "INT"}));
    let seen = c.events_until(|m| m.is("exited", gen));
    assert!(String::from_utf8_lossy(&output_of(&seen, gen)).contains("got-int"));
    let exited = seen.last().unwrap().json();
    assert_eq!(exited["code"], 7);
}

/// Several terminals attached to one PTY: the latest size wins, and when the terminal
/// that sized it last goes, the session gets back the size of the one attached before it
/// (tmux's `window-size latest`), not the size of a terminal nobody looks at any more. A
/// one-off `resize` holds until a terminal resizes again.
#[test]
fn a_terminal_going_gives_the_pty_the_size_of_the_one_attached_before_it() {
    let d = Daemon::start("pty-sizes", &[]);
    let mut c = d.client();
    let hello = c.ok(json!({"op": "hello"}));
    assert!(hello["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("attached_resize")));
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done";
    let gen = c.ok(
        json!({"op": "spawn", "session": "t", "pty": {"rows": 24, "cols": 80},
        "argv": ["sh", "-c", script]}),
    )["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "ready");
    let attached = |rows: u16, cols: u16| {
        json!({"op": "resize", "session": "t", "if_gen": gen, "rows": rows, "cols": cols,
               "attached": true})
    };
    let mut first = d.client();
    first.ok(attached(20, 90));
    c.output_until(gen, "20 90");
    let mut second = d.client();
    second.ok(attached(30, 100));
    c.output_until(gen, "30 100");
    drop(second);
    c.output_until(gen, "20 90");
    // A one-off, then a third terminal: its going gives back the first's size.
    c.ok(json!({"op": "resize", "session": "t", "rows": 40, "cols": 120}));
    c.output_until(gen, "40 120");
    let mut third = d.client();
    third.ok(attached(50, 132));
    c.output_until(gen, "50 132");
    drop(third);
    c.output_until(gen, "20 90");
    c.err(
        json!({"op": "resize", "session": "t", "rows": 5, "cols": 5, "attached": "yes"}),
        "bad_request",
    );
}

/// `spawn` with `if_gen` (what `genward restart --if-gen N --env ...` sends): refused,
/// with nothing done, once the session has moved on past generation N; with its current
/// generation, a replacement like any other.
#[test]
fn a_spawn_with_if_gen_replaces_only_the_generation_it_names() {
    let d = Daemon::start("spawn-if-gen", &[]);
    let mut c = d.client();
    let hello = c.ok(json!({"op": "hello"}));
    assert!(hello["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("spawn_if_gen")));
    c.ok(json!({"op": "subscribe", "all": true}));
    let old = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", old));
    // The session moves on, as a restart policy or another client would move it.
    let newer = c.ok(json!({"op": "restart", "session": "s"}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", newer));
    let before = c.ok(json!({"op": "get", "session": "s"}));
    for on_busy in ["replace", "overlap", "reject"] {
        let r = c.err(
            json!({"op": "spawn", "session": "s", "if_gen": old, "on_busy": on_busy,
                "argv": ["sleep", "2000"], "env": {"CHANGED": "1"}}),
            "stale_generation",
        );
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("not {old}")), "{r}");
    }
    // A session that does not exist is not created: `no_such_session`, as for `restart`.
    c.err(
        json!({"op": "spawn", "session": "nope", "if_gen": newer, "argv": ["true"]}),
        "no_such_session",
    );
    c.err(json!({"op": "get", "session": "nope"}), "no_such_session");
    // Nothing was done: the same generation runs, with the same spec, and no generation
    // was allocated (the next spawn gets the number right after `newer`).
    let after = c.ok(json!({"op": "get", "session": "s"}));
    assert_eq!(after["session"]["current"], newer);
    assert_eq!(after["session"]["spec"], before["session"]["spec"]);
    assert_eq!(
        after["session"]["generations"],
        before["session"]["generations"]
    );
    let next = c.ok(json!({"op": "spawn", "session": "s", "if_gen": newer,
            "argv": ["sleep", "2000"], "env": {"CHANGED": "1"}}))["gen"]
        .as_u64()
        .unwrap();
    assert_eq!(next, newer + 1);
    let seen = c.events_until(|m| m.is("spawned", next));
    let ended = seen
        .iter()
        .find(|m| m.is("exited", newer))
        .expect("the generation it named was replaced");
    assert_eq!(ended.json()["cause"], "superseded");
    let got = c.ok(json!({"op": "get", "session": "s"}));
    assert_eq!(got["session"]["current"], next);
    assert_eq!(got["session"]["spec"]["argv"], json!(["sleep", "2000"]));
    assert_eq!(got["session"]["spec"]["env"], json!({"CHANGED": "1"}));
    // A bad `if_gen` is a bad request, naming it.
    let r = c.err(
        json!({"op": "spawn", "session": "s", "if_gen": "3", "argv": ["true"]}),
        "bad_request",
    );
    assert!(
        r["error"]["message"].as_str().unwrap().contains("if_gen"),
        "{r}"
    );
}

#[test]
fn stop_restart_remove_list_get() {
    let d = Daemon::start("lifecycle", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let g1 = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", g1));
    let g2 = c.ok(json!({"op": "restart", "session": "s", "if_gen": g1}))["gen"]
        .as_u64()
        .expect("restart answers the new generation");
    assert!(g2 > g1);
    let seen = c.events_until(|m| m.is("spawned", g2));
    let e1 = seen
        .iter()
        .find(|m| m.is("exited", g1))
        .expect("g1 exited before g2 spawned");
    assert_eq!(e1.json()["cause"], "superseded");
    let got = c.ok(json!({"op": "get", "session": "s"}));
    assert_eq!(got["session"]["current"], g2);
    c.ok(json!({"op": "stop", "session": "s", "grace": "2s"}));
    let seen = c.events_until(|m| m.is("exited", g2));
    let e2 = seen.last().unwrap().json();
    assert_eq!(e2["cause"], "stopped");
    assert_eq!(e2["code"], 143);
    let list = c.ok(json!({"op": "list"}));
    assert_eq!(list["sessions"][0]["name"], "s");
    c.ok(json!({"op": "remove", "session": "s"}));
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    let list = c.ok(json!({"op": "list"}));
    assert_eq!(list["sessions"], json!([]));
    c.err(json!({"op": "get", "session": "s"}), "no_such_session");
}

#[test]
fn shutdown_op_stops_everything_and_exits_zero() {
    let mut d = Daemon::start("shutdown", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let g = c.ok(json!({"op": "spawn", "session": "x", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", g));
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0));
}

#[test]
fn a_child_that_closes_its_stdin_is_an_event_not_a_crash() {
    let d = Daemon::start("epipe", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Closes stdin, then waits for input that can never come.
    let gen = c.ok(json!({"op": "spawn", "session": "deaf",
        "argv": ["sh", "-c", "exec 0<&-; echo closed; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "closed\n");
    // Taken, or refused if the daemon saw the closure already (it is told without a write).
    let r = c.request(json!({"op": "write", "session": "deaf", "data": "anyone?\n"}));
    assert!(
        r["ok"] == true || r["error"]["code"] == "input_closed",
        "{r}"
    );
    c.events_until(|m| m.is("input_closed", gen));
    c.err(
        json!({"op": "write", "session": "deaf", "data": "x"}),
        "input_closed",
    );
    c.ok(json!({"op": "hello"}));
}

#[test]
fn the_daemon_raises_its_descriptor_limit_but_children_get_the_original() {
    let d = Daemon::start_with("nofile", &[], Some(256));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.child.id())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft: &str = line.split_whitespace().nth(3).unwrap();
    if soft == "256" {
        println!("SKIP the_daemon_raises_its_descriptor_limit: hard limit is 256 too");
        return;
    }
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "n", "argv": ["sh", "-c", "ulimit -Sn"]}))
        ["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(output_of(&seen, gen), b"256\n");
}

#[test]
fn systemd_readiness_reaches_notify_socket() {
    use std::os::unix::net::UnixDatagram;
    let dir = genward::testkit::scratch::ScratchDir::new("notify");
    let notify = dir.join("notify");
    let sock = UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(util::daemon::PATIENCE)).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_genward"))
        .args(["daemon", "--state-dir"])
        .arg(dir.join("state"))
        .env("NOTIFY_SOCKET", &notify)
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let mut buf = [0u8; 256];
    let n = sock
        .recv(&mut buf)
        .expect("READY=1 within the patience bound");
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.contains("READY=1"), "{msg}");
    assert!(msg.contains(&format!("MAINPID={}", child.id())), "{msg}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_readiness_descriptor_that_is_not_open_for_writing_is_refused_before_anything_starts() {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let dir = genward::testkit::scratch::ScratchDir::new("ready-fd-bad");
    let (pipe_r, _pipe_w): (OwnedFd, OwnedFd) = rustix::pipe::pipe().unwrap();
    let pipe_r = pipe_r.as_raw_fd();
    // (descriptor number, what fd 3 is in the daemon, the refusal)
    let cases: [(&str, Option<i32>, &str); 3] = [
        // Closed: the daemon's first descriptor would otherwise take the number.
        ("3", None, "`3` for `--ready-fd`: not an open descriptor"),
        (
            "3",
            Some(pipe_r),
            "`3` for `--ready-fd`: open only for reading",
        ),
        (
            "1",
            None,
            "`1` for `--ready-fd`: standard input, output and error stay the daemon's own",
        ),
    ];
    for (number, fd3, refusal) in cases {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_genward"));
        cmd.args(["daemon", "--ready-fd", number, "--state-dir"])
            .arg(dir.join("state"))
            .env("RUST_LOG", "warn");
        // SAFETY: the closure makes only async-signal-safe descriptor calls on numbers
        // open in the child (or closes one that may not be).
        unsafe {
            cmd.pre_exec(move || match fd3 {
                Some(fd) => util::daemon::place_at(fd, 3),
                None => {
                    libc::close(3);
                    Ok(())
                }
            });
        }
        let out =
            util::cli::wait_bounded(cmd.stderr(std::process::Stdio::piped()).spawn().unwrap());
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The value's fault: a usage error, as any other bad value.
        assert_eq!(out.status.code(), Some(2), "{number} {fd3:?}: {stderr}");
        assert!(stderr.contains(refusal), "{number} {fd3:?}: {stderr}");
        assert!(
            !dir.join("state").exists(),
            "refused before the state directory is made"
        );
    }
}

#[test]
fn a_bad_daemon_option_is_refused_before_anything_starts() {
    let dir = genward::testkit::scratch::ScratchDir::new("daemon-options");
    let long = dir.join("x".repeat(120));
    // A bad value is a usage error (status 2), as every command's; a socket path the
    // system cannot take fails the start (status 1).
    let cases: [(&[&str], &str, i32); 9] = [
        (
            &["--max-sessions", "+5"],
            "bad value `+5` for `--max-sessions`: expected a number in digits only",
            2,
        ),
        (
            &["--keeper-hold", "0"],
            "bad value `0` for `--keeper-hold`: a keeper that holds nothing (it counts whole milliseconds); use --no-keeper",
            2,
        ),
        // Less than a millisecond is a hold of none, not a keeper that goes at once.
        (
            &["--keeper-hold", "500us"],
            "bad value `500us` for `--keeper-hold`: a keeper that holds nothing (it counts whole milliseconds); use --no-keeper",
            2,
        ),
        // 2^64 ms: the keeper is told its hold in milliseconds.
        (
            &["--keeper-hold", "18446744073709551616ms"],
            "bad value `18446744073709551616ms` for `--keeper-hold`: duration `18446744073709551616ms` is too large; at most 18446744073709551615ms (2^64-1 milliseconds)",
            2,
        ),
        (
            &["--subreaper", "--no-subreaper"],
            "`--subreaper` and `--no-subreaper` cannot be used together",
            2,
        ),
        (
            &["--allow-uid", "4294967295"],
            "bad value `4294967295` for `--allow-uid`: not a numeric uid",
            2,
        ),
        (
            &["--reaper", "sometimes"],
            "bad value `sometimes` for `--reaper`: expected auto or fallback",
            2,
        ),
        (
            &["--containment", "jail"],
            "bad value `jail` for `--containment`: expected auto, cgroup or session",
            2,
        ),
        // Too long for a Unix socket's address.
        (
            &["--socket", long.to_str().unwrap()],
            long.to_str().unwrap(),
            1,
        ),
    ];
    for (args, refusal, code) in cases {
        let out = util::cli::wait_bounded(
            std::process::Command::new(env!("CARGO_BIN_EXE_genward"))
                .arg("daemon")
                .args(args)
                .arg("--state-dir")
                .arg(dir.join("state"))
                .env("RUST_LOG", "warn")
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(refusal), "{args:?}: {stderr}");
        assert!(
            !dir.join("state").exists(),
            "{args:?}: refused before the state directory is made"
        );
    }
}

#[test]
fn a_relative_state_directory_keeps_its_keeper() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let dir = genward::testkit::scratch::ScratchDir::new("relative-state");
    let (ready_r, ready_w) = rustix::pipe::pipe().unwrap();
    let ready_w_raw = ready_w.as_raw_fd();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_genward"));
    cmd.args(["daemon", "--ready-fd", "3", "--state-dir", "rel"])
        .current_dir(dir.path())
        .env("RUST_LOG", "warn");
    // SAFETY: `place_at` makes only async-signal-safe calls; `ready_w_raw` is open in the
    // child.
    unsafe {
        cmd.pre_exec(move || util::daemon::place_at(ready_w_raw, 3));
    }
    let mut child = cmd.spawn().unwrap();
    drop(ready_w);
    let mut byte = [0u8; 1];
    assert_eq!(
        std::fs::File::from(ready_r).read(&mut byte).unwrap(),
        1,
        "ready"
    );
    let mut c = util::daemon::Client::connect(&dir.join("rel").join("genward.sock"));
    let hello = c.ok(json!({"op": "hello"}));
    // The keeper starts from `/`: it is handed the directory as an absolute path.
    assert_eq!(hello["keeper"], true, "{hello}");
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_grandchild_holding_the_pipe_cannot_hold_back_the_exit() {
    // Session containment: an escapee is out of reach (a cgroup would kill it with its
    // generation; see daemon_containment), so only the drain deadline ends the wait.
    let d = Daemon::start("drain", &["--containment", "session"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // The grandchild leaves the process group (setsid) and keeps writing to our pipe.
    // The leader waits (on a fifo) until the grandchild has left the group and written
    // its first tick, then exits.
    let script = "f=$(mktemp -u); mkfifo $f; \
                  setsid sh -c \"echo tick; echo > $f; while :; do echo tick; sleep 0.02; done\" & \
                  read _ < $f; rm $f; echo $!; exit 0";
    let gen = c.ok(json!({"op": "spawn", "session": "d", "drain": "300ms",
        "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    let text = String::from_utf8_lossy(&output_of(&seen, gen)).to_string();
    let escapee: i32 = text
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .expect("the leader printed the grandchild's pid");
    let exited = seen.last().unwrap().json().clone();
    // SAFETY: killing the grandchild this test started (it escaped every group signal).
    unsafe { libc::kill(escapee, libc::SIGKILL) };
    assert_eq!(exited["code"], 0, "{exited}");
    assert_eq!(exited["cause"], "exited");
    assert_eq!(exited["truncated"], true, "{exited}");
    assert!(
        text.contains("tick"),
        "output before the deadline was delivered"
    );
    // Nothing of that generation follows its exit.
    c.ok(json!({"op": "hello"}));
    assert!(
        !c.backlog.iter().any(|m| m.is("output", gen)),
        "{:?}",
        c.backlog
    );
}

/// What a service manager sends on a user's word (`s6-svc -1 -2 -a -q`, `sv 1 2 alarm
/// quit`): SIGUSR1, SIGUSR2 and SIGALRM mean nothing and are ignored; SIGQUIT is a
/// shutdown like SIGTERM's. Before, each ended the daemon by its default action and left
/// the sessions running unsupervised.
#[test]
fn a_service_managers_other_signals_neither_kill_the_daemon_nor_orphan_sessions() {
    let mut d = Daemon::start("stray-signals", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let pid = c.spawned_pid(gen);
    for sig in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM, libc::SIGQUIT] {
        // SAFETY: kill with the pid of our own child.
        unsafe { libc::kill(d.child.id() as i32, sig) };
    }
    // An ignored signal's default would have ended it by that signal, before SIGQUIT's
    // shutdown, with no exit code.
    assert_eq!(d.exit_code(), Some(0));
    // Stopped with the daemon, not left behind.
    assert!(
        genward::testkit::proc::stat(pid).is_none_or(|s| s.state == "Z"),
        "session's process {pid} outlived the daemon"
    );
}

/// `max_restarts` is 5 unless given: then the session is `failed`. `"infinity"` asks for
/// restarts without a bound, and `get` shows it as given.
#[test]
fn restarts_are_bounded_by_default_and_unbounded_on_request() {
    let d = Daemon::start("restart-bound", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    c.ok(
        json!({"op": "spawn", "session": "bounded", "argv": ["false"],
        "restart": {"mode": "always", "initial": 0}}),
    );
    c.events_until(|m| {
        let v = m.json();
        v["event"] == "state" && v["session"] == "bounded" && v["state"] == "failed"
    });
    let got = c.ok(json!({"op": "get", "session": "bounded"}));
    assert_eq!(got["session"]["restarts"], 5, "{got}");
    c.ok(
        json!({"op": "spawn", "session": "unbounded", "argv": ["false"],
        "restart": {"mode": "always", "initial": 0, "max_restarts": "infinity"}}),
    );
    let mut ends = 0;
    c.events_until(|m| {
        let v = m.json();
        assert!(
            !(v["session"] == "unbounded" && v["state"] == "failed"),
            "gave up: {v}"
        );
        if v["event"] == "exited" && v["session"] == "unbounded" {
            ends += 1;
        }
        ends > 8
    });
    let got = c.ok(json!({"op": "get", "session": "unbounded"}));
    assert_eq!(
        got["session"]["spec"]["restart"]["max_restarts"], "infinity",
        "{got}"
    );
    c.ok(json!({"op": "stop", "session": "unbounded"}));
    // `initial` above the default `max` names that default.
    let e = c.err(
        json!({"op": "spawn", "session": "slow", "argv": ["true"],
            "restart": {"mode": "always", "initial": "90s"}}),
        "bad_request",
    );
    let why = e["error"]["message"].as_str().unwrap();
    assert!(why.contains("restart.max") && why.contains("60s"), "{e}");
}

/// `restarts` counts the restarts that happened: a stop during the backoff cancels the
/// one scheduled, and the count stays 0 (one process ran); the next one, once it starts,
/// counts.
#[test]
fn a_restart_cancelled_in_its_backoff_is_not_counted() {
    let d = Daemon::start("backoff-count", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let in_backoff =
        |m: &Msg| matches!(m, Msg::Json(v) if v["event"] == "state" && v["state"] == "backoff");
    let restarts = |c: &mut util::daemon::Client| {
        c.ok(json!({"op": "get", "session": "bcount"}))["session"]["restarts"].clone()
    };
    c.ok(
        json!({"op": "spawn", "session": "bcount", "argv": ["false"],
        "restart": {"mode": "on-failure", "initial": "60s", "max": "60s"}}),
    );
    c.events_until(in_backoff);
    assert_eq!(restarts(&mut c), json!(0), "scheduled, not made");
    c.ok(json!({"op": "stop", "session": "bcount"}));
    let r = c.ok(json!({"op": "get", "session": "bcount"}));
    assert_eq!(
        (&r["session"]["state"], &r["session"]["restarts"]),
        (&json!("stopped"), &json!(0)),
        "{r}"
    );
    // With no backoff, the restart happens and is counted as it starts.
    let first = c.ok(
        json!({"op": "spawn", "session": "bcount", "argv": ["false"],
        "restart": {"mode": "on-failure", "initial": "0s", "max_restarts": 1}}),
    )["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(
        |m| matches!(m, Msg::Json(v) if v["event"] == "state" && v["state"] == "failed"),
    );
    let spawned = seen
        .iter()
        .filter(|m| matches!(m, Msg::Json(v) if v["event"] == "spawned" && v["gen"].as_u64() >= Some(first)))
        .count();
    assert_eq!((spawned, restarts(&mut c)), (2, json!(1)));
}
