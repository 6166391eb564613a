//! Process trees: a generation's whole session — job-control process groups, grandchildren,
//! double-forked members — is found by walking our own subtree, signalled member by member
//! through verified pidfds while the leader lives and after it exited (its zombie pins the
//! session id), and watched until empty; a process that left with `setsid` is reported,
//! not signalled; a stranger is never signalled.
//!
//! This test binary makes itself a child subreaper (as the daemon does), so orphans of the
//! scenarios are reparented to it rather than to init. That is process-wide, but it only
//! concerns the tests in this file (each integration test file is a binary of its own),
//! and every assertion here is about the pids and sessions a test started itself, so the
//! tests running in parallel do not disturb each other. Orphans are reaped by each test's
//! [`Cleanup`], by pidfd, never with `waitpid(-1)`.

mod util;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Once;
use std::time::{Duration, Instant};

use genward::sys::orphans::become_subreaper;
use genward::sys::process::{Exit, Process, SignalError};
use genward::sys::spawn::{spawn, Child};
use genward::sys::tree::{
    descendants, descendants_capped, foreground_group, pid_set, session_members, signal_foreground,
    signal_members, signal_tree, EscapeeLedger, Member, OwnChildren, Reach, SessionWatch, Survey,
    WatchState, Within, FIRST_RESCAN, GEN_MARKER, MAX_RESCAN,
};
use rustix::process::{pidfd_send_signal, waitid, Signal, WaitId, WaitIdOptions};
use util::sys::*;

fn subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| become_subreaper().expect("PR_SET_CHILD_SUBREAPER"));
}

/// Every process a test started, by pidfd, and what is left in its sessions (found with
/// the test kit's own `/proc` reader, not the code under test): killed and (if it was
/// reparented to us) reaped when the test ends, however it ends. The sessions' leaders are
/// unreaped until the end of their tests, so their ids still name them.
#[derive(Default)]
struct Cleanup(Vec<OwnedFd>, Vec<i32>);

impl Cleanup {
    fn track(&mut self, pid: i32) -> i32 {
        self.0.push(pidfd_of(pid));
        pid
    }

    fn session(&mut self, sid: i32) {
        self.1.push(sid);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for &sid in &self.1 {
            for pid in genward::testkit::proc::pids() {
                let in_session = |pid| {
                    genward::testkit::proc::stat(pid)
                        .is_some_and(|s| s.session == sid as u32 && !s.is_zombie())
                };
                if pid as i32 == sid || !in_session(pid) {
                    continue;
                }
                let Ok(fd) = rustix::process::pidfd_open(
                    rustix::process::Pid::from_raw(pid as i32).unwrap(),
                    rustix::process::PidfdFlags::empty(),
                ) else {
                    continue;
                };
                if in_session(pid) {
                    self.0.push(fd);
                }
            }
        }
        for fd in &self.0 {
            let _ = pidfd_send_signal(fd, Signal::KILL);
        }
        let deadline = Instant::now() + TIMEOUT;
        for fd in &self.0 {
            readable(fd.as_fd(), deadline);
            // Ours only if it was reparented to us; ECHILD otherwise.
            let _ = waitid(
                WaitId::PidFd(fd.as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            );
        }
    }
}

/// Like a job-control shell's session: jobs in process groups of their own (`set -m`), one
/// with a grandchild, a member in the leader's group, a member whose parent exited (double
/// fork, still in the session), a process that left with `setsid` (still our descendant),
/// and a daemonizing double fork + `setsid`. The leader exits when a line arrives on its
/// stdin.
const SCENARIO: &str = r#"
set -m
sh -c 'echo JOB=$$; exec sleep 1000' &
sh -c 'sh -c "echo GRAND=\$\$; exec sleep 1000" & echo MID=$$; exec sleep 1000' &
set +m
sh -c 'echo SAME=$$; exec sleep 1000' &
( sh -c 'echo DOUBLE=$$; exec sleep 1000' & )
setsid sh -c 'echo ESCAPED=$$; exec sleep 1000' &
( setsid sh -c 'echo DAEMON=$$; exec sleep 1000' & )
echo READY
read line
exit 0
"#;

const GEN: u64 = 77;

struct Scenario {
    child: Child,
    sid: i32,
    job: i32,
    mid: i32,
    grand: i32,
    same: i32,
    double: i32,
    escaped: i32,
    daemon: i32,
    cleanup: Cleanup,
}

impl Scenario {
    fn start() -> Scenario {
        subreaper();
        let mut req = request(&["bash", "--norc", "--noprofile", "-c", SCENARIO]);
        req.env
            .set
            .push((OsString::from(GEN_MARKER), OsString::from(GEN.to_string())));
        let child = spawn(&req).unwrap();
        let mut cleanup = Cleanup::default();
        let sid = child.process.pid();
        cleanup.session(sid);
        let stdout = child.stdout.as_ref().unwrap().as_fd();
        let mut out = Vec::new();
        read_until(stdout, &mut out, "READY");
        let mut n = |prefix| cleanup.track(read_number(stdout, &mut out, prefix));
        let (job, mid, grand, same) = (n("JOB="), n("MID="), n("GRAND="), n("SAME="));
        let (double, escaped, daemon) = (n("DOUBLE="), n("ESCAPED="), n("DAEMON="));
        Scenario {
            child,
            sid,
            job,
            mid,
            grand,
            same,
            double,
            escaped,
            daemon,
            cleanup,
        }
    }

    fn process(&self) -> &Process {
        &self.child.process
    }

    /// The processes that are in the leader's session (the leader aside).
    fn members(&self) -> BTreeSet<i32> {
        BTreeSet::from([self.job, self.mid, self.grand, self.same, self.double])
    }

    /// Lets the leader exit (it stays an unreaped zombie).
    fn end_leader(&self) {
        write_all(self.child.stdin.as_ref().unwrap().as_fd(), b"\n");
        assert_eq!(wait_exit(self.process()), Exit::Code(0));
    }

    fn assert_all_gone(&self, pids: &BTreeSet<i32>) {
        let deadline = Instant::now() + TIMEOUT;
        for &pid in pids {
            let fd = self.pidfd(pid);
            assert!(readable(fd.as_fd(), deadline), "{pid} survived");
        }
    }

    fn alive(&self, pid: i32) -> bool {
        !exited(self.pidfd(pid))
    }

    fn pidfd(&self, pid: i32) -> &OwnedFd {
        let all = [
            self.job,
            self.mid,
            self.grand,
            self.same,
            self.double,
            self.escaped,
            self.daemon,
        ];
        &self.cleanup.0[all.iter().position(|&p| p == pid).expect("a scenario pid")]
    }
}

fn pids(members: &[Member]) -> BTreeSet<i32> {
    members.iter().map(|m| m.pid).collect()
}

/// Polls the watch as the event loop does — when its descriptor is readable or its
/// deadline has passed — until it reports the session empty.
fn wait_empty(watch: &mut SessionWatch, leader: &Process) {
    let limit = Instant::now() + TIMEOUT;
    loop {
        let now = Instant::now();
        if watch.poll(leader, &[], now).unwrap() == WatchState::Empty {
            return;
        }
        if now >= limit {
            let left = session_members(leader.pid(), &[]).map(|(m, _)| m);
            panic!("the session did not empty: {watch:?}, left: {left:?}");
        }
        let until = watch.deadline().map_or(limit, |d| d.min(limit));
        match watch.fd() {
            Some(fd) => {
                readable(fd, until);
            }
            // Nothing watched to wake it: only its timer.
            None => std::thread::sleep(until.saturating_duration_since(Instant::now())),
        }
    }
}

#[test]
fn the_walk_finds_every_member_of_the_session_and_nothing_else() {
    let s = Scenario::start();
    let stranger = spawn(&request(&["sleep", "1000"])).unwrap();
    let (members, walk) = session_members(s.sid, &[stranger.process.pid()]).unwrap();
    assert!(walk.is_complete() && !walk.by_scan);
    assert_eq!(pids(&members), s.members());
    assert!(
        walk.members.iter().all(|m| m.pid != stranger.process.pid()),
        "another session's leader, named in `others`, is not even read"
    );

    // Job control: groups of their own inside the one session.
    let by_pid = |pid| *members.iter().find(|m| m.pid == pid).unwrap();
    assert_eq!(by_pid(s.job).pgid, s.job);
    assert_eq!(by_pid(s.mid).pgid, s.mid);
    assert_eq!(by_pid(s.grand).pgid, s.mid);
    assert_eq!(by_pid(s.grand).ppid, s.mid);
    assert_eq!(by_pid(s.same).pgid, s.sid);
    // The double-forked member's parent exited: it was reparented to us, the subreaper.
    assert_eq!(by_pid(s.double).ppid, std::process::id() as i32);

    // Both that left with `setsid` are escapees: one traced through its living parent, the
    // other (its parent gone) through the marker it inherited.
    let escapees = walk.escapees(&[s.sid, stranger.process.pid()]);
    let escaped = escapees.iter().find(|e| e.member.pid == s.escaped).unwrap();
    assert_eq!(escaped.from_sid, Some(s.sid));
    assert_eq!(escaped.marker, Some(GEN));
    let daemon = escapees.iter().find(|e| e.member.pid == s.daemon).unwrap();
    assert_eq!(daemon.from_sid, None);
    assert_eq!(daemon.marker, Some(GEN));
    assert!(escapees
        .iter()
        .all(|e| !s.members().contains(&e.member.pid) && e.member.pid != stranger.process.pid()));

    // The same members from a walk of the leader's subtree (those still below it).
    let below: BTreeSet<i32> = descendants(s.sid)
        .unwrap()
        .members
        .iter()
        .filter(|m| m.sid == s.sid)
        .map(|m| m.pid)
        .collect();
    assert_eq!(
        below,
        BTreeSet::from([s.job, s.mid, s.grand, s.same]),
        "the double-forked one is not below the leader any more"
    );
    let capped = descendants_capped(s.sid, 2).unwrap();
    assert!(capped.truncated && !capped.is_complete());
    assert_eq!(capped.members.len(), 2);

    let mut stranger = stranger;
    stranger.process.signal(Signal::KILL).unwrap();
    wait_reap(&mut stranger.process);
}

#[test]
fn the_tree_signal_kills_every_member_while_the_leader_lives_but_not_an_escapee_or_a_stranger() {
    let mut s = Scenario::start();
    let mut stranger = spawn(&request(&["sleep", "1000"])).unwrap();
    let counts = signal_tree(s.process(), &[], Signal::KILL).unwrap();
    assert_eq!(
        counts.signalled, 6,
        "five members and the leader: {counts:?}"
    );
    assert_eq!(counts.refused, 0);
    s.assert_all_gone(&s.members());
    assert_eq!(wait_reap(&mut s.child.process), by_signal(libc::SIGKILL));
    assert!(s.alive(s.escaped) && s.alive(s.daemon));
    assert_eq!(stranger.process.exit_status_nowait().unwrap(), None);

    // Reaped: the session id is no longer pinned, nothing is signalled by it.
    assert!(matches!(
        signal_tree(s.process(), &[], Signal::KILL),
        Err(SignalError::Reaped)
    ));
    stranger.process.signal(Signal::KILL).unwrap();
    wait_reap(&mut stranger.process);
}

#[test]
fn after_the_leader_exits_its_zombie_pins_the_session_and_the_watch_sees_it_empty() {
    let mut s = Scenario::start();
    s.end_leader();
    // The leader's exit left every member running: the orphans were reparented to us.
    assert!(s.members().iter().all(|&pid| s.alive(pid)));
    let (members, _) = session_members(s.sid, &[]).unwrap();
    assert_eq!(pids(&members), s.members());

    let now = Instant::now();
    let mut watch = SessionWatch::new(s.process(), now);
    let counts = watch.signal(s.process(), &[], Signal::TERM, now).unwrap();
    assert_eq!(counts.signalled, 5, "{counts:?}");
    assert_eq!(watch.watched(), 5);
    assert_eq!(watch.deadline(), Some(now + FIRST_RESCAN));
    wait_empty(&mut watch, s.process());
    s.assert_all_gone(&s.members());
    assert!(watch.is_empty() && watch.deadline().is_none());
    assert!(
        watch.walks() <= 8,
        "{} walks: the watch waits on pidfds, it does not poll",
        watch.walks()
    );

    // Escapees are handed out once each, with the generation they came from.
    let mut ledger = EscapeeLedger::default();
    let sids = pid_set([s.sid]);
    let survey = Survey::take(
        Reach::Subtree,
        &sids,
        &pid_set([]),
        &mut OwnChildren::default(),
    )
    .unwrap();
    let escapees = ledger.new_in(survey.walk(), &sids);
    for pid in [s.escaped, s.daemon] {
        let e = escapees.iter().find(|e| e.member.pid == pid).unwrap();
        assert_eq!(e.marker, Some(GEN), "{e:?}");
        assert_ne!(e.member.sid, s.sid);
    }
    assert!(ledger.new_in(survey.walk(), &sids).is_empty());
    assert!(s.alive(s.escaped) && s.alive(s.daemon));

    wait_reap(&mut s.child.process);
    assert!(matches!(
        watch.signal(s.process(), &[], Signal::KILL, Instant::now()),
        Err(SignalError::Reaped)
    ));
}

#[test]
fn an_empty_session_costs_two_walks_and_no_timer() {
    subreaper();
    let mut child = spawn(&request(&["true"])).unwrap();
    wait_exit(&child.process);
    let now = Instant::now();
    let mut watch = SessionWatch::new(&child.process, now);
    let counts = watch
        .signal(&child.process, &[], Signal::TERM, now)
        .unwrap();
    assert_eq!(counts.signalled, 0);
    assert_eq!(watch.walks(), 2);
    assert_eq!(watch.deadline(), None);
    assert_eq!(
        watch.poll(&child.process, &[], now).unwrap(),
        WatchState::Empty
    );
    assert_eq!(watch.walks(), 2);
    wait_reap(&mut child.process);
}

#[test]
fn the_watch_backs_off_and_signals_members_forked_after_the_signal() {
    subreaper();
    // A member that answers SIGTERM by starting another member, and keeps running.
    let script = r#"
        bash -c 'trap "sh -c \"echo NEW=\\\$\\\$; exec sleep 1000\" &" TERM
                 sleep 1000 & echo STUBBORN=$$
                 while :; do wait $!; sleep 1000 & done' &
        echo READY
        read line
    "#;
    let mut child = spawn(&request(&["bash", "--norc", "--noprofile", "-c", script])).unwrap();
    let mut cleanup = Cleanup::default();
    cleanup.session(child.process.pid());
    let stdout = child.stdout.take().unwrap();
    let mut out = Vec::new();
    read_until(stdout.as_fd(), &mut out, "READY");
    cleanup.track(read_number(stdout.as_fd(), &mut out, "STUBBORN="));
    write_all(child.stdin.as_ref().unwrap().as_fd(), b"\n");
    wait_exit(&child.process);

    let t0 = Instant::now();
    let mut watch = SessionWatch::new(&child.process, t0);
    let counts = watch.signal(&child.process, &[], Signal::TERM, t0).unwrap();
    assert_eq!(
        counts.signalled, 2,
        "the stubborn shell and its sleep: {counts:?}"
    );
    let new = cleanup.track(read_number(stdout.as_fd(), &mut out, "NEW="));
    let new_fd = pidfd_of(new);

    // Not due: no walk, whatever the time says, until the deadline.
    let walks = watch.walks();
    let first = watch.deadline().unwrap();
    assert_eq!(first, t0 + FIRST_RESCAN);
    let early = first - Duration::from_millis(1);
    assert_eq!(
        watch.poll(&child.process, &[], early).unwrap(),
        WatchState::Waiting
    );
    // (The sleep's exit may have made the descriptor readable: that alone walks only when
    // no watched member is left, and the stubborn shell still runs.)
    assert_eq!(watch.walks(), walks);

    // Due: the walk finds the newcomer and sends it the last signal, SIGTERM.
    assert_eq!(
        watch.poll(&child.process, &[], first).unwrap(),
        WatchState::Waiting
    );
    assert_eq!(watch.walks(), walks + 1);
    assert!(
        readable(new_fd.as_fd(), Instant::now() + TIMEOUT),
        "the member forked after the signal did not get it"
    );

    // The delay doubles up to its cap.
    let mut at = first;
    let mut delays = Vec::new();
    for _ in 0..8 {
        let next = watch.deadline().unwrap();
        delays.push(next - at);
        at = next;
        watch.poll(&child.process, &[], at).unwrap();
    }
    assert_eq!(delays[0], FIRST_RESCAN * 2);
    assert_eq!(delays[1], FIRST_RESCAN * 4);
    assert_eq!(*delays.last().unwrap(), MAX_RESCAN);
    assert!(delays.windows(2).all(|w| w[0] <= w[1]));
    assert!(exited(&new_fd) && !exited(cleanup.0.first().unwrap()));

    // SIGKILL ends it; its own pidfd wakes the watch, which confirms the session empty.
    watch
        .signal(&child.process, &[], Signal::KILL, Instant::now())
        .unwrap();
    wait_empty(&mut watch, &child.process);
    assert!(exited(cleanup.0.first().unwrap()));
    wait_reap(&mut child.process);
}

#[test]
fn a_record_that_no_longer_names_the_member_is_never_signalled() {
    subreaper();
    let mut leader = spawn(&request(&[
        "sh",
        "-c",
        "sh -c 'echo MEMBER=$$; exec sleep 1000' & read line",
    ]))
    .unwrap();
    let mut stranger = spawn(&request(&["sleep", "1000"])).unwrap();
    let mut cleanup = Cleanup::default();
    cleanup.session(leader.process.pid());
    let stdout = leader.stdout.take().unwrap();
    let member = cleanup.track(read_number(stdout.as_fd(), &mut Vec::new(), "MEMBER="));
    let (members, _) = session_members(leader.process.pid(), &[]).unwrap();
    let real = *members.iter().find(|m| m.pid == member).unwrap();

    // A record naming the stranger's pid as a member (as if the member's pid had been
    // recycled by it): the stranger's session is not the leader's.
    let stranger_now = genward::sys::tree::read_member(stranger.process.pid())
        .unwrap()
        .unwrap();
    let forged = Member {
        sid: leader.process.pid(),
        ..stranger_now
    };
    let counts = signal_members(&leader.process, &[forged], Within::Session, Signal::KILL).unwrap();
    assert_eq!((counts.signalled, counts.refused), (0, 1));
    // The member's pid with another start time: another process than the one recorded.
    let older = Member {
        starttime: real.starttime + 1,
        ..real
    };
    let counts = signal_members(&leader.process, &[older], Within::Session, Signal::KILL).unwrap();
    assert_eq!((counts.signalled, counts.gone), (0, 1));
    // In another group than the one asked for.
    let counts = signal_members(
        &leader.process,
        &[real],
        Within::Group(real.pgid + 1),
        Signal::KILL,
    )
    .unwrap();
    assert_eq!((counts.signalled, counts.refused), (0, 1));
    assert_eq!(stranger.process.exit_status_nowait().unwrap(), None);
    assert!(!exited(cleanup.0.first().unwrap()));

    // The record as it is: signalled.
    let counts = signal_members(&leader.process, &[real], Within::Session, Signal::KILL).unwrap();
    assert_eq!(counts.signalled, 1);
    assert!(readable(
        cleanup.0.first().unwrap().as_fd(),
        Instant::now() + TIMEOUT
    ));
    // Gone since: counted as such.
    let counts = signal_members(&leader.process, &[real], Within::Session, Signal::KILL).unwrap();
    assert_eq!((counts.signalled, counts.gone), (0, 1));

    for p in [&mut leader.process, &mut stranger.process] {
        p.signal(Signal::KILL).unwrap();
        wait_reap(p);
    }
    assert!(matches!(
        signal_members(&leader.process, &[real], Within::Session, Signal::KILL),
        Err(SignalError::Reaped)
    ));
}

#[test]
fn an_interactive_shells_background_job_is_found_and_killed_after_the_shell_exits() {
    subreaper();
    let mut req = pty_request(
        &["bash", "--norc", "--noprofile", "--noediting", "-i"],
        24,
        80,
    );
    // No prompt, and markers on lines of their own: the input we type is echoed and may
    // meet the shell's output on one line.
    req.env.set.push(("PS1".into(), "".into()));
    let mut child = spawn(&req).unwrap();
    let mut cleanup = Cleanup::default();
    cleanup.session(child.process.pid());
    let master = child.pty.take().unwrap();
    let mut out = Vec::new();
    write_all(master.as_fd(), b"sleep 1001 & printf '\\nBG=%s\\n' $!\n");
    let bg = cleanup.track(read_number(master.as_fd(), &mut out, "BG="));
    write_all(
        master.as_fd(),
        b"sh -c 'printf \"\\nFG=%s\\n\" $$; exec sleep 1002'; echo BACK-$((1+1))\n",
    );
    let fg = cleanup.track(read_number(master.as_fd(), &mut out, "FG="));

    // The job in the foreground has a process group of its own, and it alone gets a
    // foreground signal.
    assert_eq!(foreground_group(master.as_fd()).unwrap(), Some(fg));
    let counts = signal_foreground(&child.process, master.as_fd(), &[], Signal::KILL).unwrap();
    assert_eq!(counts.signalled, 1, "{counts:?}");
    assert!(readable(cleanup.0[1].as_fd(), Instant::now() + TIMEOUT));
    read_until(master.as_fd(), &mut out, "BACK-2");
    assert!(
        !exited(&cleanup.0[0]),
        "the background job is not in the foreground"
    );
    // Back at the prompt the shell's own group is the foreground one: the leader is
    // signalled through its own handle (SIGWINCH: harmless to bash).
    assert_eq!(
        foreground_group(master.as_fd()).unwrap(),
        Some(child.process.pid())
    );
    let counts = signal_foreground(&child.process, master.as_fd(), &[], Signal::WINCH).unwrap();
    assert_eq!(counts.signalled, 1, "{counts:?}");

    // The reported bug: the shell exits, its background job keeps running.
    write_all(master.as_fd(), b"exit\n");
    assert_eq!(wait_exit(&child.process), Exit::Code(0));
    assert!(
        !exited(&cleanup.0[0]),
        "the background job outlived the shell"
    );
    // Its zombie pins the session: the job is found and killed.
    let (members, _) = session_members(child.process.pid(), &[]).unwrap();
    assert_eq!(pids(&members), BTreeSet::from([bg]));
    let now = Instant::now();
    let mut watch = SessionWatch::new(&child.process, now);
    let counts = watch
        .signal(&child.process, &[], Signal::KILL, now)
        .unwrap();
    assert_eq!(counts.signalled, 1);
    wait_empty(&mut watch, &child.process);
    assert!(exited(&cleanup.0[0]));
    wait_reap(&mut child.process);
}

#[test]
fn a_stopped_member_is_continued_after_the_stop_signal_so_its_handler_runs() {
    subreaper();
    // The member waits in `read` on the leader's stdin (our pipe, never written), with no
    // child of its own: a child forked by a shell with a TERM trap would carry the trap's
    // handler until its exec, and a SIGTERM landing in between would be lost in it.
    // (Through descriptor 3: an asynchronous command's stdin is /dev/null.)
    let script = r#"
        exec 3<&0
        sh -c 'trap "exit 0" TERM; echo HANDLER=$$; read x <&3' &
    "#;
    let mut child = spawn(&request(&["bash", "--norc", "--noprofile", "-c", script])).unwrap();
    let mut cleanup = Cleanup::default();
    cleanup.session(child.process.pid());
    let stdout = child.stdout.take().unwrap();
    let handler = cleanup.track(read_number(stdout.as_fd(), &mut Vec::new(), "HANDLER="));
    wait_exit(&child.process);

    // Reparented to us: we can wait for it to stop (job control's Ctrl-Z, in effect).
    let fd = &cleanup.0[0];
    pidfd_send_signal(fd, Signal::STOP).unwrap();
    waitid(
        WaitId::PidFd(fd.as_fd()),
        WaitIdOptions::STOPPED | WaitIdOptions::NOWAIT,
    )
    .unwrap()
    .expect("stopped");
    let stat = genward::testkit::proc::stat(handler as u32).unwrap();
    assert_eq!(stat.state, "T");

    // SIGTERM alone would wait in the stopped shell; SIGCONT after it lets the trap run.
    let now = Instant::now();
    let mut watch = SessionWatch::new(&child.process, now);
    watch
        .signal(&child.process, &[], Signal::TERM, now)
        .unwrap();
    // A shell may restart a `read` its trapped signal interrupted and run the trap only
    // once the read returns: a line lets it return — a member left stopped reads nothing.
    // (A member that already ran its trap and exited leaves no reader: the write fails.)
    let stdin = child.stdin.take().expect("the leader's stdin");
    let _ = rustix::io::write(&stdin, b"\n");
    wait_empty(&mut watch, &child.process);
    assert!(exited(fd));
    let status = waitid(WaitId::PidFd(fd.as_fd()), WaitIdOptions::EXITED)
        .unwrap()
        .unwrap();
    assert_eq!(status.exit_status(), Some(0), "the TERM trap ran");
    wait_reap(&mut child.process);
}
