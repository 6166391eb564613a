//! Session records damaged while no daemon ran (a truncated file, a copy under another
//! name): the next daemon never keeps a process that no session accounts for, and never
//! lets one session act on another's process.

mod util;

use std::os::fd::AsFd;
use std::time::Instant;

use serde_json::{json, Value};
use util::daemon::{Daemon, PATIENCE};
use util::recorded::{self, KillMarkedOnDrop};
use util::sys::{pidfd_of, readable};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("gen")
}

/// Sessions `a` and `b` running; the daemon killed; `edit` run on the state directory;
/// a new daemon started on it. Returns the generations and the leaders' pidfds.
fn crash_with(
    d: &mut Daemon,
    edit: impl FnOnce(&std::path::Path),
) -> [(u64, std::os::fd::OwnedFd); 2] {
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let held = ["a", "b"].map(|session| {
        let spawn = json!({"op": "spawn", "session": session, "argv": ["sleep", "1000"]});
        let gen = gen_of(&c.ok(spawn));
        (gen, pidfd_of(c.spawned_pid(gen) as i32))
    });
    d.kill();
    edit(&d.dir.join("state"));
    d.restart_wrapped(&[], &[]);
    held
}

/// A record the next daemon sets aside (truncated here) leaves its process with no
/// session: it is stopped, as anything else no session accounts for, and its descriptor
/// goes; the other session is taken back as it was.
#[test]
fn the_process_of_a_record_set_aside_is_stopped() {
    let mut d = Daemon::start("damaged-truncated", &[]);
    let state = d.dir.join("state");
    let _cleanup = KillMarkedOnDrop(recorded::dir_id(&state));
    let [(a, pa), (b, pb)] = crash_with(&mut d, |state| {
        let file = state.join("sessions").join("a.json");
        let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
        f.set_len(20).unwrap();
    });
    let mut c = d.client();
    c.err(json!({"op": "get", "session": "a"}), "no_such_session");
    assert!(
        readable(pa.as_fd(), Instant::now() + PATIENCE),
        "generation {a}'s process runs on with no session"
    );
    let got = c.ok(json!({"op": "get", "session": "b"}));
    assert_eq!(got["session"]["current"], json!(b), "{got}");
    assert!(!readable(pb.as_fd(), Instant::now()), "b's process ended");
    let gens: Vec<u64> = recorded::descriptors(&state)
        .iter()
        .map(|f| f.gen)
        .collect();
    assert_eq!(gens, [b], "descriptors left");
    c.ok(json!({"op": "shutdown"}));
}

/// A copy of `b`'s record under another name claims `b`'s running generation: it is
/// refused, and `b` keeps its process, which no request about the copy can reach.
#[test]
fn a_record_claiming_another_sessions_process_is_refused() {
    let mut d = Daemon::start("damaged-copied", &[]);
    let state = d.dir.join("state");
    let _cleanup = KillMarkedOnDrop(recorded::dir_id(&state));
    let [_, (b, pb)] = crash_with(&mut d, |state| {
        let sessions = state.join("sessions");
        let text = std::fs::read_to_string(sessions.join("b.json")).unwrap();
        let copy = text.replace(r#""name":"b""#, r#""name":"d""#);
        assert_ne!(copy, text, "the record names its session");
        // As the daemon writes its files: others' modes would have it set aside.
        let path = sessions.join("d.json");
        std::fs::write(&path, copy).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    });
    let mut c = d.client();
    c.err(json!({"op": "stop", "session": "d"}), "no_such_session");
    let got = c.ok(json!({"op": "get", "session": "b"}));
    assert_eq!(got["session"]["current"], json!(b), "{got}");
    assert_eq!(got["session"]["state"], json!("running"), "{got}");
    assert!(!readable(pb.as_fd(), Instant::now()), "b's process ended");
    c.ok(json!({"op": "shutdown"}));
}

/// The directory's `id` file damaged or removed while its processes ran: the id is taken
/// back from the generations' descriptors, so those processes are still this directory's
/// and taken back, not disowned as another directory's (reported `lost` while running
/// on, unsupervised, and started a second time by a restart policy).
#[test]
fn a_lost_directory_id_is_taken_back_from_the_descriptors() {
    for (tag, damage) in [("damaged-id", "garbage\n"), ("missing-id", "")] {
        let mut d = Daemon::start(tag, &[]);
        let state = d.dir.join("state");
        let id = recorded::dir_id(&state);
        let _cleanup = KillMarkedOnDrop(id.clone());
        let [(a, pa), (b, pb)] = crash_with(&mut d, |state| match damage {
            "" => std::fs::remove_file(state.join("id")).unwrap(),
            text => std::fs::write(state.join("id"), text).unwrap(),
        });
        let mut c = d.client();
        for (name, gen) in [("a", a), ("b", b)] {
            let got = c.ok(json!({"op": "get", "session": name}));
            assert_eq!(got["session"]["current"], json!(gen), "{tag}: {got}");
            assert_eq!(got["session"]["state"], json!("running"), "{tag}: {got}");
        }
        for fd in [&pa, &pb] {
            assert!(
                !readable(fd.as_fd(), Instant::now()),
                "{tag}: a process ended"
            );
        }
        assert_eq!(recorded::dir_id(&state), id, "{tag}: the id written again");
        c.ok(json!({"op": "shutdown"}));
    }
}
