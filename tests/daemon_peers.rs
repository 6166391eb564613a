//! Peer credentials: only the daemon's own uid, root, and uids allowed with `--allow-uid`
//! may talk to it. A stranger is given CAP_DAC_OVERRIDE here so that it can reach the
//! private socket at all — what stops it is the daemon's SO_PEERCRED check.

mod util;

use std::process::Command;

use util::daemon::Daemon;

const STRANGER: &str = "65534";

/// `genward --socket S ls` run as uid 65534 (keeping only CAP_DAC_OVERRIDE), or `None`
/// when this machine cannot do that (not root, no setpriv).
fn ls_as_stranger(d: &Daemon) -> Option<std::process::Output> {
    ls_as(
        d,
        &[
            "--inh-caps",
            "+dac_override",
            "--ambient-caps",
            "+dac_override",
        ],
    )
}

/// The same as a plain uid 65534: no capability at all, file permissions apply.
fn ls_as_plain_stranger(d: &Daemon) -> Option<std::process::Output> {
    ls_as(d, &["--inh-caps", "-all", "--bounding-set", "-all"])
}

fn ls_as(d: &Daemon, caps: &[&str]) -> Option<std::process::Output> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let out = Command::new("setpriv")
        .args(["--reuid", STRANGER, "--regid", STRANGER, "--clear-groups"])
        .args(caps)
        .arg(env!("CARGO_BIN_EXE_genward"))
        .arg("--socket")
        .arg(&d.socket)
        .arg("ls")
        .output()
        .ok()?;
    // setpriv itself failing (e.g. no ambient capabilities) is not the daemon's answer.
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.starts_with("setpriv") {
        return None;
    }
    Some(out)
}

#[test]
fn a_stranger_uid_is_refused_and_an_allowed_one_admitted() {
    let d = Daemon::start("peers-refuse", &[]);
    let Some(out) = ls_as_stranger(&d) else {
        println!("SKIP a_stranger_uid_is_refused: needs root and setpriv");
        eprintln!("SKIP a_stranger_uid_is_refused: needs root and setpriv");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("uid 65534 may not use this daemon") && stderr.contains("--allow-uid"),
        "{stderr}"
    );

    let allowed = Daemon::start("peers-allow", &["--allow-uid", STRANGER]);
    let out = ls_as_stranger(&allowed).expect("worked a moment ago");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("SESSION"));
}

/// `--allow-uid` works for a uid with no privilege at all: the socket's directory lets it
/// pass and the socket lets it connect; the daemon's peer check admits it.
#[test]
fn an_allowed_uid_without_privileges_can_connect() {
    use std::os::unix::fs::PermissionsExt;
    let allowed = Daemon::start("peers-plain", &["--allow-uid", STRANGER]);
    // Where the state directory lives must be passable, as /run is (the scratch space
    // around it is private otherwise).
    let around = allowed.socket.parent().unwrap().parent().unwrap();
    std::fs::set_permissions(around, std::fs::Permissions::from_mode(0o711)).unwrap();
    let Some(out) = ls_as_plain_stranger(&allowed) else {
        println!("SKIP an_allowed_uid_without_privileges_can_connect: needs root and setpriv");
        eprintln!("SKIP an_allowed_uid_without_privileges_can_connect: needs root and setpriv");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("SESSION"));
    // A daemon started again on the same directory accepts what the first one made of it.
    let mode = std::fs::metadata(allowed.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o711);
}

/// A second daemon that is refused — by the lease of the same state directory, or by the
/// daemon listening on the same socket — leaves the running daemon's directory as it made
/// it: its allowed uids keep reaching its socket (the refused one closed the directory
/// to 0700 before it was refused).
#[test]
fn a_refused_second_daemon_leaves_the_directory_mode_alone() {
    use std::os::unix::fs::PermissionsExt;
    let first = Daemon::start("peers-second", &["--allow-uid", STRANGER]);
    let dir = first.socket.parent().unwrap().to_owned();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o711);
    // The same state directory, without --allow-uid: refused by the lease.
    let out = Command::new(env!("CARGO_BIN_EXE_genward"))
        .arg("daemon")
        .arg("--state-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another genward daemon"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        mode(&dir),
        0o711,
        "the refused daemon changed the directory's mode"
    );
    // Another state directory, the same socket: refused by the socket's listener.
    let other = first.dir.join("other-state");
    let out = Command::new(env!("CARGO_BIN_EXE_genward"))
        .arg("daemon")
        .arg("--state-dir")
        .arg(&other)
        .arg("--socket")
        .arg(&first.socket)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a daemon already listens"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        mode(&dir),
        0o711,
        "the refused daemon changed the socket directory's mode"
    );
    assert_eq!(mode(&first.socket), 0o666);
}

/// A peer that connects flat out (here the daemon's own uid, connecting and closing at
/// once; a uid that is not allowed, refused at once, costs the daemon the same) must not
/// keep the loop in its accept: a client already connected is answered while the flood
/// goes on — the flood stops only once the answers came. The listener used to be drained
/// until its queue was empty, and a queue refilled as fast as it was drained held every
/// other client (and every timer, child and signal) for as long as the flood lasted: the
/// answers never came, and the request ran out of patience.
#[test]
fn a_connection_flood_does_not_hold_the_loop() {
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    let d = Daemon::start("peers-flood", &[]);
    let mut c = d.client();
    c.request(serde_json::json!({"op": "hello"}));
    let stop = Arc::new(AtomicBool::new(false));
    let connected = Arc::new(AtomicUsize::new(0));
    let flooders: Vec<_> = (0..3)
        .map(|_| {
            let (stop, connected) = (stop.clone(), connected.clone());
            let path = d.socket.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if UnixStream::connect(&path).is_ok() {
                        connected.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // The flood is under way before the first request.
    while connected.load(Ordering::Relaxed) < 1000 {
        std::thread::yield_now();
    }
    for _ in 0..20 {
        let v = c.request(serde_json::json!({"op": "hello"}));
        assert_eq!(v["ok"], serde_json::json!(true), "{v}");
    }
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.join().unwrap();
    }
}

/// A socket whose listener accepts nothing, its queue full (a daemon stopped with
/// SIGSTOP): a daemon started on it is refused promptly, the socket left as it is,
/// instead of hanging in connect(2) while it checks whether the socket is live.
#[test]
fn a_stopped_listener_with_a_full_queue_is_a_live_one() {
    let dir = genward::testkit::scratch::ScratchDir::new("peers-stopped-listener");
    let socket = dir.join("taken.sock");
    let _full = genward::testkit::full_listener::full_listener(&socket);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_genward"));
    cmd.arg("daemon")
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--socket")
        .arg(&socket)
        .arg("--no-keeper");
    let out = util::cli::run_cmd(cmd, b"");
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("a daemon already listens") && out.stderr.contains("accepting nothing"),
        "{out:?}"
    );
    assert!(socket.exists(), "the live listener's socket was removed");
}
