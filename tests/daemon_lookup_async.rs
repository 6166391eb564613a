//! The lookups of a start (user and group names, the environment file) never stop the
//! loop: a helper process does them and the daemon reads its answer as readiness. An
//! environment file on a filesystem that never answers leaves every other client and
//! session served, and a `stop` (or `remove`) gives the start up, killing the helper.
//!
//! A directory service (NSS) that hangs cannot be arranged here; it hangs the same helper,
//! in the same place, as the dead mount does.

mod util;

use rustix::event::{poll, PollFd, PollFlags};
use serde_json::{json, Value};
use util::daemon::{output_of, Client, Daemon, Msg};
use util::fuse::HungMount;
use util::sys::pidfd_of;

/// The daemon's only child: the lookup helper of the one start in flight.
fn only_child(daemon: u32) -> i32 {
    let list = std::fs::read_to_string(format!("/proc/{daemon}/task/{daemon}/children")).unwrap();
    let pids: Vec<i32> = list
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 1, "children of the daemon: {pids:?}");
    pids[0]
}

/// Waits for the process behind `pidfd` to end (readable pidfd); a minute at most, as a
/// safety net only.
fn await_end(pidfd: &std::os::fd::OwnedFd) {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let minute = rustix::event::Timespec {
        tv_sec: 60,
        tv_nsec: 0,
    };
    let ready = poll(&mut fds, Some(&minute)).unwrap();
    assert_eq!(ready, 1, "the lookup helper is still there");
}

fn failed_event(seen: &[Msg], gen: u64) -> Value {
    seen.iter()
        .find_map(|m| match m {
            Msg::Json(v) if v["event"] == "spawn_failed" && v["gen"] == json!(gen) => {
                Some(v.clone())
            }
            _ => None,
        })
        .unwrap()
}

/// Spawns `session` with an environment file on the dead mount, and a short grace (how long
/// a stop waits for a start before it gives it up); returns its generation and its lookup
/// helper's pidfd.
fn spawn_hung(
    d: &Daemon,
    c: &mut Client,
    mount: &HungMount,
    session: &str,
) -> (u64, std::os::fd::OwnedFd) {
    let env_file = mount.path.join("app.env");
    let gen = c.ok(json!({"op": "spawn", "session": session, "argv": ["true"],
        "env_file": env_file, "grace": "100ms"}))["gen"]
        .as_u64()
        .unwrap();
    // Answered after the start began: the helper exists (whether it exec'd yet or not).
    c.ok(json!({"op": "hello"}));
    (gen, pidfd_of(only_child(d.pid)))
}

#[test]
fn an_env_file_on_a_dead_mount_freezes_nothing_and_a_stop_or_remove_cancels_it() {
    let mount = match HungMount::new("lookup-hung") {
        Ok(m) => m,
        Err(why) => {
            println!("SKIP an_env_file_on_a_dead_mount_freezes_nothing_and_a_stop_or_remove_cancels_it: {why}");
            return;
        }
    };
    let mut d = Daemon::start("hung-lookup", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (hung, helper) = spawn_hung(&d, &mut c, &mount, "hung");
    // Everything else goes on: requests are answered, other sessions run and end.
    let other = c.ok(json!({"op": "spawn", "session": "other", "argv": ["echo", "hi"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", other));
    assert_eq!(output_of(&seen, other), b"hi\n");
    let listed = c.ok(json!({"op": "get", "session": "hung"}));
    assert_eq!(listed["session"]["state"], "starting", "{listed}");
    // A stop waits for the start as long as its grace, then gives it up: the helper dies.
    c.ok(json!({"op": "stop", "session": "hung", "grace": "100ms"}));
    let seen = c.events_until(|m| m.is("spawn_failed", hung));
    assert_eq!(failed_event(&seen, hung)["error"]["kind"], "cancelled");
    await_end(&helper);
    // The same with `remove`.
    let (gone, helper) = spawn_hung(&d, &mut c, &mount, "gone");
    c.ok(json!({"op": "remove", "session": "gone"}));
    let seen = c.events_until(|m| m.is("spawn_failed", gone));
    assert_eq!(failed_event(&seen, gone)["error"]["kind"], "cancelled");
    await_end(&helper);
    c.err(json!({"op": "get", "session": "gone"}), "no_such_session");
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0));
}
