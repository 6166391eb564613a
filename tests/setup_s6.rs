//! The s6 setup of `examples/s6`: the service directory `genward/` (its `run` script and
//! `notification-fd`) in a scan directory of a real `s6-svscan`, which runs `s6-supervise`
//! on it, with a copy of the setup's `config/`. `s6-svwait -U` returns once genward is
//! ready, the example application runs in dependency order, and `s6-svc -d` stops
//! everything: every session ends by the stop, web before db, genward exits 0, and no
//! process of the setup is left.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use genward::testkit::scratch::ScratchDir;
use genward::testkit::wait;
use util::cli::wait_bounded;
use util::daemon::PATIENCE;
use util::setup::{
    app_env, await_none_tagged, await_socket, example, free_port, have, installed_config,
    unique_tag, App,
};

/// `s6-svscan` on a scan directory holding a copy of the example's service directory; on
/// drop, it is told to bring every service down and exit, or killed.
struct Supervised {
    svscan: Child,
    scan: PathBuf,
    service: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
}

impl Supervised {
    fn start(dir: &Path, env: Vec<(String, std::ffi::OsString)>) -> Supervised {
        let scan = dir.join("scan");
        let service = scan.join("genward");
        std::fs::create_dir_all(&service).unwrap();
        for file in ["run", "notification-fd"] {
            std::fs::copy(example("s6/genward").join(file), service.join(file)).unwrap();
        }
        let svscan = Command::new("s6-svscan")
            .arg(&scan)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .spawn()
            .expect("run s6-svscan");
        let s = Supervised {
            svscan,
            scan,
            service,
            env,
        };
        // s6-svscan and s6-supervise have no readiness of their own: `s6-svok` says when
        // the service's supervisor listens.
        let deadline = Instant::now() + PATIENCE;
        while !s.s6(&["s6-svok"]).status.success() {
            assert!(Instant::now() < deadline, "s6-supervise did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// Runs `PROGRAM ARGS... SERVICE-DIR`, bounded by [`PATIENCE`].
    fn s6(&self, cmd: &[&str]) -> std::process::Output {
        self.s6_on(cmd, &self.service)
    }

    /// Runs `PROGRAM ARGS... DIR`, bounded by [`PATIENCE`].
    fn s6_on(&self, cmd: &[&str], dir: &Path) -> std::process::Output {
        let child = Command::new(cmd[0])
            .args(&cmd[1..])
            .arg(dir)
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
        if let Ok(None) = self.svscan.try_wait() {
            let _ = self.s6_on(&["s6-svscanctl", "-t"], &self.scan);
            if wait::child_exit(&mut self.svscan, PATIENCE).is_none() {
                let _ = self.svscan.kill();
                let _ = self.svscan.wait();
            }
        }
    }
}

#[test]
fn s6_svscan_runs_genward_ready_and_down() {
    let test = "s6_svscan_runs_genward_ready_and_down";
    if !have(test, "s6-svscan") || !have(test, "python3") {
        return;
    }
    let scratch = ScratchDir::new("setup-s6");
    let state = scratch.join("state");
    let port = free_port();
    let tag = unique_tag(test);
    let config = installed_config("s6", &scratch, port);
    let mut s = Supervised::start(&scratch, app_env(&state, &config, &tag));

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

    let out = s.s6_on(&["s6-svscanctl", "-t"], &s.scan);
    assert!(out.status.success(), "s6-svscanctl -t: {out:?}");
    let status = wait::child_exit(&mut s.svscan, PATIENCE).expect("s6-svscan exits");
    assert!(status.success(), "s6-svscan: {status:?}");
    await_none_tagged(&tag, &[]);
}
