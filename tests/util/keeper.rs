//! Helpers for the tests of the daemon's keeper: its pid from its record, pidfds awaited
//! (bounded), and spawning a session up to its `spawned` event.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use genward::store::keeper_file::{decode_keeper, KEEPER_FILE};
use genward::testkit::wait;
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use serde_json::{json, Value};

use super::daemon::{Client, PATIENCE};

/// A generation's number in an answer or event.
pub fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().unwrap()
}

/// A pidfd for a running process.
pub fn pidfd(pid: u32) -> OwnedFd {
    pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()).expect("pidfd_open")
}

/// Waits (bounded) until the process behind `fd` has exited.
#[track_caller]
pub fn await_exit(fd: &OwnedFd, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    assert!(wait::readable(fd.as_fd(), deadline), "{what} did not exit");
}

/// The keeper's pid, as its record in the state directory says.
#[track_caller]
pub fn keeper_pid(state: &Path) -> u32 {
    recorded_keeper(state).expect("a well-formed keeper record")
}

/// The keeper's pid if its record is there and well-formed (it is replaced atomically,
/// but removed while a lost keeper is being replaced).
pub fn recorded_keeper(state: &Path) -> Option<u32> {
    let bytes = std::fs::read(state.join(KEEPER_FILE)).ok()?;
    decode_keeper(&bytes).ok().map(|r| r.pid)
}

/// Spawns `spec` (a spawn request's members) as `session`; its generation and pid.
pub fn spawn(c: &mut Client, session: &str, spec: Value) -> (u64, u32) {
    let mut req = json!({"op": "spawn", "session": session});
    for (k, v) in spec.as_object().unwrap() {
        req[k] = v.clone();
    }
    let gen = gen_of(&c.ok(req));
    let seen = c.events_until(|m| m.is("spawned", gen));
    let pid = seen.last().unwrap().json()["pid"].as_u64().unwrap();
    (gen, pid as u32)
}
