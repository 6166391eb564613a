//! What a generation's processes may and may not do to each other and to the daemon's own
//! context: a PTY child that closes its stdio is not hung up on, and the daemon's own
//! service-manager variables do not leak into children.

mod util;

use serde_json::json;
use util::daemon::{output_of, Daemon, Msg};

fn exited(seen: &[Msg], gen: u64) -> serde_json::Value {
    seen.iter()
        .find_map(|m| match m {
            Msg::Json(v) if v["event"] == "exited" && v["gen"] == json!(gen) => Some(v.clone()),
            _ => None,
        })
        .expect("an exited event")
}

#[test]
fn a_pty_child_that_closes_its_stdio_is_not_hung_up_on() {
    let d = Daemon::start("pty-close", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // It closes its terminal, then lives on a little: the terminal must stay up.
    let gen = c.ok(json!({"op": "spawn", "session": "quiet", "pty": true,
        "argv": ["sh", "-c", "echo closing; exec >&- 2>&- <&-; sleep 1; exit 0"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    assert!(String::from_utf8_lossy(&output_of(&seen, gen)).contains("closing"));
    let end = exited(&seen, gen);
    assert_eq!(
        (&end["code"], &end["cause"]),
        (&json!(0), &json!("exited")),
        "{end}"
    );
}

#[test]
fn service_manager_variables_do_not_leak_into_children() {
    let vars = [
        "NOTIFY_SOCKET",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
    ];
    // `env` sets them for the daemon, which a shell runs as its child.
    let assignments: Vec<String> = vars.iter().map(|v| format!("{v}=x")).collect();
    let mut wrapper: Vec<&str> = vec!["env"];
    wrapper.extend(assignments.iter().map(String::as_str));
    wrapper.extend(["sh", "-c", "\"$@\"; :", "sh"]);
    let d = Daemon::start_wrapped("env-leak", &wrapper, &[], None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "env", "argv": ["env"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    let out = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
    for v in vars {
        assert!(!out.contains(&format!("{v}=")), "{v} leaked: {out}");
    }
    // What a client asks for explicitly is still set.
    let gen = c.ok(json!({"op": "spawn", "session": "env", "argv": ["env"],
        "env": {"LISTEN_FDS": "3"}}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    let out = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
    assert!(out.contains("LISTEN_FDS=3"), "{out}");
}

#[test]
fn a_process_that_survives_sigkill_does_not_keep_the_daemon_from_exiting() {
    let mut mount = match util::fuse::HungMount::holding("unkillable") {
        Ok(m) => m,
        Err(why) => {
            println!(
                "SKIP a_process_that_survives_sigkill_does_not_keep_the_daemon_from_exiting: {why}"
            );
            return;
        }
    };
    let mut d = Daemon::start("unkillable", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let target = mount.path.join("anything");
    let spawned = c.ok(json!({"op": "spawn", "session": "stuck", "grace": "100ms",
        "kill_grace": "300ms", "argv": ["stat", target.to_str().unwrap()]}));
    let gen = spawned["gen"].as_u64().unwrap();
    // Its request was taken: from now on it waits for an answer that never comes, and
    // a fatal signal leaves it waiting uninterruptibly.
    mount.await_request();
    // SIGTERM twice: stop everything, then kill everything; SIGKILL does not take.
    for _ in 0..2 {
        // SAFETY: kill with the pid of our own running child.
        unsafe { libc::kill(d.pid as i32, libc::SIGTERM) };
    }
    let seen = c.events_until(|m| m.is("unkillable", gen));
    assert!(seen.iter().any(|m| m.is("unkillable", gen)));
    assert_eq!(
        d.exit_code(),
        Some(0),
        "the daemon exits, leaving the stuck process"
    );
    drop(mount); // the answer never comes: the connection is aborted and it dies
}
