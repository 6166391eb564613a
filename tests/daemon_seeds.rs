//! The two bug reports genward exists to make impossible, end to end with real processes.
//!
//! Seed 1: a replaced process's late output and exit (143 after SIGTERM) must never be
//! attributed to its successor, nor remove or settle it. Seed 2: failed and stuck entries
//! must never make a listing fail.

mod util;

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde_json::{json, Value};
use util::daemon::{output_of, Daemon, Msg};

/// Traps SIGTERM, keeps printing for ~300 ms, then exits 143.
const STUBBORN: &str =
    "trap 'for i in 1 2 3 4 5 6; do echo late-$i; sleep 0.05; done; exit 143' TERM; \
                        echo ready; while :; do sleep 0.01; done";

/// [`STUBBORN`], except that after its first late line it waits for a line on the fifo
/// `gate` before it goes on: it cannot end until the test lets it.
fn gated_stubborn(gate: &Path) -> String {
    format!(
        "trap 'echo late-1; read _ < {}; for i in 2 3 4 5 6; do echo late-$i; sleep 0.05; done; \
         exit 143' TERM; echo ready; while :; do sleep 0.01; done",
        gate.display()
    )
}

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("gen")
}

/// Everything tagged `gen` among `msgs` (events and output).
fn tagged(msgs: &[Msg], gen: u64) -> Vec<&Msg> {
    msgs.iter()
        .filter(|m| m.json()["gen"] == json!(gen))
        .collect()
}

fn replaced_generation_never_touches_its_successor(reaper: &[&str]) {
    let d = Daemon::start("seed1-replace", reaper);
    let mut c = d.client();
    let hello = c.ok(json!({"op": "hello"}));
    let expected = if reaper.is_empty() {
        "pidfd"
    } else {
        "sigchld"
    };
    assert_eq!(hello["reaper"], expected);
    c.ok(json!({"op": "subscribe", "all": true}));
    let g1 = gen_of(&c.ok(json!({"op": "spawn", "session": "agent",
        "argv": ["sh", "-c", STUBBORN], "grace": "10s"})));
    c.output_until(g1, "ready");
    let g2 = gen_of(&c.ok(json!({"op": "spawn", "session": "agent", "argv": ["cat"]})));
    assert!(g2 > g1);
    let mut seen = c.events_until(|m| m.is("spawned", g2));
    // The successor is running; its predecessor's end came first (replace waits).
    let e1: Vec<&Msg> = seen.iter().filter(|m| m.is("exited", g1)).collect();
    assert_eq!(e1.len(), 1, "exactly one exit for gen {g1}");
    assert_eq!(e1[0].json()["code"], 143);
    assert_eq!(e1[0].json()["cause"], "superseded");
    let late = String::from_utf8_lossy(&output_of(&seen, g1)).to_string();
    assert!(
        late.contains("late-6"),
        "gen {g1} drained fully before its exit: {late}"
    );
    // The successor can be written to and answers, tagged with its own generation.
    c.ok(json!({"op": "write", "session": "agent", "if_gen": g2, "data": "ping\n"}));
    seen.extend(c.output_until(g2, "ping\n"));
    // Input meant for the replaced generation is refused and reaches nobody.
    c.err(
        json!({"op": "write", "session": "agent", "if_gen": g1, "data": "stale\n"}),
        "stale_generation",
    );
    let got = c.ok(json!({"op": "get", "session": "agent"}));
    assert_eq!(got["session"]["current"], g2);
    assert_eq!(got["session"]["state"], "running");
    c.ok(json!({"op": "stop", "session": "agent", "if_gen": g2}));
    seen.extend(c.events_until(|m| m.is("exited", g2)));
    for m in tagged(&seen, g2) {
        assert!(
            !matches!(m, Msg::Output(_, data) if data.windows(4).any(|w| w == b"late" || w == b"stal")),
            "gen {g2} carries foreign output: {m:?}"
        );
    }
    let e2: Vec<&Msg> = seen.iter().filter(|m| m.is("exited", g2)).collect();
    assert_eq!(e2.len(), 1);
    assert_eq!(e2[0].json()["cause"], "stopped");
    assert_eq!(output_of(&seen, g2), b"ping\n");
}

fn overlap_successor_exits_before_predecessor_drained(reaper: &[&str]) {
    let d = Daemon::start("seed1-overlap", reaper);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // The predecessor cannot end before the test opens its gate, whatever the timing.
    let gate = d.dir.join("gate");
    let path = std::ffi::CString::new(gate.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");
    let g1 = gen_of(&c.ok(json!({"op": "spawn", "session": "agent",
        "argv": ["sh", "-c", gated_stubborn(&gate)], "grace": "10m"})));
    c.output_until(g1, "ready");
    let g2 = gen_of(&c.ok(
        json!({"op": "spawn", "session": "agent", "on_busy": "overlap",
        "argv": ["sh", "-c", "echo new; exit 0"]}),
    ));
    let mut seen = c.events_until(|m| m.is("exited", g2));
    // The successor ended first, cleanly, with its own output only.
    assert!(
        !seen.iter().any(|m| m.is("exited", g1)),
        "gen {g1} ended before its gate opened"
    );
    let e2 = seen.last().unwrap().json().clone();
    assert_eq!(e2["code"], 0);
    assert_eq!(e2["cause"], "exited");
    assert_eq!(output_of(&seen, g2), b"new\n");
    // Now the predecessor's late output and exit arrive: tagged gen 1, changing nothing
    // about gen 2 or the session's record of it. Opened read-write, the fifo does not
    // wait for its reader, and keeps the line for it until the predecessor has ended.
    c.seen_or_until(&mut seen, |m| {
        String::from_utf8_lossy(&output_of(std::slice::from_ref(m), g1)).contains("late-1")
    });
    let mut gate = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&gate)
        .unwrap();
    gate.write_all(b"go\n").unwrap();
    seen.extend(c.events_until(|m| m.is("exited", g1)));
    drop(gate);
    let e1 = seen.last().unwrap().json().clone();
    assert_eq!(e1["code"], 143);
    assert_eq!(e1["cause"], "superseded");
    assert!(String::from_utf8_lossy(&output_of(&seen, g1)).contains("late-6"));
    assert_eq!(output_of(&seen, g2), b"new\n");
    assert_eq!(seen.iter().filter(|m| m.is("exited", g2)).count(), 1);
    let got = c.ok(json!({"op": "get", "session": "agent"}));
    assert_eq!(got["session"]["last_end"]["gen"], g2, "{got}");
    assert_eq!(got["session"]["last_end"]["code"], 0, "{got}");
    assert_eq!(got["session"]["generations"], json!([]));
}

fn failed_entries_never_fail_a_listing(reaper: &[&str]) {
    let d = Daemon::start("seed2", reaper);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let healthy = gen_of(&c.ok(json!({"op": "spawn", "session": "healthy",
        "argv": ["sleep", "1000"]})));
    let nofile = gen_of(&c.ok(json!({"op": "spawn", "session": "nofile",
        "argv": ["/nonexistent/genward-test-binary"]})));
    c.ok(
        json!({"op": "spawn", "session": "crashy", "argv": ["false"],
        "restart": {"mode": "always", "initial": 10, "max": 20, "max_restarts": 2}}),
    );
    // A generation that ignores SIGTERM, being stopped with a long grace: stuck in
    // `stopping` while we list.
    let stuck = gen_of(&c.ok(json!({"op": "spawn", "session": "stuck",
        "argv": ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
        "grace": "60s"})));
    let mut seen = c.output_until(stuck, "ready");
    c.ok(json!({"op": "stop", "session": "stuck"}));
    c.seen_or_until(&mut seen, |m| {
        m.json()["event"] == "state"
            && m.json()["session"] == "crashy"
            && m.json()["state"] == "failed"
    });
    c.seen_or_until(&mut seen, |m| m.is("spawn_failed", nofile));
    assert!(seen.iter().any(|m| m.is("spawn_failed", nofile)));
    let list = c.ok(json!({"op": "list"}));
    let sessions = list["sessions"].as_array().unwrap();
    let state = |name: &str| {
        sessions
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {list}"))["state"]
            .clone()
    };
    assert_eq!(sessions.len(), 4, "{list}");
    assert_eq!(state("healthy"), "running");
    assert_eq!(state("nofile"), "failed");
    assert_eq!(state("crashy"), "failed");
    assert_eq!(state("stuck"), "stopping");
    let nofile_end = &sessions.iter().find(|s| s["name"] == "nofile").unwrap()["last_end"];
    assert_eq!(nofile_end["error"]["kind"], "not_found", "{nofile_end}");
    // The healthy session is still fully usable.
    c.ok(json!({"op": "signal", "session": "healthy", "if_gen": healthy, "signal": "TERM"}));
    let e = c.events_until(|m| m.is("exited", healthy));
    assert_eq!(e.last().unwrap().json()["cause"], "signaled");
}

/// Each scenario runs with pidfds and with the SIGCHLD fallback reaper.
mod reapers {
    use super::*;

    #[test]
    fn replaced_generation_never_touches_its_successor_pidfd() {
        replaced_generation_never_touches_its_successor(&[]);
    }

    #[test]
    fn replaced_generation_never_touches_its_successor_fallback() {
        replaced_generation_never_touches_its_successor(&["--reaper", "fallback"]);
    }

    #[test]
    fn overlap_successor_exits_before_predecessor_drained_pidfd() {
        overlap_successor_exits_before_predecessor_drained(&[]);
    }

    #[test]
    fn overlap_successor_exits_before_predecessor_drained_fallback() {
        overlap_successor_exits_before_predecessor_drained(&["--reaper", "fallback"]);
    }

    #[test]
    fn failed_entries_never_fail_a_listing_pidfd() {
        failed_entries_never_fail_a_listing(&[]);
    }

    #[test]
    fn failed_entries_never_fail_a_listing_fallback() {
        failed_entries_never_fail_a_listing(&["--reaper", "fallback"]);
    }
}
