//! The cost of a generation's exit for the daemon: CPU time of "find and signal every
//! member of the exited leader's session, then confirm the session empty", with no other
//! processes on the host and with thousands of idle unrelated ones, the old way and the new
//! way side by side in one run.
//!
//! - **old**: what the exit path did: find the members with a scan of all of `/proc`,
//!   then [`procscan::empty_groups`] (two scans of all of `/proc`) at the end of the turn
//!   and every 20 ms until the groups are empty. The members are signalled the same way on
//!   both sides (verified pidfds, [`signal_members`]), so only the finding and the
//!   waiting differ.
//! - **new**: [`SessionWatch`]: a walk of our own subtree through the `children` files,
//!   pidfds of the members in one epoll descriptor, rescans only when they all exited or on
//!   a backed-off timer; two walks prove emptiness.
//!
//! Scenarios, each measured with 0 and with `--idle N` (default 4,000) idle `sleep`
//! processes elsewhere on the host (started by a helper that is not our descendant, and
//! ended with it):
//! - **members**: the leader (bash, job control on) leaves five members in four process
//!   groups — one a grandchild — and exits; they are killed.
//! - **alone**: the leader exits alone (the common case).
//! - **stubborn**: a member ignores SIGTERM; the CPU used while waiting 2 s for it (a
//!   generation waiting out its `kill_grace`) is reported as a share of one CPU.
//!
//! A second table shows what the new way's cost does grow with: the sessions we
//! supervise (`--sessions N`, default 500, each a `sleep` of ours), with the walk told
//! which pids lead them (`others`) and not.
//!
//! `cargo bench --bench exit_cost` (optionally `-- --idle 4000 --rounds 20 --sessions
//! 500`). Without
//! `--bench` (as `cargo test --all-targets` runs it) a quick smoke run checks both sides.
//! Needs `bash` and `sleep`.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use genward::sys::orphans;
use genward::sys::process::Process;
use genward::sys::procscan;
use genward::sys::spawn::{spawn, Child, SpawnRequest};
use genward::sys::tree::{session_walk, signal_members, Reach, SessionWatch, WatchState, Within};
use genward::testkit::wait::readable;
use rustix::process::Signal;

/// How often the old exit path looked at awaited groups.
const GROUP_CHECK: Duration = Duration::from_millis(20);
const TIMEOUT: Duration = Duration::from_secs(60);

/// CPU time (user + system) of this process so far.
fn cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; the clock id is a constant the kernel
    // knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Idle processes that are not our descendants: a helper started through an intermediate
/// that exits at once (while we are not a subreaper), so it is reparented away from us.
/// It starts `n` sleeps, says READY, and kills them when its stdin closes (also if we
/// die).
struct Crowd {
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

const CROWD: &str = r#"
i=0; pids=
while [ $i -lt $N ]; do
  sleep 1000000 </dev/null >/dev/null 2>&1 &
  pids="$pids $!"; i=$((i+1))
done
echo READY
read _ || true
kill $pids; wait
"#;

impl Crowd {
    fn start(n: usize) -> Crowd {
        let was = orphans::adopts_orphans();
        rustix::process::set_child_subreaper(None).expect("clear subreaper");
        let mut helper = Command::new("sh")
            .arg("-c")
            // An asynchronous list's stdin is /dev/null unless redirected: give it ours.
            .arg(r#"( bash -c "$CROWD" 0<&3 3<&- & ) 3<&0"#)
            .env("CROWD", CROWD)
            .env("N", n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        // Taken first: `wait` would close it, and the crowd ends when it closes.
        let mut crowd = Crowd {
            stdin: helper.stdin.take(),
            stdout: BufReader::new(helper.stdout.take().unwrap()),
        };
        assert!(helper.wait().expect("wait").success());
        if was {
            orphans::become_subreaper().expect("subreaper");
        }
        let mut line = String::new();
        crowd.stdout.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "READY", "the crowd did not start");
        let now = host_processes();
        assert!(
            now >= n,
            "only {now} processes on the host with a crowd of {n}"
        );
        crowd
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        drop(self.stdin.take());
        // EOF once the helper killed its sleeps and exited.
        let _ = self.stdout.read_to_end(&mut Vec::new());
    }
}

/// What a session leaves when its leader exits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Members,
    Alone,
    Stubborn,
}

fn script(shape: Shape) -> &'static str {
    match shape {
        Shape::Members => {
            "set -m; sleep 1000 & sleep 1000 & sh -c 'sleep 1000 & echo GRAND; exec sleep 1000' & \
             set +m; sleep 1000 & echo READY"
        }
        Shape::Alone => "echo READY",
        Shape::Stubborn => "sh -c 'trap \"\" TERM; echo READY; exec sleep 1000' &",
    }
}

/// A session whose leader has exited (and is not reaped), leaving `shape` behind.
fn session(shape: Shape) -> Child {
    let req = SpawnRequest {
        argv: ["bash", "--norc", "--noprofile", "-c", script(shape)]
            .iter()
            .map(OsString::from)
            .collect(),
        ..SpawnRequest::default()
    };
    let mut child = spawn(&req).expect("spawn");
    let stdout = child.stdout.take().unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    let deadline = Instant::now() + TIMEOUT;
    // Every member exists once these are out (the job with a grandchild says so itself).
    let ready = |out: &[u8]| {
        let out = String::from_utf8_lossy(out);
        out.contains("READY") && (shape != Shape::Members || out.contains("GRAND"))
    };
    while !ready(&out) {
        match genward::sys::fd::read_nonblocking(stdout.as_fd(), &mut buf).expect("read") {
            genward::sys::fd::ReadOutcome::Data(n) => out.extend_from_slice(&buf[..n]),
            genward::sys::fd::ReadOutcome::Eof => panic!("no READY"),
            genward::sys::fd::ReadOutcome::WouldBlock => {
                assert!(readable(stdout.as_fd(), deadline), "no READY");
            }
        }
    }
    let pidfd = child.process.pidfd().expect("pidfd");
    assert!(readable(pidfd, deadline), "the leader did not exit");
    child
}

/// Reaps the leader and the members reparented to us (not timed).
fn finish(mut child: Child) {
    let leader = child.process.pid();
    child.process.reap().expect("reap").expect("exited");
    orphans::reap_orphans(|pid| pid == leader, &mut Default::default()).expect("reap orphans");
}

/// What one side measured for one session.
#[derive(Default)]
struct Sample {
    cpu: Duration,
    wall: Duration,
    looks: u64,
}

/// One way through the exit path: the exited leader, the other session leaders we hold
/// (`others`), the signal, and (for the stubborn member) how long to wait.
type Way = fn(&Process, &[i32], Signal, Option<Duration>) -> Sample;

/// The old way: scan `/proc` for the members, then `empty_groups` now and every 20 ms.
fn old_way(leader: &Process, _others: &[i32], sig: Signal, wait: Option<Duration>) -> Sample {
    let (c0, t0) = (cpu(), Instant::now());
    let sid = leader.pid();
    let walk = session_walk(Reach::Host, sid, &[]).expect("scan");
    let members: Vec<_> = walk.session(sid).copied().collect();
    signal_members(leader, &members, Within::Session, sig).expect("signal");
    let mut pgids: Vec<i32> = members.iter().map(|m| m.pgid).collect();
    pgids.push(sid);
    pgids.sort_unstable();
    pgids.dedup();
    let mut looks = 1;
    loop {
        looks += 2;
        let empty = procscan::empty_groups(&pgids).expect("scan");
        if empty.len() == pgids.len() || wait.is_some_and(|w| t0.elapsed() >= w) {
            break;
        }
        assert!(t0.elapsed() < TIMEOUT, "the old way never saw it empty");
        std::thread::sleep(GROUP_CHECK);
    }
    Sample {
        cpu: cpu() - c0,
        wall: t0.elapsed(),
        looks,
    }
}

/// The new way: a [`SessionWatch`] signals and waits on the members' pidfds.
fn new_way(leader: &Process, others: &[i32], sig: Signal, wait: Option<Duration>) -> Sample {
    let (c0, t0) = (cpu(), Instant::now());
    let mut watch = SessionWatch::with_reach(leader, Reach::Subtree, t0);
    watch.signal(leader, others, sig, t0).expect("signal");
    loop {
        let now = Instant::now();
        if watch.poll(leader, others, now).expect("poll") == WatchState::Empty {
            break;
        }
        let end = match wait {
            Some(w) if now >= t0 + w => break,
            Some(w) => t0 + w,
            None => t0 + TIMEOUT,
        };
        assert!(now < t0 + TIMEOUT, "the new way never saw it empty");
        let until = watch.deadline().map_or(end, |d| d.min(end));
        match watch.fd() {
            Some(fd) => {
                readable(fd, until);
            }
            None => std::thread::sleep(until.saturating_duration_since(Instant::now())),
        }
    }
    Sample {
        cpu: cpu() - c0,
        wall: t0.elapsed(),
        looks: watch.walks(),
    }
}

/// Runs `rounds` sessions of `shape` through each way, the ways alternating; returns the
/// mean sample of each.
fn measure(shape: Shape, rounds: usize, ways: &[(Way, &[i32])]) -> Vec<Sample> {
    let mut sums: Vec<Sample> = ways.iter().map(|_| Sample::default()).collect();
    for _ in 0..rounds {
        for (sum, (way, others)) in sums.iter_mut().zip(ways) {
            let child = session(shape);
            let sample = match shape {
                Shape::Stubborn => {
                    let s = way(&child.process, others, Signal::TERM, Some(STUBBORN_WAIT));
                    // End it (not timed).
                    way(&child.process, others, Signal::KILL, None);
                    s
                }
                _ => way(&child.process, others, Signal::KILL, None),
            };
            finish(child);
            sum.cpu += sample.cpu;
            sum.wall += sample.wall;
            sum.looks += sample.looks;
        }
    }
    for sum in &mut sums {
        sum.cpu /= rounds as u32;
        sum.wall /= rounds as u32;
        sum.looks /= rounds as u64;
    }
    sums
}

const STUBBORN_WAIT: Duration = Duration::from_secs(2);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn name(shape: Shape) -> &'static str {
    match shape {
        Shape::Members => "5 members killed",
        Shape::Alone => "leader alone",
        Shape::Stubborn => "stubborn member, 2 s wait",
    }
}

/// One cell: CPU per exit (or, waiting, the share of one CPU), wall time, looks.
fn cell(shape: Shape, s: &Sample, looks: &str) -> String {
    if shape == Shape::Stubborn {
        let share = 100.0 * s.cpu.as_secs_f64() / s.wall.as_secs_f64();
        format!("{share:.2} % CPU ({} {looks})", s.looks)
    } else {
        format!(
            "{:.3} ms CPU, {:.1} ms wall ({} {looks})",
            ms(s.cpu),
            ms(s.wall),
            s.looks
        )
    }
}

fn ratio(a: &Sample, b: &Sample) -> f64 {
    a.cpu.as_secs_f64() / b.cpu.as_secs_f64().max(1e-9)
}

fn host_processes() -> usize {
    genward::testkit::proc::pids().len()
}

fn arg(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

/// `n` sessions of our own, each a `sleep` leading its own session, as a daemon holds.
fn sessions(n: usize) -> Vec<Child> {
    let req = SpawnRequest {
        argv: vec![OsString::from("sleep"), OsString::from("1000000")],
        ..SpawnRequest::default()
    };
    (0..n).map(|_| spawn(&req).expect("spawn")).collect()
}

fn end_sessions(all: Vec<Child>) {
    for mut child in all {
        child.process.signal(Signal::KILL).expect("kill");
        let deadline = Instant::now() + TIMEOUT;
        assert!(readable(child.process.pidfd().expect("pidfd"), deadline));
        child.process.reap().expect("reap");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let idle = arg(&args, "--idle").unwrap_or(if bench { 4000 } else { 20 });
    let rounds = arg(&args, "--rounds").unwrap_or(if bench { 20 } else { 1 });
    let supervised = arg(&args, "--sessions").unwrap_or(if bench { 500 } else { 3 });
    // As the daemon runs by default: orphans (the members whose leader exited) come to us.
    orphans::become_subreaper().expect("PR_SET_CHILD_SUBREAPER");
    let old: (Way, &[i32]) = (old_way, &[]);
    let new: (Way, &[i32]) = (new_way, &[]);
    if !bench {
        for shape in [Shape::Members, Shape::Alone] {
            let r = measure(shape, rounds, &[old, new]);
            assert!(r[0].looks >= 3 && r[1].looks >= 2);
        }
        let others = sessions(supervised);
        let pids: Vec<i32> = others.iter().map(|c| c.process.pid()).collect();
        let r = measure(Shape::Members, rounds, &[(new_way, &pids)]);
        assert!(r[0].looks >= 2);
        end_sessions(others);
        drop(Crowd::start(idle));
        println!("exit_cost bench: smoke run ok (use `cargo bench --bench exit_cost` to measure)");
        return;
    }

    println!(
        "exit cost: CPU of this process per exit, mean of {rounds} rounds per side (stubborn: \
         {} rounds), sides alternating; {} processes on the host before the crowd",
        rounds.div_ceil(10),
        host_processes()
    );
    println!();
    println!("| scenario | idle processes on the host | old: /proc scans | new: subtree walks + pidfds | old/new |");
    println!("|---|---:|---:|---:|---:|");
    let mut results = Vec::new();
    for crowd in [0, idle] {
        let _crowd = (crowd > 0).then(|| Crowd::start(crowd));
        let shown = if crowd > 0 { host_processes() } else { 0 };
        for shape in [Shape::Members, Shape::Alone, Shape::Stubborn] {
            let n = if shape == Shape::Stubborn {
                rounds.div_ceil(10)
            } else {
                rounds
            };
            let r = measure(shape, n, &[old, new]);
            println!(
                "| {} | {shown} | {} | {} | {:.0}× |",
                name(shape),
                cell(shape, &r[0], "scans"),
                cell(shape, &r[1], "walks"),
                ratio(&r[0], &r[1]),
            );
            results.push((shape, crowd, r));
        }
    }
    println!();
    for shape in [Shape::Members, Shape::Alone, Shape::Stubborn] {
        let of = |crowd| {
            &results
                .iter()
                .find(|(s, c, _)| *s == shape && *c == crowd)
                .unwrap()
                .2
        };
        let (without, with) = (of(0), of(idle));
        println!(
            "{}: with {idle} idle processes the old way costs {:.1}× its cost without, the new way {:.2}×",
            name(shape),
            ratio(&with[0], &without[0]),
            ratio(&with[1], &without[1]),
        );
    }

    // The new way's cost grows with what we supervise, not with the host: here with
    // sessions of our own, and with or without telling the walk which they are.
    let others = sessions(supervised);
    let pids: Vec<i32> = others.iter().map(|c| c.process.pid()).collect();
    println!();
    println!("| scenario | other sessions of ours | old: /proc scans | new, `others` empty | new, `others` given |");
    println!("|---|---:|---:|---:|---:|");
    for shape in [Shape::Members, Shape::Alone] {
        let r = measure(shape, rounds, &[old, new, (new_way, &pids)]);
        println!(
            "| {} | {supervised} | {} | {} | {} |",
            name(shape),
            cell(shape, &r[0], "scans"),
            cell(shape, &r[1], "walks"),
            cell(shape, &r[2], "walks"),
        );
    }
    end_sessions(others);
}
