//! Spawning never stops the loop: the exec result arrives later, a start that hangs on a
//! dead filesystem leaves every other client and session served, and a stop cancels it.

mod util;

use serde_json::json;
use util::daemon::{output_of, Daemon, Msg};
use util::fuse::HungMount;

#[test]
fn a_spawn_hung_on_a_dead_mount_freezes_nothing_and_a_stop_cancels_it() {
    let mount = match HungMount::new("daemon-hung") {
        Ok(m) => m,
        Err(why) => {
            println!(
                "SKIP a_spawn_hung_on_a_dead_mount_freezes_nothing_and_a_stop_cancels_it: {why}"
            );
            return;
        }
    };
    let mut d = Daemon::start("hung-spawn", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let cwd = mount.path.to_str().unwrap();
    let hung = c.ok(json!({"op": "spawn", "session": "hung", "argv": ["true"], "cwd": cwd}))["gen"]
        .as_u64()
        .unwrap();
    // Everything else goes on: requests are answered, other sessions run and end.
    c.ok(json!({"op": "hello"}));
    let other = c.ok(json!({"op": "spawn", "session": "other", "argv": ["echo", "hi"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", other));
    assert_eq!(output_of(&seen, other), b"hi\n");
    let listed = c.ok(json!({"op": "get", "session": "hung"}));
    assert_eq!(listed["session"]["state"], "starting", "{listed}");
    // A stop waits for the start as long as its grace, then gives it up.
    c.ok(json!({"op": "stop", "session": "hung", "grace": "100ms"}));
    let seen = c.events_until(|m| m.is("spawn_failed", hung));
    let failed = seen
        .iter()
        .find_map(|m| match m {
            Msg::Json(v) if v["event"] == "spawn_failed" && v["gen"] == json!(hung) => {
                Some(v.clone())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(failed["error"]["kind"], "cancelled", "{failed}");
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0));
}

#[test]
fn input_sent_right_after_spawn_is_held_until_the_process_runs() {
    let d = Daemon::start("early-input", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    for pty in [false, true] {
        let session = if pty { "tty" } else { "pipe" };
        let gen = c.ok(
            json!({"op": "spawn", "session": session, "argv": ["head", "-c", "6"],
            "pty": pty}),
        )["gen"]
            .as_u64()
            .unwrap();
        // No waiting for `spawned`: a resize and the input are accepted (and held while
        // it starts). The resize goes first: once it has its input, the process exits.
        if pty {
            c.ok(json!({"op": "resize", "session": session, "rows": 30, "cols": 100}));
        }
        c.ok(json!({"op": "write", "session": session, "if_gen": gen, "data": "hello\n"}));
        let seen = c.events_until(|m| m.is("exited", gen));
        let out = output_of(&seen, gen);
        assert!(
            out.windows(5).any(|w| w == b"hello"),
            "{session}: {:?}",
            String::from_utf8_lossy(&out)
        );
    }
}

#[test]
fn input_pipelined_with_its_spawn_is_written_once_the_process_runs() {
    let d = Daemon::start("pipelined-input", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    for pty in [false, true] {
        let session = if pty { "tty" } else { "pipe" };
        let write = json!({"op": "write", "session": session, "data": "hello\n"});
        let (gen, seen) = with_spawn_until_exit(&mut c, session, &["head", "-c", "6"], pty, write);
        let out = output_of(&seen, gen);
        assert!(
            out.windows(5).any(|w| w == b"hello"),
            "{session}: {:?}",
            String::from_utf8_lossy(&out)
        );
        // The end of input held the same way: `cat` ends only if it is delivered.
        let session = format!("{session}-eof");
        let close = json!({"op": "close_input", "session": session});
        with_spawn_until_exit(&mut c, &session, &["cat"], pty, close);
    }
}

/// Sends a spawn of `argv` in `session` and `then` in the same write: the daemon reads
/// both in the same turn, before the start can have finished, so what `then` asks is
/// always held, and done by the daemon on its own once the process runs (nothing else
/// comes to wake it). Returns the generation and every message read until it exited.
fn with_spawn_until_exit(
    c: &mut util::daemon::Client,
    session: &str,
    argv: &[&str],
    pty: bool,
    mut then: serde_json::Value,
) -> (u64, Vec<Msg>) {
    let spawn = json!({"id": "s", "op": "spawn", "session": session, "argv": argv, "pty": pty});
    then["id"] = json!("t");
    c.send_raw(format!("{spawn}\n{then}\n").as_bytes());
    let mut gen = None;
    let seen = c.events_until(|m| {
        if m.json()["id"] == "s" {
            gen = m.json()["gen"].as_u64();
        }
        gen.is_some_and(|g| m.is("exited", g))
    });
    (gen.unwrap(), seen)
}

#[test]
fn a_failed_start_names_the_step_and_the_path() {
    let d = Daemon::start("spawn-why", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let cases = [
        (
            json!({"op": "spawn", "session": "a", "argv": ["true"], "cwd": "/nonexistent-genward-dir"}),
            "chdir to working directory \"/nonexistent-genward-dir\": ",
        ),
        (
            json!({"op": "spawn", "session": "b", "argv": ["/nonexistent-genward-prog"]}),
            "exec \"/nonexistent-genward-prog\": ",
        ),
        (
            json!({"op": "spawn", "session": "c", "argv": ["genward-no-such-program"]}),
            "exec \"genward-no-such-program\" (searched PATH): ",
        ),
    ];
    for (request, expected) in cases {
        let gen = c.ok(request)["gen"].as_u64().unwrap();
        let seen = c.events_until(|m| m.is("spawn_failed", gen));
        let error = seen
            .iter()
            .find_map(|m| match m {
                Msg::Json(v) if v["event"] == "spawn_failed" => Some(v["error"].clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(error["kind"], "not_found", "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.starts_with(expected), "{message}");
    }
}

#[test]
fn a_signal_sent_right_after_spawn_reaches_the_process_once_it_runs() {
    let d = Daemon::start("early-signal", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.ok(json!({"op": "signal", "session": "s", "if_gen": gen, "signal": "HUP"}));
    let seen = c.events_until(|m| m.is("exited", gen));
    let end = seen
        .iter()
        .find_map(|m| match m {
            Msg::Json(v) if v["event"] == "exited" => Some(v.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (&end["code"], &end["cause"]),
        (&json!(129), &json!("signaled")),
        "{end}"
    );
}
