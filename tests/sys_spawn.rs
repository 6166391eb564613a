//! Spawning: exec errors as errors naming the step and the path, a start that never waits
//! for the child (not even one hung on a dead mount), argv without a shell, cwd,
//! environment, session leadership, signal reset, no leaked descriptors.

mod util;

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

use genward::sys::process::Exit;
use genward::sys::spawn::{reap_abandoned, spawn, start, Env, SpawnError, SpawnRequest, Step};
use genward::testkit::proc;
use genward::testkit::scratch::ScratchDir;
use util::fuse::HungMount;
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
        matches!(&err, SpawnError::NotFound { step: Step::Exec, path: Some(p) }
            if p == Path::new("/nonexistent/genward-no-such-program")),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "exec \"/nonexistent/genward-no-such-program\": no such file or directory"
    );
    let mut req = request(&["genward-no-such-program-in-path"]);
    req.env.set.push(("PATH".into(), "/usr/bin:/bin".into()));
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(&err, SpawnError::NotFound { step: Step::Exec, path: Some(p) }
            if p == Path::new("genward-no-such-program-in-path")),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "exec \"genward-no-such-program-in-path\" (searched PATH): no such file or directory"
    );
}

#[test]
fn a_script_whose_interpreter_is_missing_is_told_apart_from_a_missing_script() {
    let dir = ScratchDir::new("nointerp");
    let file = dir.join("genward-test-nointerp");
    std::fs::write(&file, "#!/nonexistent/genward-interp\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = spawn(&request(&[file.to_str().unwrap()])).unwrap_err();
    assert!(
        matches!(&err, SpawnError::NotFound { step: Step::Interpreter, path: Some(p) } if *p == file),
        "{err:?}"
    );
    assert_eq!(err.errno(), Some(libc::ENOENT));
    assert_eq!(
        err.to_string(),
        format!(
            "exec {file:?}: the interpreter it names (its \"#!\" line) or its ELF loader: \
             no such file or directory"
        )
    );
    // Found by a PATH search, the same, naming the match.
    let mut req = request(&["genward-test-nointerp"]);
    let path = format!("/nonexistent:{}:/usr/bin:/bin", dir.display());
    req.env.set.push(("PATH".into(), path.into()));
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(&err, SpawnError::NotFound { step: Step::Interpreter, path: Some(p) } if *p == file),
        "{err:?}"
    );
}

#[test]
fn non_executable_file_is_permission_denied() {
    let dir = ScratchDir::new("noexec");
    let file = dir.join("genward-test-noexec");
    std::fs::write(&file, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = spawn(&request(&[file.to_str().unwrap()])).unwrap_err();
    // root may read anything but still needs an execute bit to exec.
    assert!(
        matches!(&err, SpawnError::PermissionDenied { step: Step::Exec, path: Some(p), .. } if *p == file),
        "{err:?}"
    );
    assert_eq!(err.errno(), Some(libc::EACCES));

    // In a PATH search, a non-executable match is remembered and reported (like execvp and
    // the shell's 126) even when later directories lack the program, naming the match.
    let mut req = request(&["genward-test-noexec"]);
    let path = format!("/nonexistent:{}:/usr/bin:/bin", dir.display());
    req.env.set.push(("PATH".into(), path.into()));
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(&err, SpawnError::PermissionDenied { step: Step::Exec, path: Some(p), .. } if *p == file),
        "{err:?}"
    );
    assert_eq!(err.to_string(), format!("exec {file:?}: permission denied"));
}

#[test]
fn missing_cwd_is_reported_as_chdir_naming_the_directory() {
    let mut req = request(&["/bin/true"]);
    req.cwd = Some("/nonexistent/genward-dir".into());
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(&err, SpawnError::NotFound { step: Step::Chdir, path: Some(p) }
            if p == Path::new("/nonexistent/genward-dir")),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "chdir to working directory \"/nonexistent/genward-dir\": no such file or directory"
    );
    // Both missing: the directory is entered first, so it is the one reported.
    let mut req = request(&["/nonexistent/genward-no-such-program"]);
    req.cwd = Some("/nonexistent/genward-dir".into());
    let err = spawn(&req).unwrap_err();
    assert_eq!(err.step(), Some(Step::Chdir), "{err:?}");
}

#[test]
fn a_cwd_that_is_a_file_is_reported_as_not_a_directory() {
    let dir = ScratchDir::new("cwd-file");
    let file = dir.join("plain");
    std::fs::write(&file, b"").unwrap();
    let mut req = request(&["/bin/true"]);
    req.cwd = Some(file.clone());
    let err = spawn(&req).unwrap_err();
    assert!(
        matches!(
            &err,
            SpawnError::Os {
                step: Step::Chdir,
                errno: libc::ENOTDIR,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().to_lowercase().contains("not a directory"),
        "{err}"
    );
}

#[test]
fn start_returns_at_once_and_the_exec_arrives_on_the_status_pipe() {
    let starting = start(&request(&["cat"])).expect("start");
    let pid = starting.pid();
    assert!(pid > 0);
    let mut child = finish(starting).expect("exec");
    assert_eq!(child.process.pid(), pid);
    assert!(child.process.token().is_some());
    write_all(child.stdin.as_ref().unwrap().as_fd(), b"through cat\n");
    drop(child.stdin.take());
    let out = read_to_eof(child.stdout.as_ref().unwrap().as_fd());
    assert_eq!(lossy(&out), "through cat\n");
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn start_does_not_look_for_the_program_a_failed_exec_arrives_on_the_status_pipe() {
    // Not found is not an error of `start`: only the child looks at the filesystem.
    let starting = start(&request(&["/nonexistent/genward-no-such-program"])).expect("start");
    let pid = starting.pid();
    let err = finish(starting).unwrap_err();
    assert!(
        matches!(
            err,
            SpawnError::NotFound {
                step: Step::Exec,
                ..
            }
        ),
        "{err:?}"
    );
    // The failed child is reaped (now, or by a later sweep), never left a zombie.
    let deadline = Instant::now() + TIMEOUT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "failed child {pid} never reaped");
        reap_abandoned();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// What a helper that answers on its stdout and exits needs (the daemon's lookup helper):
/// its output read before `finish`, and once it ended, why it did not exec (if it did not)
/// known without `finish`, which is never called for it.
#[test]
fn a_starting_childs_stdout_is_read_before_finish_and_its_failure_known_without_it() {
    let mut answered = start(&request(&["echo", "answer"])).expect("start");
    let out = read_to_eof(answered.stdout_fd().expect("pipes"));
    assert_eq!(lossy(&out), "answer\n");
    // Its stdout ended: its status pipe has said all it will.
    assert!(answered.poll());
    assert!(answered.failure().is_none());
    drop(answered);
    let mut failed = start(&request(&["/nonexistent/genward-no-such-program"])).expect("start");
    assert!(read_to_eof(failed.stdout_fd().expect("pipes")).is_empty());
    assert!(failed.poll());
    let err = failed.failure();
    assert!(
        matches!(
            err,
            Some(SpawnError::NotFound {
                step: Step::Exec,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn dropping_a_starting_child_kills_and_reaps_it() {
    let starting = start(&request(&["sleep", "1000"])).expect("start");
    let pid = starting.pid();
    drop(starting);
    let deadline = Instant::now() + TIMEOUT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            Instant::now() < deadline,
            "abandoned child {pid} still there"
        );
        reap_abandoned();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
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

#[test]
fn children_started_at_once_beside_thousands_of_descriptors_keep_none_of_them() {
    // Thousands of descriptors of ours, and more children starting at once than there are
    // bands of low numbers to start children with (see `sys/spawn/band.rs`): the children
    // that get a band and those that start with a copy of the whole table alike keep
    // nothing of ours, and every one's output reaches its end (a band taken back no
    // longer holds the child's pipe).
    // SAFETY: plain getrlimit/setrlimit on our own process with a valid struct.
    let hard = unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        lim.rlim_max
    };
    let extra = hard.saturating_sub(500).min(3000) as usize;
    // The bands are kept (or not) at the first spawn, from the lowest numbers free then:
    // a daemon keeps them as it starts.
    output_of(&request(&["true"]));
    let null = std::fs::File::open("/dev/null").unwrap();
    let ours: Vec<std::os::fd::OwnedFd> = (0..extra)
        .map(|_| null.as_fd().try_clone_to_owned().unwrap())
        .collect();
    // Each waits for its input to end, so all are alive while the others start.
    let waiting = request(&["sh", "-c", "read x; exec ls /proc/self/fd"]);
    let starting: Vec<_> = (0..20).map(|_| start(&waiting).expect("start")).collect();
    let started: Vec<_> = starting
        .into_iter()
        .map(|s| s.finish().expect("exec"))
        .collect();
    for mut child in started {
        drop(child.stdin.take());
        let out = lossy(&read_to_eof(child.stdout.as_ref().unwrap().as_fd()));
        let fds: Vec<&str> = out.split_whitespace().collect();
        // ls opens one directory descriptor of its own to list /proc/self/fd.
        assert!(fds.len() <= 4, "descriptors of ours in the child: {fds:?}");
        assert!(fds.starts_with(&["0", "1", "2"]), "{fds:?}");
        assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
    }
    drop(ours);
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `Z`, ...).
fn proc_state(pid: i32) -> Option<String> {
    proc::stat(pid as u32).map(|s| s.state)
}

#[test]
fn start_never_waits_for_a_child_hung_on_a_dead_mount() {
    let mut mount = match HungMount::new("hung") {
        Ok(m) => m,
        Err(why) => return skip("start_never_waits_for_a_child_hung_on_a_dead_mount", &why),
    };
    // Three ways onto the dead mount: the working directory, the program's path, and a
    // directory of the PATH search.
    let mut in_cwd = request(&["/bin/true"]);
    in_cwd.cwd = Some(mount.path.clone());
    let program = mount.path.join("genward-prog");
    let as_program = request(&[program.to_str().unwrap()]);
    let mut in_path = request(&["genward-prog"]);
    let path = format!("{}:/usr/bin:/bin", mount.path.display());
    in_path.env.set.push(("PATH".into(), path.into()));

    // `start` runs in another thread, so that a start that does wait (the bug) fails this
    // test instead of hanging it: the mount is aborted, which frees the thread.
    let (tx, rx) = std::sync::mpsc::channel();
    let requests = [in_cwd, as_program, in_path];
    let starter = std::thread::spawn(move || {
        for req in &requests {
            tx.send(start(req).expect("start")).unwrap();
        }
    });
    let mut started = Vec::new();
    for _ in 0..3 {
        match rx.recv_timeout(TIMEOUT) {
            Ok(s) => started.push(s),
            Err(_) => {
                mount.abort();
                panic!("start waited for a child hung on a dead mount");
            }
        }
    }
    starter.join().unwrap();

    for s in &mut started {
        // The child is asleep in the kernel, on the mount...
        let deadline = Instant::now() + TIMEOUT;
        while proc_state(s.pid()).as_deref() != Some("D") {
            assert!(
                Instant::now() < deadline,
                "child {} never blocked on the mount (state {:?})",
                s.pid(),
                proc_state(s.pid())
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // ...and has told us nothing: no outcome yet, nothing to read.
        assert!(!s.poll());
        assert!(!readable(s.status_fd(), Instant::now()));
    }

    // The server "recovers" by dying: every call on the mount fails, and each failure
    // arrives on its status pipe naming the step and the path.
    mount.abort();
    let mut errors = started.into_iter().map(|s| finish(s).unwrap_err());
    let err = errors.next().unwrap();
    assert!(
        matches!(&err, SpawnError::Os { step: Step::Chdir, errno: libc::ENOTCONN, path: Some(p) }
            if *p == mount.path),
        "{err:?}"
    );
    let err = errors.next().unwrap();
    assert!(
        matches!(&err, SpawnError::Os { step: Step::Exec, errno: libc::ENOTCONN, path: Some(p) }
            if *p == program),
        "{err:?}"
    );
    let err = errors.next().unwrap();
    assert!(
        matches!(&err, SpawnError::Os { step: Step::Exec, errno: libc::ENOTCONN, path: Some(p) }
            if *p == program),
        "{err:?}"
    );
}

/// Whom the child becomes, its umask and its limits, applied between fork and exec.
#[test]
fn credentials_umask_and_limits_are_applied_in_the_child() {
    use genward::sys::spawn::{Credentials, ResourceLimit, RLIM_INFINITY};
    let mut req = request(&[
        "sh",
        "-c",
        "echo $(id -u) $(id -g) $(id -G) $(umask) $(ulimit -Sn) $(ulimit -Hn) $(ulimit -Hc)",
    ]);
    req.umask = Some(0o027);
    req.rlimits = vec![
        ResourceLimit {
            resource: libc::RLIMIT_NOFILE as i32,
            name: "nofile",
            soft: 50,
            hard: 60,
        },
        ResourceLimit {
            resource: libc::RLIMIT_CORE as i32,
            name: "core",
            soft: 0,
            hard: RLIM_INFINITY,
        },
    ];
    let root = is_root();
    let hard_core = if root {
        "unlimited".to_string()
    } else {
        // Unprivileged, a hard limit cannot be raised: keep ours.
        let out = std::process::Command::new("sh")
            .args(["-c", "ulimit -Hc"])
            .output()
            .unwrap();
        req.rlimits[1].hard = match lossy(&out.stdout).trim() {
            "unlimited" => RLIM_INFINITY,
            n => n.parse().unwrap(),
        };
        lossy(&out.stdout).trim().to_string()
    };
    let ids = if root {
        req.credentials = Some(Credentials {
            uid: 4321,
            gid: 4322,
            groups: vec![4323, 4324],
        });
        "4321 4322 4322 4323 4324".to_string()
    } else {
        skip(
            "credentials_umask_and_limits_are_applied_in_the_child",
            "changing the user needs root",
        );
        // SAFETY: getuid and getgid cannot fail.
        let (u, g) = unsafe { (libc::getuid(), libc::getgid()) };
        let out = std::process::Command::new("id").arg("-G").output().unwrap();
        format!("{u} {g} {}", lossy(&out.stdout).trim())
    };
    let (out, exit) = output_of(&req);
    assert_eq!(exit, Exit::Code(0), "{out}");
    assert_eq!(out.trim(), format!("{ids} 0027 50 60 {hard_core}"));
}

/// A step the kernel refuses comes back through the status pipe, named.
#[test]
fn a_refused_limit_or_identity_is_reported_naming_the_step() {
    use genward::sys::spawn::{Credentials, ResourceLimit};
    let mut req = request(&["/bin/true"]);
    req.rlimits = vec![ResourceLimit {
        resource: libc::RLIMIT_NOFILE as i32,
        name: "nofile",
        soft: 1 << 40,
        hard: 1 << 40,
    }];
    let err = spawn(&req).unwrap_err();
    assert_eq!(err.step(), Some(Step::Rlimit), "{err:?}");
    assert!(err.to_string().starts_with("setrlimit nofile: "), "{err}");
    // The kernel's errno (EPERM), not a made-up EACCES; not a denied program or directory.
    assert_eq!(err.errno(), Some(libc::EPERM), "{err:?}");
    assert!(matches!(err, SpawnError::Os { .. }), "{err:?}");
    let mut req = request(&["/bin/true"]);
    req.credentials = Some(Credentials {
        uid: u32::MAX,
        gid: 0,
        groups: Vec::new(),
    });
    assert!(matches!(spawn(&req), Err(SpawnError::Invalid(_))));
    if is_root() {
        skip(
            "a_refused_limit_or_identity_is_reported_naming_the_step",
            "root may become anyone: no refused identity to test",
        );
        return;
    }
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    req.credentials = Some(Credentials {
        uid: me + 1,
        gid: 0,
        groups: Vec::new(),
    });
    let err = spawn(&req).unwrap_err();
    assert_eq!(err.step(), Some(Step::Setgroups), "{err:?}");
    assert!(err.to_string().starts_with("setgroups: "), "{err}");
    // An identity that may not be taken is a denied permission, with the kernel's errno.
    assert!(
        matches!(err, SpawnError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert_eq!(err.errno(), Some(libc::EPERM), "{err:?}");
}
