//! Spawn cost: spawns per second of `/bin/true` through `genward::sys::spawn` versus
//! `std::process::Command`, in one run, each spawn waited for and reaped before the next.
//! Ours goes the way the event loop does: `start`, wait for the status pipe, `poll`,
//! `finish`.
//!
//! Where this process may create cgroup-v2 cgroups (root, cgroup v2 mounted), the same
//! spawn into a cgroup too, side by side: each spawn in a fresh generation cgroup (made,
//! entered, emptied, removed, as the daemon does), once with `clone3(CLONE_INTO_CGROUP)`
//! (where the kernel has it) and once with the child writing itself into `cgroup.procs`;
//! and `clone3` into one cgroup made once, for the cost of the entry alone.
//!
//! `cargo bench --bench spawn` (optionally `-- <seconds per side>`, default 5).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genward::sys::cgroup::{CgroupDir, CgroupRoot, GenCgroup, Placement};
use genward::sys::process::ReaperMode;
use genward::sys::spawn::{
    cgroup_entry, start, start_in_via, CgroupEntry, IoMode, SpawnRequest, Starting, StderrMode,
};
use rustix::event::{poll, PollFd, PollFlags};

fn ours(req: &SpawnRequest) {
    run(start(req).expect("start"));
}

/// One spawn into `dir` by way of `entry`.
fn ours_in(req: &SpawnRequest, dir: &CgroupDir, entry: CgroupEntry) {
    run(start_in_via(req, dir, entry).expect("start"));
}

/// One spawn in a fresh generation cgroup, removed once empty.
fn ours_in_fresh(req: &SpawnRequest, root: &CgroupRoot, gen: &mut u64, entry: CgroupEntry) {
    *gen += 1;
    let mut cg: GenCgroup = root.create_generation(*gen).expect("create cgroup");
    ours_in(req, &cg.open_dir().unwrap(), entry);
    // The leader has been reaped; wait (on cgroup.events) in case the kernel has not
    // noted the cgroup empty yet.
    while cg.is_populated().expect("cgroup.events") {
        let events = cg.events_fd();
        let mut fds = [PollFd::new(&events, PollFlags::PRI)];
        poll(&mut fds, None).expect("poll");
    }
    cg.remove().expect("remove cgroup");
}

fn run(mut starting: Starting) {
    while !starting.poll() {
        let fd = starting.status_fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        poll(&mut fds, None).expect("poll");
    }
    let mut child = starting.finish().expect("exec");
    let fd = child.process.pidfd().expect("pidfd");
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    while poll(&mut fds, None).expect("poll") == 0 {}
    child.process.reap().expect("reap").expect("exited");
    drop(child.stdin.take());
    let _ = child.stdout.as_ref().map(|fd| fd.as_fd());
}

fn std_command() {
    let status = Command::new("/bin/true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .status()
        .expect("spawn");
    assert!(status.success());
}

/// Runs `f` for about `budget`, returns spawns per second.
fn rate(budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..20 {
        f(); // warm up
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let req = SpawnRequest {
        argv: vec![OsString::from("/bin/true")],
        io: IoMode::Pipes {
            stderr: StderrMode::Pipe,
        },
        reaper: ReaperMode::Auto,
        ..SpawnRequest::default()
    };
    // `cargo test --all-targets` runs this binary without `--bench`: check that both sides
    // work, quickly, instead of measuring.
    if !args.iter().any(|a| a == "--bench") {
        let cgroups = cgroup_root();
        let mut gen = 0;
        for _ in 0..10 {
            ours(&req);
            std_command();
            if let Some((root, same)) = &cgroups {
                let same_dir = same.open_dir().expect("open cgroup");
                ours_in_fresh(&req, root, &mut gen, CgroupEntry::ChildWritesProcs);
                if cgroup_entry() == CgroupEntry::CloneIntoCgroup {
                    ours_in_fresh(&req, root, &mut gen, CgroupEntry::CloneIntoCgroup);
                    ours_in(&req, &same_dir, CgroupEntry::CloneIntoCgroup);
                }
            }
        }
        println!("spawn bench: smoke run ok (use `cargo bench --bench spawn` to measure)");
        return;
    }
    let secs: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5);
    let budget = Duration::from_secs(secs);
    let cgroups = cgroup_root();
    // Interleave short rounds so drift in machine load affects every side alike; report
    // the median round of each side.
    const ROUNDS: u32 = 9;
    let mut genward = Vec::new();
    let mut std = Vec::new();
    let mut clone3_fresh = Vec::new();
    let mut procs_fresh = Vec::new();
    let mut clone3_same = Vec::new();
    let clone3 = cgroup_entry() == CgroupEntry::CloneIntoCgroup;
    let mut gen = 0;
    for _ in 0..ROUNDS {
        genward.push(rate(budget / ROUNDS, || ours(&req)));
        std.push(rate(budget / ROUNDS, std_command));
        if let Some((root, same)) = &cgroups {
            let same_dir = same.open_dir().expect("open cgroup");
            let entry = CgroupEntry::ChildWritesProcs;
            procs_fresh.push(rate(budget / ROUNDS, || {
                ours_in_fresh(&req, root, &mut gen, entry)
            }));
            if clone3 {
                let entry = CgroupEntry::CloneIntoCgroup;
                clone3_fresh.push(rate(budget / ROUNDS, || {
                    ours_in_fresh(&req, root, &mut gen, entry)
                }));
                clone3_same.push(rate(budget / ROUNDS, || ours_in(&req, &same_dir, entry)));
            }
        }
    }
    let g = median(&mut genward);
    let s = median(&mut std);
    println!("spawn /bin/true, three pipes, wait + reap, {secs} s per side in {ROUNDS} rounds");
    println!("genward::sys::spawn::start        {g:>6.0} spawns/s (median round)");
    println!("std::process::Command             {s:>6.0} spawns/s (median round)");
    println!("ratio genward/std                 {:>6.2}", g / s);
    match &cgroups {
        None => println!("into a cgroup: not measured (no writable cgroup v2 here)"),
        Some(_) => {
            if clone3 {
                let f = median(&mut clone3_fresh);
                let o = median(&mut clone3_same);
                println!(
                    "clone3, a fresh cgroup each       {f:>6.0} spawns/s (ratio to start {:.2})",
                    f / g
                );
                println!(
                    "clone3, one cgroup                {o:>6.0} spawns/s (ratio to start {:.2})",
                    o / g
                );
            } else {
                println!("clone3(CLONE_INTO_CGROUP): not available on this kernel or target");
            }
            let p = median(&mut procs_fresh);
            println!(
                "cgroup.procs, a fresh cgroup each {p:>6.0} spawns/s (ratio to start {:.2})",
                p / g
            );
        }
    }
}

/// A subtree of our own below our cgroup (this process stays where it is), and one
/// generation cgroup in it for the spawns that share one; `None` where cgroup v2 is not
/// writable (a line says so).
fn cgroup_root() -> Option<(CgroupRoot, GenCgroup)> {
    let name = format!("genward-bench-{}", std::process::id());
    match CgroupRoot::setup(&name, Placement::StayPut) {
        Ok(root) => {
            let same = root.create_generation(0).expect("create cgroup");
            Some((root, same))
        }
        Err(why) => {
            println!("no cgroup side: {why}");
            None
        }
    }
}
