//! A standard output closed by its reader (`genward run web -- cmd | true`) ends every
//! command with status 141, as if SIGPIPE had, and nothing on standard error: never a
//! panic (an abort in the release build).

mod util;

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use util::cli::{command, genward, gw_ok, wait_bounded};
use util::daemon::Daemon;

/// The write end of a pipe whose read end is already closed.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just made and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Runs `cmd` with standard output a closed pipe; asserts status 141 and silence.
#[track_caller]
fn exits_141(mut cmd: Command, what: &str) {
    cmd.stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped());
    let out = wait_bounded(cmd.spawn().expect("spawn genward"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(141),
        "{what}: {:?}: {stderr}",
        out.status
    );
    assert_eq!(stderr, "", "{what}");
}

#[test]
fn help_and_version_on_a_closed_output() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["-V"],
        &["stop", "-h"],
    ] {
        exits_141(genward(args), &args.join(" "));
    }
}

#[test]
fn commands_that_act_then_print_on_a_closed_output() {
    let d = Daemon::start("cli-closed-output", &[]);
    exits_141(
        command(&d, &["run", "a", "--", "sleep", "600"]),
        "run (waiting for the start)",
    );
    exits_141(
        command(&d, &["run", "--no-wait", "b", "--", "sleep", "600"]),
        "run --no-wait",
    );
    exits_141(command(&d, &["restart", "a"]), "restart");
    exits_141(command(&d, &["stop", "a"]), "stop");
    exits_141(command(&d, &["upgrade"]), "upgrade");
    // The daemon did each: `b` runs, `a` was stopped, and it still answers after its
    // upgrade.
    let table = gw_ok(&d, &["ls"]);
    assert!(table.lines().any(|l| l.starts_with("b ")), "{table}");
    gw_ok(&d, &["stop", "b"]);
}
