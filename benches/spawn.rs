//! Spawn cost: spawns per second of `/bin/true` through `genward::sys::spawn` versus
//! `std::process::Command`, in one run, each spawn waited for and reaped before the next.
//! Ours goes the way the event loop does: `start`, wait for the status pipe, `poll`,
//! `finish`.
//!
//! `cargo bench --bench spawn` (optionally `-- <seconds per side>`, default 5).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genward::sys::process::ReaperMode;
use genward::sys::spawn::{start, IoMode, SpawnRequest, StderrMode};
use rustix::event::{poll, PollFd, PollFlags};

fn ours(req: &SpawnRequest) {
    let mut starting = start(req).expect("start");
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
        for _ in 0..10 {
            ours(&req);
            std_command();
        }
        println!("spawn bench: smoke run ok (use `cargo bench --bench spawn` to measure)");
        return;
    }
    let secs: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5);
    let budget = Duration::from_secs(secs);
    // Interleave short rounds so drift in machine load affects both sides alike; report the
    // median round of each side.
    const ROUNDS: u32 = 9;
    let mut genward = Vec::new();
    let mut std = Vec::new();
    for _ in 0..ROUNDS {
        genward.push(rate(budget / ROUNDS, || ours(&req)));
        std.push(rate(budget / ROUNDS, std_command));
    }
    let g = median(&mut genward);
    let s = median(&mut std);
    println!("spawn /bin/true, three pipes, wait + reap, {secs} s per side in {ROUNDS} rounds");
    println!("genward::sys::spawn::start {g:>6.0} spawns/s (median round)");
    println!("std::process::Command      {s:>6.0} spawns/s (median round)");
    println!("ratio genward/std          {:>6.2}", g / s);
}
