//! An exit that comes before a stop keeps its own cause: a process that ended on its own
//! is reported `exited`, not `stopped`, even when the daemon reads the stop before it
//! sees the exit.

mod util;

use std::time::Instant;

use serde_json::json;
use util::daemon::{fifo, release, Daemon, PATIENCE};

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

/// The order is forced: the daemon is stopped, the `remove` is sent, then the child exits
/// 0, then the daemon goes on and finds the request ready before the exit.
#[test]
fn an_exit_that_came_before_a_remove_is_reported_as_its_own() {
    let cases = ["remove", "stop"]
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
        // Accepted before the daemon stops: the request is then ready before the exit.
        other.ok(json!({"op": "hello"}));
        signal(d.pid, libc::SIGSTOP);
        let request = format!("{{\"id\":1,\"op\":\"{op}\",\"session\":\"s\"}}\n");
        other.send_raw(request.as_bytes());
        release(&go);
        let deadline = Instant::now() + PATIENCE;
        while !is_zombie(pid) {
            assert!(Instant::now() < deadline, "pid {pid} never exited");
            std::thread::yield_now();
        }
        signal(d.pid, libc::SIGCONT);
        let seen = c.events_until(|m| m.is("exited", gen));
        let exited = seen.last().unwrap().json();
        assert_eq!(
            exited["cause"],
            json!("exited"),
            "{op} ({reaper}): {exited}"
        );
        assert_eq!(exited["code"], json!(0), "{op} ({reaper}): {exited}");
        assert_eq!(other.read_msg().json()["ok"], json!(true), "{op}");
    }
}
