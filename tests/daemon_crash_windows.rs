//! Narrow windows the crash torture (tests/daemon_crash_torture.rs) found, each narrowed
//! down to a reproduction: the daemon is killed exactly there and started again (or, for a
//! race, put where it is hit at once). All of them are fixed now, and each test checks that
//! its window stays closed; each says what went wrong there.

mod util;

use std::os::fd::AsFd;
use std::time::Instant;

use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use serde_json::{json, Value};
use util::daemon::{Daemon, LAZY_SUBREAPER, PATIENCE};
use util::recorded::{self, await_marked, descriptors, marked, marker, KillMarkedOnDrop};
use util::sys::{pidfd_of, readable};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("gen")
}

/// The leader exits (code 1) and its output reaches end of file, but a child that ignores
/// SIGTERM (and holds no pipe of the daemon's) stays in its tree: the end is reported, and
/// the generation waits out its `kill_grace` before SIGKILL ends that child and the
/// generation is gone. The daemon dies in that wait.
const LEAVES_A_CHILD: &str = "trap '' TERM; sleep 1000000 >/dev/null 2>&1 & exit 1";

/// Returns the daemon, started again after dying between a generation's reported end and
/// its being gone, that generation, and what kills its processes when the test is done.
fn killed_after_an_end_before_gone() -> (Daemon, u64, KillMarkedOnDrop) {
    let mut d = Daemon::start("end-not-gone", &[]);
    let leftovers = KillMarkedOnDrop(recorded::dir_id(&d.dir.join("state")));
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(
        &c.ok(json!({"op": "spawn", "session": "s", "kill_grace": "1h",
        "argv": ["sh", "-c", LEAVES_A_CHILD]})),
    );
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["code"], 1);
    // Reported, not gone: still listed, its descriptor still on disk.
    let got = c.ok(json!({"op": "get", "session": "s"}));
    assert_eq!(got["session"]["generations"][0]["gen"], json!(gen), "{got}");
    let state = d.dir.join("state");
    assert!(descriptors(&state).iter().any(|f| f.gen == gen));
    drop(c);
    d.kill();
    d.restart_wrapped(&[], &[]);
    (d, gen, leftovers)
}

/// Bug: the restarted daemon finds the descriptor's pid gone ("another process now:
/// lost"), but the generation's end is already recorded, and the descriptor is never
/// removed: every later daemon checks it again and keeps it. (In the torture, once that
/// record was no longer there — the session removed and made again — a later daemon
/// reported the generation `lost`: a second end for one generation.)
#[test]
fn the_descriptor_of_an_ended_generation_is_removed_after_a_crash() {
    let (mut d, gen, _leftovers) = killed_after_an_end_before_gone();
    let mut c = d.client();
    let list = c.ok(json!({"op": "list"}));
    let listed = list["sessions"][0]["generations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["gen"] == json!(gen));
    let state = d.dir.join("state");
    assert!(
        listed || !descriptors(&state).iter().any(|f| f.gen == gen),
        "gen {gen} is not listed, and its descriptor is left: {list}"
    );
    // And after another restart.
    drop(c);
    d.kill();
    d.restart_wrapped(&[], &[]);
    d.client().ok(json!({"op": "list"}));
    assert!(
        !descriptors(&state).iter().any(|f| f.gen == gen),
        "gen {gen}'s descriptor outlives two restarts"
    );
}

/// Bug: the child the generation's `on_exit: kill_group` was about to kill carries the
/// generation's marker; the restarted daemon treats the generation as ended (its end is
/// recorded) and leaves the child running, unlisted and unsupervised, for good.
#[test]
fn what_a_group_kill_left_at_a_crash_does_not_run_on() {
    let (d, gen, _leftovers) = killed_after_an_end_before_gone();
    let mut c = d.client();
    let list = c.ok(json!({"op": "list"}));
    let dir_id = recorded::dir_id(&d.dir.join("state"));
    for p in marked(&dir_id).into_iter().filter(|p| p.gen == gen) {
        let listed = list["sessions"][0]["generations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["gen"] == json!(gen));
        if listed {
            continue;
        }
        let pidfd = pidfd_open(Pid::from_raw(p.pid as i32).unwrap(), PidfdFlags::empty());
        let ended = pidfd.map_or(true, |fd| readable(fd.as_fd(), Instant::now() + PATIENCE));
        assert!(
            ended,
            "pid {} of gen {gen} runs on, unlisted: {list}",
            p.pid
        );
    }
}

/// Two processes taken back after a crash (`on_recover: keep`): one is stopped through the
/// daemon, the other ends by itself. The daemon sees both end: each gets its one
/// `exited`, is no longer listed, and leaves no descriptor.
fn a_process_taken_back_is_seen_to_end(reaper: &[&str]) {
    let mut d = Daemon::start("taken-back-ends", reaper);
    let state = d.dir.join("state");
    let dir_id = recorded::dir_id(&state);
    let _leftovers = KillMarkedOnDrop(dir_id.clone());
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let stopped = gen_of(&c.ok(json!({"op": "spawn", "session": "stopped",
        "on_recover": "keep", "grace": "100ms", "kill_grace": "100ms",
        "argv": ["sleep", "1000000"]})));
    c.spawned_pid(stopped);
    let ends = gen_of(&c.ok(json!({"op": "spawn", "session": "ends",
        "on_recover": "keep", "argv": ["sleep", "1000000"]})));
    let ends_pid = c.spawned_pid(ends);
    drop(c);
    d.kill();
    d.restart_wrapped(&[], reaper);

    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let list = c.ok(json!({"op": "list"}));
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2, "{list}");
    c.ok(json!({"op": "stop", "session": "stopped", "if_gen": stopped}));
    let pidfd = pidfd_open(Pid::from_raw(ends_pid as i32).unwrap(), PidfdFlags::empty())
        .expect("pidfd_open the process taken back");
    // Pinned: if it carries the marker, it is the generation's process.
    assert_eq!(marker(ends_pid), Some(format!("{dir_id}:{ends}")));
    pidfd_send_signal(&pidfd, Signal::KILL).unwrap();
    let mut seen = c.events_until(|m| m.is("exited", stopped));
    c.seen_or_until(&mut seen, |m| m.is("exited", ends));
    c.released("stopped");
    c.released("ends");
    let list = c.ok(json!({"op": "list"}));
    for s in list["sessions"].as_array().unwrap() {
        assert_eq!(s["generations"], json!([]), "{list}");
    }
    assert!(descriptors(&state).is_empty(), "descriptors left: {list}");
}

#[test]
fn a_process_taken_back_is_seen_to_end_pidfd() {
    a_process_taken_back_is_seen_to_end(&[]);
}

/// Bug: under the fallback reaper, a process taken back (not the daemon's child, so no
/// SIGCHLD, and no pidfd) is never seen to end. The stopped one gets SIGTERM and dies;
/// after its grace the daemon finds another process (none) on its pid, does not send
/// SIGKILL, and reports the generation `unkillable`, still tracked, its descriptor kept;
/// the one that ended by itself stays listed as running. With `on_recover: stop` (the
/// default) a session taken back this way is never restarted.
#[test]
fn a_process_taken_back_is_seen_to_end_fallback() {
    a_process_taken_back_is_seen_to_end(&["--reaper", "fallback"]);
}

/// Bug: a process taken back after a crash is stopped, and dies of the SIGTERM at once,
/// but its new parent has not reaped it yet, so the kernel has no exit status for it: the
/// daemon waits for one (up to 5 s), and meanwhile the stop's timers run on — SIGKILL is
/// "not sent: process has exited", and after `kill_grace` the generation is reported
/// `unkillable`, "survived SIGKILL", before its `exited`. (A parent that reaps late: here
/// a subreaper that reaps only when told; any init that is slow to reap does the same.)
#[test]
fn a_stopped_process_taken_back_is_not_reported_unkillable_while_its_status_waits() {
    let mut d = Daemon::start_wrapped("adopted-unkillable", &LAZY_SUBREAPER, &[], None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(
        json!({"op": "spawn", "session": "kept", "on_recover": "keep",
        "grace": "100ms", "kill_grace": "100ms", "argv": ["sleep", "1000000"]}),
    ));
    c.spawned_pid(gen);
    drop(c);
    let mut subreaper = d.crash_daemon_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    c.ok(json!({"op": "stop", "session": "kept", "if_gen": gen}));
    let seen = c.events_until(|m| m.is("exited", gen));
    // The subreaper reaps everything now, and exits.
    // SAFETY: kill with the pid of our own, unreaped child.
    unsafe { libc::kill(subreaper.id() as i32, libc::SIGUSR1) };
    let _ = genward::testkit::wait::child_exit(&mut subreaper, PATIENCE);
    assert!(
        !seen.iter().any(|m| m.is("unkillable", gen)),
        "a process that died of the stop's SIGTERM was reported unkillable: {seen:?}"
    );
}

/// Bug: the start-up sweep reads each process's `GENWARD_GEN` once; a process in the
/// middle of an `execve` shows an empty environment for a moment (between the switch to
/// its new memory and the new program's environment being set up), is passed over, and
/// runs on unsupervised. Here, marked processes that re-execute themselves in a loop
/// (each nobody accounts for: their descriptors are gone, as when the daemon dies between
/// a spawn and its descriptor) are swept by a restarted daemon: some escape.
#[test]
fn a_marked_process_in_the_middle_of_an_exec_is_still_swept() {
    let mut d = Daemon::start("sweep-exec", &[]);
    let state = d.dir.join("state");
    let dir_id = recorded::dir_id(&state);
    let _leftovers = KillMarkedOnDrop(dir_id.clone());
    let script = d.dir.join("again.sh");
    std::fs::write(&script, "exec /bin/sh \"$0\"\n").unwrap();
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut gens = Vec::new();
    for i in 0..16 {
        let gen = gen_of(&c.ok(json!({"op": "spawn", "session": format!("s{i}"),
            "argv": ["/bin/sh", script.to_str().unwrap()]})));
        c.spawned_pid(gen);
        gens.push(gen);
    }
    drop(c);
    for _ in 0..10 {
        d.kill();
        // As if the daemon had died before describing them: nothing accounts for them.
        for f in descriptors(&state) {
            std::fs::remove_file(&f.path).unwrap();
        }
        d.restart_wrapped(&[], &[]);
        d.client().ok(json!({"op": "list"}));
        let left: Vec<_> = marked(&dir_id)
            .into_iter()
            .filter(|p| gens.contains(&p.gen))
            .filter(|p| {
                let fd = pidfd_open(Pid::from_raw(p.pid as i32).unwrap(), PidfdFlags::empty());
                !fd.map_or(true, |fd| readable(fd.as_fd(), Instant::now() + PATIENCE))
            })
            .collect();
        assert!(left.is_empty(), "unaccounted for and running on: {left:?}");
        // Next round: the same processes are gone; start new ones.
        let mut c = d.client();
        c.ok(json!({"op": "subscribe", "all": true}));
        gens.clear();
        for i in 0..16 {
            let gen = gen_of(&c.ok(json!({"op": "spawn", "session": format!("s{i}"),
                "argv": ["/bin/sh", script.to_str().unwrap()]})));
            c.spawned_pid(gen);
            gens.push(gen);
        }
    }
}

/// A process taken back after a crash whose spec says `on_exit: leave` ends: what it left
/// running is left, as a spawned child's would be (and as the start-up sweep leaves it),
/// not swept by its generation's marker.
#[test]
fn what_a_leader_taken_back_leaves_is_left_with_on_exit_leave() {
    let mut d = Daemon::start("adopted-leave", &[]);
    let dir_id = recorded::dir_id(&d.dir.join("state"));
    let _leftovers = KillMarkedOnDrop(dir_id.clone());
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "leaves",
        "on_exit": "leave", "on_recover": "keep", "drain": "100ms",
        "argv": ["sh", "-c", "sleep 1000000 >/dev/null 2>&1 </dev/null & exec sleep 1000000"]})));
    let leader = c.spawned_pid(gen);
    let child = await_marked(&dir_id, "the leader's child", |p| {
        p.gen == gen && p.pid != leader && !p.leader
    });
    drop(c);
    d.kill();
    d.restart_wrapped(&[], &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let got = c.ok(json!({"op": "get", "session": "leaves"}));
    assert_eq!(got["session"]["generations"][0]["gen"], json!(gen), "{got}");
    let child_fd = pidfd_of(child as i32);
    assert_eq!(marker(child), Some(format!("{dir_id}:{gen}")));
    let leader_fd = pidfd_open(Pid::from_raw(leader as i32).unwrap(), PidfdFlags::empty())
        .expect("pidfd_open the leader taken back");
    assert_eq!(marker(leader), Some(format!("{dir_id}:{gen}")));
    pidfd_send_signal(&leader_fd, Signal::KILL).unwrap();
    c.events_until(|m| m.is("exited", gen));
    assert!(
        !readable(
            child_fd.as_fd(),
            Instant::now() + std::time::Duration::from_millis(500)
        ),
        "pid {child}, left by gen {gen} with `on_exit: leave`, was killed when its leader ended"
    );
}

/// A readiness probe's command still running when the daemon dies is no generation's
/// process: it carries the helpers' mark (generation 0), and the next daemon's start-up
/// sweep ends it, where before it ran on under init for good.
#[test]
fn a_probe_running_when_the_daemon_dies_is_ended_by_the_next() {
    let mut d = Daemon::start("probe-orphan", &[]);
    let dir_id = recorded::dir_id(&d.dir.join("state"));
    let _leftovers = KillMarkedOnDrop(dir_id.clone());
    let mut c = d.client();
    c.ok(
        json!({"op": "spawn", "session": "p", "argv": ["sleep", "1000000"],
        "ready": {"command": ["sleep", "888888"], "interval": "1h", "timeout": "1h"}}),
    );
    let probe = await_marked(&dir_id, "the probe", |p| p.gen == 0);
    let probe_fd = pidfd_of(probe as i32);
    drop(c);
    d.kill();
    d.restart_wrapped(&[], &[]);
    assert!(
        readable(probe_fd.as_fd(), Instant::now() + PATIENCE),
        "the probe (pid {probe}) outlived the daemon that started it and the next one's start"
    );
}
