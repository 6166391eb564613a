//! A stop reaches processes that were stopped (`kill -STOP`, `genward signal NAME STOP`, a
//! shell's Ctrl-Z): each is sent SIGCONT after its signal, so that its handler runs and the
//! stop is graceful — under cgroup containment as under session containment.

mod util;

use std::time::Instant;

use serde_json::json;
use util::daemon::{output_of, Client, Daemon, Msg, PATIENCE};

/// The containments to try: the default (cgroup where the daemon can make cgroups) and
/// session.
const CONTAINMENTS: [&str; 2] = ["auto", "session"];

/// A shell that says `up` and its pid, and on SIGTERM says `graceful` and exits 0. Its
/// loop's `sleep` is short, so that a pending trap runs soon once it is allowed to.
const TRAPPING: &str =
    "trap 'echo graceful-$$; exit 0' TERM; echo up=$$.; while :; do sleep 0.01; done";

fn exited(seen: &[Msg], gen: u64) -> serde_json::Value {
    seen.iter()
        .find_map(|m| match m {
            Msg::Json(v) if v["event"] == "exited" && v["gen"] == json!(gen) => Some(v.clone()),
            _ => None,
        })
        .expect("an exited event")
}

/// The pid a [`TRAPPING`] shell printed, once it has.
fn pid_printed(c: &mut Client, gen: u64) -> u32 {
    let mut text = String::new();
    let pid = |text: &str| -> Option<u32> {
        let rest = text.split("up=").nth(1)?;
        rest.split_once('.')?.0.parse().ok()
    };
    c.events_until(|m| {
        text.push_str(&String::from_utf8_lossy(&output_of(
            std::slice::from_ref(m),
            gen,
        )));
        pid(&text).is_some()
    });
    pid(&text).unwrap()
}

/// Waits until `pid` is stopped (`T`): a stop signal takes effect asynchronously, and only
/// `/proc` shows it to a process that is not the parent.
fn await_stopped(pid: u32) {
    let deadline = Instant::now() + PATIENCE;
    while genward::testkit::proc::stat(pid).map(|s| s.state) != Some("T".into()) {
        assert!(Instant::now() < deadline, "pid {pid} never stopped");
        std::thread::yield_now();
    }
}

fn containment_of(c: &mut Client) -> String {
    c.ok(json!({"op": "hello"}))["containment"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The leader, stopped through genward itself, is woken by the stop: its SIGTERM trap
/// runs and it ends `stopped` with its own status, before its grace would have ended it
/// `killed`.
#[test]
fn a_stopped_leader_runs_its_handler_when_stopped() {
    for containment in CONTAINMENTS {
        let d = Daemon::start("stopped-leader", &["--containment", containment]);
        let mut c = d.client();
        if containment == "auto" && containment_of(&mut c) != "cgroup" {
            util::daemon::skip_because(
                "a_stopped_leader_runs_its_handler_when_stopped (cgroup): no cgroup containment here",
            );
            continue;
        }
        c.ok(json!({"op": "subscribe", "all": true}));
        let gen = c.ok(json!({"op": "spawn", "session": "paused", "grace": "10s",
            "argv": ["bash", "-c", TRAPPING]}))["gen"]
            .as_u64()
            .unwrap();
        let pid = pid_printed(&mut c, gen);
        c.ok(json!({"op": "signal", "session": "paused", "signal": "STOP"}));
        await_stopped(pid);
        c.ok(json!({"op": "stop", "session": "paused"}));
        let seen = c.events_until(|m| m.is("exited", gen));
        let end = exited(&seen, gen);
        let out = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
        assert!(
            out.contains(&format!("graceful-{pid}")),
            "{containment}: the handler did not run: {out:?} {end}"
        );
        assert_eq!(
            (&end["code"], &end["cause"], &end["truncated"]),
            (&json!(0), &json!("stopped"), &json!(false)),
            "{containment}: {end}"
        );
    }
}

/// A member of the tree stopped as a shell's Ctrl-Z leaves a job: when the leader ends of
/// the stop, the member gets its SIGTERM and a SIGCONT, runs its trap and closes the
/// output, so the end is reported whole (not cut at the drain deadline) and graceful.
#[test]
fn a_stopped_member_is_woken_by_the_stop_in_every_containment() {
    for containment in CONTAINMENTS {
        let d = Daemon::start("stopped-member", &["--containment", containment]);
        let mut c = d.client();
        if containment == "auto" && containment_of(&mut c) != "cgroup" {
            util::daemon::skip_because(
                "a_stopped_member_is_woken_by_the_stop (cgroup): no cgroup containment here",
            );
            continue;
        }
        c.ok(json!({"op": "subscribe", "all": true}));
        // The leader waits for its member; TERM ends it (no trap), and what it leaves
        // gets the tree's TERM then.
        // (`$$` escaped: the member's own pid, not the leader's.)
        let member_script = TRAPPING.replace("$$", "\\$\\$");
        let script = format!("bash -c \"{member_script}\" & wait");
        let gen = c.ok(json!({"op": "spawn", "session": "job", "grace": "60s",
            "kill_grace": "60s", "drain": "10s", "argv": ["bash", "-c", script]}))["gen"]
            .as_u64()
            .unwrap();
        let leader = c.spawned_pid(gen);
        let member = pid_printed(&mut c, gen);
        assert_ne!(member, leader, "the member's own pid");
        // SAFETY: kill with the pid of a live process of the generation, just printed.
        assert_eq!(unsafe { libc::kill(member as i32, libc::SIGSTOP) }, 0);
        await_stopped(member);
        c.ok(json!({"op": "stop", "session": "job"}));
        let seen = c.events_until(|m| m.is("exited", gen));
        let end = exited(&seen, gen);
        let out = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
        assert!(
            out.contains(&format!("graceful-{member}")),
            "{containment}: the member's handler did not run: {out:?} {end}"
        );
        assert_eq!(
            (&end["cause"], &end["truncated"]),
            (&json!("stopped"), &json!(false)),
            "{containment}: {end}"
        );
    }
}

/// A client's `tree` signal wakes what it finds stopped, the leader included, as a stop
/// does: the stopped leader's trap runs.
#[test]
fn a_tree_signal_wakes_a_stopped_leader_in_every_containment() {
    for containment in CONTAINMENTS {
        let d = Daemon::start("tree-wakes", &["--containment", containment]);
        let mut c = d.client();
        if containment == "auto" && containment_of(&mut c) != "cgroup" {
            util::daemon::skip_because(
                "a_tree_signal_wakes_a_stopped_leader_in_every_containment (cgroup): no cgroup containment here",
            );
            continue;
        }
        c.ok(json!({"op": "subscribe", "all": true}));
        let gen = c.ok(json!({"op": "spawn", "session": "paused",
            "argv": ["bash", "-c", TRAPPING]}))["gen"]
            .as_u64()
            .unwrap();
        let pid = pid_printed(&mut c, gen);
        c.ok(json!({"op": "signal", "session": "paused", "signal": "STOP"}));
        await_stopped(pid);
        c.ok(json!({"op": "signal", "session": "paused", "signal": "TERM", "scope": "tree"}));
        let seen = c.events_until(|m| m.is("exited", gen));
        let end = exited(&seen, gen);
        let out = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
        assert!(
            out.contains(&format!("graceful-{pid}")),
            "{containment}: the handler did not run: {out:?} {end}"
        );
        assert_eq!(
            (&end["code"], &end["cause"]),
            (&json!(0), &json!("exited")),
            "{containment}: {end}"
        );
    }
}
