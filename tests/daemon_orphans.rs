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
    // Adopted by the daemon once the middle shell is gone (it may still be exiting)…
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, parent) = state_and_parent(orphan).expect("orphan still running");
        if parent == d.pid {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "orphan {orphan} never reparented to the daemon"
        );
        std::thread::sleep(Duration::from_millis(5)); // no observable event from outside
    }
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

/// Processes (seen from our namespace) whose command line is exactly `argv`.
fn processes_running(argv: &[&str]) -> Vec<(u32, String)> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read(format!("/proc/{pid}/cmdline"))
            .ok()
            .as_deref()
            == Some(&want[..])
        {
            if let Some((state, _)) = state_and_parent(pid) {
                found.push((pid, state));
            }
        }
    }
    found
}

#[test]
fn as_pid_1_of_a_namespace_the_daemon_reaps_orphans() {
    let root = rustix::process::geteuid().is_root();
    let unshare = std::process::Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child=TERM",
            "true",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !root || !unshare {
        println!("SKIP as_pid_1_of_a_namespace_the_daemon_reaps_orphans: needs root and unshare");
        eprintln!("SKIP as_pid_1_of_a_namespace_the_daemon_reaps_orphans: needs root and unshare");
        return;
    }
    let d = Daemon::start_wrapped(
        "pid1",
        &[
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child=TERM",
        ],
        &[],
        None,
    );
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // A uniquely named orphan: its middle shell exits at once.
    let gen = c.ok(json!({"op": "spawn", "session": "o", "on_exit": "leave",
        "argv": ["sh", "-c", "sh -c 'sleep 0.317 &'; echo spawned; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| output_of(std::slice::from_ref(m), gen) == b"spawned\n");
    let orphan = ["sleep", "0.317"];
    // It runs, then exits; as PID 1 the daemon must reap it (no zombie may remain).
    let deadline = Instant::now() + PATIENCE;
    while !processes_running(&orphan).is_empty() {
        assert!(
            Instant::now() < deadline,
            "orphan left behind: {:?}",
            processes_running(&orphan)
        );
        std::thread::sleep(Duration::from_millis(10)); // no observable event from outside
    }
    c.ok(json!({"op": "stop", "session": "o"}));
    c.events_until(|m| m.is("exited", gen));
}
