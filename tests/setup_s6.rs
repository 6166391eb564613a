//! The s6 setup of `examples/s6`: the service directory `genward/` (its `run` script and
//! `notification-fd`) under a real `s6-supervise`. `s6-svwait -U` returns once genward is
//! ready, the example application runs, and `s6-svc -d` stops everything: every session
//! ends by the stop, genward exits 0, and no process of the setup is left.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use genward::testkit::scratch::ScratchDir;
use genward::testkit::wait;
use util::cli::wait_bounded;
use util::daemon::PATIENCE;
use util::setup::{
    app_env, await_none_tagged, await_socket, example, free_port, have, unique_tag, App,
};

/// `s6-supervise` on a copy of the example's service directory; on drop, the service is
/// brought down and the supervisor told to exit, or killed.
struct Supervised {
    supervise: Child,
    service: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
}

impl Supervised {
    fn start(dir: &Path, env: Vec<(String, std::ffi::OsString)>) -> Supervised {
        let service = dir.join("genward");
        std::fs::create_dir(&service).unwrap();
        for file in ["run", "notification-fd"] {
            std::fs::copy(example("s6/genward").join(file), service.join(file)).unwrap();
        }
        let supervise = Command::new("s6-supervise")
            .arg(&service)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .spawn()
            .expect("run s6-supervise");
        let s = Supervised {
            supervise,
            service,
            env,
        };
        // s6-supervise has no readiness of its own: `s6-svok` says when it listens.
        let deadline = Instant::now() + PATIENCE;
        while !s.s6(&["s6-svok"]).status.success() {
            assert!(Instant::now() < deadline, "s6-supervise did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// Runs `PROGRAM ARGS... SERVICE-DIR`, bounded by [`PATIENCE`].
    fn s6(&self, cmd: &[&str]) -> std::process::Output {
        let child = Command::new(cmd[0])
            .args(&cmd[1..])
            .arg(&self.service)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", cmd[0]));
        wait_bounded(child)
    }

    #[track_caller]
    fn s6_ok(&self, cmd: &[&str]) -> String {
        let out = self.s6(cmd);
        assert!(out.status.success(), "{cmd:?} failed: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if let Ok(None) = self.supervise.try_wait() {
            let _ = self.s6(&["s6-svc", "-dx"]);
            if wait::child_exit(&mut self.supervise, PATIENCE).is_none() {
                let _ = self.supervise.kill();
                let _ = self.supervise.wait();
            }
        }
    }
}

#[test]
fn s6_supervise_runs_genward_ready_and_down() {
    let test = "s6_supervise_runs_genward_ready_and_down";
    if !have(test, "s6-supervise") || !have(test, "python3") {
        return;
    }
    let scratch = ScratchDir::new("setup-s6");
    let state = scratch.join("state");
    let port = free_port();
    let tag = unique_tag(test);
    let mut s = Supervised::start(&scratch, app_env(&state, port, &tag));

    // Returns once genward has written to its notification fd.
    s.s6_ok(&["s6-svwait", "-U", "-t", "20000"]);
    assert_eq!(s.s6_ok(&["s6-svstat", "-o", "up,ready"]), "true true");
    let mut app = App::watch(await_socket(&state.join("genward.sock")));
    let started = app.await_started();
    app.await_web_serves(started.web, port);
    app.await_worker_restarted(started.worker, 1);

    // Down: SIGTERM to genward, which stops every session and exits 0.
    s.s6_ok(&["s6-svc", "-d"]);
    s.s6_ok(&["s6-svwait", "-D", "-t", "20000"]);
    app.await_all_stopped(started);
    assert_eq!(s.s6_ok(&["s6-svstat", "-o", "up,exitcode"]), "false 0");

    s.s6_ok(&["s6-svc", "-x"]);
    let status = wait::child_exit(&mut s.supervise, PATIENCE).expect("s6-supervise exits");
    assert!(status.success(), "s6-supervise: {status:?}");
    await_none_tagged(&tag, &[]);
}
