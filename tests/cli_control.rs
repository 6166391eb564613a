//! `send`, `stop`, `kill`, `restart`, `rm`, `wait` and `shutdown` against a real daemon,
//! including `--if-gen` refusing to act on a generation that is no longer current.

mod util;

use serde_json::json;
use std::process::Stdio;

use util::cli::{await_line, command, gw, gw_input, gw_ok, run_cmd, GatedSink, Streaming};
use util::daemon::Daemon;

#[test]
fn send_text_stdin_and_eof_reach_the_process() {
    let d = Daemon::start("cli-send", &[]);
    let gen = gw_ok(&d, &["run", "cat", "--", "cat"]);
    gw(&d, &["send", "cat", "one\n"]).ok();
    // An empty TEXT writes nothing, and succeeds: the session takes input.
    gw(&d, &["send", "cat", ""]).ok();
    let bytes: Vec<u8> = (0..=255u8).chain(b"two\n".iter().copied()).collect();
    gw_input(&d, &["send", "cat", "--stdin"], &bytes).ok();
    gw(&d, &["send", "cat", "--eof", "--if-gen", &gen]).ok();
    // cat ends when its input closes; its exit status is `wait`'s.
    assert_eq!(gw(&d, &["wait", "cat"]).code, Some(0));
    let logs = gw(&d, &["logs", "cat"]);
    assert_eq!(logs.code, Some(0));
    let mut expected = b"one\n".to_vec();
    expected.extend_from_slice(&bytes);
    assert_eq!(logs.raw, expected);
}

#[test]
fn send_needs_something_to_send() {
    let d = Daemon::start("cli-send-nothing", &[]);
    // Left out, TEXT is missing — not given as an empty value, which is a TEXT.
    let out = gw(&d, &["send", "x"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .starts_with("genward send: missing TEXT: give TEXT, --stdin or --eof; "),
        "{out:?}"
    );
    let out = gw(&d, &["send", "x", "hello"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no session"), "{out:?}");
    assert!(out.stderr.contains("genward ls"), "{out:?}");
}

#[test]
fn stale_if_gen_changes_nothing() {
    let d = Daemon::start("cli-if-gen", &[]);
    let old = gw_ok(&d, &["run", "s", "--", "cat"]);
    // The replacement starts once the old one is gone; it says when it runs.
    let new = gw_ok(&d, &["run", "s", "--", "sh", "-c", "echo up; exec cat"]);
    await_line(&d, "s", &new, "up");
    for args in [
        vec!["send", "s", "x", "--if-gen", &old],
        vec!["kill", "s", "--if-gen", &old],
        vec!["stop", "s", "--if-gen", &old],
        vec!["restart", "s", "--if-gen", &old],
        // With changes, `restart` sends a `spawn` carrying `if_gen`: the daemon refuses it
        // as it refuses the plain `restart`, in the same words.
        vec!["restart", "s", "--if-gen", &old, "--env", "A=x"],
        vec!["restart", "s", "--if-gen", &old, "--cwd", "/"],
    ] {
        let out = gw(&d, &args);
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(out.stderr.contains("nothing was done"), "{args:?}: {out:?}");
    }
    // The refusal names the session, as its label.
    let out = gw(&d, &["stop", "s", "--if-gen", &old]);
    let said = format!("genward: s: current generation is {new}, not {old}; nothing was done");
    assert!(out.stderr.starts_with(&said), "{out:?}");
    let plain = gw(&d, &["restart", "s", "--if-gen", &old]);
    let changed = gw(&d, &["restart", "s", "--if-gen", &old, "--env", "A=x"]);
    assert_eq!(changed.stderr, plain.stderr);
    // The current generation is untouched: still running, still the same.
    let table = gw(&d, &["ls"]).ok();
    let line = table.lines().find(|l| l.starts_with("s ")).unwrap();
    assert!(line.contains(&format!(" {new} ")), "{table}");
    assert!(line.contains("running"), "{table}");
    // With the current generation, the change is made.
    let next = gw_ok(&d, &["restart", "s", "--if-gen", &new, "--env", "A=x"]);
    assert_ne!(next, new);
    let table = gw(&d, &["ls"]).ok();
    let line = table.lines().find(|l| l.starts_with("s ")).unwrap();
    assert!(line.contains(&format!(" {next} ")), "{table}");
    gw(&d, &["stop", "s"]).ok();
}

#[test]
fn stop_waits_for_the_end_and_kill_and_restart_act_on_the_current_generation() {
    let d = Daemon::start("cli-stop", &[]);
    let gen = gw_ok(&d, &["run", "s", "--", "sleep", "600"]);
    let out = gw(&d, &["stop", "s", "--grace", "5s"]).ok();
    assert_eq!(out, format!("s gen {gen}: exit 143 (SIGTERM, stopped)\n"));
    let out = gw(&d, &["stop", "s"]);
    assert_eq!(out.code, Some(0));
    assert!(out.stderr.contains("was not running"), "{out:?}");

    let gen = gw_ok(&d, &["run", "s", "--", "sleep", "600"]);
    gw(&d, &["kill", "s", "-s", "HUP"]).ok();
    assert_eq!(gw(&d, &["wait", "s", "--gen", &gen]).code, Some(129));

    let first = gw_ok(&d, &["run", "r", "--", "sleep", "600"]);
    let second = gw_ok(&d, &["restart", "r"]);
    assert!(second.parse::<u64>().unwrap() > first.parse::<u64>().unwrap());
    let out = gw(&d, &["wait", "r", "--gen", &first]);
    assert_eq!(out.code, Some(143), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "r gen {first}: exit 143 (SIGTERM, superseded): it was replaced by a newer generation"
        )),
        "a 143 never comes without a word: {out:?}"
    );

    let bad = gw(&d, &["kill", "r", "-s", "NOPE"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("NOPE"), "{bad:?}");

    // `rm` returns once the session is gone: stopped and forgotten.
    gw(&d, &["rm", "r"]).ok();
    let out = gw(&d, &["wait", "r"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("no session"), "{out:?}");
    assert!(!gw(&d, &["ls"]).ok().lines().any(|l| l.starts_with("r ")));
}

#[test]
fn wait_reports_the_last_end_when_nothing_runs() {
    let d = Daemon::start("cli-wait-last", &[]);
    let gen = gw_ok(&d, &["run", "j", "--", "sh", "-c", "exit 5"]);
    assert_eq!(gw(&d, &["wait", "j", "--gen", &gen]).code, Some(5));
    // Without --gen and with nothing running: the last generation's status.
    assert_eq!(gw(&d, &["wait", "j"]).code, Some(5));
}

#[test]
fn shutdown_returns_once_the_daemon_is_gone() {
    let mut d = Daemon::start("cli-shutdown", &[]);
    gw_ok(&d, &["run", "s", "--", "sleep", "600"]);
    gw(&d, &["shutdown"]).ok();
    assert_eq!(d.exit_code(), Some(0));
    let out = gw(&d, &["ls"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("start one with `genward daemon`"),
        "{out:?}"
    );
}

/// `send --stdin` of more than the process's input queue holds waits for room: the
/// process gets all of it, where it failed after the first mebibyte.
#[test]
fn send_stdin_waits_for_room_and_delivers_everything() {
    let d = Daemon::start("cli-send-full", &[]);
    let sink = GatedSink::run(&d, "sink", 3 << 20);
    let send = {
        let cmd = command(&d, &["send", "sink", "--stdin"]);
        let input = sink.input.clone();
        std::thread::spawn(move || run_cmd(cmd, &input))
    };
    let done = sink.open_when_full(&d, send);
    assert_eq!(done.code, Some(0), "{done:?}");
}

/// `stop` of a session waiting out a restart's backoff says that it cancelled the restart,
/// not that there was nothing to stop.
#[test]
fn stop_in_backoff_says_the_restart_is_cancelled() {
    let d = Daemon::start("cli-stop-backoff", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    c.ok(
        json!({"op": "spawn", "session": "b", "argv": ["sh", "-c", "exit 1"],
                "restart": {"mode": "always", "initial": "1h", "max": "1h"}}),
    );
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "backoff");
    let out = gw(&d, &["stop", "b"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("pending restart is cancelled"),
        "{out:?}"
    );
    let s = c.ok(json!({"op": "get", "session": "b"}));
    assert_eq!(s["session"]["state"], json!("stopped"));
}

/// `stop` and `rm` of a session whose generation already survived SIGKILL (it was
/// reported `unkillable` before) wait for a report that never comes again: the command
/// hangs for as long as the process is stuck, saying nothing.
#[test]
fn stop_and_rm_of_an_already_unkillable_generation_say_so_at_once() {
    let mut mount = match util::fuse::HungMount::holding("cli-unkillable") {
        Ok(m) => m,
        Err(why) => {
            println!("SKIP stop_and_rm_of_an_already_unkillable_generation_say_so_at_once: {why}");
            return;
        }
    };
    let d = Daemon::start("cli-unkillable", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let target = mount.path.join("anything");
    let spawned = c.ok(json!({"op": "spawn", "session": "stuck",
        "grace": "100ms", "kill_grace": "300ms", "argv": ["stat", target.to_str().unwrap()]}));
    let gen = spawned["gen"].as_u64().unwrap();
    mount.await_request();
    // The first stop hears the report.
    let first = gw(&d, &["stop", "stuck"]);
    assert_eq!(first.code, Some(1), "{first:?}");
    assert!(first.stderr.contains("survived SIGKILL"), "{first:?}");
    c.events_until(|m| m.is("unkillable", gen));
    // Later ones must not wait for it again.
    for args in [&["stop", "stuck"][..], &["rm", "stuck"][..]] {
        let out = gw(&d, args);
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(out.stderr.contains("survived SIGKILL"), "{args:?}: {out:?}");
    }
    drop(mount); // the answer never comes: the connection is aborted and it dies
}

/// A restart whose new generation cannot start (its directory is gone, or the one asked
/// for does not exist) fails as `run` does: the reason, and the shell's status.
#[test]
fn restart_that_cannot_start_fails_as_run_does() {
    let d = Daemon::start("cli-restart-fails", &[]);
    let dir = genward::testkit::scratch::ScratchDir::new("cli-restart-fails-cwd");
    let cwd = dir.join("gone");
    std::fs::create_dir(&cwd).unwrap();
    let cwd = cwd.to_str().unwrap().to_owned();
    gw_ok(&d, &["run", "s", "--cwd", &cwd, "--", "sleep", "600"]);
    std::fs::remove_dir(&cwd).unwrap();
    let ran = gw(&d, &["run", "t", "--cwd", &cwd, "--", "sleep", "600"]);
    assert_eq!(ran.code, Some(127), "{ran:?}");
    for args in [
        vec!["restart", "s"],
        vec!["restart", "s", "--env", "X=1"],
        vec!["restart", "s", "--cwd", "/nonexistent/genward-dir"],
    ] {
        let out = gw(&d, &args);
        assert_eq!(out.code, ran.code, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("spawn failed (not_found)"),
            "{args:?}: {out:?}"
        );
        assert!(
            out.stderr.contains("working directory"),
            "{args:?}: {out:?}"
        );
    }
    // With --json, the `spawn_failed` event, as `run --json` prints it.
    let out = gw(&d, &["restart", "s", "--json"]);
    assert_eq!(out.code, Some(127), "{out:?}");
    let event: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(event["event"], "spawn_failed", "{out:?}");
    assert_eq!(event["session"], "s", "{out:?}");
}

/// `restart --no-wait` returns at once as `run --no-wait` does: the new generation's
/// number (with `--json`, `{"session","gen"}`) and success, even for a generation that
/// will not start; `wait` then tells how it ended.
#[test]
fn restart_no_wait_returns_the_generation_at_once() {
    let d = Daemon::start("cli-restart-no-wait", &[]);
    let dir = genward::testkit::scratch::ScratchDir::new("cli-restart-no-wait-cwd");
    let cwd = dir.join("gone");
    std::fs::create_dir(&cwd).unwrap();
    let cwd = cwd.to_str().unwrap().to_owned();
    let first = gw_ok(&d, &["run", "s", "--cwd", &cwd, "--", "sleep", "600"]);
    std::fs::remove_dir(&cwd).unwrap();

    let out = gw(&d, &["restart", "s", "--no-wait"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let gen: u64 = out.stdout.trim().parse().expect("a generation number");
    assert!(gen > first.parse::<u64>().unwrap(), "{out:?}");
    let gen = gen.to_string();
    assert_eq!(gw(&d, &["wait", "s", "--gen", &gen]).code, Some(127));

    let out = gw(&d, &["restart", "s", "--no-wait", "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["session"], "s", "{out:?}");
    assert!(
        v["gen"].as_u64().unwrap() > gen.parse::<u64>().unwrap(),
        "{out:?}"
    );
    assert!(v.get("pid").is_none(), "{out:?}");

    let help = gw(&d, &["restart", "--help"]).ok();
    assert!(help.contains("--no-wait"), "{help}");
}

/// `send --stdin` to a process that ends while its input is still being sent fails, and
/// says so and how much was passed on: not "nothing was done", which the daemon's refusal
/// of the next chunk alone would say.
#[test]
fn send_stdin_cut_short_by_the_end_says_what_was_sent() {
    let d = Daemon::start("cli-send-cut-short", &[]);
    // Reads 1000 bytes and exits: far less than the 5 MB sent, more than the daemon
    // queues for it.
    let gen = gw_ok(&d, &["run", "h", "--", "head", "-c", "1000"]);
    let input = vec![b'x'; 5_000_000];
    let out = gw_input(&d, &["send", "h", "--stdin"], &input);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(!out.stderr.contains("nothing was done"), "{out:?}");
    let want = format!("h gen {gen}: it ended while");
    assert!(out.stderr.contains(&want), "{out:?}");
    assert!(
        out.stderr
            .contains("while standard input was being sent to it"),
        "{out:?}"
    );
    let sent: u64 = out
        .stderr
        .split(" bytes had been passed on")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count: {out:?}"));
    assert!((1000..5_000_000).contains(&sent), "{out:?}");
}

/// What the docs say of a following command when the daemon goes away: an orderly
/// `shutdown` ends `events` as a crash would, status 1 and "lost the daemon" (the
/// protocol tells a client nothing that would set the two apart), after the ends of the
/// generations the shutdown stopped.
#[test]
fn events_after_a_shutdown_ends_as_the_docs_say() {
    let mut d = Daemon::start("cli-events-shutdown", &[]);
    let mut cmd = command(&d, &["events"]);
    cmd.stderr(Stdio::piped());
    // Output that keeps coming: once `events` shows some, it is following.
    let gen = gw_ok(
        &d,
        &[
            "run",
            "s",
            "--",
            "sh",
            "-c",
            "while :; do echo tick; sleep 0.2; done",
        ],
    );
    let mut events = Streaming::start_cmd(cmd);
    let label = format!("s gen {gen}: ");
    events.until(|l| l.starts_with(&label) && l.contains("bytes on stdout"));
    gw(&d, &["shutdown"]).ok();
    events.until(|l| l.starts_with(&label) && l.contains("stopped"));
    let (code, stderr) = events.finish_stderr();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("lost the daemon: the daemon closed the connection"),
        "{stderr}"
    );
    assert_eq!(d.exit_code(), Some(0));
}

/// Messages name sessions one way (issue 12): a message about one session or generation
/// starts with its label, `NAME:` or `NAME gen N:`; a name inside a sentence is in
/// backticks. Never in double quotes.
#[test]
fn messages_name_sessions_one_way() {
    let d = Daemon::start("cli-message-names", &[]);
    gw_ok(&d, &["run", "done", "--", "true"]);
    assert_eq!(gw(&d, &["wait", "done"]).code, Some(0));
    let other = gw_ok(&d, &["run", "other", "--", "true"]);
    let not_running = "genward: session `done` has no running process; ";
    for (args, said) in [
        (
            vec!["logs", "nosuch"],
            "genward: no session `nosuch`; see `genward ls`\n",
        ),
        (
            vec!["send", "nosuch", "x"],
            "genward: no session `nosuch`; ",
        ),
        (vec!["send", "done", "x"], not_running),
        (vec!["kill", "done"], not_running),
        (
            vec!["stop", "done", "--if-gen", &other],
            &format!("genward: done: current generation is none, not {other}; nothing was done"),
        ),
        (
            vec!["wait", "done", "--gen", &other],
            &format!("genward: done gen {other}: not known (ended long ago, or never existed)"),
        ),
        (
            vec!["attach", "done"],
            "genward: done: no process to attach to (it is exited); ",
        ),
        (
            vec!["logs", "done", "--gen", &other],
            &format!("genward: done: no generation {other} that genward knows of"),
        ),
    ] {
        let out = gw(&d, &args);
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(out.stderr.starts_with(said), "{args:?}: {out:?}");
        assert!(!out.stderr.contains('"'), "{args:?}: {out:?}");
    }
    let out = gw(&d, &["stop", "done"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stderr,
        "genward: done: was not running; nothing to stop\n"
    );
}
