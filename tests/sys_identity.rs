//! Identity tokens: format, the tri-state comparison, `ps1:` pinned to UTC and the C
//! locale, uniqueness, and real pid reuse in a fresh PID namespace on both paths.

mod util;

use std::process::Command;
use std::time::Duration;

use genward::sys::identity::{
    self, adopt, compare, parse, parse_stat_starttime, Adoption, Observed, Token, Verdict,
};
use genward::sys::process::{Exit, ReaperMode, SignalError};
use genward::sys::spawn::{spawn, SpawnRequest};
use rustix::process::Signal;
use util::sys::*;

#[test]
fn linux_token_has_boot_id_inode_and_starttime() {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
        let mut child = spawn(&request_with(&["cat"], mode)).unwrap();
        let token = child.process.token().unwrap().to_owned();
        let Some(Token::Linux {
            boot_id,
            inode,
            starttime,
        }) = parse(&token)
        else {
            panic!("not a linux1 token: {token}");
        };
        assert_eq!(boot_id, boot.trim());
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.process.pid())).unwrap();
        assert_eq!(Some(starttime), parse_stat_starttime(&stat));
        match mode {
            ReaperMode::Fallback => assert_eq!(inode, 0),
            ReaperMode::Auto => {
                let pidfd = child.process.pidfd().unwrap();
                assert_eq!(inode, identity::pidfd_inode(pidfd));
            }
        }
        assert_eq!(parse(&token).unwrap().to_text(), token);
        drop(child.stdin.take());
        wait_reap(&mut child.process);
    }
}

#[test]
fn stat_is_parsed_after_the_last_parenthesis() {
    let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21";
    assert_eq!(
        parse_stat_starttime(&format!("77 (a) b (c) 1 2 3) {tail}")),
        Some(424242)
    );
    assert_eq!(parse_stat_starttime("77 (no close"), None);
    assert_eq!(parse_stat_starttime("77 (x) S 1 2"), None);
}

#[test]
fn compare_is_tri_state() {
    let rec = "linux1:ab-12:0:500";
    let tok = |s: &str| Observed::Token(s.to_owned());
    use Verdict::*;
    let cases: &[(Option<&str>, Observed, Verdict)] = &[
        (Some(rec), tok("linux1:ab-12:0:500"), Match),
        (Some(rec), tok("linux1:ab-12:77:500"), Match),
        (
            Some("linux1:ab-12:76:500"),
            tok("linux1:ab-12:77:500"),
            Mismatch,
        ),
        (Some(rec), tok("linux1:ab-12:0:501"), Mismatch),
        (Some(rec), tok("linux1:cd-34:0:500"), Mismatch),
        (Some(rec), Observed::Gone, Mismatch),
        (
            Some(rec),
            Observed::Unreadable("no /proc".into()),
            Unverifiable,
        ),
        (Some(rec), tok("ps1:Mon Nov 30 06:00:00 2026"), Unverifiable),
        (Some(rec), tok("junk"), Unverifiable),
        (None, tok(rec), Unverifiable),
        (None, Observed::Gone, Unverifiable),
        (Some("junk"), tok(rec), Unverifiable),
        (Some("linux1:ab:0:5:extra"), tok(rec), Unverifiable),
        (
            Some("ps1:Mon Nov 30 06:00:00 2026"),
            tok("ps1:Mon Nov 30 06:00:00 2026"),
            Match,
        ),
        (
            Some("ps1:Mon Nov 30 06:00:00 2026"),
            tok("ps1:Mon Nov 30 06:00:01 2026"),
            Mismatch,
        ),
        (
            Some("ps1:Mon Nov 30 06:00:00 2026"),
            Observed::Gone,
            Mismatch,
        ),
    ];
    for (recorded, observed, want) in cases {
        assert_eq!(
            compare(*recorded, observed),
            *want,
            "{recorded:?} vs {observed:?}"
        );
    }
}

const PS1_PID: &str = "GENWARD_TEST_PS1_PID";

/// Not a test on its own: re-executed by `ps1_token_ignores_timezone_and_locale` with a
/// different environment, prints the token it reads.
#[test]
fn ps1_token_helper() {
    if let Ok(pid) = std::env::var(PS1_PID) {
        let observed = identity::ps_token(pid.parse().unwrap());
        println!("PS1-TOKEN={observed:?}");
    }
}

#[test]
fn ps1_token_ignores_timezone_and_locale() {
    if Command::new("ps").arg("-V").output().is_err() {
        return skip("ps1_token_ignores_timezone_and_locale", "no ps");
    }
    let mut child = spawn(&request(&["cat"])).unwrap();
    let pid = child.process.pid();
    let ours = identity::ps_token(pid);
    let Observed::Token(ref token) = ours else {
        panic!("{ours:?}")
    };
    assert!(matches!(parse(token), Some(Token::Ps { .. })), "{token}");
    // Plain ps does depend on the timezone: the pinning is what keeps the token stable.
    let raw = |tz: &str| {
        let out = Command::new("ps")
            .args(["-o", "lstart=", "-p", &pid.to_string()])
            .env("TZ", tz)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_ne!(raw("UTC0"), raw("JST-9"));
    let exe = std::env::current_exe().unwrap();
    for (tz, lang) in [
        ("JST-9", "de_DE.UTF-8"),
        ("EST5EDT", "fr_FR.UTF-8"),
        ("UTC0", "C"),
    ] {
        let out = Command::new(&exe)
            .args([
                "--exact",
                "ps1_token_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(PS1_PID, pid.to_string())
            .env("TZ", tz)
            .env("LANG", lang)
            .env("LC_ALL", lang)
            .env("LC_TIME", lang)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("PS1-TOKEN={ours:?}")),
            "TZ={tz} LANG={lang}: {text}"
        );
    }
    assert_eq!(identity::verify(pid, Some(token), None), Verdict::Match);
    drop(child.stdin.take());
    wait_reap(&mut child.process);
    assert_eq!(identity::verify(pid, Some(token), None), Verdict::Mismatch);
}

#[test]
fn two_processes_never_share_a_token() {
    let mut children: Vec<_> = (0..40)
        .map(|_| spawn(&request(&["cat"])).unwrap())
        .collect();
    let tokens: Vec<String> = children
        .iter()
        .map(|c| c.process.token().unwrap().to_owned())
        .collect();
    let pidfs = tokens
        .iter()
        .all(|t| matches!(parse(t), Some(Token::Linux { inode, .. }) if inode != 0));
    let mut unique = tokens.clone();
    unique.sort();
    unique.dedup();
    for c in &mut children {
        drop(c.stdin.take());
        wait_reap(&mut c.process);
    }
    if !pidfs {
        // Without pidfs the token is (boot, starttime): unique only together with the pid.
        return skip(
            "two_processes_never_share_a_token",
            "pidfds are not on pidfs (Linux < 6.9)",
        );
    }
    assert_eq!(unique.len(), tokens.len(), "{tokens:?}");
    // And each one only matches its own process.
    let (a, b) = (&children[0].process, &children[1].process);
    assert_ne!(a.token(), b.token());
}

const REUSE_MODE: &str = "GENWARD_TEST_PID_REUSE_MODE";

fn boottime_ticks() -> u64 {
    // SAFETY: `ts` is a valid out-pointer; sysconf has no preconditions.
    let (ts, hz) = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        assert_eq!(libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts), 0);
        (ts, libc::sysconf(libc::_SC_CLK_TCK) as u64)
    };
    ts.tv_sec as u64 * hz + ts.tv_nsec as u64 * hz / 1_000_000_000
}

/// Runs inside the fresh PID namespace (as its pid 1).
fn pid_reuse_scenario(mode: ReaperMode) {
    let mut first = spawn(&request_with(&["sleep", "1000"], mode)).unwrap();
    let pid = first.process.pid();
    let token = first.process.token().unwrap().to_owned();
    // A handle on it as a restarted supervisor would hold one: adopted, not our child.
    let Adoption::Adopted(held) = adopt(pid, &token, mode) else {
        panic!("live process not adopted")
    };
    assert_eq!(held.pidfd().is_some(), mode == ReaperMode::Auto);
    first.process.signal(Signal::KILL).unwrap();
    wait_reap(&mut first.process);

    // The start time has a resolution of one clock tick; a pid can only be reused by a
    // later process, so let a tick pass as any real reuse would (a full pid-space wrap
    // takes far longer). This waits on the clock, not on another process.
    let Some(Token::Linux { starttime, .. }) = parse(&token) else {
        panic!("{token}")
    };
    while boottime_ticks() <= starttime + 1 {
        std::thread::sleep(Duration::from_millis(2));
    }

    // Put a bystander on the recycled pid.
    std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
    let mut bystander = spawn(&request_with(&["sleep", "1000"], mode)).unwrap();
    assert_eq!(
        bystander.process.pid(),
        pid,
        "bystander not on the recycled pid"
    );

    // The reaped child handle refuses outright.
    assert!(matches!(
        first.process.signal(Signal::TERM),
        Err(SignalError::Reaped)
    ));
    assert!(matches!(
        first.process.signal_group(Signal::TERM),
        Err(SignalError::Reaped)
    ));
    // The adopted handle refuses: its pidfd refers to the dead process (pidfd path), or
    // the identity re-check before the signal finds the bystander (fallback path).
    match mode {
        ReaperMode::Auto => {
            assert!(matches!(
                held.signal(Signal::TERM),
                Err(SignalError::Exited)
            ));
            assert!(held.signal_group_members(Signal::TERM).is_err());
        }
        ReaperMode::Fallback => {
            assert!(matches!(
                held.signal(Signal::TERM),
                Err(SignalError::Mismatch)
            ));
        }
    }
    assert!(held.signal_group(Signal::TERM).is_err());
    assert_eq!(held.exit_status_nowait().unwrap(), Some(Exit::Unknown));
    // The recorded identity no longer matches the pid, on this path and the other.
    assert_eq!(identity::verify(pid, Some(&token), None), Verdict::Mismatch);
    for adopt_mode in [mode, ReaperMode::Auto, ReaperMode::Fallback] {
        assert!(
            matches!(adopt(pid, &token, adopt_mode), Adoption::Mismatch),
            "adopt({adopt_mode:?})"
        );
    }
    // The bystander was not touched: it dies of the SIGKILL we send now.
    assert_eq!(bystander.process.exit_status_nowait().unwrap(), None);
    bystander.process.signal(Signal::KILL).unwrap();
    assert_eq!(wait_reap(&mut bystander.process), by_signal(libc::SIGKILL));
    println!("PID-REUSE-REFUSED {mode:?}");
}

#[test]
fn pid_reuse_is_refused_as_mismatch() {
    const NAME: &str = "pid_reuse_is_refused_as_mismatch";
    if let Ok(mode) = std::env::var(REUSE_MODE) {
        let mode = if mode == "fallback" {
            ReaperMode::Fallback
        } else {
            ReaperMode::Auto
        };
        return pid_reuse_scenario(mode);
    }
    if !is_root() {
        return skip(
            NAME,
            "needs root to create a PID namespace and write ns_last_pid",
        );
    }
    let exe = std::env::current_exe().unwrap();
    for mode in ["auto", "fallback"] {
        let out = match Command::new("unshare")
            .args(["--fork", "--pid", "--mount-proc"])
            .arg(&exe)
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(REUSE_MODE, mode)
            .output()
        {
            Ok(out) => out,
            Err(e) => return skip(NAME, &format!("cannot run unshare: {e}")),
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.starts_with("unshare:") {
            return skip(NAME, &format!("no PID namespace: {}", stderr.trim()));
        }
        assert!(out.status.success(), "{mode}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("PID-REUSE-REFUSED"),
            "{mode}: {stdout}\n{stderr}"
        );
    }
}

#[test]
fn odd_command_names_do_not_hide_a_process() {
    use std::os::unix::ffi::OsStrExt;
    let dir = genward::testkit::scratch::ScratchDir::new("comm");
    // Not UTF-8, with a ')' and spaces: the fields must still be found after the last ')'.
    let link = dir.join(std::ffi::OsStr::from_bytes(b"\xff) (x y"));
    std::os::unix::fs::symlink("/bin/sleep", &link).unwrap();
    let mut child = spawn(&SpawnRequest {
        argv: vec![link.clone().into_os_string(), "1000".into()],
        ..SpawnRequest::default()
    })
    .unwrap();
    let pid = child.process.pid();
    let token = child
        .process
        .token()
        .expect("token despite the odd name")
        .to_owned();
    assert_eq!(identity::verify(pid, Some(&token), None), Verdict::Match);
    let members = genward::sys::procscan::group_members(pid).unwrap();
    assert_eq!(members, vec![pid]);
    child.process.signal(Signal::KILL).unwrap();
    wait_reap(&mut child.process);
}

/// Without a pidfd, an adopted process is known to have ended when its pid is free or
/// another's — or when it is a zombie its real parent has not reaped yet: `verify` (whose
/// pid is it?) still says match for the zombie, `verify_running` (does it still run?)
/// says mismatch, and so does the handle's look at its exit.
#[test]
fn a_zombie_taken_back_without_a_pidfd_no_longer_runs() {
    let mut child = spawn(&request_with(&["cat"], ReaperMode::Fallback)).unwrap();
    let pid = child.process.pid();
    let token = child.process.token().unwrap().to_owned();
    let Adoption::Adopted(adopted) = adopt(pid, &token, ReaperMode::Fallback) else {
        panic!("not adopted");
    };
    assert!(adopted.pidfd().is_none());
    assert_eq!(identity::verify_running(pid, Some(&token)), Verdict::Match);
    assert_eq!(adopted.exit_status_nowait().unwrap(), None);
    drop(child.stdin.take());
    // Our child here: it stays a zombie until reaped below.
    assert_eq!(wait_exit(&child.process), Exit::Code(0));
    assert_eq!(identity::verify(pid, Some(&token), None), Verdict::Match);
    assert_eq!(
        identity::verify_running(pid, Some(&token)),
        Verdict::Mismatch
    );
    assert_eq!(adopted.exit_status_nowait().unwrap(), Some(Exit::Unknown));
    wait_reap(&mut child.process);
    assert_eq!(
        identity::verify_running(pid, Some(&token)),
        Verdict::Mismatch
    );
    assert_eq!(adopted.exit_status_nowait().unwrap(), Some(Exit::Unknown));
    // What cannot be read or compared never counts as an end.
    assert_eq!(
        identity::verify_running(pid, Some("garbage")),
        Verdict::Unverifiable
    );
    assert_eq!(identity::verify_running(pid, None), Verdict::Unverifiable);
    assert_eq!(
        identity::verify_running(0, Some(&token)),
        Verdict::Unverifiable
    );
}
