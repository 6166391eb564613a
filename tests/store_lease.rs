//! The lease: one holder per state directory, whoever races for it (threads or processes);
//! a live holder is named, a verifiably gone one is taken over, one that cannot be
//! verified never is.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};

use genward::store::lease::{decode_holder, encode_holder, Holder, Lease, LeaseError, LEASE_FILE};
use genward::sys::identity::{self, Observed};
use genward::testkit::scratch::ScratchDir;
use rustix::fs::{flock, FlockOperation};

/// Set in a re-executed copy of this test binary: take the lease on this directory,
/// print the outcome on one line, and hold it until stdin closes.
const CHILD_ENV: &str = "GENWARD_TEST_LEASE_DIR";

/// One test at a time: a child forked by one test holds copies of every descriptor of the
/// process until it execs, locks included, which would make another test's lock look
/// held (the very case a stale lease's takeover is for).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn my_token() -> String {
    match identity::observe(std::process::id() as i32, None) {
        Observed::Token(t) => t,
        other => panic!("cannot read our own identity: {other:?}"),
    }
}

/// Holds the lock on `dir`'s lease file through a descriptor of our own, as a process
/// that inherited a dead daemon's descriptor would, after writing `record` into it.
fn hold_with_record(dir: &Path, record: &[u8]) -> File {
    let path = dir.join(LEASE_FILE);
    std::fs::write(&path, record).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let file = File::open(&path).unwrap();
    flock(&file, FlockOperation::NonBlockingLockExclusive).unwrap();
    file
}

#[test]
fn racing_threads_leave_exactly_one_holder() {
    let _serial = serial();
    let dir = ScratchDir::new("lease-threads");
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let results: Vec<Result<Lease, LeaseError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let barrier = barrier.clone();
                let dir = dir.path();
                s.spawn(move || {
                    barrier.wait();
                    Lease::acquire(dir)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e, LeaseError::Held { verified: true, .. }), "{e}");
        }
    }
}

/// The child side of [`racing_processes_leave_exactly_one_holder`].
#[test]
fn lease_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    match Lease::acquire(Path::new(&dir)) {
        Ok(lease) => {
            println!("\nlease: won {}", std::process::id());
            let mut rest = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut rest);
            drop(lease);
        }
        Err(e) => println!("\nlease: refused {e}"),
    }
}

#[test]
fn racing_processes_leave_exactly_one_holder() {
    let _serial = serial();
    let dir = ScratchDir::new("lease-procs");
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..6)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "lease_child", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, dir.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut outcomes = Vec::new();
    let mut outputs = Vec::new();
    for child in &mut children {
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert_ne!(
                out.read_line(&mut line).unwrap(),
                0,
                "the child said nothing"
            );
            if let Some(outcome) = line.strip_prefix("lease: ") {
                outcomes.push(outcome.trim().to_owned());
                break;
            }
        }
        outputs.push(out);
    }
    let winners: Vec<&String> = outcomes.iter().filter(|o| o.starts_with("won ")).collect();
    assert_eq!(winners.len(), 1, "{outcomes:#?}");
    let winner_pid = winners[0].trim_start_matches("won ");
    for o in outcomes.iter().filter(|o| o.starts_with("refused ")) {
        let named = format!("another genward daemon (pid {winner_pid}, holding it for ");
        assert!(o.contains(&named), "{o}");
    }
    for (mut child, mut out) in children.into_iter().zip(outputs) {
        drop(child.stdin.take());
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        assert!(child.wait().unwrap().success(), "{rest}");
    }
    // The winner is gone: the lease is free again.
    Lease::acquire(&dir).unwrap();
}

#[test]
fn a_lease_whose_holder_is_gone_is_taken_over() {
    let _serial = serial();
    let dir = ScratchDir::new("lease-stale");
    // A holder that exited: its pid is free.
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let token = my_token();
    for stale in [
        Holder {
            pid: gone_pid,
            identity: Some(token.clone()),
            since_unix_ms: Some(1),
            pid_ns: None,
        },
        // Our own pid, but another process's start time: the pid was reused.
        Holder {
            pid: std::process::id(),
            identity: Some(format!(
                "{}999999999",
                token.trim_end_matches(char::is_numeric)
            )),
            since_unix_ms: Some(1),
            pid_ns: None,
        },
    ] {
        let inherited = hold_with_record(&dir, &encode_holder(&stale));
        let old_inode = inherited.metadata().unwrap().ino();
        let lease = Lease::acquire(&dir).unwrap_or_else(|e| panic!("{stale:?}: {e}"));
        let path = dir.join(LEASE_FILE);
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), old_inode);
        let record = decode_holder(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(record.pid, std::process::id());
        assert_eq!(record.identity.as_deref(), Some(token.as_str()));
        // The new holder is live and named.
        assert!(matches!(
            Lease::acquire(&dir),
            Err(LeaseError::Held { verified: true, .. })
        ));
        drop(lease);
        drop(inherited);
    }
}

#[test]
fn a_holder_of_another_pid_namespace_is_never_taken_over() {
    let _serial = serial();
    let dir = ScratchDir::new("lease-pidns");
    let ours = identity::pid_namespace().unwrap();
    // Its pid is free here, and would be taken over if it were ours: in its own
    // namespace it may well be a live daemon.
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let foreign = Holder {
        pid: gone_pid,
        identity: Some(my_token()),
        since_unix_ms: Some(1),
        pid_ns: Some(ours + 1),
    };
    let held = hold_with_record(&dir, &encode_holder(&foreign));
    let inode = held.metadata().unwrap().ino();
    let e = Lease::acquire(&dir).unwrap_err();
    assert!(
        matches!(&e, LeaseError::Foreign { holder } if holder.pid == gone_pid),
        "{e:?}"
    );
    assert!(e.to_string().contains("another PID namespace"), "{e}");
    assert_eq!(
        std::fs::metadata(dir.join(LEASE_FILE)).unwrap().ino(),
        inode
    );
    drop(held);
    // The same record from our own namespace is a stale lease, taken over.
    let ours_too = Holder {
        pid_ns: Some(ours),
        ..foreign
    };
    let held = hold_with_record(&dir, &encode_holder(&ours_too));
    let lease = Lease::acquire(&dir).unwrap();
    let record = decode_holder(&std::fs::read(dir.join(LEASE_FILE)).unwrap()).unwrap();
    assert_eq!(record.pid, std::process::id());
    assert_eq!(record.pid_ns, Some(ours));
    drop(lease);
    drop(held);
}

#[test]
fn a_holder_that_cannot_be_verified_is_never_taken_over() {
    let _serial = serial();
    let dir = ScratchDir::new("lease-unverifiable");
    for record in [
        encode_holder(&Holder {
            pid: 1,
            identity: None,
            since_unix_ms: None,
            pid_ns: None,
        }),
        // An older daemon's record: its pid alone.
        b"1\n".to_vec(),
        // No record at all.
        Vec::new(),
        b"garbage".to_vec(),
    ] {
        let held = hold_with_record(&dir, &record);
        let e = Lease::acquire(&dir).unwrap_err();
        assert!(
            matches!(
                e,
                LeaseError::Held {
                    verified: false,
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.starts_with("the lease is held"), "{text}");
        assert!(text.ends_with("not taking it over"), "{text}");
        drop(held);
        // Once the lock is free, the record does not matter.
        drop(Lease::acquire(&dir).unwrap());
    }
}

#[test]
fn a_lease_that_is_not_a_file_of_ours_is_replaced_without_following_it() {
    let _serial = serial();
    let dir = ScratchDir::new("lease-symlink");
    let target = dir.join("target");
    std::fs::write(&target, b"keep me").unwrap();
    std::os::unix::fs::symlink(&target, dir.join(LEASE_FILE)).unwrap();
    let lease = Lease::acquire(&dir).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    let meta = std::fs::symlink_metadata(dir.join(LEASE_FILE)).unwrap();
    assert!(meta.file_type().is_file());
    drop(lease);
}
