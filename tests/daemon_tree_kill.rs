//! The rest of a generation's tree after its leader ends: a tree that keeps forking is
//! killed whole under session containment, and a member that survives SIGKILL keeps its
//! generation listed (`unkillable`) until it is gone, as a stuck leader would.

mod util;

use serde_json::json;
use util::daemon::Daemon;

/// A tree that ignores TERM and HUP and keeps forking: `LINES` lines, each process of a
/// line forks its successor and exits, never calling `setsid`, until the file named by
/// its first argument exists (so that a test that fails leaves nothing running for long).
const STORM: &str = r#"
import os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
stop = sys.argv[1]
for _ in range(int(sys.argv[2]) - 1):
    if os.fork() == 0:
        break
else:
    print("up", flush=True)
os.close(1)
os.close(2)
while not os.path.exists(stop):
    try:
        if os.fork() > 0:
            os._exit(0)
    except OSError:
        pass
"#;

/// The pids of live processes whose environment has `marker` (`GENWARD_GEN=...`).
fn marked(marker: &[u8]) -> Vec<u32> {
    genward::testkit::proc::pids()
        .into_iter()
        .filter(|&pid| genward::testkit::proc::stat(pid).is_some_and(|s| !s.is_zombie()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == marker))
        })
        .collect()
}

/// The `GENWARD_GEN=...` entry generation `gen` of daemon `d` gives its processes: read
/// from the state directory, not from a process (the leader's environment reads empty
/// while it is in `execve`).
fn marker_of(d: &Daemon, gen: u64) -> Vec<u8> {
    let id = util::recorded::dir_id(&d.dir.join("state"));
    format!("GENWARD_GEN={id}:{gen}").into_bytes()
}

/// Session containment: a tree whose processes keep forking (and never leave the
/// session) is killed whole by a stop — its members are frozen (SIGSTOP) until a walk
/// finds none that can still fork, then killed — and its generation is not released
/// while any of them lives: none is left running, marked with it, in no one's care.
#[test]
fn a_tree_that_keeps_forking_is_killed_whole_before_its_generation_is_released() {
    let d = Daemon::start("storm", &["--containment", "session"]);
    let stop_file = d.dir.path().join("storm-stop");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!(
        "python3 -c '{STORM}' {} 24 & exec sleep 1000",
        stop_file.display()
    );
    let gen = c.ok(json!({"op": "spawn", "session": "storm", "grace": "100ms",
        "kill_grace": "1s", "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.spawned_pid(gen);
    let marker = marker_of(&d, gen);
    c.output_until(gen, "up");
    assert!(
        !marked(&marker).is_empty(),
        "the storm carries {}",
        String::from_utf8_lossy(&marker)
    );
    c.ok(json!({"op": "stop", "session": "storm"}));
    c.events_until(|m| m.is("exited", gen));
    c.released("storm");
    let left = marked(&marker);
    // Whatever happened, nothing of it is left running after the test.
    std::fs::write(&stop_file, b"").unwrap();
    assert!(
        left.is_empty(),
        "processes of gen {gen} outlived its release: {left:?}"
    );
}

/// A member of the tree stuck in the kernel (a request to a FUSE server that never
/// answers) survives the SIGKILL after its leader ended: the generation is reported
/// `unkillable` after `kill_grace` and stays listed as such; once the member ends (the
/// server dies), it is released. Under both containments.
#[test]
fn a_member_that_survives_sigkill_makes_its_generation_unkillable_until_it_ends() {
    for containment in ["session", "auto"] {
        stuck_member(containment);
    }
}

fn stuck_member(containment: &str) {
    let mut mount = match util::fuse::HungMount::holding(&format!("stuck-{containment}")) {
        Ok(m) => m,
        Err(why) => {
            println!(
                "SKIP a_member_that_survives_sigkill_makes_its_generation_unkillable_until_it_ends: {why}"
            );
            return;
        }
    };
    let d = Daemon::start("stuck-member", &["--containment", containment]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let target = mount.path.join("anything");
    let script = format!(
        "stat {} >/dev/null 2>&1 & echo go; exec sleep 1000",
        target.display()
    );
    let gen = c.ok(json!({"op": "spawn", "session": "s", "grace": "300ms",
        "kill_grace": "500ms", "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "go");
    // Its request was taken: the member now waits uninterruptibly, SIGKILL included.
    mount.await_request();
    c.ok(json!({"op": "stop", "session": "s"}));
    let seen = c.events_until(|m| m.is("unkillable", gen));
    assert!(
        seen.iter().any(|m| m.is("exited", gen)),
        "{containment}: its leader's end is reported first: {seen:?}"
    );
    let got = c.ok(json!({"op": "get", "session": "s"}));
    let listed = &got["session"]["generations"];
    assert_eq!(
        listed[0]["lifecycle"], "unkillable",
        "{containment}: still listed as unkillable: {got}"
    );
    assert_eq!(listed[0]["gen"], json!(gen));
    // The server dies: the member's request fails, it dies of its SIGKILL, and the
    // generation goes.
    mount.abort();
    c.released("s");
}
