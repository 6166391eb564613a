//! An exit that comes before a stop keeps its own cause: a process that ended on its own
//! is reported `exited`, not `stopped`, even when the daemon reads the stop (a `remove`,
//! `stop`, `shutdown` or `reload`) before it sees the exit.

mod util;

use std::path::Path;
use std::time::Instant;

use genward::testkit::scratch::ScratchDir;
use serde_json::{json, Value};
use util::daemon::{fifo, make_fifo, release, Client, Daemon, PATIENCE};

/// Whether `pid` is a zombie: it exited, and nobody reaped it yet.
fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name's closing parenthesis.
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('Z'))
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid this test started and a valid signal number.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill {pid} {sig}");
}

/// Forces the order: the daemon is stopped, `request` is sent on `other` (accepted
/// before), then the leader `pid` (waiting on `go`) exits 0, then the daemon goes on and
/// finds the request ready before the exit. Returns the `exited` event of `gen`.
fn race(
    d: &Daemon,
    c: &mut Client,
    other: &mut Client,
    (gen, pid): (u64, u32),
    go: &Path,
    request: &str,
) -> Value {
    signal(d.pid, libc::SIGSTOP);
    other.send_raw(format!("{request}\n").as_bytes());
    release(go);
    let deadline = Instant::now() + PATIENCE;
    while !is_zombie(pid) {
        assert!(Instant::now() < deadline, "pid {pid} never exited");
        std::thread::yield_now();
    }
    signal(d.pid, libc::SIGCONT);
    let seen = c.events_until(|m| m.is("exited", gen));
    seen.last().unwrap().json().clone()
}

#[test]
fn an_exit_that_came_before_a_remove_stop_or_shutdown_is_reported_as_its_own() {
    let cases = ["remove", "stop", "shutdown"]
        .into_iter()
        .flat_map(|op| [(op, "auto"), (op, "fallback")]);
    for (op, reaper) in cases {
        let d = Daemon::start(&format!("exit-race-{op}-{reaper}"), &["--reaper", reaper]);
        let mut c = d.client();
        c.ok(json!({"op": "subscribe", "all": true}));
        let go = fifo(&d, "go");
        let script = format!("read x < '{}'; exit 0", go.display());
        let gen = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sh", "-c", script]}))["gen"]
            .as_u64()
            .unwrap();
        let pid = c.spawned_pid(gen);
        let mut other = d.client();
        other.ok(json!({"op": "hello"}));
        let request = match op {
            "shutdown" => json!({"id": 1, "op": op}),
            _ => json!({"id": 1, "op": op, "session": "s"}),
        };
        let exited = race(
            &d,
            &mut c,
            &mut other,
            (gen, pid),
            &go,
            &request.to_string(),
        );
        assert_eq!(
            exited["cause"],
            json!("exited"),
            "{op} ({reaper}): {exited}"
        );
        assert_eq!(exited["code"], json!(0), "{op} ({reaper}): {exited}");
        assert_eq!(other.read_msg().json()["ok"], json!(true), "{op}");
    }
}

/// The same for a `reload` that drops the session from the configuration.
#[test]
fn an_exit_that_came_before_a_reload_is_reported_as_its_own() {
    for reaper in ["auto", "fallback"] {
        let conf = ScratchDir::new(&format!("exit-race-reload-{reaper}"));
        let go = make_fifo(conf.join("go"));
        let path = conf.join("genward.json");
        let script = format!("read x < '{}'; exit 0", go.display());
        let config = |sessions: Value| {
            let text = json!({ "sessions": sessions }).to_string();
            std::fs::write(&path, text).unwrap();
        };
        config(json!({"s": {"argv": ["sh", "-c", script]}}));
        let d = Daemon::start(
            &format!("exit-race-reload-{reaper}"),
            &["--reaper", reaper, "--config", path.to_str().unwrap()],
        );
        let mut c = d.client();
        c.ok(json!({"op": "subscribe", "session": "s", "from_start": true}));
        let seen = c.events_until(|m| m.json()["event"] == "spawned");
        let spawned = seen.last().unwrap().json();
        let gen = spawned["gen"].as_u64().unwrap();
        let pid = spawned["pid"].as_u64().unwrap() as u32;
        let mut other = d.client();
        other.ok(json!({"op": "hello"}));
        config(json!({}));
        let request = json!({"id": 1, "op": "reload"}).to_string();
        let exited = race(&d, &mut c, &mut other, (gen, pid), &go, &request);
        assert_eq!(
            exited["cause"],
            json!("exited"),
            "reload ({reaper}): {exited}"
        );
        assert_eq!(exited["code"], json!(0), "reload ({reaper}): {exited}");
        assert_eq!(other.read_msg().json()["ok"], json!(true), "reload");
    }
}
