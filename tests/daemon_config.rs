//! The declarative configuration against a real daemon: `--config` (file and directory),
//! `reload` (and its dry run), SIGHUP, bad configurations changing nothing, client
//! sessions left alone, and systemd's notifications around all of it.

mod util;

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use genward::testkit::scratch::ScratchDir;
use serde_json::{json, Value};
use util::cli::wait_bounded;
use util::daemon::{daemon_binary, Client, Daemon, PATIENCE};

/// A session that runs until stopped; `tag` makes specs differ.
fn sleeper(tag: &str) -> Value {
    json!({"argv": ["sh", "-c", format!("exec sleep 1000 # {tag}")], "grace": "2s"})
}

fn write_config(path: &Path, sessions: Value) {
    std::fs::write(
        path,
        serde_json::to_vec_pretty(&json!({ "sessions": sessions })).unwrap(),
    )
    .unwrap();
}

fn start(tag: &str, config: &Path) -> Daemon {
    Daemon::start(tag, &["--config", config.to_str().unwrap()])
}

/// Each session's current generation and its pid, once every current generation has
/// been reported spawned (awaited through a subscription that replays from the start).
fn running(c: &mut Client) -> BTreeMap<String, (u64, u64)> {
    let list = c.ok(json!({"op": "list"}));
    let mut out = BTreeMap::new();
    for s in list["sessions"].as_array().unwrap() {
        let Some(gen) = s["current"].as_u64() else {
            continue;
        };
        let name = s["name"].as_str().unwrap().to_owned();
        let mut sub = Client::connect(&c_socket(c));
        sub.ok(json!({"op": "subscribe", "session": name, "from_start": true}));
        let seen = sub.events_until(|m| m.is("spawned", gen));
        let pid = seen.last().unwrap().json()["pid"].as_u64().unwrap();
        out.insert(name, (gen, pid));
    }
    out
}

fn c_socket(c: &Client) -> PathBuf {
    let addr = c.stream().peer_addr().unwrap();
    addr.as_pathname().unwrap().to_owned()
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

#[test]
fn a_config_file_starts_its_sessions() {
    let conf = ScratchDir::new("config-file");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a"), "b": sleeper("b")}));
    let d = start("config-file", &path);
    let mut c = d.client();
    let now = running(&mut c);
    assert_eq!(now.keys().collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn a_config_directory_starts_one_session_per_file() {
    let conf = ScratchDir::new("config-dir");
    let dir = conf.join("genward.d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("web.json"), sleeper("web").to_string()).unwrap();
    std::fs::write(dir.join("db.json"), sleeper("db").to_string()).unwrap();
    std::fs::write(dir.join("web.json~"), "an editor's backup").unwrap();
    let d = start("config-dir", &dir);
    let mut c = d.client();
    let now = running(&mut c);
    assert_eq!(now.keys().collect::<Vec<_>>(), ["db", "web"]);
}

#[test]
fn reload_adds_removes_replaces_and_leaves_unchanged_sessions_alone() {
    let conf = ScratchDir::new("config-reload");
    let path = conf.join("genward.json");
    write_config(
        &path,
        json!({"keep": sleeper("keep"), "change": sleeper("v1"), "drop": sleeper("drop")}),
    );
    let d = start("config-reload", &path);
    let mut c = d.client();
    let before = running(&mut c);
    c.ok(json!({"op": "subscribe", "all": true}));
    write_config(
        &path,
        json!({"keep": sleeper("keep"), "change": sleeper("v2"), "add": sleeper("add")}),
    );
    let plan = c.ok(json!({"op": "reload"}));
    assert_eq!(plan["dry_run"], json!(false));
    assert_eq!(names(&plan["start"]), ["add"]);
    assert_eq!(names(&plan["stop"]), ["drop"]);
    assert_eq!(names(&plan["replace"]), ["change"]);
    assert_eq!(names(&plan["unchanged"]), ["keep"]);
    c.events_until(|m| {
        m.json()["event"] == "state"
            && m.json()["session"] == "drop"
            && m.json()["state"] == "removed"
    });
    let after = running(&mut c);
    assert_eq!(after.keys().collect::<Vec<_>>(), ["add", "change", "keep"]);
    assert_eq!(
        after["keep"], before["keep"],
        "unchanged: same generation, same pid"
    );
    assert!(
        after["change"].0 > before["change"].0,
        "changed: a new generation"
    );
    assert_ne!(after["change"].1, before["change"].1);
    // Again with nothing changed: nothing is touched.
    let plan = c.ok(json!({"op": "reload"}));
    assert_eq!(names(&plan["unchanged"]), ["add", "change", "keep"]);
    assert_eq!(running(&mut c), after);
}

#[test]
fn a_restarted_daemon_keeps_the_configured_sessions_that_did_not_change() {
    let conf = ScratchDir::new("config-crash");
    let path = conf.join("genward.json");
    write_config(
        &path,
        json!({"keep": sleeper("keep"), "change": sleeper("v1")}),
    );
    let config = ["--config", path.to_str().unwrap()];
    let mut d = start("config-crash", &path);
    let before = running(&mut d.client());
    write_config(
        &path,
        json!({"keep": sleeper("keep"), "change": sleeper("v2")}),
    );
    d.crash_and_restart(&config);
    let after = running(&mut d.client());
    assert_eq!(after["keep"], before["keep"], "unchanged: kept running");
    assert!(
        after["change"].0 > before["change"].0,
        "changed: a new generation"
    );
}

/// A container's PID 1 killed takes every session's process with it: the next daemon on
/// the same state directory finds them gone (`lost`) and runs the configured sessions
/// again, as after a clean restart — before, one without a restart policy stayed `failed`.
#[test]
fn a_crash_that_took_the_configured_processes_with_it_runs_them_again() {
    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
    let conf = ScratchDir::new("config-lost");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a")}));
    let config = ["--config", path.to_str().unwrap()];
    let mut d = Daemon::start("config-lost", &[&config[..], &["--no-keeper"]].concat());
    let (gen, pid) = running(&mut d.client())["a"];
    let process = pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()).unwrap();
    d.kill();
    pidfd_send_signal(&process, Signal::KILL).unwrap();
    use std::os::fd::AsFd;
    let deadline = std::time::Instant::now() + PATIENCE;
    assert!(
        genward::testkit::wait::readable(process.as_fd(), deadline),
        "the session's process outlived its SIGKILL"
    );
    d.restart_wrapped(&[], &[&config[..], &["--no-keeper"]].concat());
    let mut c = d.client();
    let after = running(&mut c);
    assert!(after["a"].0 > gen, "a new generation: {after:?}");
    let a = &c.ok(json!({"op": "get", "session": "a"}))["session"];
    assert_eq!(a["restarts"], json!(0), "not counted as a restart: {a}");
}

/// A service manager's restart (SIGTERM, then a new daemon on the same state directory)
/// runs the configured sessions again; one a client stopped stays stopped.
#[test]
fn a_stopped_and_started_daemon_runs_its_configured_sessions_again() {
    let conf = ScratchDir::new("config-restart");
    let path = conf.join("genward.json");
    write_config(&path, json!({"up": sleeper("up"), "down": sleeper("down")}));
    let config = ["--config", path.to_str().unwrap()];
    let mut d = start("config-restart", &path);
    let before = running(&mut d.client());
    d.client()
        .ok(json!({"op": "stop", "session": "down", "grace": 0}));
    assert_eq!(d.terminate(), Some(0));
    d.restart_wrapped(&[], &config);
    let mut c = d.client();
    let after = running(&mut c);
    assert!(after["up"].0 > before["up"].0, "started again: {after:?}");
    assert!(
        !after.contains_key("down"),
        "stopped by a client: {after:?}"
    );
    let down = c.ok(json!({"op": "get", "session": "down"}));
    assert_eq!(down["session"]["state"], json!("stopped"));
}

/// The generation of `session`'s last run, once it has ended (awaited through a
/// subscription that replays from the start).
fn ended(c: &mut Client, session: &str) -> u64 {
    let mut sub = Client::connect(&c_socket(c));
    sub.ok(json!({"op": "subscribe", "session": session, "from_start": true}));
    let seen = sub.events_until(|m| m.json()["event"] == "exited");
    seen.last().unwrap().json()["gen"].as_u64().unwrap()
}

/// Asserts that `session` rests `exited` with `gen` still its last run: nothing started
/// it since (a new generation would be its current one, or its last end).
#[track_caller]
fn still_done(c: &mut Client, session: &str, gen: u64) {
    let s = &c.ok(json!({"op": "get", "session": session}))["session"];
    assert_eq!(s["current"], Value::Null, "not started again: {s}");
    assert_eq!(s["last_end"]["gen"], json!(gen), "not started again: {s}");
    assert_eq!(s["state"], json!("exited"), "left as it ended: {s}");
}

/// A configured one-shot that ran and exited before a crash of the daemon, and before a
/// clean stop, is not run again by the next daemon — it was not left down by either, and
/// a restart reconciles as a reload does; the long-running session the stop stopped runs
/// again. Runs are also counted in a file the one-shot appends to.
#[test]
fn a_one_shot_that_exited_does_not_run_again_after_a_crash_or_a_stop() {
    let conf = ScratchDir::new("config-once");
    let path = conf.join("genward.json");
    let runs = conf.join("runs");
    let script = format!("echo ran >> '{}'", runs.display());
    write_config(
        &path,
        json!({"mig": {"argv": ["sh", "-c", script]}, "svc": sleeper("svc")}),
    );
    let config = ["--config", path.to_str().unwrap()];
    let count = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let mut d = start("config-once", &path);
    let mig = ended(&mut d.client(), "mig");
    still_done(&mut d.client(), "mig", mig);
    let before = running(&mut d.client());
    assert_eq!(count(), 1);

    // A crash (the keeper keeps `svc` running): the config is applied before the socket
    // is served, so what the start did is there to see.
    d.crash_and_restart(&config);
    let mut c = d.client();
    still_done(&mut c, "mig", mig);
    let after = running(&mut c);
    assert_eq!(after["svc"], before["svc"], "kept running across the crash");
    let plan = c.ok(json!({"op": "reload"}));
    assert_eq!(names(&plan["unchanged"]), ["mig", "svc"]);

    // A clean stop: it stopped `svc`, not `mig`.
    assert_eq!(d.terminate(), Some(0));
    d.restart_wrapped(&[], &config);
    let mut c = d.client();
    still_done(&mut c, "mig", mig);
    let after = running(&mut c);
    assert!(
        after["svc"].0 > before["svc"].0,
        "stopped by the stop, started again: {after:?}"
    );
    assert_eq!(count(), 1, "the one-shot ran once");
}

#[test]
fn a_dry_run_prints_the_plan_and_changes_nothing() {
    let conf = ScratchDir::new("config-dry");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a"), "b": sleeper("b")}));
    let d = start("config-dry", &path);
    let mut c = d.client();
    let before = running(&mut c);
    write_config(&path, json!({"a": sleeper("a2"), "c": sleeper("c")}));
    let plan = c.ok(json!({"op": "reload", "dry_run": true}));
    assert_eq!(plan["dry_run"], json!(true));
    assert_eq!(names(&plan["start"]), ["c"]);
    assert_eq!(names(&plan["stop"]), ["b"]);
    assert_eq!(names(&plan["replace"]), ["a"]);
    assert_eq!(running(&mut c), before);
    // The CLI prints the same plan.
    let out = util::cli::gw_ok(&d, &["reload", "--dry-run"]);
    assert_eq!(out, "would start: c\nwould stop: b\nwould replace: a");
    assert_eq!(running(&mut c), before);
}

#[test]
fn client_sessions_are_not_touched_and_cannot_be_configured() {
    let conf = ScratchDir::new("config-client");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a")}));
    let d = start("config-client", &path);
    let mut c = d.client();
    let mut spawn = sleeper("mine");
    spawn["op"] = json!("spawn");
    spawn["session"] = json!("mine");
    c.ok(spawn);
    let before = running(&mut c);
    write_config(&path, json!({}));
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "a"}));
    let plan = c.ok(json!({"op": "reload"}));
    assert_eq!(names(&plan["stop"]), ["a"]);
    sub.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    let after = running(&mut c);
    assert_eq!(after.keys().collect::<Vec<_>>(), ["mine"]);
    assert_eq!(after["mine"], before["mine"]);
    // A config naming it is refused, naming it, and changes nothing.
    write_config(&path, json!({"mine": sleeper("theirs"), "b": sleeper("b")}));
    let e = c.err(json!({"op": "reload"}), "bad_config");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("\"mine\" was started by a client"), "{msg}");
    assert_eq!(running(&mut c), after);
}

#[test]
fn a_bad_config_at_reload_says_where_and_changes_nothing() {
    let conf = ScratchDir::new("config-bad");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a")}));
    let d = start("config-bad", &path);
    let mut c = d.client();
    let before = running(&mut c);
    std::fs::write(
        &path,
        "{\"sessions\": {\n  \"a\": {\"argv\": [\"true\"]},\n  \"b\": {\"argv\": [\"true\"], \"grace\": \"soon\"}\n}}",
    )
    .unwrap();
    let e = c.err(json!({"op": "reload"}), "bad_config");
    let msg = e["error"]["message"].as_str().unwrap();
    let want = format!("{}:3:36: sessions.b.grace: ", path.display());
    assert!(msg.starts_with(&want), "{msg}");
    // The CLI says the same and fails.
    let out = util::cli::gw(&d, &["reload"]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains(&want), "{}", out.stderr);
    assert_eq!(running(&mut c), before);
}

/// Starts a daemon with `extra` arguments on `state` and the configuration at `config`,
/// which must refuse to start (exit 1); what it said.
fn refused_start(extra: &[&str], state: &Path, config: &Path) -> String {
    let child = Command::new(daemon_binary())
        .arg("daemon")
        .args(extra)
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bad_config_fails_the_start_with_where_and_why() {
    let conf = ScratchDir::new("config-start");
    let path = conf.join("genward.json");
    std::fs::write(
        &path,
        "{\"sessions\": {\"a\": {\"argv\": [\"true\"], \"colour\": 1}}}",
    )
    .unwrap();
    let stderr = refused_start(&[], &conf.join("state"), &path);
    let want = format!("{}:1:39: sessions.a.colour: unknown field", path.display());
    assert!(stderr.contains(&want), "{stderr}");
    // A spec that decodes but is not valid names its file and session too.
    std::fs::write(&path, "{\"sessions\": {\"a\": {\"argv\": []}}}").unwrap();
    let stderr = refused_start(&[], &conf.join("state"), &path);
    let want = format!("{}: sessions.a: argv is empty", path.display());
    assert!(stderr.contains(&want), "{stderr}");
}

#[test]
fn a_config_beyond_the_session_limit_fails_the_start_and_leaves_no_keeper() {
    let conf = ScratchDir::new("config-over");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a"), "b": sleeper("b")}));
    let state = conf.join("state");
    let stderr = refused_start(&["--max-sessions", "1"], &state, &path);
    assert!(stderr.contains("beyond the limit of 1"), "{stderr}");
    // Its keeper held nothing: it went with the daemon (its socket and record with it).
    for file in ["keeper.sock", "keeper"] {
        assert!(!state.join(file).exists(), "{file} left: a keeper lingers");
    }
}

#[test]
fn reload_without_a_config_is_no_config() {
    let d = Daemon::start("config-none", &[]);
    let mut c = d.client();
    c.err(json!({"op": "reload"}), "no_config");
    let hello = c.ok(json!({"op": "hello"}));
    assert!(hello["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("reload")));
}

#[test]
fn sighup_reloads_and_a_bad_config_on_sighup_changes_nothing() {
    let conf = ScratchDir::new("config-hup");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a")}));
    // The notifications say when a reload is over: READY=1 follows each attempt.
    let sock_path = conf.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let env = [("NOTIFY_SOCKET", sock_path.as_os_str())];
    let d = Daemon::start_env("config-hup", &["--config", path.to_str().unwrap()], &env);
    notified(&sock, "READY=1");
    let mut c = d.client();
    write_config(&path, json!({"a": sleeper("a"), "b": sleeper("b")}));
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(d.pid as i32, libc::SIGHUP) };
    notified(&sock, "RELOADING=1");
    notified(&sock, "READY=1");
    let before = running(&mut c);
    assert_eq!(before.keys().collect::<Vec<_>>(), ["a", "b"]);
    std::fs::write(&path, "{\"sessions\": ").unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(d.pid as i32, libc::SIGHUP) };
    notified(&sock, "RELOADING=1");
    notified(&sock, "READY=1");
    assert_eq!(running(&mut c), before);
}

/// Without a config there is nothing to reload, but a `Type=notify-reload` unit's
/// `systemctl reload` (SIGHUP) still waits for the reload's READY=1.
#[test]
fn sighup_without_a_config_still_tells_systemd_the_reload_is_over() {
    let conf = ScratchDir::new("config-hup-none");
    let sock_path = conf.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let env = [("NOTIFY_SOCKET", sock_path.as_os_str())];
    let d = Daemon::start_env("config-hup-none", &[], &env);
    notified(&sock, "READY=1");
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(d.pid as i32, libc::SIGHUP) };
    notified(&sock, "RELOADING=1");
    notified(&sock, "READY=1");
}

/// Reads notifications until one contains `want`; returns it.
fn notified(sock: &UnixDatagram, want: &str) -> String {
    let mut buf = [0u8; 4096];
    loop {
        let n = sock
            .recv(&mut buf)
            .expect("a notification before the timeout");
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        if msg.contains(want) {
            return msg;
        }
    }
}

#[test]
fn systemd_hears_ready_reloading_watchdog_and_stopping() {
    let conf = ScratchDir::new("config-notify");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a")}));
    let sock_path = conf.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let env = [
        ("NOTIFY_SOCKET", sock_path.as_os_str()),
        ("WATCHDOG_USEC", std::ffi::OsStr::new("200000")),
    ];
    let mut d = Daemon::start_env("config-notify", &["--config", path.to_str().unwrap()], &env);
    notified(&sock, "READY=1");
    notified(&sock, "WATCHDOG=1");
    let mut c = d.client();
    c.ok(json!({"op": "reload"}));
    let reloading = notified(&sock, "RELOADING=1");
    let usec = reloading
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .expect("MONOTONIC_USEC with RELOADING=1");
    assert!(usec.parse::<u64>().unwrap() > 0);
    notified(&sock, "READY=1");
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(d.pid as i32, libc::SIGTERM) };
    notified(&sock, "STOPPING=1");
    assert_eq!(d.exit_code(), Some(0));
}

#[test]
fn an_upgrade_keeps_the_config_for_the_next_reload() {
    let conf = ScratchDir::new("config-upgrade");
    let path = conf.join("genward.json");
    write_config(&path, json!({"a": sleeper("a")}));
    let d = start("config-upgrade", &path);
    let mut c = d.client();
    let before = running(&mut c);
    let r = c.request(json!({"op": "upgrade"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    write_config(&path, json!({"a": sleeper("a"), "b": sleeper("b")}));
    let plan = c.ok(json!({"op": "reload"}));
    assert_eq!(names(&plan["start"]), ["b"]);
    assert_eq!(names(&plan["unchanged"]), ["a"]);
    assert_eq!(running(&mut c)["a"], before["a"]);
}

/// Sessions taken back with nothing running still count as taken back: a config with no
/// room beside them does not stop the daemon from starting and serving them.
#[test]
fn a_config_without_room_beside_idle_sessions_taken_back_does_not_stop_the_start() {
    let conf = ScratchDir::new("config-idle-taken-back");
    let path = conf.join("genward.json");
    write_config(&path, json!({}));
    let config = path.to_str().unwrap();
    let mut d = Daemon::start("config-idle-taken-back", &["--config", config]);
    let mut c = d.client();
    for name in ["a", "b"] {
        let gen = c.ok(json!({"op": "spawn", "session": name, "argv": ["true"]}))["gen"].clone();
        c.ok(json!({"op": "wait", "session": name, "gen": gen}));
    }
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0));
    write_config(&path, json!({"x": sleeper("x")}));
    d.restart_wrapped(&[], &["--max-sessions", "2", "--config", config]);
    let mut c = d.client();
    let list = c.ok(json!({"op": "list"}));
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "{list}");
    c.err(json!({"op": "reload"}), "limit");
    c.ok(json!({"op": "remove", "session": "a"}));
    c.ok(json!({"op": "reload"}));
    c.ok(json!({"op": "shutdown"}));
}
