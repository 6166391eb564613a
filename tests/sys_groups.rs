//! Process groups: a stop reaches grandchildren (escalating to SIGKILL for one that ignores
//! SIGTERM) while the zombie leader pins the group; a grandchild that leaves the group
//! with `setsid` is found through the output pipe it still holds. An adopted leader's group
//! is reached through its pidfd, or member by member.

mod util;

use std::os::fd::AsFd;
use std::time::Instant;

use genward::sys::fd::{read_nonblocking, ReadOutcome};
use genward::sys::process::{Exit, SignalError};
use genward::sys::procscan::holders_of;
use genward::sys::spawn::spawn;
use rustix::process::Signal;
use util::sys::*;

#[test]
fn stop_reaches_grandchildren_and_escalates_to_sigkill() {
    let script = r#"
        sh -c 'trap "" TERM; echo STUBBORN=$$; exec sleep 1000' &
        sh -c 'echo POLITE=$$; exec sleep 1000' &
        wait
    "#;
    let mut child = spawn(&request(&["sh", "-c", script])).unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut out = Vec::new();
    let stubborn = pidfd_of(read_number(stdout.as_fd(), &mut out, "STUBBORN="));
    let polite = pidfd_of(read_number(stdout.as_fd(), &mut out, "POLITE="));
    let deadline = Instant::now() + TIMEOUT;

    // Graceful stop: the leader and the polite grandchild go, the stubborn one stays.
    child.process.signal_group(Signal::TERM).unwrap();
    assert_eq!(wait_exit(&child.process), by_signal(libc::SIGTERM));
    assert!(
        readable(polite.as_fd(), deadline),
        "polite grandchild survived SIGTERM"
    );
    assert!(!exited(&stubborn));
    assert!(!child.process.is_group_empty().unwrap());

    // The leader is a zombie we have not reaped: its pgid is still ours to signal.
    child.process.signal_group(Signal::KILL).unwrap();
    assert!(
        readable(stubborn.as_fd(), deadline),
        "SIGKILL did not reach the grandchild"
    );
    assert!(child.process.is_group_empty().unwrap());

    // Reaped: no group signal any more, the pgid may be recycled.
    child.process.reap().unwrap().unwrap();
    assert!(matches!(
        child.process.signal_group(Signal::KILL),
        Err(SignalError::Reaped)
    ));
    assert!(matches!(
        child.process.signal(Signal::KILL),
        Err(SignalError::Reaped)
    ));
}

#[test]
fn daemonizing_grandchild_is_reported_through_the_pipe_it_holds() {
    // Double fork + setsid: the grandchild leaves our group (no group signal reaches it)
    // but keeps our stdout pipe. It is found, not missed.
    let script = r#"( setsid sh -c 'echo DAEMON=$$; exec sleep 1000' & ); echo LEADER-DONE"#;
    let mut child = spawn(&request(&["sh", "-c", script])).unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut out = Vec::new();
    read_until(stdout.as_fd(), &mut out, "LEADER-DONE");
    let daemon_pid = read_number(stdout.as_fd(), &mut out, "DAEMON=");
    let daemon = pidfd_of(daemon_pid);

    assert_eq!(wait_exit(&child.process), Exit::Code(0));
    child.process.signal_group(Signal::KILL).unwrap();
    // The group is empty (the daemon left it) ...
    assert!(child.process.is_group_empty().unwrap());
    child.process.reap().unwrap();
    assert!(!exited(&daemon), "the escaped daemon is not in the group");
    // ... yet the output pipe does not reach EOF: it is still held, and by whom is known.
    let mut buf = [0u8; 64];
    assert_eq!(
        read_nonblocking(stdout.as_fd(), &mut buf).unwrap(),
        ReadOutcome::WouldBlock
    );
    // (A child another test is starting meanwhile may hold a copy for an instant, between
    // its clone and its closing of what it inherited: the daemon must be among them.)
    let holders = holders_of(stdout.as_fd()).unwrap();
    assert!(holders.contains(&daemon_pid), "{holders:?}");

    rustix::process::pidfd_send_signal(&daemon, Signal::KILL).unwrap();
    assert!(readable(daemon.as_fd(), Instant::now() + TIMEOUT));
    assert!(read_to_eof(stdout.as_fd()).is_empty());
}

#[test]
fn adopted_leader_group_is_signalled_member_by_member() {
    use genward::sys::identity::{adopt, Adoption};
    use genward::sys::process::ReaperMode;
    let script = r#"
        sh -c 'echo ONE=$$; exec sleep 1000' &
        sh -c 'echo TWO=$$; exec sleep 1000' &
        wait
    "#;
    let mut child = spawn(&request(&["sh", "-c", script])).unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut out = Vec::new();
    let one = pidfd_of(read_number(stdout.as_fd(), &mut out, "ONE="));
    let two = pidfd_of(read_number(stdout.as_fd(), &mut out, "TWO="));
    let token = child.process.token().unwrap().to_owned();
    let Adoption::Adopted(adopted) = adopt(child.process.pid(), &token, ReaperMode::Auto) else {
        panic!("not adopted");
    };
    assert!(matches!(
        adopted.signal_group(Signal::TERM),
        Err(SignalError::GroupNotPinned)
    ));
    assert_eq!(adopted.signal_group_members(Signal::TERM).unwrap(), 3);
    let deadline = Instant::now() + TIMEOUT;
    assert!(readable(one.as_fd(), deadline));
    assert!(readable(two.as_fd(), deadline));
    assert_eq!(wait_reap(&mut child.process), by_signal(libc::SIGTERM));
    // The leader is gone: nothing can vouch for its pgid any more.
    assert!(adopted.signal_group_members(Signal::TERM).is_err());
}

#[test]
fn adopted_leader_group_is_signalled_through_its_pidfd_while_it_runs() {
    use genward::sys::identity::{adopt, Adoption};
    use genward::sys::process::ReaperMode;
    let script = r#"
        sh -c 'echo ONE=$$; exec sleep 1000' &
        sh -c 'echo TWO=$$; exec sleep 1000' &
        wait
    "#;
    let mut child = spawn(&request(&["sh", "-c", script])).unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut out = Vec::new();
    let one = pidfd_of(read_number(stdout.as_fd(), &mut out, "ONE="));
    let two = pidfd_of(read_number(stdout.as_fd(), &mut out, "TWO="));
    let token = child.process.token().unwrap().to_owned();
    let Adoption::Adopted(adopted) = adopt(child.process.pid(), &token, ReaperMode::Auto) else {
        panic!("not adopted");
    };
    adopted.signal_adopted_group(Signal::TERM).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    assert!(readable(one.as_fd(), deadline));
    assert!(readable(two.as_fd(), deadline));
    assert_eq!(wait_reap(&mut child.process), by_signal(libc::SIGTERM));
    // The leader is gone: its group is signalled no more.
    assert!(matches!(
        adopted.signal_adopted_group(Signal::TERM),
        Err(SignalError::Exited)
    ));
}
