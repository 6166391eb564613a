//! A session record the daemon could not write (its state directory full) is written as
//! soon as it can be — by the same program, or by the one an `upgrade` put in its place:
//! what a client was answered must reach the disk, or a crash would undo it.

mod util;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use genward::testkit::wait::exit_of_all;
use serde_json::json;
use util::daemon::{Daemon, PATIENCE};

/// A small tmpfs mounted at a daemon's state directory (by the wrapper that starts it),
/// unmounted when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Whether this process may mount a tmpfs (tried on a directory of its own).
fn can_mount_tmpfs() -> bool {
    let dir = genward::testkit::scratch::ScratchDir::new("mount-probe");
    let target = dir.join("m");
    std::fs::create_dir(&target).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&target)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        drop(Mounted(target));
    }
    mounted
}

/// A daemon (without a keeper) whose state directory is a 1 MiB tmpfs of its own, and the
/// mount; `None`, with a visible skip line for `test`, where a tmpfs cannot be mounted.
fn start_on_small_tmpfs(name: &str, test: &str) -> Option<(Daemon, Mounted)> {
    if !can_mount_tmpfs() {
        util::daemon::skip_because(&format!("{test}: cannot mount a tmpfs (needs root)"));
        return None;
    }
    // The wrapper mounts the state directory ($4) and runs the daemon as its one child.
    let mount = r#"mkdir -p "$4" && mount -t tmpfs -o size=1m,mode=0700 tmpfs "$4" && "$@""#;
    let d = Daemon::start_wrapped(name, &["sh", "-c", mount, "sh"], &["--no-keeper"], None);
    let mounted = Mounted(d.dir.join("state"));
    Some((d, mounted))
}

/// Fills the file system at `dir` with one file, `filler`, until a write fails.
fn fill(filler: &Path) {
    let mut f = std::fs::File::create(filler).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).and_then(|()| f.sync_all()).is_ok() {}
}

/// Session `name`'s file says it is to stay down.
fn recorded_down(state: &Path, name: &str) -> bool {
    let file = state.join("sessions").join(format!("{name}.json"));
    std::fs::read_to_string(file).is_ok_and(|s| s.contains(r#""desired":"down""#))
}

#[test]
fn a_record_that_could_not_be_written_is_written_after_an_upgrade() {
    let Some((d, _mounted)) = start_on_small_tmpfs(
        "unwritable",
        "a_record_that_could_not_be_written_is_written_after_an_upgrade",
    ) else {
        return;
    };
    let state = d.dir.join("state");
    let mut c = d.client();
    // A session that waits for a dependency: no process, so no descriptor whose removal
    // would free room for the record before its write.
    let deps = json!({"never": "started"});
    c.ok(
        json!({"op": "spawn", "session": "stub", "argv": ["sleep", "1000"],
                "depends_on": deps}),
    );

    let filler = state.join("filler");
    fill(&filler);
    // Answered once its record was tried: the file system is full.
    c.ok(json!({"op": "stop", "session": "stub"}));
    assert!(
        !recorded_down(&state, "stub"),
        "written into a full file system?"
    );

    let up = c.request(json!({"op": "upgrade"}));
    assert_eq!(up["ok"], json!(true), "{up}");
    std::fs::remove_file(&filler).unwrap();
    // Tried again every second: nothing announces the write but the file itself.
    let since = Instant::now();
    while !recorded_down(&state, "stub") {
        assert!(
            since.elapsed() < PATIENCE,
            "the stop answered before the upgrade never reached the disk"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    c.ok(json!({"op": "shutdown"}));
}

/// "`gens/<gen>.json` ... before the spawn is reported": a generation whose descriptor
/// cannot be written (its state directory full) is never reported running — a crash
/// would leave a process no daemon could account for. Its start fails instead, naming
/// why, and its process is killed at once; with room again, spawns work.
#[test]
fn a_start_that_cannot_be_recorded_fails_and_leaves_no_process() {
    let Some((d, _mounted)) = start_on_small_tmpfs(
        "unrecordable",
        "a_start_that_cannot_be_recorded_fails_and_leaves_no_process",
    ) else {
        return;
    };
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));

    let filler = state.join("filler");
    fill(&filler);
    let argv = ["sleep", "98765"];
    let gen = c.ok(json!({"op": "spawn", "session": "full", "argv": argv}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("spawn_failed", gen));
    assert!(
        !seen.iter().any(|m| m.is("spawned", gen)),
        "reported running without its descriptor"
    );
    let failed = seen.last().unwrap().json().clone();
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("could not be recorded"), "{failed}");
    assert!(
        exit_of_all(&argv, Instant::now() + PATIENCE),
        "its process was left running"
    );

    std::fs::remove_file(&filler).unwrap();
    let gen = c.ok(json!({"op": "spawn", "session": "full", "argv": argv}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", gen));
    assert!(state.join("gens").join(format!("{gen}.json")).exists());
    c.ok(json!({"op": "shutdown"}));
}

/// An upgrade on a full state directory: the new program takes the generation mark its
/// predecessor kept durable as it is (nothing to write), so it resumes and serves — and
/// so would the previous program after a rollback. Writing it again failed both, and the
/// daemon was gone.
#[test]
fn an_upgrade_on_a_full_state_directory_resumes() {
    let Some((d, _mounted)) = start_on_small_tmpfs(
        "full-upgrade",
        "an_upgrade_on_a_full_state_directory_resumes",
    ) else {
        return;
    };
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "on", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", gen));
    let filler = state.join("filler");
    fill(&filler);

    let up = c.request(json!({"op": "upgrade"}));
    assert_eq!(up["ok"], json!(true), "{up}");
    let listed = d.client().ok(json!({"op": "get", "session": "on"}));
    assert_eq!(listed["session"]["current"], json!(gen), "{listed}");
    std::fs::remove_file(&filler).unwrap();
    c.ok(json!({"op": "shutdown"}));
}

/// A start whose descriptor cannot be written is the daemon's shortage, not the
/// session's failure: its `spawn_failed` carries the errno of the write (`ENOSPC` here,
/// where it said `EIO`), and the restart policy tries again without counting it — the
/// session never uses up its `max_restarts` and ends `failed` for a full state directory.
#[test]
fn a_start_that_cannot_be_recorded_is_retried_without_counting() {
    let Some((d, _mounted)) = start_on_small_tmpfs(
        "unrecorded-restarts",
        "a_start_that_cannot_be_recorded_is_retried_without_counting",
    ) else {
        return;
    };
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let filler = state.join("filler");
    fill(&filler);
    let restart =
        json!({"mode": "on-failure", "initial": "10ms", "max": "20ms", "max_restarts": 1});
    c.ok(json!({"op": "spawn", "session": "full", "argv": ["sleep", "1000"], "restart": restart}));
    let mut failures = Vec::new();
    c.events_until(|m| {
        if m.json()["event"] == json!("spawn_failed") {
            failures.push(m.json().clone());
        }
        failures.len() >= 3
    });
    for failed in &failures {
        assert_eq!(failed["error"]["errno"], json!(libc::ENOSPC), "{failed}");
    }
    let got = c.ok(json!({"op": "get", "session": "full"}));
    assert_ne!(got["session"]["state"], json!("failed"), "{got}");
    assert_eq!(got["session"]["restarts"], json!(0), "{got}");
    std::fs::remove_file(&filler).unwrap();
    c.ok(json!({"op": "shutdown"}));
}
