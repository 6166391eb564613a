//! A process taken back after a crash whose identity cannot be verified (`unverifiable`)
//! is listed as such (`adopted.verified: false`), never signalled — a `signal` is refused,
//! a `stop` is taken and waits — and checked again on a backed-off timer: once the check
//! says `mismatch` (its pid is free) it is reported `lost` and its descriptor goes; once
//! it says `match` it is an adopted process like any other, and the stop asked meanwhile
//! runs.
//!
//! The identity is made unverifiable by editing the generation's descriptor while no
//! daemon runs: no token at all (nothing to compare with while the pid is taken), or a
//! `ps1:` token read while `ps` answers, checked by a daemon whose `ps` fails until the
//! test lets it work. The first daemon runs under a child subreaper ([`SUBREAPER`]) that
//! reaps what it leaves, as init would: a killed process's pid is then free.

mod util;

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genward::store::descriptor::{decode_descriptor, encode_descriptor};
use genward::sys::identity::{ps_token, Observed};
use genward::sys::pidfd_ext::{exit_info, ExitInfo};
use genward::testkit::wait;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use serde_json::{json, Value};
use util::daemon::{skip_because, Client, Daemon, Msg, PATIENCE, SUBREAPER};

/// Whether there is no `python3` for the subreaper (said out loud).
fn no_subreaper() -> bool {
    let python = Command::new("python3")
        .args(["-c", ""])
        .stdin(Stdio::null())
        .status();
    !python.is_ok_and(|s| s.success()) && skip_because("no python3 for the subreaper")
}

/// Whether this kernel keeps the exit status of a process for pidfds (`PIDFD_INFO_EXIT`,
/// 6.15+): only then can the end of a process taken back be told other than `lost`.
fn keeps_exit_status() -> bool {
    let mut child = Command::new("true").spawn().expect("run true");
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).expect("pidfd_open");
    child.wait().unwrap();
    matches!(exit_info(pidfd.as_fd()), Ok(ExitInfo::Exited(_)))
}

/// The fallback reaper's switch: no pidfds, a process taken back is watched by reading
/// its identity again.
const FALLBACK: [&str; 2] = ["--reaper", "fallback"];

/// A daemon under the subreaper, and a client subscribed to everything.
fn daemon(tag: &str, reaper: &[&str]) -> (Daemon, Client) {
    let d = Daemon::start_wrapped(tag, &SUBREAPER, reaper, None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    (d, c)
}

/// Spawns `sleep 1000` as `session`, kept across a restart: its generation, its pid, and
/// a pidfd for it (opened while it runs as the daemon's child: it is that process's).
fn spawn_kept(c: &mut Client, session: &str) -> (u64, u32, OwnedFd) {
    let gen = c.ok(json!({"op": "spawn", "session": session,
        "on_recover": "keep", "argv": ["sleep", "1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("spawned", gen));
    let pid = seen.last().unwrap().json()["pid"].as_u64().unwrap() as u32;
    let pidfd = pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()).unwrap();
    (gen, pid, pidfd)
}

fn descriptor_path(state: &Path, gen: u64) -> PathBuf {
    state.join("gens").join(format!("{gen}.json"))
}

/// Rewrites `gen`'s descriptor in the state directory `state` with `identity` for its
/// token; everything else stays as the daemon wrote it.
fn set_identity(state: &Path, gen: u64, identity: Option<String>) {
    let path = descriptor_path(state, gen);
    let mut d = decode_descriptor(&std::fs::read(&path).unwrap()).unwrap();
    d.identity = identity;
    std::fs::write(&path, encode_descriptor(&d)).unwrap();
}

/// `session`'s one generation as `get` shows it, and the session's state.
fn only_generation(c: &mut Client, session: &str) -> (Value, Value) {
    let got = c.ok(json!({"op": "get", "session": session}));
    let gens = got["session"]["generations"].as_array().unwrap();
    assert_eq!(gens.len(), 1, "{got}");
    (gens[0].clone(), got["session"]["state"].clone())
}

/// The `exited` event of `gen`.
fn exited(c: &mut Client, gen: u64) -> Value {
    let seen = c.events_until(|m| m.is("exited", gen));
    match seen.last() {
        Some(Msg::Json(v)) => v.clone(),
        other => panic!("{other:?}"),
    }
}

/// Taken back unverified: listed running, with its pid, `verified: false`; a signal is
/// refused and a stop taken (the session says stopping), and neither sends anything.
fn assert_held_unsignalled(c: &mut Client, session: &str, gen: u64, pid: u32, pidfd: &OwnedFd) {
    let (g, state) = only_generation(c, session);
    assert_eq!(
        (g["gen"].as_u64(), g["pid"].as_u64()),
        (Some(gen), Some(pid.into()))
    );
    assert_eq!(g["lifecycle"], "running", "{g}");
    assert_eq!(g["adopted"]["verified"], false, "{g}");
    assert_eq!(g["adopted"]["io_lost"], true, "{g}");
    assert_eq!(state, "running");
    c.err(
        json!({"op": "signal", "session": session, "signal": "TERM"}),
        "not_running",
    );
    let stopped = c.ok(json!({"op": "stop", "session": session, "if_gen": gen}));
    assert_eq!(stopped["gen"].as_u64(), Some(gen), "{stopped}");
    let (g, state) = only_generation(c, session);
    assert_eq!(state, "stopping");
    assert_eq!(g["lifecycle"], "running", "{g}");
    assert_eq!(g["adopted"]["verified"], false, "{g}");
    // A signal for it would have gone out before the replies: it still runs.
    assert!(
        !wait::readable(pidfd.as_fd(), Instant::now()),
        "signalled while unverified"
    );
}

#[test]
fn an_unverifiable_process_is_kept_unsignalled_and_lost_once_its_pid_is_free() {
    kept_unsignalled_then_lost(&[]);
}

#[test]
fn under_the_fallback_reaper_too() {
    kept_unsignalled_then_lost(&FALLBACK);
}

fn kept_unsignalled_then_lost(reaper: &[&str]) {
    if no_subreaper() {
        return;
    }
    let (mut d, mut c) = daemon("unverified-lost", reaper);
    let (gen, pid, pidfd) = spawn_kept(&mut c, "held");
    drop(c);
    let subreaper =
        d.crash_daemon_edit_and_restart(|state| set_identity(state, gen, None), &[], reaper);
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    assert_held_unsignalled(&mut c, "held", gen, pid, &pidfd);

    // Its first identity checks again (1 s after the start, then 2 s later) still cannot
    // tell, and send nothing: it runs through the first. No event says a check happened,
    // so this waits on its pidfd (which would wake at its end) past the first check.
    assert!(
        !wait::readable(pidfd.as_fd(), Instant::now() + Duration::from_millis(1500)),
        "signalled while unverified"
    );
    let (g, _) = only_generation(&mut c, "held");
    assert_eq!(g["adopted"]["verified"], false, "{g}");
    assert!(descriptor_path(&state, gen).exists());

    // It ends while unverified (the subreaper reaps it, its pid is free): a later check
    // says `mismatch`, and it is reported lost, once, and its descriptor goes.
    pidfd_send_signal(&pidfd, Signal::KILL).unwrap();
    let end = exited(&mut c, gen);
    assert_eq!(end["cause"], "lost", "{end}");
    assert_eq!(end["code"], Value::Null, "{end}");
    // Its descriptor goes at the end of the turn that released it (once what it left is
    // looked for): an answer to a later request comes after that.
    c.ok(json!({"op": "hello"}));
    assert!(!descriptor_path(&state, gen).exists());
    let got = c.ok(json!({"op": "get", "session": "held"}));
    assert_eq!(got["session"]["generations"], json!([]), "{got}");
    assert_eq!(got["session"]["last_end"]["cause"], "lost", "{got}");
    let waited = c.ok(json!({"op": "wait", "session": "held", "gen": gen}));
    assert_eq!(waited["end"]["cause"], "lost", "{waited}");

    drop(c);
    assert_eq!(d.terminate(), Some(0));
    let mut subreaper = subreaper;
    assert!(
        wait::child_exit(&mut subreaper, PATIENCE).is_some(),
        "the subreaper still has processes to reap"
    );
}

/// `ps` on the caller's `PATH`.
fn real_ps() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ps"))
        .find(|p| p.is_file())
}

#[test]
fn a_stop_asked_while_unverifiable_runs_once_the_process_is_verified() {
    stopped_once_verified(&[]);
}

#[test]
fn a_stop_asked_while_unverifiable_runs_once_verified_under_the_fallback_reaper() {
    stopped_once_verified(&FALLBACK);
}

fn stopped_once_verified(reaper: &[&str]) {
    if no_subreaper() {
        return;
    }
    let Some(ps) = real_ps() else {
        skip_because("no ps");
        return;
    };
    let (mut d, mut c) = daemon("unverified-match", reaper);
    let (gen, pid, pidfd) = spawn_kept(&mut c, "later");
    let token = match ps_token(pid as i32) {
        Observed::Token(t) => t,
        other => {
            skip_because(&format!("ps cannot read a start time here: {other:?}"));
            return;
        }
    };
    drop(c);
    // The next daemon's `ps` fails (exit 2, a complaint: unreadable, never "gone") until
    // the file `ps-ok` exists.
    let bin = d.dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let ok = d.dir.join("ps-ok");
    let script = format!(
        "#!/bin/sh\n[ -e '{}' ] && exec '{}' \"$@\"\necho 'ps: not now' >&2\nexit 2\n",
        ok.display(),
        ps.display()
    );
    let fake = bin.join("ps");
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let subreaper = d.crash_daemon_edit_and_restart(
        |state| set_identity(state, gen, Some(token)),
        &[("PATH", &path)],
        reaper,
    );
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    assert_held_unsignalled(&mut c, "later", gen, pid, &pidfd);

    // `ps` works again: a later check says `match`, and the stop asked meanwhile runs.
    std::fs::write(&ok, b"").unwrap();
    assert!(
        wait::readable(pidfd.as_fd(), Instant::now() + PATIENCE),
        "not stopped once verified"
    );
    let end = exited(&mut c, gen);
    if reaper.is_empty() && keeps_exit_status() {
        assert_eq!(end["cause"], "stopped", "{end}");
        assert_eq!(end["code"], 143, "{end}");
    } else {
        // Its status cannot be had for a process that is not our child (without a pidfd,
        // or on a kernel that keeps none for pidfds).
        assert_eq!(end["cause"], "lost", "{end}");
    }
    // Gone at the end of the turn that released it: after a later answer.
    c.ok(json!({"op": "hello"}));
    assert!(!descriptor_path(&state, gen).exists());
    assert_eq!(
        c.ok(json!({"op": "get", "session": "later"}))["session"]["state"],
        "stopped"
    );

    drop(c);
    assert_eq!(d.terminate(), Some(0));
    let mut subreaper = subreaper;
    assert!(
        wait::child_exit(&mut subreaper, PATIENCE).is_some(),
        "the subreaper still has processes to reap"
    );
}
