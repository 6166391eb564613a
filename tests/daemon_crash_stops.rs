//! A crash in the middle of a stop, or while what a generation's leader left is being
//! killed: the next daemon carries on where the stop was. Under cgroup containment a
//! generation's tree is killed whole through its cgroup and the generation released only
//! once the cgroup is empty, whether its leader ended before the crash or while no daemon
//! ran; a stop keeps its own grace and deadline and its signal is not sent twice; a
//! SIGKILL sent before the crash still makes the end `killed`; a tree member stuck in the
//! kernel stays listed `unkillable`.
//!
//! The cgroup tests need cgroup containment (root, cgroup v2); those that hold a process
//! in the kernel need the cgroup v1 freezer too. Each says when it is skipped.

mod util;

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use genward::sys::pidfd_ext::{exit_info, ExitInfo};
use genward::testkit::wait;
use rustix::process::{pidfd_send_signal, Signal};
use serde_json::{json, Value};
use util::daemon::{
    cannot_take_back_exits, output_of, skip_because, without_cgroups, Client, Daemon, Msg,
    PATIENCE, SUBREAPER,
};
use util::sys::{is_root, pidfd_of, readable};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("gen")
}

/// Members that ignore SIGTERM and left what ties them to their generation: one cleared
/// its environment (no `GENWARD_GEN` marker), one cleared it and left the session too.
/// Each prints its pid, then lets go of the output pipe.
const MEMBERS: &str = r#"(trap '' TERM; exec env -i sh -c 'echo noenv $$; exec >/dev/null 2>&1; trap "" TERM; while :; do sleep 1; done') &
(trap '' TERM; exec env -i setsid sh -c 'echo escaped $$; exec >/dev/null 2>&1; trap "" TERM; while :; do sleep 1; done') &"#;

/// Kills (SIGKILL, through pidfds) the processes it holds when the test is over, however
/// it ends: what a failing test leaves must not run on.
struct KillOnDrop(Vec<OwnedFd>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for fd in &self.0 {
            let _ = pidfd_send_signal(fd, Signal::KILL);
        }
    }
}

/// The pids the members printed (`name pid` lines) in `msgs`, output of `gen`.
fn member_pids(msgs: &[Msg], gen: u64) -> Vec<i32> {
    String::from_utf8_lossy(&output_of(msgs, gen))
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| ["noenv", "escaped", "member"].contains(name))
        .map(|(_, pid)| pid.trim().parse().expect("a pid"))
        .collect()
}

/// Spawns `s` with `MEMBERS` and a leader that dies of SIGTERM; returns the generation and
/// pidfds of its two members, once both printed their pid.
fn tree(c: &mut Client, kill_grace: &str) -> (u64, KillOnDrop) {
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!("{MEMBERS}\necho up; exec sleep 1000000");
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "s", "grace": "10s",
        "kill_grace": kill_grace, "argv": ["sh", "-c", script]})));
    let mut seen = c.output_until(gen, "up");
    while member_pids(&seen, gen).len() < 2 {
        seen.extend(c.output_until(gen, "\n"));
    }
    let pids = member_pids(&seen, gen);
    (gen, KillOnDrop(pids.iter().map(|&p| pidfd_of(p)).collect()))
}

/// Whether every process `held` refers to ends within [`PATIENCE`].
fn all_end(held: &KillOnDrop) -> bool {
    let deadline = Instant::now() + PATIENCE;
    held.0.iter().all(|fd| readable(fd.as_fd(), deadline))
}

/// The generations `session` lists, with their lifecycle.
fn listed(c: &mut Client, session: &str) -> Vec<(u64, String)> {
    let got = c.ok(json!({"op": "get", "session": session}));
    got["session"]["generations"]
        .as_array()
        .map(|gens| {
            gens.iter()
                .map(|g| (gen_of(g), g["lifecycle"].as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Bug: the daemon crashed while a stopped generation's tree waited out its `kill_grace`
/// (its leader gone, its end reported); the next one killed only what still carried the
/// generation's marker, released the generation at once, and left the members that had
/// cleared their environment running in its cgroup for good.
#[test]
fn a_tree_being_killed_at_a_crash_is_killed_whole_through_its_cgroup_after_it() {
    const TEST: &str = "a_tree_being_killed_at_a_crash_is_killed_whole_through_its_cgroup_after_it";
    let mut d = Daemon::start("crash-tree-grace", &[]);
    let mut c = d.client();
    if without_cgroups(&mut c, TEST) {
        return;
    }
    let (gen, members) = tree(&mut c, "1h");
    c.ok(json!({"op": "stop", "session": "s"}));
    let end = c.events_until(|m| m.is("exited", gen));
    assert_eq!(end.last().unwrap().json()["cause"], "stopped");
    drop(c);
    d.crash_and_restart(&[]);
    let mut c = d.client();
    assert!(all_end(&members), "members of gen {gen} outlive the crash");
    c.released("s");
}

/// Bug: a generation's leader died while no daemon ran, and its members lived on; the
/// next daemon found no cgroup for it (the leader's `/proc` entry was gone) and took it
/// for a session-contained one: the members without its marker ran on.
#[test]
fn a_tree_whose_leader_died_while_no_daemon_ran_is_killed_through_its_cgroup() {
    const TEST: &str = "a_tree_whose_leader_died_while_no_daemon_ran_is_killed_through_its_cgroup";
    if cannot_take_back_exits() {
        return;
    }
    // Under a subreaper that reaps what the daemon leaves: the leader, once killed, is
    // gone altogether (no zombie whose `/proc` entry still names its cgroup).
    let mut d = Daemon::start_wrapped("crash-tree-leader", &SUBREAPER, &[], None);
    let mut c = d.client();
    if without_cgroups(&mut c, TEST) {
        return;
    }
    let (gen, members) = tree(&mut c, "100ms");
    let got = c.ok(json!({"op": "get", "session": "s"}));
    let pid = got["session"]["generations"][0]["pid"].as_i64().unwrap() as i32;
    let leader = pidfd_of(pid);
    drop(c);
    let mut wrapper = d.crash_daemon_edit_and_restart(
        |_| {
            pidfd_send_signal(&leader, Signal::KILL).unwrap();
            // Reaped by the subreaper: its exit status is published then.
            let deadline = Instant::now() + PATIENCE;
            while !matches!(exit_info(leader.as_fd()), Ok(ExitInfo::Exited(_))) {
                assert!(Instant::now() < deadline, "the leader was never reaped");
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(!Path::new(&format!("/proc/{pid}")).exists());
        },
        &[],
        &[],
    );
    let mut c = d.client();
    assert!(
        all_end(&members),
        "members of gen {gen} outlive their leader"
    );
    c.released("s");
    // Once the daemon (and its keeper, the subreaper's too now) is gone, the subreaper
    // has nothing left to reap.
    drop(c);
    drop(d);
    assert!(wait::child_exit(&mut wrapper, PATIENCE).is_some());
}

/// Bug: a client's `stop` with a 30 s grace (the spec's is 100 ms) under way at a crash
/// was begun again by the next daemon: a second SIGTERM, and a SIGKILL after the spec's
/// grace. The program, in the middle of its clean shutdown, must get neither.
#[test]
fn a_stop_under_way_at_a_crash_keeps_its_grace_and_is_not_signalled_twice() {
    let mut d = Daemon::start("crash-stop-grace", &[]);
    let terms = d.dir.join("terms");
    let go = d.dir.join("go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!(
        "trap 'echo term >> {t}; echo term' TERM; echo up; while [ ! -e {g} ]; do sleep 0.05; done; exit 5",
        t = terms.display(),
        g = go.display()
    );
    let gen = gen_of(
        &c.ok(json!({"op": "spawn", "session": "s", "grace": "100ms",
        "argv": ["sh", "-c", script]})),
    );
    c.output_until(gen, "up");
    c.ok(json!({"op": "stop", "session": "s", "grace": "1h"}));
    c.output_until(gen, "term");
    drop(c);
    d.crash_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "s"}));
    // An absence, so a wait: well past the spec's 100 ms grace, the stop's own (1 h) still
    // holds — a stop begun again with the spec's grace would have killed it by now.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(listed(&mut c, "s"), [(gen, "stopping".to_owned())]);
    std::fs::write(&go, b"").unwrap();
    let end = c.events_until(|m| m.is("exited", gen));
    let end = end.last().unwrap().json().clone();
    assert_eq!(
        (end["code"].clone(), end["cause"].clone()),
        (json!(5), json!("stopped")),
        "{end}"
    );
    let received = std::fs::read_to_string(&terms).unwrap();
    assert_eq!(
        received.lines().count(),
        1,
        "SIGTERMs received: {received:?}"
    );
}

/// A cgroup v1 freezer cgroup holding processes, thawed and removed when dropped: a
/// frozen process does not act on a SIGKILL until it is thawed (it stays in the kernel,
/// as one on a dead mount would).
struct Frozen(PathBuf);

impl Frozen {
    /// Freezes `pid`, or says why it cannot be.
    fn hold(tag: &str, pid: i32) -> Result<Frozen, String> {
        let root = Path::new("/sys/fs/cgroup/freezer");
        if !is_root() || !root.join("tasks").exists() {
            return Err("no cgroup v1 freezer (or not root)".into());
        }
        let dir = root.join(format!("genward-test-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let frozen = Frozen(dir);
        std::fs::write(frozen.0.join("tasks"), pid.to_string()).map_err(|e| e.to_string())?;
        std::fs::write(frozen.0.join("freezer.state"), "FROZEN").map_err(|e| e.to_string())?;
        let deadline = Instant::now() + PATIENCE;
        while std::fs::read_to_string(frozen.0.join("freezer.state"))
            .unwrap_or_default()
            .trim()
            != "FROZEN"
        {
            assert!(Instant::now() < deadline, "never frozen");
            std::thread::yield_now();
        }
        Ok(frozen)
    }

    fn thaw(&self) {
        let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.thaw();
        // Emptied once what it held ended (they are killed by then).
        let deadline = Instant::now() + PATIENCE;
        while std::fs::remove_dir(&self.0).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Waits until `gen` of `session` is listed with `lifecycle` (nothing announces it).
fn await_lifecycle(c: &mut Client, session: &str, gen: u64, lifecycle: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !listed(c, session).contains(&(gen, lifecycle.to_owned())) {
        assert!(Instant::now() < deadline, "gen {gen} never {lifecycle}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Bug: the stop's SIGKILL was sent before the crash, but the leader died of it only
/// after (it was held in the kernel): the next daemon reported it `stopped`, not `killed`.
#[test]
fn a_leader_sigkilled_before_a_crash_ends_killed_after_it() {
    let mut d = Daemon::start("crash-killed-cause", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(
        &c.ok(json!({"op": "spawn", "session": "s", "grace": "100ms",
        "kill_grace": "1h", "argv": ["sh", "-c", "trap '' TERM; echo up; exec sleep 1000000"]})),
    );
    let pid = c.spawned_pid(gen) as i32;
    c.output_until(gen, "up");
    let frozen = match Frozen::hold("killed", pid) {
        Ok(f) => f,
        Err(why) => {
            skip_because(&format!(
                "a_leader_sigkilled_before_a_crash_ends_killed_after_it: {why}"
            ));
            return;
        }
    };
    let _leader = KillOnDrop(vec![pidfd_of(pid)]);
    c.ok(json!({"op": "stop", "session": "s"}));
    await_lifecycle(&mut c, "s", gen, "killing");
    drop(c);
    d.kill();
    frozen.thaw();
    d.restart_wrapped(&[], &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "s"}));
    let end = c.events_until(|m| m.is("exited", gen));
    let end = end.last().unwrap().json().clone();
    assert_eq!(end["cause"], "killed", "{end}");
    assert_eq!(end["signal"], "SIGKILL", "{end}");
}

/// Bug: a member of a stopped generation's tree survived SIGKILL (`unkillable`); after a
/// crash the generation was no longer listed while that process lived.
#[test]
fn an_unkillable_tree_member_stays_listed_across_a_crash() {
    const TEST: &str = "an_unkillable_tree_member_stays_listed_across_a_crash";
    let mut d = Daemon::start("crash-unkillable", &[]);
    let mut c = d.client();
    if without_cgroups(&mut c, TEST) {
        return;
    }
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "sh -c 'echo member $$; exec >/dev/null 2>&1; trap \"\" TERM; while :; do sleep 1; done' &\necho up; exec sleep 1000000";
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "s", "grace": "10s",
        "kill_grace": "300ms", "argv": ["sh", "-c", script]})));
    let seen = c.output_until(gen, "up");
    let mut seen = seen;
    while member_pids(&seen, gen).is_empty() {
        seen.extend(c.output_until(gen, "member"));
    }
    let member = member_pids(&seen, gen)[0];
    let held = KillOnDrop(vec![pidfd_of(member)]);
    let frozen = match Frozen::hold("unkillable", member) {
        Ok(f) => f,
        Err(why) => {
            skip_because(&format!("{TEST}: {why}"));
            return;
        }
    };
    c.ok(json!({"op": "stop", "session": "s"}));
    c.events_until(|m| m.is("unkillable", gen));
    drop(c);
    d.crash_and_restart(&[]);
    let mut c = d.client();
    assert_eq!(listed(&mut c, "s"), [(gen, "unkillable".to_owned())]);
    frozen.thaw();
    assert!(all_end(&held));
    c.released("s");
}
