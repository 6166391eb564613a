//! A daemon that crashes (SIGKILL) and is started again on the same state directory takes
//! back what it knew: sessions, their `failed` state, generation numbers that never
//! repeat, and the processes still running (verified before anything is done to them).
//! Without a keeper (`--no-keeper`): the durable-state path, where the I/O is lost; with
//! one, see `daemon_keeper.rs`.

mod util;

use serde_json::{json, Value};
use util::daemon::Daemon;

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().unwrap()
}

fn session<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no session {name} in {list}"))
}

#[test]
fn sessions_generations_and_running_processes_survive_a_crash() {
    let mut d = Daemon::start("restart", &["--no-keeper"]);
    let mut c = d.client();
    assert_eq!(c.ok(json!({"op": "hello"}))["keeper"], json!(false));
    c.ok(json!({"op": "subscribe", "all": true}));
    let keep = gen_of(&c.ok(json!({"op": "spawn", "session": "keep",
        "on_recover": "keep", "argv": ["sleep", "1000"]})));
    let keep_pid = c.spawned_pid(keep);
    // By default a process found running by the next daemon is stopped, then its restart
    // policy applies (it gets a process whose I/O the daemon holds again).
    let auto = gen_of(&c.ok(json!({"op": "spawn", "session": "auto",
        "restart": {"mode": "always", "initial": "10ms"},
        "argv": ["sh", "-c", "sleep 1000 & echo child=$!.; exec sleep 1000"]})));
    let auto_pid = c.spawned_pid(auto);
    let mut text = String::new();
    let child_of = |text: &str| -> Option<u32> {
        text.split("child=").nth(1)?.split('.').next()?.parse().ok()
    };
    c.events_until(|m| {
        text.push_str(&String::from_utf8_lossy(&util::daemon::output_of(
            std::slice::from_ref(m),
            auto,
        )));
        child_of(&text).is_some()
    });
    let auto_child = child_of(&text).unwrap();
    let gone = gen_of(&c.ok(json!({"op": "spawn", "session": "gone",
        "argv": ["sleep", "1000"]})));
    let gone_pid = c.spawned_pid(gone);
    let fail = gen_of(&c.ok(json!({"op": "spawn", "session": "fail",
        "argv": ["sh", "-c", "exit 3"]})));
    c.events_until(|m| m.is("exited", fail));
    drop(c);

    d.crash_and_restart(&["--no-keeper"]);
    // While no daemon ran, one of its processes ended (and its pid may be anyone's now).
    // SAFETY: killing a process this test started (through the daemon); it was not reaped
    // by us, and the kill is by a pidfd opened while it is known to be that process.
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(gone_pid as i32).unwrap(),
        rustix::process::PidfdFlags::empty(),
    );
    if let Ok(fd) = pidfd {
        let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
    }

    // The restarted daemon has not seen `gone` die in its own lifetime: restart it once
    // more, so that it is gone at start (its pid is checked, found gone: lost).
    d.crash_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let list = c.ok(json!({"op": "list"}));
    assert_eq!(session(&list, "fail")["state"], "failed", "{list}");
    assert_eq!(session(&list, "fail")["last_end"]["code"], 3, "{list}");
    let keep_s = session(&list, "keep");
    assert_eq!(keep_s["current"], json!(keep), "{list}");
    assert_eq!(keep_s["generations"][0]["pid"], json!(keep_pid), "{list}");
    assert_eq!(keep_s["state"], "running", "{list}");
    let adopted = &keep_s["generations"][0]["adopted"];
    assert_eq!(adopted["io_lost"], true, "{list}");
    assert!(adopted["since_unix_ms"].as_u64().is_some(), "{list}");
    // Its stdin stayed with the daemon that died.
    c.err(
        json!({"op": "write", "session": "keep", "data": "x"}),
        "input_closed",
    );
    let gone_s = session(&list, "gone");
    assert!(
        gone_s["generations"].as_array().unwrap().is_empty(),
        "{list}"
    );
    assert_eq!(gone_s["last_end"]["cause"], "lost", "{list}");
    // `wait` for the generation that was lost while no daemon ran answers at once.
    let end = c.ok(json!({"op": "wait", "session": "gone", "gen": gone}));
    assert_eq!(end["end"]["cause"], "lost", "{end}");
    assert_eq!(end["end"]["code"], Value::Null, "{end}");

    // `auto` was stopped — what it started too — and started again.
    let deadline = std::time::Instant::now() + util::daemon::PATIENCE;
    for pid in [auto_pid, auto_child] {
        while genward::testkit::proc::stat(pid).is_some_and(|s| !s.is_zombie()) {
            assert!(
                std::time::Instant::now() < deadline,
                "{pid} was not stopped"
            );
            std::thread::yield_now();
        }
    }
    let auto_now = loop {
        let got = c.ok(json!({"op": "get", "session": "auto"}));
        let current = got["session"]["current"].as_u64();
        if current.is_some_and(|g| g > auto) && got["session"]["state"] == "running" {
            break current.unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "not restarted: {got}");
        std::thread::yield_now();
    };
    assert!(auto_now > auto);

    // Numbers never repeat: a new generation is above every earlier one.
    let new = gen_of(&c.ok(json!({"op": "spawn", "session": "new", "argv": ["true"]})));
    assert!(new > keep.max(gone).max(fail), "{new}");
    // A precondition naming an old number is still checked against the right session.
    c.err(
        json!({"op": "signal", "session": "keep", "if_gen": new, "signal": "TERM"}),
        "stale_generation",
    );

    // The process taken back is stopped for real, through its verified identity.
    c.ok(json!({"op": "stop", "session": "keep", "if_gen": keep}));
    c.events_until(|m| m.is("exited", keep));
    assert!(
        genward::testkit::proc::stat(keep_pid).is_none_or(|s| s.is_zombie()),
        "the adopted process was stopped"
    );
}

/// A process the previous daemon started but did not describe (it died in between) is
/// found by its `GENWARD_GEN` marker and stopped: nothing is left running unsupervised.
#[test]
fn a_marked_process_nobody_accounts_for_is_stopped_at_start() {
    let mut d = Daemon::start("sweep", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let ghost = gen_of(&c.ok(json!({"op": "spawn", "session": "ghost",
        "argv": ["sh", "-c", "sleep 1000 & exec sleep 1000"]})));
    let ghost_pid = c.spawned_pid(ghost);
    drop(c);
    // SIGKILL, then the descriptor is lost as if the daemon had died before writing it.
    // SAFETY: kill with the pid of our own, unreaped child.
    unsafe { libc::kill(d.pid as i32, libc::SIGKILL) };
    let _ = d.child.wait();
    let descriptor = d
        .dir
        .join("state")
        .join("gens")
        .join(format!("{ghost}.json"));
    std::fs::remove_file(&descriptor).unwrap();
    d.crash_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    let deadline = std::time::Instant::now() + util::daemon::PATIENCE;
    while genward::testkit::proc::stat(ghost_pid).is_some_and(|s| !s.is_zombie()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the unaccounted process runs on"
        );
        std::thread::yield_now();
    }
    let list = c.ok(json!({"op": "list"}));
    assert_eq!(
        session(&list, "ghost")["last_end"]["cause"],
        "lost",
        "{list}"
    );
}

/// Session `a` with a replacement waiting: see [`replacement_waiting`].
struct Replacing {
    /// What releases the old generation: it exits 0 once a line is written here.
    go: std::path::PathBuf,
    /// The old generation, ignoring SIGTERM (with an hour's grace) until released.
    old: u64,
    /// A pidfd of its process.
    pidfd: std::os::fd::OwnedFd,
    /// The replacement, waiting for it.
    waiting: u64,
}

/// After the restart: the replacement that was `waiting` was reported `lost`, and a newer
/// generation is current in its place; that generation, and `get`'s answer.
fn replaced_after_the_restart(c: &mut util::daemon::Client, waiting: u64) -> (u64, Value) {
    let r = c.ok(json!({"op": "wait", "session": "a", "gen": waiting}));
    assert_eq!(r["end"]["cause"], json!("lost"), "{r}");
    let r = c.ok(json!({"op": "get", "session": "a"}));
    let next = r["session"]["current"]
        .as_u64()
        .unwrap_or_else(|| panic!("no current: {r}"));
    assert!(next > waiting, "{r}");
    (next, r)
}

/// Starts session `a`, then a replacement that waits for it; `c` is left subscribed to
/// every session.
fn replacement_waiting(d: &Daemon, c: &mut util::daemon::Client) -> Replacing {
    let go = util::daemon::fifo(d, "go");
    // It ignores SIGTERM before the replacement's stop can reach it.
    let script = format!(
        "trap '' TERM; echo ignoring; read x < '{}'; exit 0",
        go.display()
    );
    c.ok(json!({"op": "subscribe", "all": true}));
    let old = gen_of(&c.ok(json!({"op": "spawn", "session": "a", "grace": "1h",
        "argv": ["sh", "-c", script]})));
    let pidfd = util::sys::pidfd_of(c.spawned_pid(old) as i32);
    c.output_until(old, "ignoring");
    let waiting = gen_of(&c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sleep", "1000"]})));
    Replacing {
        go,
        old,
        pidfd,
        waiting,
    }
}

/// A replacement still waiting for the generation it replaces when the daemon crashed is
/// started again by the next daemon (as a new generation, once the old process it took
/// back is gone), rather than dropped with the session left `failed`.
#[test]
fn a_replacement_waiting_at_a_crash_runs_after_the_restart() {
    let mut d = Daemon::start("restart-replacement", &["--no-keeper"]);
    let mut c = d.client();
    let Replacing {
        go, old, waiting, ..
    } = replacement_waiting(&d, &mut c);
    drop(c);

    d.crash_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    let (next, _) = replaced_after_the_restart(&mut c, waiting);
    c.ok(json!({"op": "subscribe", "session": "a"}));
    util::daemon::release(&go);
    let seen = c.events_until(|m| m.is("spawned", next));
    assert!(seen.iter().any(|m| m.is("exited", old)), "{seen:?}");
    c.ok(json!({"op": "shutdown"}));
}

/// The same when the generation it replaced ended while no daemon ran: the replacement
/// starts as soon as the next daemon finds it gone.
#[test]
fn a_replacement_waiting_at_a_crash_runs_when_its_predecessor_ended_meanwhile() {
    let mut d = Daemon::start("restart-replacement-gone", &["--no-keeper"]);
    let mut c = d.client();
    let Replacing {
        go,
        old,
        pidfd,
        waiting,
    } = replacement_waiting(&d, &mut c);
    drop(c);

    d.kill();
    util::daemon::release(&go);
    let ended = util::sys::await_exit(&pidfd, util::daemon::PATIENCE);
    assert!(ended, "gen {old} never ended");
    d.restart_wrapped(&[], &["--no-keeper"]);
    let mut c = d.client();
    let (next, r) = replaced_after_the_restart(&mut c, waiting);
    assert_eq!(r["session"]["restarts"], json!(0), "{r}");
    c.ok(json!({"op": "subscribe", "session": "a", "from_start": true}));
    c.events_until(|m| m.is("spawned", next));
    c.ok(json!({"op": "shutdown"}));
}

/// A generation taken back after a crash keeps its own start as its `since` (what `ls`
/// counts its uptime from): the one its descriptor recorded, not the moment the new daemon
/// took it back, which is `adopted.since_unix_ms`.
#[test]
fn a_generation_taken_back_keeps_its_start() {
    let mut d = Daemon::start("restart-since", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "keep",
        "on_recover": "keep", "argv": ["sleep", "1000"]})));
    // Described before anyone hears it started.
    c.spawned_pid(gen);
    drop(c);
    let descriptor = d.dir.join("state").join("gens").join(format!("{gen}.json"));
    let text = std::fs::read_to_string(&descriptor).expect("its descriptor");
    let record: Value = serde_json::from_str(text.lines().nth(1).expect("a record line"))
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    let started = record["started_unix_ms"].as_u64().expect("its start");

    d.crash_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    let list = c.ok(json!({"op": "list"}));
    let g = &session(&list, "keep")["generations"][0];
    assert_eq!(g["gen"], json!(gen), "{list}");
    assert_eq!(g["lifecycle"], "running", "{list}");
    assert_eq!(g["since_unix_ms"], json!(started), "{list}");
    let adopted = g["adopted"]["since_unix_ms"].as_u64().expect("adopted");
    assert!(adopted > started, "taken back after it started: {list}");
    c.ok(json!({"op": "stop", "session": "keep"}));
}

/// A descriptor whose process is gone and whose session is not taken back (its record
/// gone: removed while the daemon died) has nothing to adopt, stop or report: it is
/// forgotten at start, not read again at every start while nothing lists it.
#[test]
fn a_gone_process_of_a_session_not_taken_back_leaves_no_descriptor() {
    use genward::store::names::{GENS_DIR, SESSIONS_DIR};
    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

    let mut d = Daemon::start("gone-unclaimed", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "gone", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let pid = c.spawned_pid(gen);
    drop(c);
    let state = d.dir.join("state");
    let descriptor = state.join(GENS_DIR).join(format!("{gen}.json"));
    assert!(descriptor.exists(), "{}", descriptor.display());
    d.kill();
    let pidfd = pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()).unwrap();
    pidfd_send_signal(&pidfd, Signal::KILL).unwrap();
    assert!(genward::testkit::wait::readable(
        std::os::fd::AsFd::as_fd(&pidfd),
        std::time::Instant::now() + util::daemon::PATIENCE
    ));
    drop(pidfd);
    // Reaped by its new parent (init: nothing to await), after which its pid names no
    // process, and its identity is a mismatch: polled, bounded.
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let until = std::time::Instant::now() + util::daemon::PATIENCE;
    while proc_dir.exists() {
        assert!(std::time::Instant::now() < until, "pid {pid} never reaped");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::fs::remove_file(state.join(SESSIONS_DIR).join("gone.json")).unwrap();

    d.restart_wrapped(&[], &["--no-keeper"]);
    let list = d.client().ok(json!({"op": "list"}));
    assert_eq!(list["sessions"], json!([]), "{list}");
    assert!(!descriptor.exists(), "the descriptor of gen {gen} was left");
}
