//! The orphan reaper takes the zombies it is not told about, by pid, and never one that is
//! tracked, or that this process started itself (a probe's, a lookup's): the exit status
//! of such a child stays for its owner to collect.
//!
//! One test in this binary: the reaper looks at every child of the process, and another
//! test's children would be taken for orphans.

use std::process::Command;

use genward::sys::orphans::reap_orphans;
use genward::sys::process::Exit;
use genward::sys::spawn::{spawn, SpawnRequest};
use genward::sys::tree::OwnChildren;
use genward::testkit::proc;
use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};

/// Waits until `pid` (our child) has exited, leaving it a zombie.
fn wait_exited_unreaped(pid: u32) {
    let pid = Pid::from_raw(pid as i32).unwrap();
    waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
    )
    .expect("waitid")
    .expect("an exited child");
}

#[test]
fn untracked_zombies_are_reaped_and_tracked_ones_left_alone() {
    let mut tracked = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
    // Started by the daemon's own spawn (as a `command` probe is), and known to nobody
    // the reaper asks.
    let mut probe = spawn(&SpawnRequest {
        argv: ["sh", "-c", "exit 3"].map(Into::into).to_vec(),
        ..SpawnRequest::default()
    })
    .unwrap();
    let untracked: Vec<u32> = (0..3)
        .map(|_| Command::new("true").spawn().unwrap().id())
        .collect();
    wait_exited_unreaped(tracked.id());
    wait_exited_unreaped(probe.process.pid() as u32);
    for &pid in &untracked {
        wait_exited_unreaped(pid);
    }

    let mut asked = Vec::new();
    let mut own = OwnChildren::default();
    let reaped = reap_orphans(
        |pid| {
            asked.push(pid);
            pid == tracked.id() as i32
        },
        &mut own,
    )
    .unwrap();
    assert_eq!(reaped, untracked.len(), "asked about {asked:?}");
    for &pid in &untracked {
        assert!(proc::stat(pid).is_none(), "zombie {pid} left unreaped");
    }
    // Each child was asked about once.
    asked.sort_unstable();
    asked.dedup();
    assert_eq!(asked.len(), untracked.len() + 2, "asked about {asked:?}");

    // Still a zombie, and its status still ours to take.
    assert_eq!(proc::stat(tracked.id()).unwrap().state, "Z");
    assert_eq!(tracked.wait().unwrap().code(), Some(7));
    assert_eq!(probe.process.reap().unwrap(), Some(Exit::Code(3)));
}
