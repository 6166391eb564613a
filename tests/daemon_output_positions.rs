//! Session output positions never go back across daemons, not even for output that could
//! not be kept on disk. A file-size limit below a journal segment's size makes every
//! segment write fail as a full state directory does (no root needed): the output is kept
//! in memory only while positions advance. After a crash the next daemon goes on past
//! every position a subscriber saw — a client resuming there is told the lost range was
//! `dropped` — and after a clean exit exactly where the output ended. As root, the same
//! on a state directory that is a full tmpfs: the ceiling is written in place, over bytes
//! allocated while there was room.

mod util;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use util::daemon::{Client, Daemon, Msg};

/// Below one journal segment (a little over 9 MiB, allocated whole): none can be made.
const LIMIT: u64 = 1 << 20;

/// Lowers the running daemon's file-size limit (its soft limit; the next daemon, started
/// by this test, has none).
fn limit_file_size(pid: u32) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit of our own child, reading into a live struct.
    let rc = unsafe { libc::prlimit(pid as i32, libc::RLIMIT_FSIZE, std::ptr::null(), &mut old) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let new = libc::rlimit {
        rlim_cur: LIMIT,
        rlim_max: old.rlim_max,
    };
    // SAFETY: prlimit of our own child, from a live struct.
    let rc = unsafe { libc::prlimit(pid as i32, libc::RLIMIT_FSIZE, &new, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Spawns session `s` printing a few hundred lines and then `{marker}-end`, follows its
/// output (`c` is subscribed to everything); returns the position of its first byte and
/// the position after its last.
fn run_session(c: &mut Client, marker: &str) -> (u64, u64) {
    let script = format!(
        "i=0; while [ $i -lt 300 ]; do echo {marker}-line-$i; i=$((i+1)); done; echo {marker}-end"
    );
    let r = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sh", "-c", script]}));
    let gen = r["gen"].as_u64().unwrap();
    let msgs = c.output_until(gen, &format!("{marker}-end"));
    let spans: Vec<(u64, u64)> = msgs
        .iter()
        .filter_map(|m| match m {
            Msg::Output(v, data) if v["gen"] == json!(gen) => {
                let pos = v["pos"].as_u64().unwrap();
                Some((pos, pos + data.len() as u64))
            }
            _ => None,
        })
        .collect();
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    (first, end)
}

/// Output of a daemon whose journal cannot be written: none of it reached the disk.
fn output_kept_in_memory(d: &Daemon) -> (Client, u64) {
    limit_file_size(d.pid);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (first, end) = run_session(&mut c, "before");
    assert_eq!(first, 0);
    let segments = std::fs::read_dir(d.dir.join("state").join("output"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .count();
    assert_eq!(
        segments, 0,
        "the file-size limit kept every segment from being made"
    );
    (c, end)
}

#[test]
fn positions_of_output_lost_in_a_crash_are_never_handed_out_again() {
    let mut d = Daemon::start("positions-crash", &["--no-keeper"]);
    let (c, seen) = output_kept_in_memory(&d);
    drop(c);
    d.crash_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (first, _) = run_session(&mut c, "after");
    assert!(
        first >= seen,
        "positions went back: new output at {first}, a subscriber had seen up to {seen}"
    );
    // A client resuming where it stopped is told what was lost, then given what is new.
    let mut r = d.client();
    r.ok(json!({"op": "subscribe", "session": "s", "from_pos": seen}));
    let msgs = r.events_until(|m| matches!(m, Msg::Output(..)));
    let dropped: Vec<&Msg> = msgs
        .iter()
        .filter(|m| m.json()["event"] == "dropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{msgs:?}");
    assert_eq!(dropped[0].json()["from"], json!(seen), "{msgs:?}");
    assert_eq!(dropped[0].json()["to"], json!(first), "{msgs:?}");
    assert_eq!(msgs.last().unwrap().json()["pos"], json!(first));
}

#[test]
fn after_a_clean_exit_positions_go_on_exactly_where_they_ended() {
    let mut d = Daemon::start("positions-clean", &["--no-keeper"]);
    let (c, seen) = output_kept_in_memory(&d);
    drop(c);
    assert_eq!(d.terminate(), Some(0));
    d.restart_wrapped(&[], &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (first, _) = run_session(&mut c, "after");
    assert_eq!(first, seen, "no gap, and never back");
}

/// A tmpfs mounted at a daemon's state directory (by the wrapper that starts it),
/// unmounted when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn positions_never_go_back_after_a_crash_on_a_full_tmpfs() {
    if !rustix::process::geteuid().is_root() {
        util::daemon::skip_because(
            "positions_never_go_back_after_a_crash_on_a_full_tmpfs: mounting a tmpfs needs root",
        );
        return;
    }
    // The wrapper mounts the state directory ($4) and runs the daemon as its one child.
    let mount = r#"mkdir -p "$4" && mount -t tmpfs -o size=2m,mode=0700 tmpfs "$4" && "$@""#;
    let mut d = Daemon::start_wrapped(
        "positions-full",
        &["sh", "-c", mount, "sh"],
        &["--no-keeper"],
        None,
    );
    let state = d.dir.join("state");
    let _mounted = Mounted(state.clone());
    let gate = util::daemon::fifo(&d, "gate");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!(
        "read x < {}; i=0; while [ $i -lt 300 ]; do echo line-$i; i=$((i+1)); done; echo before-end",
        gate.display()
    );
    let r = c.ok(json!({"op": "spawn", "session": "s", "argv": ["sh", "-c", script]}));
    let gen = r["gen"].as_u64().unwrap();
    // Described (its descriptor written) and waiting at the gate.
    c.events_until(|m| m.is("spawned", gen));
    // Full: not a page left.
    let filler = state.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).and_then(|()| f.sync_all()).is_ok() {}
    drop(f);
    util::daemon::release(&gate);
    let msgs = c.output_until(gen, "before-end");
    let seen = msgs
        .iter()
        .filter_map(|m| match m {
            Msg::Output(v, data) => Some(v["pos"].as_u64().unwrap() + data.len() as u64),
            _ => None,
        })
        .max()
        .unwrap();
    drop(c);
    let mut wrapper = d.crash_daemon_edit_and_restart(
        |state| std::fs::remove_file(state.join("filler")).unwrap(),
        &[],
        &["--no-keeper"],
    );
    let _ = wrapper.wait();
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let (first, _) = run_session(&mut c, "after");
    assert!(
        first >= seen,
        "positions went back: new output at {first}, a subscriber had seen up to {seen}"
    );
}
