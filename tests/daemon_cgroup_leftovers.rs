//! A daemon that dies without cleaning up leaves its cgroup subtree behind. The next
//! daemon on the same state directory removes what of it holds no process at start, and
//! the rest once the generations it took back from it end; another directory's subtrees,
//! and anything not named as a daemon names its subtree, are never touched.

mod util;

use std::path::{Path, PathBuf};

use genward::sys::cgroup::{own_cgroup, Location};
use serde_json::json;
use util::daemon::{Client, Daemon, PATIENCE};

/// Cgroups the test makes itself, removed however it ends.
struct Made(Vec<PathBuf>);

impl Made {
    fn dir(&mut self, path: PathBuf) -> PathBuf {
        std::fs::create_dir(&path).unwrap();
        self.0.push(path.clone());
        path
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_dir(path);
        }
    }
}

/// `genward-<id>-<pid>` split into its id and pid.
fn id_of(subtree: &Path) -> String {
    let name = subtree.file_name().unwrap().to_str().unwrap();
    let rest = name.strip_prefix("genward-").unwrap();
    rest.rsplit_once('-').unwrap().0.to_owned()
}

#[test]
fn a_crashed_daemons_cgroup_subtree_goes_once_nothing_runs_in_it() {
    const TEST: &str = "a_crashed_daemons_cgroup_subtree_goes_once_nothing_runs_in_it";
    let mut d = Daemon::start("cgroup-leftover", &["--no-keeper"]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    let mount = Location::find().expect("cgroup containment works").mount;
    c.ok(json!({"op": "subscribe", "all": true}));
    let keep = c.ok(
        json!({"op": "spawn", "session": "keep", "on_recover": "keep",
        "argv": ["sleep", "1000"]}),
    )["gen"]
        .as_u64()
        .unwrap();
    let keep_pid = c.spawned_pid(keep);
    // A job that ends: its emptied cgroup is kept for reuse when the daemon dies.
    let job = c.ok(json!({"op": "spawn", "session": "job", "argv": ["true"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", job));
    c.released("job");

    let text = std::fs::read_to_string(format!("/proc/{keep_pid}/cgroup")).unwrap();
    let keep_cg = own_cgroup(&text).unwrap();
    let keep_cg = mount.join(keep_cg.trim_start_matches('/'));
    let subtree = keep_cg.parent().unwrap().to_owned();
    let job_cg = subtree.join(format!("gen-{job}"));
    assert!(job_cg.is_dir(), "{job_cg:?} kept for reuse");
    // Beside it: another state directory's subtree, and names no daemon gives its own.
    let own = subtree.parent().unwrap();
    let id = id_of(&subtree);
    let other_id: String = id
        .chars()
        .map(|ch| if ch == '0' { '1' } else { '0' })
        .collect();
    let mut made = Made(Vec::new());
    let decoys = [
        made.dir(own.join(format!("genward-{other_id}-1"))),
        made.dir(own.join(format!("genward-{id}-1x"))),
        made.dir(own.join(format!("genward-{id}"))),
    ];
    drop(c);

    d.crash_and_restart(&["--no-keeper"]);
    // At start: the empty cgroup is gone, the one a running process is in is not.
    assert!(!job_cg.exists(), "{job_cg:?} left");
    assert!(keep_cg.is_dir(), "{keep_cg:?} removed with a process in it");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let got = c.ok(json!({"op": "get", "session": "keep"}));
    assert_eq!(got["session"]["state"], "running", "{got}");

    // Once the process taken back is gone, so is the subtree it ran in.
    c.ok(json!({"op": "remove", "session": "keep"}));
    c.events_until(|m| {
        let v = m.json();
        v["event"] == "state" && v["session"] == "keep" && v["state"] == "removed"
    });
    assert!(!subtree.exists(), "{subtree:?} left once empty");
    for decoy in &decoys {
        assert!(decoy.is_dir(), "{decoy:?} is not the daemon's to remove");
    }
}

/// The cgroup subtree of the daemon `c` talks to, and the cgroup of a generation running
/// `sleep` in session `session` (left running).
fn sleeping(c: &mut Client, mount: &Path, session: &str) -> (PathBuf, PathBuf) {
    let gen = c.ok(
        json!({"op": "spawn", "session": session, "on_recover": "keep",
        "argv": ["sleep", "1000"]}),
    )["gen"]
        .as_u64()
        .unwrap();
    let pid = c.spawned_pid(gen);
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let cg = mount.join(own_cgroup(&text).unwrap().trim_start_matches('/'));
    (cg.parent().unwrap().to_owned(), cg)
}

/// A cgroup whose processes are killed and which is removed, with its parent, however
/// the test ends.
struct Doomed(PathBuf);

impl Drop for Doomed {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        let deadline = std::time::Instant::now() + PATIENCE;
        while std::fs::remove_dir(&self.0).is_err() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let _ = std::fs::remove_dir(self.0.parent().unwrap());
    }
}

#[test]
fn a_dead_daemons_empty_subtree_goes_whichever_directory_the_next_daemon_has() {
    const TEST: &str = "a_dead_daemons_empty_subtree_goes_whichever_directory_the_next_daemon_has";
    // Killed with nothing running: its subtree is garbage.
    let mut dead = Daemon::start("cgroup-dead", &["--no-keeper"]);
    let mut c = dead.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    let mount = Location::find().expect("cgroup containment works").mount;
    c.ok(json!({"op": "subscribe", "all": true}));
    let (dead_subtree, _) = sleeping(&mut c, &mount, "s");
    c.ok(json!({"op": "remove", "session": "s"}));
    c.events_until(|m| {
        let v = m.json();
        v["event"] == "state" && v["session"] == "s" && v["state"] == "removed"
    });
    drop(c);
    dead.kill();
    assert!(dead_subtree.is_dir(), "a killed daemon cannot clean up");

    // Killed with a process running: what runs stays contained, for its directory's next
    // daemon to take back.
    let mut left = Daemon::start("cgroup-left", &["--no-keeper"]);
    let mut c = left.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (left_subtree, left_cg) = sleeping(&mut c, &mount, "s");
    let _doomed = Doomed(left_cg.clone());
    drop(c);
    left.kill();

    // Alive, on another directory, with nothing running.
    let alive = Daemon::start("cgroup-alive", &["--no-keeper"]);
    let mut c = alive.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (alive_subtree, _) = sleeping(&mut c, &mount, "s");
    c.ok(json!({"op": "stop", "session": "s"}));
    c.released("s");

    // Unmarked: nothing tells whose it is.
    let mut made = Made(Vec::new());
    let own = dead_subtree.parent().unwrap();
    let unmarked = made.dir(own.join("genward-0decoy0decoy-1"));

    let _next = Daemon::start("cgroup-next", &["--no-keeper"]);
    assert!(
        !dead_subtree.exists(),
        "{dead_subtree:?} outlived its daemon"
    );
    assert!(left_cg.is_dir(), "{left_cg:?} removed with a process in it");
    assert!(
        left_subtree.is_dir(),
        "{left_subtree:?} removed with a process in it"
    );
    assert!(
        alive_subtree.is_dir(),
        "{alive_subtree:?} removed under a live daemon"
    );
    assert!(unmarked.is_dir(), "{unmarked:?} is no daemon's to remove");
    // The live daemon carries on in it.
    let (again, _) = sleeping(&mut c, &mount, "t");
    assert_eq!(again, alive_subtree);
}

/// A generation taken back after a crash stays in the cgroup it was started in: listed
/// `cgroup`, and its `stop` ends what left its session and cleared its environment (no
/// marker) too — handled as session-contained, that process ran on, unsupervised, in a
/// cgroup no daemon would ever kill.
#[test]
fn a_generation_taken_back_stays_contained_by_its_cgroup() {
    const TEST: &str = "a_generation_taken_back_stays_contained_by_its_cgroup";
    const ESCAPEE: [&str; 2] = ["sleep", "3013177"];
    let mut d = Daemon::start("cgroup-taken-back", &[]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "e", "on_recover": "keep",
        "argv": ["sh", "-c", "setsid env -i sleep 3013177 & exec sleep 3013178"]}))["gen"]
        .as_u64()
        .unwrap();
    c.spawned_pid(gen);
    let deadline = std::time::Instant::now() + PATIENCE;
    let escapee = loop {
        if let Some(&pid) = genward::testkit::proc::running(&ESCAPEE).first() {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the escapee never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let escapee_fd = util::sys::pidfd_of(escapee as i32);
    drop(c);
    d.crash_and_restart(&[]);
    let mut c = d.client();
    let got = c.ok(json!({"op": "get", "session": "e"}));
    assert_eq!(
        got["session"]["generations"][0]["containment"],
        json!("cgroup"),
        "{got}"
    );
    c.ok(json!({"op": "stop", "session": "e", "grace": 0}));
    let ended = genward::testkit::wait::readable(
        std::os::fd::AsFd::as_fd(&escapee_fd),
        std::time::Instant::now() + PATIENCE,
    );
    let _ = rustix::process::pidfd_send_signal(&escapee_fd, rustix::process::Signal::KILL);
    assert!(
        ended,
        "pid {escapee}, which left the session of a generation taken back, outlived its stop"
    );
}
