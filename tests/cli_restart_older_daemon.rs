//! `restart --if-gen G` with changes against a daemon whose `spawn` does not take `if_gen`
//! yet (the program installed, the daemon not upgraded): its `hello` does not list
//! `spawn_if_gen`, so the command checks `G` against the session's snapshot itself and
//! sends a `spawn` without the member such a daemon would refuse.
//!
//! The older daemon is this one behind a relay that takes `spawn_if_gen` out of every
//! answer listing it and keeps the requests it passes on.

mod util;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use util::cli::{await_line, genward, gw, gw_ok, run_cmd, Out};
use util::daemon::Daemon;

/// The requests the relay passed on, in order.
type Seen = Arc<Mutex<Vec<Value>>>;

/// A socket at `dir/older.sock` relaying each connection to `daemon`, as a daemon that
/// does not know `spawn_if_gen` would answer.
fn older_daemon(dir: &Path, daemon: &Path) -> (PathBuf, Seen) {
    let path = dir.join("older.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let seen: Seen = Arc::default();
    let daemon = daemon.to_owned();
    let requests = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(client) = conn else { continue };
            let Ok(upstream) = UnixStream::connect(&daemon) else {
                continue;
            };
            let (to_daemon, to_client) =
                (upstream.try_clone().unwrap(), client.try_clone().unwrap());
            let requests = requests.clone();
            std::thread::spawn(move || {
                relay(client, to_daemon, |v| {
                    requests.lock().unwrap().push(v.clone())
                })
            });
            std::thread::spawn(move || {
                relay(upstream, to_client, |v| {
                    if let Some(caps) = v.get_mut("capabilities").and_then(Value::as_array_mut) {
                        caps.retain(|c| c != "spawn_if_gen");
                    }
                })
            });
        }
    });
    (path, seen)
}

/// Copies JSON lines from `from` to `to`, each seen (and perhaps changed) by `each` first.
fn relay(from: UnixStream, mut to: UnixStream, mut each: impl FnMut(&mut Value)) {
    for line in BufReader::new(from).split(b'\n') {
        let Ok(line) = line else { return };
        let mut v: Value = serde_json::from_slice(&line).expect("a JSON line");
        each(&mut v);
        let mut out = serde_json::to_vec(&v).unwrap();
        out.push(b'\n');
        if to.write_all(&out).is_err() {
            return;
        }
    }
}

fn through(socket: &Path, args: &[&str]) -> Out {
    let mut cmd = genward(&["--socket", socket.to_str().unwrap()]);
    cmd.args(args);
    run_cmd(cmd, b"")
}

fn spawns(seen: &Seen) -> Vec<Value> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .filter(|v| v["op"] == "spawn")
        .cloned()
        .collect()
}

#[test]
fn restart_if_gen_with_changes_checks_the_snapshot_when_spawn_cannot() {
    let d = Daemon::start("cli-older-daemon", &[]);
    let old = gw_ok(&d, &["run", "s", "--", "cat"]);
    let new = gw_ok(&d, &["run", "s", "--", "sh", "-c", "echo up; exec cat"]);
    await_line(&d, "s", &new, "up");
    let (older, seen) = older_daemon(&d.dir, &d.socket);

    // Stale: refused on the snapshot, and nothing is sent to the daemon to spawn.
    let out = through(&older, &["restart", "s", "--if-gen", &old, "--env", "A=x"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let expected = format!("genward: s: current generation is {new}, not {old}; nothing was done");
    assert!(out.stderr.contains(&expected), "{out:?}");
    assert_eq!(spawns(&seen), Vec::<Value>::new());
    let table = gw(&d, &["ls"]).ok();
    let line = table.lines().find(|l| l.starts_with("s ")).unwrap();
    assert!(
        line.contains(&format!(" {new} ")) && line.contains("running"),
        "{table}"
    );

    // Current: the spawn goes without `if_gen`, and the change is made.
    let next = through(&older, &["restart", "s", "--if-gen", &new, "--env", "A=x"]).ok();
    let sent = spawns(&seen);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].get("if_gen").is_none(), "{sent:?}");
    assert_ne!(next.trim(), new);
    assert_eq!(sent[0]["env"]["A"], "x", "{sent:?}");
    gw(&d, &["stop", "s"]).ok();
}
