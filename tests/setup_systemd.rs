//! The systemd setup of `examples/systemd`: the unit `genward.service` is checked with
//! `systemd-analyze verify` (where it is installed and can run), and the
//! notify protocol it relies on (`Type=notify`) is tested against a fake `NOTIFY_SOCKET`:
//! `READY=1` and `MAINPID=` arrive once the daemon's socket accepts connections. The unit's
//! own `ExecStart=` and `ExecReload=` lines are run as systemd would run them, on a copy of
//! the setup's `config/`: the example application starts in dependency order, a reload
//! reads the config again, and SIGTERM stops it, web before db.

mod util;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use genward::testkit::scratch::ScratchDir;
use genward::testkit::wait;
use serde_json::json;
use util::cli::wait_bounded;
use util::daemon::{Client, PATIENCE};
use util::setup::{
    app_env, await_none_tagged, example, free_port, installed_config, unique_tag, App,
};

/// `systemd-analyze verify --man=no UNIT`: whether it passed, and what it printed.
fn verify(unit: &Path) -> (bool, String) {
    let child = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(unit)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run systemd-analyze");
    let out = wait_bounded(child);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status.success(), text.trim().to_string())
}

/// Why `systemd-analyze verify` cannot be used here, if it cannot: not installed, or
/// unable to verify a unit known to be good (it needs to read the system's unit paths).
fn cannot_verify(dir: &Path) -> Option<String> {
    let found = Command::new("systemd-analyze")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !found.is_ok_and(|s| s.success()) {
        return Some("systemd-analyze is not installed".into());
    }
    let good = dir.join("known-good.service");
    std::fs::write(
        &good,
        "[Service]\nType=oneshot\nExecStart=/bin/sh -c true\n",
    )
    .unwrap();
    match verify(&good) {
        (true, text) if text.is_empty() => None,
        (_, text) => Some(format!(
            "systemd-analyze verify cannot run here (a known-good unit: {text})"
        )),
    }
}

/// The example's unit, copied into `dir` with the installed paths pointed at this build's
/// binary and at `config` (verify checks that every command exists and is executable).
fn installed_copy(dir: &Path, config: &Path) -> std::path::PathBuf {
    let bin = env!("CARGO_BIN_EXE_genward");
    let unit = dir.join("genward.service");
    let text = std::fs::read_to_string(example("systemd/genward.service")).unwrap();
    let text = text.replace("/usr/local/bin/genward", bin).replace(
        "/etc/genward/config",
        config.to_str().expect("a UTF-8 path"),
    );
    std::fs::write(&unit, text).unwrap();
    unit
}

#[test]
fn the_example_unit_verifies_cleanly() {
    let test = "the_example_unit_verifies_cleanly";
    let scratch = ScratchDir::new("setup-systemd");
    if let Some(why) = cannot_verify(&scratch) {
        util::sys::skip(test, &why);
        return;
    }
    let config = installed_config("systemd", &scratch, free_port());
    let unit = installed_copy(&scratch, &config);
    let (ok, text) = verify(&unit);
    assert!(ok && text.is_empty(), "systemd-analyze verify: {text}");

    // A mistake in the unit is reported: the check above means something.
    let mut text = std::fs::read_to_string(&unit).unwrap();
    text.push_str("NoSuchSetting=1\n");
    std::fs::write(&unit, text).unwrap();
    let (_, text) = verify(&unit);
    assert!(text.contains("NoSuchSetting"), "{text}");
}

/// The settings the setup depends on, as the unit spells them.
#[test]
fn the_example_unit_has_the_settings_the_setup_relies_on() {
    let text = std::fs::read_to_string(example("systemd/genward.service")).unwrap();
    let settings: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && l.contains('='))
        .collect();
    for want in [
        "Type=notify",
        "ExecStart=/usr/local/bin/genward daemon --config /etc/genward/config",
        "ExecReload=/usr/local/bin/genward reload",
        "RuntimeDirectory=genward",
        "RuntimeDirectoryMode=0700",
        "KillMode=process",
        "Delegate=yes",
    ] {
        assert!(settings.contains(&want), "{want} missing from the unit");
    }
}

/// A daemon started as systemd starts a `Type=notify` service: `NOTIFY_SOCKET` in its
/// environment (a path, or `@name` for an abstract socket).
fn start_notified(dir: &Path, notify_socket: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_genward"))
        .arg("daemon")
        .arg("--state-dir")
        .arg(dir.join("state"))
        .env("NOTIFY_SOCKET", notify_socket)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn genward daemon")
}

/// Receives the daemon's notification, checks it says `READY=1` and names the daemon's own
/// pid, then that the socket serves, and that SIGTERM ends the daemon with status 0.
fn ready_then_serving(listener: &UnixDatagram, mut daemon: Child, dir: &Path) {
    listener.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    let n = listener
        .recv(&mut buf)
        .expect("a notification within the patience");
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let fields: Vec<&str> = text.lines().collect();
    assert!(fields.contains(&"READY=1"), "notification {text:?}");
    let mainpid = format!("MAINPID={}", daemon.id());
    assert!(fields.contains(&mainpid.as_str()), "notification {text:?}");

    // Ready means serving: the socket takes a connection and answers at once.
    let socket = dir.join("state").join("genward.sock");
    assert!(
        UnixStream::connect(&socket).is_ok(),
        "ready but not serving"
    );
    Client::connect(&socket).ok(json!({"op": "list"}));

    // `systemctl stop`: SIGTERM to the main process.
    // SAFETY: kill with the pid of our own, unreaped child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = wait::child_exit(&mut daemon, PATIENCE).expect("the daemon exits on SIGTERM");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn ready_is_sent_to_a_notify_socket_path() {
    let scratch = ScratchDir::new("setup-notify");
    let path = scratch.join("notify");
    let listener = UnixDatagram::bind(&path).expect("bind the fake NOTIFY_SOCKET");
    let daemon = start_notified(&scratch, path.to_str().unwrap());
    ready_then_serving(&listener, daemon, &scratch);
}

#[test]
fn ready_is_sent_to_an_abstract_notify_socket() {
    let scratch = ScratchDir::new("setup-notify-abstract");
    let name = format!("genward-test-notify-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixDatagram::bind_addr(&addr).expect("bind an abstract NOTIFY_SOCKET");
    let daemon = start_notified(&scratch, &format!("@{name}"));
    ready_then_serving(&listener, daemon, &scratch);
}

/// A daemon the test started, killed if the test ends before it has exited.
struct KilledOnDrop(Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The command line of the unit's `KEY=` (the example's have no quoting to undo).
fn exec_line(unit: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}=");
    let line = unit
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key}= in the unit"));
    line.split_whitespace().map(str::to_string).collect()
}

/// `ExecStart=` as systemd runs it (`Type=notify`: `NOTIFY_SOCKET` set; the state
/// directory, `RuntimeDirectory=` there, the test's own here), then `ExecReload=`, then
/// `systemctl stop`'s SIGTERM.
#[test]
fn the_units_exec_start_runs_the_config_and_exec_reload_reads_it() {
    let test = "the_units_exec_start_runs_the_config_and_exec_reload_reads_it";
    let scratch = ScratchDir::new("setup-systemd-exec");
    let state = scratch.join("state");
    let port = free_port();
    let tag = unique_tag(test);
    let config = installed_config("systemd", &scratch, port);
    let unit = std::fs::read_to_string(installed_copy(&scratch, &config)).unwrap();
    let env = app_env(&state, &config, &tag);
    let notify = scratch.join("notify");
    let listener = UnixDatagram::bind(&notify).expect("bind the fake NOTIFY_SOCKET");
    listener.set_read_timeout(Some(PATIENCE)).unwrap();

    let start = exec_line(&unit, "ExecStart");
    let mut daemon = KilledOnDrop(
        Command::new(&start[0])
            .args(&start[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("NOTIFY_SOCKET", &notify)
            .stdin(Stdio::null())
            .spawn()
            .expect("run the unit's ExecStart"),
    );
    let mut buf = [0u8; 4096];
    let n = listener
        .recv(&mut buf)
        .expect("READY=1 within the patience");
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        text.lines().any(|l| l == "READY=1"),
        "notification {text:?}"
    );

    let mut app = App::watch(Client::connect(&state.join("genward.sock")));
    let started = app.await_started();
    app.await_web_serves(started.web, port);

    // `systemctl reload`: the config is read again; nothing in it changed.
    let reload = exec_line(&unit, "ExecReload");
    let child = Command::new(&reload[0])
        .args(&reload[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the unit's ExecReload");
    let out = wait_bounded(child);
    assert!(out.status.success(), "ExecReload: {out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "unchanged: db web worker\nnothing to change\n"
    );

    // `systemctl stop`: SIGTERM to the main process.
    // SAFETY: kill with the pid of our own, unreaped child.
    unsafe { libc::kill(daemon.0.id() as i32, libc::SIGTERM) };
    app.await_all_stopped(started);
    let status = wait::child_exit(&mut daemon.0, PATIENCE).expect("the daemon exits on SIGTERM");
    assert_eq!(status.code(), Some(0));
    await_none_tagged(&tag, &[]);
}
