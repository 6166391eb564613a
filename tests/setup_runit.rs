//! The runit setup of `examples/runit`: the service directory `genward/` (its `run` and
//! `check` scripts) under a real `runsv`, driven with `sv` given the directory's path, with
//! a copy of the setup's `config/`. `sv -w up` returns once genward answers, the example
//! application runs in dependency order, and `sv -w down` stops everything: every session
//! ends by the stop, web before db, genward exits 0 (as `finish` reports) and no process
//! of the setup is left.

mod util;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use genward::testkit::scratch::ScratchDir;
use genward::testkit::wait;
use util::cli::wait_bounded;
use util::daemon::PATIENCE;
use util::setup::{
    app_env, await_none_tagged, await_socket, example, free_port, have, installed_config,
    unique_tag, App,
};

/// `runsv` on a copy of the example's service directory, which starts down (a `down`
/// file) so that `sv up` starts it; on drop, the service is brought down and runsv told to
/// exit, or killed.
struct Runsv {
    runsv: Child,
    service: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
    /// What runsv's standard output carries: the service's output and `finish`'s report.
    lines: Receiver<String>,
}

impl Runsv {
    fn start(dir: &Path, env: Vec<(String, std::ffi::OsString)>) -> Runsv {
        let service = dir.join("genward");
        std::fs::create_dir(&service).unwrap();
        for file in ["run", "check", "finish"] {
            std::fs::copy(example("runit/genward").join(file), service.join(file)).unwrap();
        }
        std::fs::write(service.join("down"), b"").unwrap();
        let mut runsv = Command::new("runsv")
            .arg(&service)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run runsv");
        let stdout = runsv.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("runsv: {line}");
                let _ = tx.send(line);
            }
        });
        let r = Runsv {
            runsv,
            service,
            env,
            lines,
        };
        // runsv has no readiness of its own: `sv status` answers once it listens.
        let deadline = Instant::now() + PATIENCE;
        while !r.sv(&["status"]).status.success() {
            assert!(Instant::now() < deadline, "runsv did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    /// Runs `sv ARGS... SERVICE-DIR`, bounded by [`PATIENCE`].
    fn sv(&self, args: &[&str]) -> std::process::Output {
        let child = Command::new("sv")
            .args(args)
            .arg(&self.service)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run sv");
        wait_bounded(child)
    }

    #[track_caller]
    fn sv_ok(&self, args: &[&str]) -> String {
        let out = self.sv(args);
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(out.status.success(), "sv {args:?} failed: {out:?}");
        text
    }
}

impl Runsv {
    /// Waits for a line starting with `prefix` on runsv's output; returns it.
    #[track_caller]
    fn line(&self, prefix: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line {prefix:?} from runsv: {e}"),
            }
        }
    }
}

impl Drop for Runsv {
    fn drop(&mut self) {
        if let Ok(None) = self.runsv.try_wait() {
            let _ = self.sv(&["-w", "20", "down"]);
            let _ = self.sv(&["exit"]);
            if wait::child_exit(&mut self.runsv, PATIENCE).is_none() {
                let _ = self.runsv.kill();
                let _ = self.runsv.wait();
            }
        }
    }
}

#[test]
fn runsv_runs_genward_up_and_down() {
    let test = "runsv_runs_genward_up_and_down";
    if !have(test, "runsv") || !have(test, "sv") || !have(test, "python3") {
        return;
    }
    let scratch = ScratchDir::new("setup-runit");
    let state = scratch.join("state");
    let port = free_port();
    let tag = unique_tag(test);
    let config = installed_config("runit", &scratch, port);
    let mut r = Runsv::start(&scratch, app_env(&state, &config, &tag));
    assert!(r.sv_ok(&["status"]).starts_with("down:"));

    // `-w`: sv waits until ./check says genward answers.
    let up = r.sv_ok(&["-w", "20", "up"]);
    assert!(up.starts_with("ok: run:"), "{up}");
    let mut app = App::watch(await_socket(&state.join("genward.sock")));
    let started = app.await_started();
    app.await_web_serves(started.web, port);
    app.await_worker_restarted(started.worker, 1);
    assert!(r.sv_ok(&["status"]).starts_with("run:"));

    // Down: SIGTERM to genward, which stops every session and exits.
    let down = r.sv_ok(&["-w", "20", "down"]);
    assert!(down.starts_with("ok: down:"), "{down}");
    app.await_all_stopped(started);
    assert_eq!(
        r.line("genward exited:"),
        "genward exited: code 0, signal 0"
    );

    r.sv_ok(&["exit"]);
    let status = wait::child_exit(&mut r.runsv, PATIENCE).expect("runsv exits");
    assert!(status.success(), "runsv: {status:?}");
    await_none_tagged(&tag, &[]);
}
