//! The second seed (shared/seeds/004) across a restart: a recorded worker exits while no
//! daemon runs and a stranger takes its pid. The daemon started again reports the worker
//! `lost` and never signals the stranger — not while taking the state back, not on a
//! `stop` of the worker's session — and `list` answers with every entry.
//!
//! The stranger is put on the recycled pid with `/proc/sys/kernel/ns_last_pid` in a PID
//! namespace of the test's own (root only; a SKIP line otherwise).

mod util;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use genward::testkit::proc;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use serde_json::{json, Value};
use util::daemon::{Daemon, PATIENCE};
use util::pidns::{Bystander, PidNamespace};
use util::recorded::{self, marker, wait_past_tick, KillMarkedOnDrop};
use util::sys::{readable, skip};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("gen")
}

fn session<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no session {name} in {list}"))
}

/// Ends the worker whose pid is `ns_pid` in `ns` while no daemon runs, waits until the
/// namespace's init has reaped it (its pid is free again), and puts a stranger there.
fn stranger_on_the_pid_of(ns: &mut PidNamespace, ns_pid: u32, dir_id: &str, gen: u64) -> Bystander {
    let outer = *ns.pids().get(&ns_pid).expect("the worker runs");
    let pidfd = pidfd_open(Pid::from_raw(outer as i32).unwrap(), PidfdFlags::empty())
        .expect("pidfd_open the worker");
    // The pidfd pins the process: if it carries the worker's marker, it is the worker.
    assert_eq!(marker(outer), Some(format!("{dir_id}:{gen}")));
    let started = recorded::starttime(outer).expect("the worker's start time");
    pidfd_send_signal(&pidfd, Signal::KILL).unwrap();
    assert!(readable(pidfd.as_fd(), Instant::now() + PATIENCE));
    // Its reaping by the namespace's init shows from outside only as the /proc entry going
    // away, which has no event to wait on: bounded polling, after the exit was awaited.
    let deadline = Instant::now() + PATIENCE;
    while proc::stat(outer).is_some() {
        assert!(Instant::now() < deadline, "the worker was never reaped");
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_past_tick(started);
    // Nothing else in the namespace forks now (the daemon is gone, the other sessions
    // sleep), so the pid is the stranger's at the first try or, rarely, soon after.
    for _ in 0..5 {
        if let Ok(stranger) = ns.bystander(ns_pid, None) {
            let stat = proc::stat(stranger.pid).unwrap();
            // It leads a group and a session of that number too, as the worker did: a
            // signal to the recorded group or session would reach it.
            assert_eq!((stat.pgrp, stat.session), (stranger.pid, stranger.pid));
            return stranger;
        }
    }
    panic!("could not put a stranger on pid {ns_pid}")
}

fn a_stranger_on_a_recorded_pid_is_never_signalled(name: &str, reaper: &[&str]) {
    // Without a keeper: the worker that ends while no daemon runs is then `lost` (with
    // one, its pidfd survives and its status is reported: see `daemon_keeper.rs`).
    let reaper = &[reaper, &["--no-keeper"]].concat();
    let mut ns = match PidNamespace::new() {
        Ok(ns) => ns,
        Err(why) => return skip(name, &why),
    };
    let wrapper = ns.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut d = Daemon::start_wrapped("seed2-restart", &wrapper, reaper, None);
    let dir_id = recorded::dir_id(&d.dir.join("state"));
    let _leftovers = KillMarkedOnDrop(dir_id.clone());
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let worker = gen_of(&c.ok(json!({"op": "spawn", "session": "worker",
        "argv": ["sleep", "1000000"]})));
    let worker_pid = c.spawned_pid(worker);
    let kept = gen_of(&c.ok(
        json!({"op": "spawn", "session": "kept", "on_recover": "keep",
        "argv": ["sleep", "1000000"]}),
    ));
    let kept_pid = c.spawned_pid(kept);
    let healthy = gen_of(&c.ok(json!({"op": "spawn", "session": "healthy",
        "restart": {"mode": "always", "initial": "10ms"}, "argv": ["sleep", "1000000"]})));
    c.spawned_pid(healthy);
    let failed = gen_of(&c.ok(json!({"op": "spawn", "session": "failed",
        "argv": ["sh", "-c", "exit 3"]})));
    c.events_until(|m| m.is("exited", failed));
    drop(c);

    d.kill();
    let stranger = stranger_on_the_pid_of(&mut ns, worker_pid, &dir_id, worker);
    d.restart_wrapped(&wrapper, reaper);

    let mut c = d.client();
    let list = c.ok(json!({"op": "list"}));
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    for want in ["worker", "kept", "healthy", "failed"] {
        assert!(names.contains(&want), "{want} missing from {list}");
    }
    let w = session(&list, "worker");
    assert_eq!(w["generations"], json!([]), "{list}");
    assert_eq!(w["last_end"]["gen"], json!(worker), "{list}");
    assert_eq!(w["last_end"]["cause"], "lost", "{list}");
    assert_eq!(session(&list, "failed")["state"], "failed", "{list}");
    let k = session(&list, "kept");
    assert_eq!(k["current"], json!(kept), "{list}");
    assert_eq!(k["generations"][0]["pid"], json!(kept_pid), "{list}");

    // The worker's session has nothing to stop: the stranger on its pid is left alone.
    c.ok(json!({"op": "stop", "session": "worker"}));
    c.err(
        json!({"op": "stop", "session": "worker", "if_gen": worker}),
        "stale_generation",
    );
    c.err(
        json!({"op": "signal", "session": "worker", "if_gen": worker, "signal": "TERM"}),
        "stale_generation",
    );
    c.err(
        json!({"op": "signal", "session": "worker", "signal": "TERM", "scope": "tree"}),
        "not_running",
    );
    let end = c.ok(json!({"op": "wait", "session": "worker", "gen": worker}));
    assert_eq!(end["end"]["event"], "exited", "{end}");
    assert_eq!(end["end"]["cause"], "lost", "{end}");
    assert_eq!(end["end"]["code"], Value::Null, "{end}");
    // A `get` of the worker answers too, and the whole listing once more.
    let got = c.ok(json!({"op": "get", "session": "worker"}));
    assert_eq!(got["session"]["last_end"]["cause"], "lost", "{got}");
    c.ok(json!({"op": "list"}));
    assert!(
        stranger.untouched(),
        "the stranger on pid {worker_pid} was signalled"
    );

    // Another crash: nothing refers to that pid any more, and the listing still answers.
    drop(c);
    d.kill();
    d.restart_wrapped(&wrapper, reaper);
    let mut c = d.client();
    let list = c.ok(json!({"op": "list"}));
    assert_eq!(
        session(&list, "worker")["last_end"]["cause"],
        "lost",
        "{list}"
    );
    assert_eq!(session(&list, "kept")["current"], json!(kept), "{list}");
    c.err(
        json!({"op": "signal", "session": "worker", "if_gen": worker, "signal": "KILL"}),
        "stale_generation",
    );
    assert!(
        stranger.untouched(),
        "the stranger on pid {worker_pid} was signalled"
    );
    stranger.kill();
}

#[test]
fn a_stranger_on_a_recorded_pid_is_never_signalled_after_a_restart_pidfd() {
    a_stranger_on_a_recorded_pid_is_never_signalled(
        "a_stranger_on_a_recorded_pid_is_never_signalled_after_a_restart_pidfd",
        &[],
    );
}

#[test]
fn a_stranger_on_a_recorded_pid_is_never_signalled_after_a_restart_fallback() {
    a_stranger_on_a_recorded_pid_is_never_signalled(
        "a_stranger_on_a_recorded_pid_is_never_signalled_after_a_restart_fallback",
        &["--reaper", "fallback"],
    );
}
