//! Orphans reparented to the daemon (as a subreaper here; as PID 1 in a container the
//! kernel does the same) are reaped by pid, and never confused with tracked children.

mod util;

use std::time::{Duration, Instant};

use serde_json::json;
use util::daemon::{output_of, Daemon, PATIENCE};

fn state_and_parent(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let mut f = after.split(' ');
    let state = f.next()?.to_string();
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

#[test]
fn a_subreaper_daemon_reaps_orphaned_grandchildren() {
    let d = Daemon::start("orphans", &["--subreaper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // The middle shell starts a short sleep in the background, prints its pid and exits:
    // the sleep is orphaned, reparented to the daemon, and exits a moment later.
    let gen = c.ok(json!({"op": "spawn", "session": "o", "on_exit": "leave",
        "argv": ["sh", "-c", "sh -c 'sleep 0.3 & echo $!'; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let mut text = String::new();
    c.events_until(|m| {
        text.push_str(&String::from_utf8_lossy(&output_of(
            std::slice::from_ref(m),
            gen,
        )));
        text.ends_with('\n')
    });
    let orphan: u32 = text.trim().parse().unwrap();
    // Adopted by the daemon…
    let (_, parent) = state_and_parent(orphan).expect("orphan still running");
    assert_eq!(parent, d.child.id(), "reparented to the subreaper daemon");
    // …and reaped once it exits (no event is observable from outside: bounded polling).
    let deadline = Instant::now() + PATIENCE;
    while let Some((state, _)) = state_and_parent(orphan) {
        assert!(Instant::now() < deadline, "orphan {orphan} left as {state}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The tracked child was never touched by the orphan reaper.
    let got = c.ok(json!({"op": "get", "session": "o"}));
    assert_eq!(got["session"]["state"], "running", "{got}");
    c.ok(json!({"op": "stop", "session": "o"}));
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["cause"], "stopped");
}
