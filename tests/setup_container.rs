//! The container setup of `examples/container`: its entrypoint run as PID 1 of a new PID
//! namespace (`unshare --pid --fork --mount-proc`, as a container runtime would), so that
//! genward is the namespace's init. It starts the example application from the setup's
//! real `config/` in dependency order, reaps the orphans a session leaves, restarts the
//! crashing worker after a backoff, applies an edited config on `genward reload`, and on
//! SIGTERM stops every session, dependents first, and exits 0.

mod util;

use std::os::fd::AsFd;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use genward::testkit::{proc, wait};
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use serde_json::json;
use util::cli::{genward, run_cmd};
use util::daemon::{output_of, PATIENCE};
use util::pidns::in_new_pid_namespace;
use util::setup::{app_env, await_socket, example, free_port, installed_config, unique_tag, App};

/// The entrypoint in a new PID namespace; killed with everything in it when dropped.
struct Container {
    unshare: Child,
}

impl Container {
    /// Starts `examples/container/entrypoint` as PID 1 of a new namespace, or says why it
    /// cannot run here.
    fn start(env: &[(String, std::ffi::OsString)]) -> Result<Container, String> {
        let mut cmd = in_new_pid_namespace()?;
        cmd.arg(example("container/entrypoint"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        let unshare = cmd
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        Ok(Container { unshare })
    }

    /// The namespace's PID 1 (the entrypoint, which became genward), as this process sees
    /// it.
    fn init(&self) -> u32 {
        *proc::children(self.unshare.id())
            .first()
            .expect("unshare's child, the namespace's init")
    }
}

/// `genward --socket SOCKET ARGS...`, which must succeed; its standard output.
#[track_caller]
fn gw_ok(socket: &std::path::Path, args: &[&str]) -> String {
    let mut cmd = genward(&["--socket"]);
    cmd.arg(socket).args(args);
    run_cmd(cmd, b"").ok()
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

#[test]
fn genward_as_pid_1_runs_the_example_and_stops_it_on_sigterm() {
    let test = "genward_as_pid_1_runs_the_example_and_stops_it_on_sigterm";
    let scratch = genward::testkit::scratch::ScratchDir::new("setup-container");
    let state = scratch.join("state");
    let port = free_port();
    let config = installed_config("container", &scratch, port);
    let container = match Container::start(&app_env(&state, &config, &unique_tag(test))) {
        Ok(c) => c,
        Err(why) => {
            util::sys::skip(test, &why);
            return;
        }
    };
    let mut app = App::watch(await_socket(&state.join("genward.sock")));
    let init = container.init();
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{init}/comm"))
            .unwrap()
            .trim(),
        "genward",
        "PID 1 of the namespace is genward"
    );

    let started = app.await_started();
    app.await_web_serves(started.web, port);
    app.await_worker_restarted(started.worker, 2);

    // A session leaves an orphan: its middle shell starts a background sleep and exits,
    // so the kernel hands the sleep to PID 1.
    let c = app.client();
    let gen = c.ok(json!({"op": "spawn", "session": "orphans", "on_exit": "leave",
        "argv": ["sh", "-c", "sh -c 'sleep 1000 & echo orphan=$!'; echo middle-gone; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.output_until(gen, "middle-gone");
    let text = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
    let reported: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("orphan="))
        .expect("the orphan's pid")
        .parse()
        .unwrap();
    let orphan = proc::pid_in_namespace_of(init, reported).expect("the orphan, still running");
    // The sleep cannot end by itself, so this pid is the orphan's while the pidfd is open.
    let pidfd = pidfd_open(Pid::from_raw(orphan as i32).unwrap(), PidfdFlags::empty())
        .expect("pidfd_open the orphan");
    assert_eq!(proc::stat(orphan).unwrap().ppid, init, "adopted by PID 1");
    pidfd_send_signal(&pidfd, Signal::KILL).unwrap();
    assert!(wait::readable(pidfd.as_fd(), Instant::now() + PATIENCE));
    // Reaping shows from outside only as the /proc entry going away: bounded polling,
    // after the exit itself was awaited on the pidfd.
    let deadline = Instant::now() + PATIENCE;
    while let Some(stat) = proc::stat(orphan) {
        assert!(Instant::now() < deadline, "orphan left as {}", stat.state);
        std::thread::sleep(Duration::from_millis(10));
    }

    // `docker stop`: SIGTERM to PID 1. Every session is stopped, web before the db it
    // depends on, and genward exits 0.
    // SAFETY: kill with the pid of the namespace's init, which lives until unshare (our
    // unreaped child) has reaped it.
    unsafe { libc::kill(init as i32, libc::SIGTERM) };
    let ends = app.await_all_stopped(started);
    let mut container = container;
    let status =
        wait::child_exit(&mut container.unshare, PATIENCE).expect("PID 1 exits after SIGTERM");
    assert_eq!(
        status.code(),
        Some(0),
        "PID 1's exit status; ends: {ends:?}"
    );
}

#[test]
fn genward_reload_applies_the_edited_config_and_leaves_the_rest_alone() {
    let test = "genward_reload_applies_the_edited_config_and_leaves_the_rest_alone";
    let scratch = genward::testkit::scratch::ScratchDir::new("setup-container-reload");
    let state = scratch.join("state");
    let socket = state.join("genward.sock");
    let port = free_port();
    let config = installed_config("container", &scratch, port);
    let container = match Container::start(&app_env(&state, &config, &unique_tag(test))) {
        Ok(c) => c,
        Err(why) => {
            util::sys::skip(test, &why);
            return;
        }
    };
    let mut app = App::watch(await_socket(&socket));
    let started = app.await_started();

    // The edit: the worker no longer crashes soon (an env of its own), and a session is
    // added that depends on db.
    let worker = config.join("worker.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&worker).unwrap()).unwrap();
    spec["env"] = json!({"WORKER_CRASH_AFTER": "1000"});
    std::fs::write(&worker, spec.to_string()).unwrap();
    std::fs::write(
        config.join("cache.json"),
        json!({"argv": ["sleep", "1000"], "depends_on": {"db": "ready"}}).to_string(),
    )
    .unwrap();

    // A dry run says what would change, and changes nothing.
    let plan = gw_ok(&socket, &["reload", "--dry-run"]);
    assert_eq!(
        plan,
        "would start: cache\nwould replace: worker\nunchanged: db web\n"
    );
    let list = app.client().ok(json!({"op": "list"}));
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["db", "web", "worker"], "{list}");
    let (_, worker_spec) = app.current("worker");
    assert!(
        worker_spec["env"].get("WORKER_CRASH_AFTER").is_none(),
        "{worker_spec}"
    );

    // The reload does it: cache starts, the worker is replaced with its new spec, db and
    // web keep their generations.
    let plan = gw_ok(&socket, &["reload"]);
    assert_eq!(
        plan,
        "started: cache\nreplaced: worker\nunchanged: db web\n"
    );
    app.await_spawned("cache", 0);
    let (_, worker_spec) = app.current("worker");
    assert_eq!(
        worker_spec["env"]["WORKER_CRASH_AFTER"], "1000",
        "{worker_spec}"
    );
    assert_eq!(app.current("db").0, started.db);
    assert_eq!(app.current("web").0, started.web);

    let init = container.init();
    // SAFETY: kill with the pid of the namespace's init, which lives until unshare (our
    // unreaped child) has reaped it.
    unsafe { libc::kill(init as i32, libc::SIGTERM) };
    let ends = app.await_all_stopped(started);
    let mut container = container;
    let status =
        wait::child_exit(&mut container.unshare, PATIENCE).expect("PID 1 exits after SIGTERM");
    assert_eq!(
        status.code(),
        Some(0),
        "PID 1's exit status; ends: {ends:?}"
    );
}
