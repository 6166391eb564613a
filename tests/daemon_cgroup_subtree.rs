//! The daemon's cgroup subtree (`genward-<id>-<pid>/`) as others may change it: a limit on
//! how many cgroups it may hold is a shortage of the daemon's, not the session's failure,
//! and the subtree removed behind the daemon's back is made again at the next spawn.

mod util;

use std::path::{Path, PathBuf};

use genward::sys::cgroup::{own_cgroup, owner_of, Location};
use serde_json::json;
use util::daemon::{skip_because, without_cgroups, Client, Daemon, Msg};

/// The cgroup subtree of the daemon with pid `pid`: `genward-<id>-<pid>/` in the cgroup it
/// runs in (it stays where it started).
fn subtree_of(pid: u32) -> PathBuf {
    let mount = Location::find().expect("cgroup containment works").mount;
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let own = mount.join(own_cgroup(&text).unwrap().trim_start_matches('/'));
    let suffix = format!("-{pid}");
    let found: Vec<PathBuf> = std::fs::read_dir(&own)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap_or_default();
            name.starts_with("genward-") && name.ends_with(&suffix) && p.is_dir()
        })
        .collect();
    assert_eq!(found.len(), 1, "the daemon's subtree in {own:?}: {found:?}");
    found.into_iter().next().unwrap()
}

/// Whether the test cannot run here (said out loud): it needs cgroup containment, and root
/// to change or remove the daemon's subtree.
fn cannot_run(c: &mut Client, test: &str) -> bool {
    if without_cgroups(c, test) {
        return true;
    }
    !util::sys::is_root() && skip_because(&format!("{test}: not root"))
}

/// `cgroup.max.descendants` of a subtree set for the test, lifted however it ends.
struct MaxDescendants(PathBuf);

impl MaxDescendants {
    fn set(subtree: &Path, value: &str) -> MaxDescendants {
        let file = subtree.join("cgroup.max.descendants");
        std::fs::write(&file, value).unwrap();
        MaxDescendants(file)
    }

    fn lift(&self) {
        std::fs::write(&self.0, "max").unwrap();
    }
}

impl Drop for MaxDescendants {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "max");
    }
}

/// Whether `m` is a `state` event of `session` saying `state`.
fn is_state(m: &Msg, session: &str, state: &str) -> bool {
    let v = m.json();
    v["event"] == "state" && v["session"] == session && v["state"] == state
}

#[test]
fn a_cgroup_that_cannot_be_made_for_want_of_room_is_not_counted_as_a_restart() {
    const TEST: &str = "a_cgroup_that_cannot_be_made_for_want_of_room_is_not_counted_as_a_restart";
    let d = Daemon::start("cgroup-shortage", &[]);
    let mut c = d.client();
    if cannot_run(&mut c, TEST) {
        return;
    }
    let subtree = subtree_of(d.pid);
    c.ok(json!({"op": "subscribe", "all": true}));
    // No cgroup may be made below the subtree (and none is kept for reuse yet).
    let limit = MaxDescendants::set(&subtree, "0");

    let first = c.ok(json!({"op": "spawn", "session": "s",
        "argv": ["sh", "-c", "echo up; exec sleep 1000"],
        "restart": {"mode": "on-failure", "initial": "10ms", "max": "20ms", "max_restarts": 2}}))
        ["gen"]
        .as_u64()
        .unwrap();
    // More failed starts than the policy allows restarts (the first and two restarts):
    // none of them was counted, and the session never went `failed`.
    let mut failed = Vec::new();
    let seen = c.events_until(|m| {
        let v = m.json();
        if v["event"] == "spawn_failed" && v["session"] == "s" {
            failed.push(v.clone());
        }
        failed.len() == 5 || is_state(m, "s", "failed")
    });
    assert!(
        !seen.iter().any(|m| is_state(m, "s", "failed")),
        "the shortage was held against the session: {seen:?}"
    );
    assert_eq!(failed[0]["gen"], first, "{failed:?}");
    for f in &failed {
        assert_eq!(f["error"]["errno"], libc::EAGAIN, "{f}");
        assert_eq!(f["error"]["kind"], "other", "{f}");
    }
    let got = c.ok(json!({"op": "get", "session": "s"}));
    assert_ne!(got["session"]["state"], "failed", "{got}");
    assert_eq!(got["session"]["restarts"], 0, "{got}");

    // Once the shortage ends, the session starts.
    limit.lift();
    let started = c.events_until(|m| {
        let v = m.json();
        v["event"] == "spawned" && v["session"] == "s"
    });
    let gen = started.last().unwrap().json()["gen"].as_u64().unwrap();
    c.output_until(gen, "up");
    let got = c.ok(json!({"op": "get", "session": "s"}));
    assert_eq!(got["session"]["state"], "running", "{got}");
    assert_eq!(got["session"]["current"], gen, "{got}");
    assert_eq!(got["session"]["restarts"], 0, "{got}");
}

#[test]
fn the_subtree_removed_behind_the_daemons_back_is_made_again() {
    const TEST: &str = "the_subtree_removed_behind_the_daemons_back_is_made_again";
    let d = Daemon::start_logged("cgroup-subtree-gone", &[]);
    let mut c = d.client();
    if cannot_run(&mut c, TEST) {
        return;
    }
    let subtree = subtree_of(d.pid);
    let owner = owner_of(&subtree);
    c.ok(json!({"op": "subscribe", "all": true}));
    // A job that ends: its emptied cgroup is kept for reuse, and goes with the subtree.
    let job = c.ok(json!({"op": "spawn", "session": "job", "argv": ["true"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", job));
    c.released("job");

    // Nothing runs in it: a privileged hand may remove it, kept cgroups first.
    for entry in std::fs::read_dir(&subtree).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir(&path).unwrap();
        }
    }
    std::fs::remove_dir(&subtree).unwrap();

    let gen = c.ok(json!({"op": "spawn", "session": "after",
        "argv": ["sh", "-c", "echo up; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let pid = c.spawned_pid(gen);
    c.output_until(gen, "up");
    assert!(subtree.is_dir(), "{subtree:?} made again");
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let cg = own_cgroup(&text).unwrap();
    let name = subtree.file_name().unwrap().to_str().unwrap();
    assert!(
        cg.contains(&format!("/{name}/gen-")),
        "gen {gen} runs in {cg}, not in {subtree:?}"
    );
    // As it was made at start: with its owner mark, where one could be set.
    assert_eq!(owner_of(&subtree), owner, "owner mark of {subtree:?}");
    let log = d.log();
    assert!(
        log.contains("removed behind its back: made it again"),
        "no warning in the log:\n{log}"
    );
}
