//! Cost against the number of sessions N (100, 10,000, 100,000), each session idle
//! (stopped, its last end recorded):
//! - the daemon's resident memory per session (RSS after the N sessions, less before),
//! - a spawn's and a `get`'s latency through the daemon (median of serial requests),
//! - the daemon's CPU while idle,
//! - a loop turn in the core itself (`next_deadline` + `handle_timeout`), beside the scan
//!   of the tables it replaced (`scan_deadline`);
//!
//! and, in a second table, against R sessions *running* (`sleep`, each holding its pipes,
//! pidfd and cgroup watch open in the daemon): a spawn's whole trip (spawn until its
//! `exited` arrives, median of serial ones) and the daemon's open descriptors; then the
//! same with PTY sessions under `--containment session` (two descriptors each: the
//! terminal and the pidfd), which reach 10,000 running where the hard descriptor limit
//! is as low as 20,000. R is capped by the descriptor limit the bench may give the daemon.
//!
//! The daemon's state directory goes to /dev/shm where there is one, so the figures are
//! the daemon's, not the disk's `fsync`s. Run with `cargo bench --bench scale`; without
//! `--bench` (as `cargo test --all-targets` runs it) a smoke run with small N;
//! `cargo bench --bench scale -- running` runs the tables of running sessions only.

#[path = "../tests/util/daemon.rs"]
mod daemon;

use std::time::{Duration, Instant};

use daemon::Daemon;
use genward::core::{
    Action, Command, Config, Core, Input, OnBusy, SpawnError, SpawnErrorKind, Spec, Time,
};
use genward::testkit::proc;
use serde_json::{json, Value};

/// Serial requests timed for a latency.
const SAMPLES: usize = 200;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    // `-- running`: only the tables of running sessions.
    let only_running = std::env::args().any(|a| a == "running");
    let sizes: &[usize] = match (full, only_running) {
        (_, true) => &[],
        (true, false) => &[100, 10_000, 100_000],
        (false, false) => &[10, 100],
    };
    if std::path::Path::new("/dev/shm").is_dir() {
        std::env::set_var("TMPDIR", "/dev/shm");
    }
    if !sizes.is_empty() {
        println!(
            "| N sessions | RSS/session | spawn p50 | get p50 | idle CPU | core turn | scan |"
        );
        println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    }
    for &n in sizes {
        let d = through_daemon(n, if full { 2.0 } else { 0.1 });
        let (turn, scan) = core_turn(n);
        println!(
            "| {n} | {:.0} B | {:.0} µs | {:.0} µs | {:.2} % | {:.2} µs | {:.2} µs |",
            d.rss_per_session, d.spawn_us, d.get_us, d.idle_cpu_pct, turn, scan
        );
    }
    let running: &[usize] = if full { &[0, 1_000, 10_000] } else { &[0, 10] };
    for kind in [Running::Pipes, Running::Pty, Running::PtyFallback] {
        println!();
        println!(
            "| R running ({}) | daemon descriptors | spawn until exited, p50 | RSS | get p50 | shutdown | misreported ends |",
            kind.name()
        );
        println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        for &r in running {
            let r = r.min(kind.cap());
            let f = spawn_beside_running(r, kind);
            println!(
                "| {r} | {} | {:.0} µs | {:.1} MiB | {:.0} µs | {:.2} s | {} |",
                f.fds,
                f.trip_us,
                f.rss as f64 / (1 << 20) as f64,
                f.get_us,
                f.shutdown.as_secs_f64(),
                f.misreported
            );
        }
    }
}

/// What the running sessions are.
#[derive(Clone, Copy)]
enum Running {
    /// Pipes, each in a cgroup of its own where the daemon may make one (the defaults).
    Pipes,
    /// A terminal each, contained by their sessions (`--containment session`).
    Pty,
    /// The same, reaped on `SIGCHLD` instead of through pidfds (`--reaper fallback`).
    PtyFallback,
}

/// Starts asked for at once when the running sessions are started (see
/// `spawn_beside_running`).
const BURST: usize = 32;

impl Running {
    fn name(self) -> &'static str {
        match self {
            Running::Pipes => "pipes, defaults",
            Running::Pty => "PTY, --containment session",
            Running::PtyFallback => "PTY, --containment session --reaper fallback",
        }
    }

    /// Descriptors each running session holds in the daemon, at most: three pipes, the
    /// pidfd and its cgroup's `cgroup.events`, with room to spare; or the terminal and
    /// the pidfd; or the terminal alone.
    fn fds(self) -> u64 {
        match self {
            Running::Pipes => 6,
            Running::Pty => 2,
            Running::PtyFallback => 1,
        }
    }

    /// The most sessions this process can have running under one daemon, which inherits
    /// our descriptor limit (and raises it to the hard limit), less what the daemon holds
    /// besides and keeps in reserve.
    fn cap(self) -> usize {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid out-pointer for the call.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        // The daemon's own (about 70), the reserve (64), a burst of starts under way
        // (12 each at their peak) and the measured spawn's.
        let besides = 200 + 12 * BURST as u64;
        (lim.rlim_max.saturating_sub(besides) / self.fds()) as usize
    }

    fn args(self) -> &'static [&'static str] {
        match self {
            Running::Pipes => &[],
            Running::Pty => &["--containment", "session"],
            Running::PtyFallback => &["--containment", "session", "--reaper", "fallback"],
        }
    }

    fn spawn(self, i: usize) -> Value {
        let mut spawn =
            json!({"op": "spawn", "session": format!("r{i}"), "argv": ["sleep", "3600"]});
        if let Running::Pty | Running::PtyFallback = self {
            spawn["pty"] = json!({"rows": 24, "cols": 80});
        }
        spawn
    }
}

/// Beside R running sessions.
struct BesideRunning {
    /// The daemon's open descriptors.
    fds: usize,
    /// Median µs from a spawn of `true` to its `exited`.
    trip_us: f64,
    /// The daemon's resident memory, bytes.
    rss: u64,
    /// Median µs of a `get` of one session.
    get_us: f64,
    /// From `shutdown` until the daemon exited, every session stopped.
    shutdown: Duration,
    /// Lines of the daemon's log at that shutdown that call a session unkillable or
    /// left behind (each one's end not seen in time).
    misreported: usize,
}

fn spawn_beside_running(r: usize, kind: Running) -> BesideRunning {
    let max = (r + 10).to_string();
    let mut args = vec!["--max-sessions", &max];
    args.extend(kind.args());
    let mut d = Daemon::start_logged("bench-scale-running", &args);
    let pid = d.child.id();
    let mut c = d.client();
    let mut s = d.client();
    s.ok(json!({"op": "subscribe", "all": true}));
    // In bursts, each waited for: every start still under way is counted at its peak
    // against the descriptor limit, so one burst of R near the limit would be refused.
    // Each start's outcome is awaited: one refused by the system (terminals, processes)
    // would make this a figure for fewer sessions than asked.
    let (mut running, mut failed) = (0, 0);
    for burst in (0..r).collect::<Vec<_>>().chunks(BURST) {
        let spawns: Vec<Value> = burst.iter().map(|&i| kind.spawn(i)).collect();
        for resp in c.pipelined(&spawns) {
            assert_eq!(resp["ok"], json!(true), "{resp}");
        }
        let done = running + failed + burst.len();
        s.events_until(|m| {
            match m.json()["event"].as_str() {
                Some("spawned") => running += 1,
                Some("spawn_failed") => failed += 1,
                _ => {}
            }
            running + failed == done
        });
    }
    drop(s);
    assert_eq!(
        failed, 0,
        "{failed} of {r} starts failed (see the daemon's log)"
    );
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
    let mut w = d.client();
    w.ok(json!({"op": "spawn", "session": "t", "argv": ["true"]}));
    w.ok(json!({"op": "subscribe", "session": "t"}));
    let trip_us = median_us((0..SAMPLES).map(|_| {
        timed(|| {
            let gen = w.ok(json!({"op": "spawn", "session": "t", "argv": ["true"]}))["gen"]
                .as_u64()
                .expect("a spawn answers its gen");
            w.events_until(|m| m.is("exited", gen));
        })
    }));
    let get_us = median_us((0..SAMPLES).map(|_| {
        timed(|| {
            c.ok(json!({"op": "get", "session": "t"}));
        })
    }));
    let rss = proc::status_number(pid, "VmRSS").unwrap_or(0) * 1024;
    drop((c, w));
    let mut c = d.client();
    let t0 = Instant::now();
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0), "{}", d.log());
    let shutdown = t0.elapsed();
    let log = d.log();
    let misreported = log
        .lines()
        .filter(|l| {
            ["survived SIGKILL", "left behind", "unkillable"]
                .iter()
                .any(|m| l.contains(m))
        })
        .count();
    BesideRunning {
        fds,
        trip_us,
        rss,
        get_us,
        shutdown,
        misreported,
    }
}

struct DaemonFigures {
    rss_per_session: f64,
    spawn_us: f64,
    get_us: f64,
    idle_cpu_pct: f64,
}

fn through_daemon(n: usize, idle_secs: f64) -> DaemonFigures {
    let max = (n + 2 * SAMPLES + 10).to_string();
    let d = Daemon::start("bench-scale", &["--max-sessions", &max]);
    let pid = d.child.id();
    let mut c = d.client();
    c.ok(json!({"op": "hello"}));
    let rss = || proc::status_number(pid, "VmRSS").unwrap_or(0) * 1024;
    let before = rss();
    let spawns: Vec<Value> = (0..n)
        .map(|i| json!({"op": "spawn", "session": format!("s{i}"), "argv": ["true"]}))
        .collect();
    for r in c.pipelined(&spawns) {
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    // Idle: every session stopped, its end recorded.
    let gets: Vec<Value> = (0..n)
        .map(|i| json!({"op": "get", "session": format!("s{i}")}))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    while c
        .pipelined(&gets)
        .iter()
        .any(|r| r["session"]["current"].is_u64())
    {
        assert!(Instant::now() < deadline, "sessions did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    let rss_per_session = rss().saturating_sub(before) as f64 / n as f64;
    let get_us = median_us((0..SAMPLES).map(|i| {
        let req = json!({"op": "get", "session": format!("s{}", i * n / SAMPLES)});
        timed(|| {
            c.ok(req.clone());
        })
    }));
    let spawn_us = median_us((0..SAMPLES).map(|i| {
        let req = json!({"op": "spawn", "session": format!("extra{i}"), "argv": ["true"]});
        timed(|| {
            c.ok(req.clone());
        })
    }));
    std::thread::sleep(Duration::from_millis(500));
    let cpu = || proc::stat(pid).map_or(0, |s| s.utime + s.stime);
    let (t0, c0) = (Instant::now(), cpu());
    std::thread::sleep(Duration::from_secs_f64(idle_secs));
    let ticks = (cpu() - c0) as f64;
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let idle_cpu_pct = 100.0 * ticks / hz / t0.elapsed().as_secs_f64();
    DaemonFigures {
        rss_per_session,
        spawn_us,
        get_us,
        idle_cpu_pct,
    }
}

/// Microseconds per loop turn of a core holding `n` idle sessions: the index against the
/// scan it replaced.
fn core_turn(n: usize) -> (f64, f64) {
    let config = Config {
        max_sessions: n,
        max_generations: n,
        ..Config::default()
    };
    let mut core = Core::new(config, 1);
    let spec = Spec::new(vec![b"true".to_vec()]);
    let failed = || SpawnError::new(SpawnErrorKind::NotFound, libc::ENOENT);
    let mut now = Time::from_millis(1);
    for i in 0..n {
        let command = Command::Spawn {
            session: format!("s{i}"),
            if_gen: None,
            spec: Box::new(spec.clone()),
            on_busy: OnBusy::Replace,
        };
        core.handle(
            now,
            Input::Command {
                request: 0,
                command,
            },
        );
        let mut spawned = Vec::new();
        while let Some(a) = core.poll_action() {
            if let Action::Spawn { gen, .. } = a {
                spawned.push(gen);
            }
        }
        for gen in spawned {
            let result = Err(failed());
            core.handle(now, Input::SpawnResult { gen, result });
            while core.poll_action().is_some() {}
        }
        core.take_dirty_sessions();
    }
    let turns = 2000;
    let t = Instant::now();
    for _ in 0..turns {
        now = Time::from_millis(now.as_millis() + 1);
        std::hint::black_box(core.next_deadline());
        core.handle_timeout(now);
    }
    let turn = t.elapsed().as_secs_f64() * 1e6 / turns as f64;
    let scans = 20;
    let t = Instant::now();
    for _ in 0..scans {
        std::hint::black_box(core.scan_deadline());
    }
    let scan = t.elapsed().as_secs_f64() * 1e6 / scans as f64;
    (turn, scan)
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn median_us(samples: impl Iterator<Item = Duration>) -> f64 {
    let mut v: Vec<Duration> = samples.collect();
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}
