//! Spawning: exec errors as errors, argv without a shell, cwd, environment, session
//! leadership, signal reset, no leaked descriptors.

mod util;

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;

use genward::sys::process::Exit;
use genward::sys::spawn::{spawn, Env, SpawnError, SpawnRequest, Step};
use genward::testkit::proc;
use genward::testkit::scratch::ScratchDir;
use util::sys::*;

fn output_of(req: &SpawnRequest) -> (String, Exit) {
    let mut child = spawn(req).expect("spawn");
    drop(child.stdin.take());
    let out = read_to_eof(child.stdout.as_ref().unwrap().as_fd());
    let exit = wait_reap(&mut child.process);
    (lossy(&out), exit)
}

#[test]
fn missing_program_is_not_found_not_exit_127() {
    let err = spawn(&request(&["/nonexistent/genward-no-such-program"])).unwrap_err();
    assert!(
        matches!(err, SpawnError::NotFound { step: Step::Exec }),
        "{err:?}"
    );
    let mut req = request(&["genward-no-such-program-in-path"]);
    req.env.set.push(("PATH".into(), "/usr/bin:/bin".into()));
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(err, SpawnError::NotFound { step: Step::Exec }),
        "{err:?}"
    );
}

#[test]
fn non_executable_file_is_permission_denied() {
    let dir = ScratchDir::new("noexec");
    let file = dir.join("script");
    std::fs::write(&file, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = spawn(&request(&[file.to_str().unwrap()])).unwrap_err();
    // root may read anything but still needs an execute bit to exec.
    assert!(
        matches!(err, SpawnError::PermissionDenied { step: Step::Exec }),
        "{err:?}"
    );
}

#[test]
fn missing_cwd_is_reported_as_chdir() {
    let mut req = request(&["/bin/true"]);
    req.cwd = Some("/nonexistent/genward-dir".into());
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(err, SpawnError::NotFound { step: Step::Chdir }),
        "{err:?}"
    );
}

#[test]
fn invalid_requests_are_rejected_before_fork() {
    for argv in [
        vec![],
        vec![OsString::from("")],
        vec![OsString::from("a\0b")],
    ] {
        let req = SpawnRequest {
            argv,
            ..SpawnRequest::default()
        };
        assert!(matches!(spawn(&req), Err(SpawnError::Invalid(_))));
    }
    let mut req = request(&["/bin/true"]);
    req.env.set.push(("A=B".into(), "x".into()));
    assert!(matches!(spawn(&req), Err(SpawnError::Invalid(_))));
}

#[test]
fn argv_is_passed_verbatim_without_a_shell() {
    let (out, exit) = output_of(&request(&["printf", "%s|", "a b", "$HOME", "*", ""]));
    assert_eq!(out, "a b|$HOME|*||");
    assert_eq!(exit, Exit::Code(0));
}

#[test]
fn exit_code_is_reported() {
    let (_, exit) = output_of(&request(&["sh", "-c", "exit 7"]));
    assert_eq!(exit, Exit::Code(7));
    assert_eq!(exit.shell_code(), Some(7));
}

#[test]
fn cwd_is_applied() {
    let dir = ScratchDir::new("cwd");
    let mut req = request(&["pwd"]);
    req.cwd = Some(dir.to_path_buf());
    let (out, _) = output_of(&req);
    assert_eq!(out.trim(), dir.canonicalize().unwrap().to_str().unwrap());
}

#[test]
fn environment_inherit_set_unset_and_clean() {
    let mut req = request(&["/usr/bin/env"]);
    req.env.set.push(("GENWARD_TEST_SET".into(), "yes".into()));
    req.env.unset.push("HOME".into());
    let (out, _) = output_of(&req);
    assert!(out.lines().any(|l| l == "GENWARD_TEST_SET=yes"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("HOME=")), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("PATH=")),
        "inherited PATH missing: {out}"
    );

    let mut req = request(&["/usr/bin/env"]);
    req.env = Env {
        inherit: false,
        set: vec![("ONLY".into(), "this".into())],
        unset: vec![],
    };
    let (out, _) = output_of(&req);
    assert_eq!(out, "ONLY=this\n");
}

#[test]
fn path_search_uses_the_child_environment() {
    let dir = ScratchDir::new("path");
    let prog = dir.join("genward-test-prog");
    std::fs::write(&prog, "#!/bin/sh\necho found-in-path\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut req = request(&["genward-test-prog"]);
    let path = format!("/nonexistent:{}:/usr/bin:/bin", dir.display());
    req.env.set.push(("PATH".into(), path.into()));
    let (out, _) = output_of(&req);
    assert_eq!(out, "found-in-path\n");
}

#[test]
fn child_leads_its_own_session_and_group() {
    let child = spawn(&request(&["cat"])).unwrap();
    let pid = child.process.pid();
    let stat = proc::stat(pid as u32).unwrap();
    assert_eq!(stat.pgrp, pid as u32);
    assert_eq!(stat.session, pid as u32);
    let mut child = child;
    drop(child.stdin.take());
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn signal_mask_and_dispositions_are_reset() {
    // Block a signal in this thread: the child must not inherit the mask. Rust already
    // ignores SIGPIPE in this process: the child must not inherit that either.
    // SAFETY: manipulates this thread's mask with valid, initialized sigsets.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let (out, _) = output_of(&request(&["cat", "/proc/self/status"]));
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .unwrap()
    };
    assert_eq!(field("SigBlk:"), "0000000000000000");
    assert_eq!(field("SigIgn:"), "0000000000000000");
}

#[test]
fn no_descriptors_leak_into_the_child() {
    // ls opens one directory descriptor of its own to list /proc/self/fd.
    let (out, _) = output_of(&request(&["ls", "/proc/self/fd"]));
    let fds: Vec<&str> = out.split_whitespace().collect();
    assert!(
        fds.len() <= 4,
        "unexpected descriptors in the child: {fds:?}"
    );
    assert!(fds.starts_with(&["0", "1", "2"]), "{fds:?}");
}
