//! One daemon per state directory, across PID namespaces too: a daemon started in a new
//! PID namespace (as in a container) on the directory a running daemon outside it holds
//! finds some other process, or none, under the holder's pid — and must still be
//! refused, leaving the running daemon, its lease and its sessions as they were.

mod util;

use std::os::unix::fs::MetadataExt;
use std::process::Stdio;

use genward::store::lease::{decode_holder, LEASE_FILE};
use genward::testkit::wait;
use serde_json::json;
use util::daemon::{daemon_binary, skip_because, Daemon, PATIENCE};
use util::pidns::in_new_pid_namespace;

#[test]
fn a_daemon_in_another_pid_namespace_is_refused_the_lease() {
    let mut cmd = match in_new_pid_namespace() {
        Ok(cmd) => cmd,
        Err(why) => {
            skip_because(&why);
            return;
        }
    };
    let d = Daemon::start("lease-pidns", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let r = c.ok(json!({"op": "spawn", "session": "held", "argv": ["sleep", "1000"]}));
    let gen = r["gen"].as_u64().unwrap();
    c.spawned_pid(gen);
    let state = d.dir.join("state");
    let lease = state.join(LEASE_FILE);
    let inode = std::fs::metadata(&lease).unwrap().ino();

    cmd.arg(daemon_binary())
        .arg("--socket")
        .arg(d.dir.join("other.sock"))
        .arg("daemon")
        .arg("--state-dir")
        .arg(&state)
        .arg("--no-keeper")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut other = cmd.spawn().unwrap();
    let status = wait::child_exit(&mut other, PATIENCE);
    if status.is_none() {
        let _ = other.kill();
        let _ = other.wait();
    }
    let mut err = String::new();
    std::io::Read::read_to_string(&mut other.stderr.take().unwrap(), &mut err).unwrap();
    let status = status.unwrap_or_else(|| panic!("the second daemon took the directory: {err}"));
    assert!(!status.success(), "{err}");
    assert!(err.contains("another PID namespace"), "{err}");

    // Nothing of the running daemon's changed: its lease, its record, its session.
    assert_eq!(std::fs::metadata(&lease).unwrap().ino(), inode);
    let holder = decode_holder(&std::fs::read(&lease).unwrap()).unwrap();
    assert_eq!(holder.pid, d.pid);
    let s = c.ok(json!({"op": "get", "session": "held"}));
    assert_eq!(s["session"]["current"], gen, "{s}");
    assert_eq!(s["session"]["state"], "running", "{s}");
}
