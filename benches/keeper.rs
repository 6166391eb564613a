//! The keeper's figures (see docs/keeper.md):
//! - its memory (PSS and private bytes, from `/proc/PID/smaps_rollup`) idle and holding
//!   the descriptors of N generations (pipes: pidfd, stdin, stdout, stderr each);
//! - how long a new daemon takes, after a SIGKILL of the old one, to be ready with N
//!   sessions resumed with their I/O — side by side with `--no-keeper` (the same sessions
//!   taken back by their descriptors alone, I/O lost).
//!
//! Run with `cargo bench --bench keeper` (N = 1,000). Prints a markdown table.

#[path = "../tests/util/daemon.rs"]
mod daemon;

use std::path::Path;
use std::time::{Duration, Instant};

use daemon::{Client, Daemon};
use genward::store::keeper_file::{decode_keeper, KEEPER_FILE};
use serde_json::json;

/// smaps_rollup's `Pss` and private (clean + dirty) bytes of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (
        field("Pss:"),
        field("Private_Clean:") + field("Private_Dirty:"),
    )
}

fn keeper_pid(state: &Path) -> u32 {
    let bytes = std::fs::read(state.join(KEEPER_FILE)).expect("the keeper's record");
    decode_keeper(&bytes).expect("a record").pid
}

/// Spawns `n` sleeping sessions (kept across a restart) and waits until each runs.
fn sleepers(c: &mut Client, n: usize) {
    c.ok(json!({"op": "subscribe", "all": true}));
    for i in 0..n {
        c.ok(json!({"op": "spawn", "session": format!("s{i}"),
            "argv": ["sleep", "100000"], "on_recover": "keep"}));
    }
    let mut spawned = 0;
    c.events_until(|m| {
        spawned += usize::from(m.json()["event"] == "spawned");
        spawned == n
    });
}

/// Kills the daemon and starts the next on the same directory; the time until it is
/// ready, and how many sessions came back with their I/O.
fn crash(d: &mut Daemon, extra: &[&str], n: usize) -> (Duration, usize) {
    let t = Instant::now();
    let mut old = d.crash_daemon_and_restart(extra);
    let ready = t.elapsed();
    // The killed daemon (started unwrapped: the process returned is the daemon itself).
    let _ = old.wait();
    let list = d.client().ok(json!({"op": "list"}));
    let sessions = list["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), n, "{list}");
    let with_io = sessions
        .iter()
        .filter(|s| s["generations"][0]["adopted"]["io_lost"] == false)
        .count();
    (ready, with_io)
}

fn main() {
    let n = if std::env::args().any(|a| a == "--bench") {
        1000
    } else {
        10
    };
    let mut rows: Vec<[String; 3]> = Vec::new();

    let mut d = Daemon::start("bench-keeper", &[]);
    let state = d.dir.join("state");
    let keeper = keeper_pid(&state);
    let (pss, private) = memory(keeper);
    rows.push([
        "keeper PSS, idle".into(),
        format!("{pss} KiB"),
        format!("private {private} KiB"),
    ]);
    let mut c = d.client();
    sleepers(&mut c, n);
    drop(c);
    let (pss, private) = memory(keeper);
    rows.push([
        format!("keeper PSS, {n} generations held"),
        format!("{pss} KiB"),
        format!("private {private} KiB"),
    ]);
    let (ready, with_io) = crash(&mut d, &[], n);
    assert_eq!(with_io, n, "not every session came back with its I/O");
    rows.push([
        format!("new daemon ready, {n} sessions resumed with their I/O"),
        format!("{:.0} ms", ready.as_secs_f64() * 1e3),
        "after SIGKILL of the old one".into(),
    ]);
    assert_eq!(d.terminate(), Some(0));

    let mut d = Daemon::start("bench-no-keeper", &["--no-keeper"]);
    let mut c = d.client();
    sleepers(&mut c, n);
    drop(c);
    let (ready, with_io) = crash(&mut d, &["--no-keeper"], n);
    assert_eq!(with_io, 0);
    rows.push([
        format!("new daemon ready, {n} sessions taken back, --no-keeper"),
        format!("{:.0} ms", ready.as_secs_f64() * 1e3),
        "I/O lost (baseline)".into(),
    ]);
    assert_eq!(d.terminate(), Some(0));

    println!("| keeper | measured | |\n|---|---:|---|");
    for [a, b, c] in rows {
        println!("| {a} | {b} | {c} |");
    }
}
