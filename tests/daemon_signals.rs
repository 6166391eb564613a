//! The daemon's own signals: SIGTERM stops every session and exits 0 with nothing left
//! behind; a second SIGTERM kills at once.

mod util;

use genward::testkit::proc::group_members;
use serde_json::json;
use util::daemon::{Client, Daemon};

#[test]
fn sigterm_stops_and_reaps_every_session_and_their_groups() {
    let mut d = Daemon::start("sigterm", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut pgids = Vec::new();
    for (name, script) in [
        ("kids", "sleep 1000 & sleep 1000 & echo ready; wait"),
        (
            "slow",
            "trap 'sleep 0.2; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
        ),
        ("pty", "echo ready; exec sleep 1000"),
    ] {
        let mut req = json!({"op": "spawn", "session": name, "argv": ["sh", "-c", script]});
        if name == "pty" {
            req["pty"] = json!(true);
        }
        let gen = c.ok(req)["gen"].as_u64().unwrap();
        let seen = c.output_until(gen, "ready");
        let pid = seen
            .iter()
            .find(|m| m.is("spawned", gen))
            .map(|m| m.json()["pid"].as_u64().unwrap() as u32)
            .expect("spawned before output");
        pgids.push(pid);
    }
    for &pgid in &pgids {
        assert!(!group_members(pgid).is_empty());
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    assert_eq!(d.exit_code(), Some(0));
    for pgid in pgids {
        assert_eq!(
            group_members(pgid),
            Vec::<u32>::new(),
            "group {pgid} left behind"
        );
    }
}

#[test]
fn a_second_sigterm_kills_at_once() {
    let mut d = Daemon::start("sigterm-twice", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(
        json!({"op": "spawn", "session": "deaf", "grace": "1h", "kill_grace": "1h",
        "argv": ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"]}),
    )["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "ready");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "stopping");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["cause"], "killed");
    assert_eq!(d.exit_code(), Some(0));
}

/// Spawns `session`: a shell and a child of it, both ignoring SIGTERM (`trap '' TERM`,
/// inherited), with an hour's `grace` and `kill_grace` (and the members of `extra`);
/// returns its generation and process group once both run.
fn deaf_tree(c: &mut Client, session: &str, extra: serde_json::Value) -> (u64, u32) {
    let mut req = json!({"op": "spawn", "session": session, "grace": "1h", "kill_grace": "1h",
        "argv": ["sh", "-c", "trap '' TERM; sleep 1000 & echo ready; wait"]});
    for (k, v) in extra.as_object().unwrap() {
        req[k] = v.clone();
    }
    let gen = c.ok(req)["gen"].as_u64().unwrap();
    let seen = c.output_until(gen, "ready");
    let pgid = seen
        .iter()
        .find(|m| m.is("spawned", gen))
        .map(|m| m.json()["pid"].as_u64().unwrap() as u32)
        .expect("spawned before output");
    assert_eq!(group_members(pgid).len(), 2, "the leader and its child");
    (gen, pgid)
}

/// A second SIGTERM kills every process of a session at once, not only its leader: a
/// child that ignores TERM (inherited `trap '' TERM`) is not left its hour-long
/// `kill_grace`, so the daemon exits — within the tests' patience — with nothing left.
#[test]
fn a_second_sigterm_kills_the_whole_tree_at_once() {
    let mut d = Daemon::start("sigterm-twice-tree", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (_, pgid) = deaf_tree(&mut c, "deaf", json!({}));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "stopping");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    assert_eq!(d.exit_code(), Some(0));
    assert_eq!(
        group_members(pgid),
        Vec::<u32>::new(),
        "the session's tree left behind"
    );
}

#[test]
fn subscribers_see_every_exit_of_a_shutdown() {
    let mut d = Daemon::start("shutdown-events", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut gens = Vec::new();
    for i in 0..20 {
        let gen = c.ok(json!({"op": "spawn", "session": format!("s{i}"),
            "argv": ["sh", "-c", "head -c 200000 /dev/zero; exec sleep 1000"]}))["gen"]
            .as_u64()
            .unwrap();
        gens.push(gen);
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    let mut left = gens.clone();
    c.events_until(|m| {
        left.retain(|g| !m.is("exited", *g));
        left.is_empty()
    });
    assert_eq!(d.exit_code(), Some(0));
}

/// `stop` with grace 0 reaches the whole tree: a grandchild that ignores SIGTERM is killed
/// as soon as its leader ends, not after the spec's hour-long `kill_grace`, so a `remove`
/// that follows completes.
#[test]
fn a_stop_with_grace_zero_kills_what_the_leader_leaves() {
    let d = Daemon::start("stop-grace-zero-tree", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(
        json!({"op": "spawn", "session": "tree", "grace": "1h", "kill_grace": "1h",
        "argv": ["sh", "-c",
            "(trap '' TERM; exec sleep 1000) >/dev/null 2>&1 & echo ready; exec sleep 1000"]}),
    )["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "ready");
    c.ok(json!({"op": "stop", "session": "tree", "grace": "0s"}));
    c.events_until(|m| m.is("exited", gen));
    c.ok(json!({"op": "remove", "session": "tree"}));
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
}

/// `stop` with an hour's grace, then `stop` with grace 0: the second grace reaches the
/// whole tree, not only its leader. The leader and a child of it both ignore SIGTERM and
/// the child holds the output pipe; the spec gives an hour to `kill_grace` and `drain`,
/// so `exited` comes (whole, not truncated) only once the second stop killed the child.
#[test]
fn a_second_stop_with_a_shorter_grace_kills_the_whole_tree() {
    let d = Daemon::start("stop-then-stop-zero", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (gen, pgid) = deaf_tree(&mut c, "tree", json!({"drain": "1h"}));
    c.ok(json!({"op": "stop", "session": "tree", "grace": "1h"}));
    c.ok(json!({"op": "stop", "session": "tree", "grace": 0}));
    let seen = c.events_until(|m| m.is("exited", gen));
    let exited = seen.last().unwrap().json();
    assert_eq!(exited["truncated"], false, "{exited}");
    assert_eq!(exited["cause"], "killed", "{exited}");
    // Its generation is gone once its group is: removing the session completes.
    c.ok(json!({"op": "remove", "session": "tree"}));
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    assert_eq!(
        group_members(pgid),
        Vec::<u32>::new(),
        "the session's tree left behind"
    );
}
