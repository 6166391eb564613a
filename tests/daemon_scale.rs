//! Many sessions through one daemon: its table limits, and ten thousand sessions served
//! as one.

mod util;

use genward::testkit::scratch::ScratchDir;
use serde_json::{json, Value};
use util::daemon::Daemon;

#[test]
fn ten_thousand_sessions_are_served_and_the_next_is_refused_with_limit() {
    const N: usize = 10_000;
    let d = Daemon::start("scale-10k", &["--max-sessions", "10000"]);
    let mut c = d.client();
    let spawns: Vec<Value> = (0..N)
        .map(|i| json!({"op": "spawn", "session": format!("s{i}"), "argv": ["true"]}))
        .collect();
    for (i, r) in c.pipelined(&spawns).iter().enumerate() {
        assert_eq!(r["ok"], json!(true), "spawn of s{i}: {r}");
    }
    let r = c.err(
        json!({"op": "spawn", "session": "one-more", "argv": ["true"]}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("10000 sessions"), "{r}");
    // Every session answers for itself, and an existing one still takes a new start.
    let gets: Vec<Value> = (0..N)
        .map(|i| json!({"op": "get", "session": format!("s{i}")}))
        .collect();
    for (i, r) in c.pipelined(&gets).iter().enumerate() {
        assert_eq!(r["ok"], json!(true), "get of s{i}: {r}");
        assert_eq!(r["session"]["name"], json!(format!("s{i}")), "{r}");
    }
    c.ok(json!({"op": "spawn", "session": "s0", "argv": ["true"]}));
}

#[test]
fn a_start_beyond_the_live_generations_limit_is_refused_with_limit() {
    let d = Daemon::start("scale-running", &["--max-running", "2"]);
    let mut c = d.client();
    for name in ["a", "b"] {
        c.ok(json!({"op": "spawn", "session": name, "argv": ["sleep", "1000"]}));
    }
    let r = c.err(
        json!({"op": "spawn", "session": "c", "argv": ["sleep", "1000"]}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("2 generations"), "{r}");
    c.ok(json!({"op": "shutdown"}));
}

#[test]
fn a_replacement_at_the_live_generations_limit_waits_for_the_one_it_replaces() {
    let d = Daemon::start("scale-replace", &["--max-running", "2"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut gens = Vec::new();
    for name in ["a", "b"] {
        let r = c.ok(json!({"op": "spawn", "session": name, "argv": ["sleep", "1000"]}));
        gens.push(r["gen"].as_u64().unwrap());
    }
    let r = c.ok(json!({"op": "spawn", "session": "a", "argv": ["sleep", "1000"]}));
    let new = r["gen"].as_u64().unwrap();
    // While it waits, no other start finds room.
    c.err(
        json!({"op": "spawn", "session": "c", "argv": ["sleep", "1000"]}),
        "limit",
    );
    let seen = c.events_until(|m| m.is("spawned", new));
    let old_exit = seen.iter().position(|m| m.is("exited", gens[0]));
    assert!(
        old_exit.is_some(),
        "the new one started before the old one ended: {seen:?}"
    );
    let r = c.ok(json!({"op": "get", "session": "a"}));
    assert_eq!(r["session"]["current"], json!(new), "{r}");
    c.ok(json!({"op": "shutdown"}));
}

/// Sessions `a`, `b` and `c`, each running `sleep` kept across a restart; a pidfd of each
/// process, to see it end.
fn three_kept_running(c: &mut util::daemon::Client) -> Vec<std::os::fd::OwnedFd> {
    c.ok(json!({"op": "subscribe", "all": true}));
    ["a", "b", "c"]
        .iter()
        .map(|name| {
            let r = c.ok(json!({"op": "spawn", "session": name, "on_recover": "keep",
                "argv": ["sleep", "1000"]}));
            let pid = c.spawned_pid(r["gen"].as_u64().unwrap());
            util::sys::pidfd_of(pid as i32)
        })
        .collect()
}

/// The three sessions of [`three_kept_running`] are listed, each running.
fn all_three_run(c: &mut util::daemon::Client) {
    let list = c.ok(json!({"op": "list"}));
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3, "{list}");
    for s in sessions {
        assert_eq!(s["state"], "running", "{list}");
    }
}

/// Shuts the daemon down and checks that none of the processes behind `pidfds` runs on.
fn nothing_runs_on_after_a_shutdown(
    d: &mut Daemon,
    c: &mut util::daemon::Client,
    pidfds: &[std::os::fd::OwnedFd],
) {
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0));
    for (name, fd) in ["a", "b", "c"].iter().zip(pidfds) {
        assert!(util::sys::exited(fd), "{name} runs on after the shutdown");
    }
}

/// A restart with a lower `--max-running` than what runs takes back every process: none
/// is reported `lost` while it runs, none runs on unsupervised after a `shutdown`, and new
/// starts are refused until what runs is below the limit.
#[test]
fn a_restart_under_a_lower_running_limit_takes_back_every_running_process() {
    let conf = ScratchDir::new("scale-lowered-config");
    let path = conf.join("genward.json");
    let config = |sessions: Value| {
        let text = json!({ "sessions": sessions }).to_string();
        std::fs::write(&path, text).unwrap();
    };
    config(json!({}));
    let path = path.to_str().unwrap();
    let mut d = Daemon::start(
        "scale-lowered",
        &["--no-keeper", "--max-running", "3", "--config", path],
    );
    let mut c = d.client();
    let pidfds = three_kept_running(&mut c);
    drop(c);
    // The configuration now adds a session there is no room for: the daemon starts all
    // the same (exiting would leave what it took back unsupervised), without it.
    config(json!({"x": {"argv": ["sleep", "1000"]}}));
    d.crash_and_restart(&["--no-keeper", "--max-running", "1", "--config", path]);
    let mut c = d.client();
    all_three_run(&mut c);
    c.err(json!({"op": "reload"}), "limit");
    config(json!({}));
    c.ok(json!({"op": "reload"}));
    assert!(pidfds.iter().all(|fd| !util::sys::exited(fd)));
    let r = c.err(
        json!({"op": "spawn", "session": "d", "argv": ["sleep", "1000"]}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-running"), "{r}");
    // An upgrade waits until what runs fits the limit the new program is given.
    let r = c.err(json!({"op": "upgrade"}), "upgrade_failed");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("once 2 more have ended"), "{r}");
    nothing_runs_on_after_a_shutdown(&mut d, &mut c, &pidfds);
}

/// The same for `--max-sessions`: every session on disk comes back with its process, and
/// nothing runs on after a `shutdown`.
#[test]
fn a_restart_under_a_lower_session_limit_takes_back_every_session() {
    let mut d = Daemon::start("scale-lowered-sessions", &["--no-keeper"]);
    let mut c = d.client();
    let pidfds = three_kept_running(&mut c);
    drop(c);
    d.crash_and_restart(&["--no-keeper", "--max-sessions", "1"]);
    let mut c = d.client();
    all_three_run(&mut c);
    c.err(
        json!({"op": "spawn", "session": "d", "argv": ["true"]}),
        "limit",
    );
    let r = c.err(json!({"op": "upgrade"}), "upgrade_failed");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-sessions"), "{r}");
    nothing_runs_on_after_a_shutdown(&mut d, &mut c, &pidfds);
}

#[test]
fn a_limit_that_is_not_a_positive_count_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_genward"))
        .args(["daemon", "--max-sessions", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
    assert!(err.contains("bad value `0` for `--max-sessions`"), "{err}");
}
