//! Spawns per second through the daemon, side by side in one run with a shell loop and
//! with supervisord.
//!
//! Each side starts `/bin/true` N times and sees every one end:
//! - **genward, one at a time**: spawn, wait for `exited`, again (one session);
//! - **genward, pipelined**: a window of W sessions, each spawned again as soon as its
//!   previous generation's `exited` arrives, requests pipelined on one connection — how an
//!   orchestrator starting many tools at once drives the daemon;
//! - **shell loop**: `sh -c 'while ...; do /bin/true; done'`, a fork/exec/wait per spawn
//!   and nothing else (no pidfd, no cgroup, no record, no one told);
//! - **supervisord** (where installed): `supervisorctl start` of a group of N programs
//!   running `/bin/true` (`startsecs=0`), timed until the command returns with all started;
//!   its own batch form, the fastest way it offers.
//!
//! Sides alternate in each round; `--rounds R` (default 3) and the summary gives
//! min/median/max of the ratios over rounds.
//!
//! Then the same again with a program that does nothing but exit — built here, static and
//! without a C library, where a C compiler is installed (SKIP otherwise). `/bin/true`'s
//! own start-up (the dynamic loader, and glibc reading the CPU's cache sizes, which traps
//! to the hypervisor in a virtual machine) costs more CPU than a supervisor's whole work
//! per spawn, so with `/bin/true` every side measures mostly `/bin/true`; the second table
//! measures the supervisors.
//!
//! Run with `cargo bench --bench spawn_rate` (`make bench`). Prints markdown tables.

#[path = "../tests/util/daemon.rs"]
mod daemon;
#[path = "util/rounds.rs"]
mod rounds;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daemon::Daemon;
use serde_json::json;

struct Sizes {
    spawns: usize,
    window: usize,
    supervised: usize,
    rounds: usize,
}

const FULL: Sizes = Sizes {
    spawns: 3000,
    window: 64,
    supervised: 500,
    rounds: 3,
};

const SMOKE: Sizes = Sizes {
    spawns: 20,
    window: 4,
    supervised: 5,
    rounds: 1,
};

/// Seconds for `n` spawns, one at a time.
fn genward_serial(d: &Daemon, n: usize, program: &str) -> f64 {
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let t = Instant::now();
    for _ in 0..n {
        let gen = c.ok(json!({"op": "spawn", "session": "serial", "argv": [program]}))["gen"]
            .as_u64()
            .unwrap();
        c.events_until(|m| m.is("exited", gen));
    }
    t.elapsed().as_secs_f64()
}

/// Seconds for `n` spawns with `window` sessions kept busy.
fn genward_pipelined(d: &Daemon, n: usize, window: usize, program: &str) -> f64 {
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let spawn = |session: &str| json!({"op": "spawn", "session": session, "argv": [program]});
    let t = Instant::now();
    let mut sent = window.min(n);
    let mut ended = 0;
    for i in 0..sent {
        c.send_raw(format!("{}\n", spawn(&format!("w{i}"))).as_bytes());
    }
    while ended < n {
        let m = c.read_msg();
        let v = m.json();
        if v.get("ok").is_some() {
            assert_eq!(v["ok"], true, "spawn refused: {v}");
            continue;
        }
        match v["event"].as_str() {
            Some("exited") => {
                ended += 1;
                if sent < n {
                    // The session that just ended runs again.
                    let again = spawn(v["session"].as_str().unwrap());
                    c.send_raw(format!("{again}\n").as_bytes());
                    sent += 1;
                }
            }
            Some("spawn_failed") => panic!("spawn failed: {v}"),
            _ => {}
        }
    }
    t.elapsed().as_secs_f64()
}

fn shell_loop(n: usize, program: &str) -> f64 {
    let t = Instant::now();
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt {n} ]; do {program}; i=$((i+1)); done"
        ))
        .status()
        .expect("run sh");
    assert!(st.success());
    t.elapsed().as_secs_f64()
}

/// supervisord with `n` programs running `program`; seconds for `supervisorctl start`
/// of all of them.
fn supervisord(dir: &Path, n: usize, program: &str) -> f64 {
    let conf = dir.join("supervisord.conf");
    let sock = dir.join("supervisor.sock");
    let _ = std::fs::remove_file(&sock);
    std::fs::write(
        &conf,
        format!(
            "[unix_http_server]\nfile={sock}\n\n[supervisord]\nnodaemon=true\nlogfile={dir}/supervisord.log\npidfile={dir}/supervisord.pid\nchildlogdir={dir}\nloglevel=warn\n\n[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n[supervisorctl]\nserverurl=unix://{sock}\n\n[program:t]\ncommand={program}\nprocess_name=%(program_name)s_%(process_num)d\nnumprocs={n}\nautostart=false\nautorestart=false\nstartsecs=0\nstdout_logfile=NONE\nstderr_logfile=NONE\n",
            sock = sock.display(),
            dir = dir.display(),
        ),
    )
    .unwrap();
    let mut sv = Command::new("supervisord")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start supervisord");
    let ctl = |args: &[&str]| {
        Command::new("supervisorctl")
            .arg("-c")
            .arg(&conf)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run supervisorctl")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ctl(&["pid"]).success() {
        assert!(Instant::now() < deadline, "supervisord did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    ctl(&["start", "t:*"]);
    let secs = t.elapsed().as_secs_f64();
    let _ = sv.kill();
    let _ = sv.wait();
    secs
}

/// A program that only exits, static and without a C library: `/bin/true` without its
/// start-up. Built with the installed C compiler; `None` (a visible SKIP) without one.
fn bare_exit(dir: &Path) -> Option<String> {
    let src = dir.join("exit0.c");
    let bin = dir.join("exit0");
    std::fs::write(
        &src,
        "void _start(void) { __asm__ volatile(\"syscall\" :: \"a\"(60), \"D\"(0)); }\n",
    )
    .unwrap();
    let built = cfg!(all(target_os = "linux", target_arch = "x86_64"))
        && Command::new("cc")
            .args(["-static", "-nostdlib", "-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    // Where scratch space is mounted `noexec` it cannot run: skipped too.
    let runs = built && Command::new(&bin).status().is_ok_and(|s| s.success());
    runs.then(|| bin.display().to_string())
}

/// One table: every side spawning `program`, `z.rounds` rounds.
fn compare(z: &Sizes, program: &str, supervisor: bool, scratch: &Path) {
    println!("Spawning `{program}`:");
    println!();
    println!(
        "| round | genward, one at a time | genward, pipelined ({} at once) | shell loop | supervisord (`start` of {}) |",
        z.window, z.supervised
    );
    println!("|---:|---:|---:|---:|---:|");
    let (mut serial_vs_loop, mut piped_vs_loop, mut piped_vs_sv) = (vec![], vec![], vec![]);
    for round in 0..z.rounds {
        let rate = |n: usize, secs: f64| n as f64 / secs;
        let genward_side = || {
            let d = Daemon::start("bench-spawn-rate", &[]);
            let serial = rate(z.spawns, genward_serial(&d, z.spawns, program));
            (
                serial,
                rate(z.spawns, genward_pipelined(&d, z.spawns, z.window, program)),
            )
        };
        let baseline_side = || {
            let shell = rate(z.spawns, shell_loop(z.spawns, program));
            let sv =
                supervisor.then(|| rate(z.supervised, supervisord(scratch, z.supervised, program)));
            (shell, sv)
        };
        // Alternate which side goes first.
        let ((serial, piped), (shell, sv)) = if round % 2 == 0 {
            let g = genward_side();
            (g, baseline_side())
        } else {
            let b = baseline_side();
            (genward_side(), b)
        };
        serial_vs_loop.push(serial / shell);
        piped_vs_loop.push(piped / shell);
        if let Some(sv) = sv {
            piped_vs_sv.push(piped / sv);
        }
        println!(
            "| {} | {serial:.0} /s | {piped:.0} /s | {shell:.0} /s | {} |",
            round + 1,
            sv.map_or("SKIP".into(), |v| format!("{v:.0} /s"))
        );
    }
    println!();
    println!("| ratio | min / median / max |");
    println!("|---|---|");
    println!(
        "| genward one at a time / shell loop | {} |",
        rounds::min_med_max(serial_vs_loop)
    );
    println!(
        "| genward pipelined / shell loop | {} |",
        rounds::min_med_max(piped_vs_loop)
    );
    if !piped_vs_sv.is_empty() {
        println!(
            "| genward pipelined / supervisord | {} |",
            rounds::min_med_max(piped_vs_sv)
        );
    }
    println!();
}

fn main() {
    rounds::state_on_tmpfs();
    let (full, asked) = rounds::run_kind();
    let mut z = if full { FULL } else { SMOKE };
    z.rounds = asked.unwrap_or(z.rounds);
    let supervisor = rounds::installed("supervisord") && rounds::installed("supervisorctl");
    if !supervisor {
        println!("SKIP supervisord baseline: supervisord not installed");
    }
    let scratch = genward::testkit::scratch::ScratchDir::new("bench-supervisord");
    compare(&z, "/bin/true", supervisor, &scratch);
    match bare_exit(&scratch) {
        Some(program) => compare(&z, &program, supervisor, &scratch),
        None => println!(
            "SKIP bare exit program: no C compiler, not x86-64 Linux, or scratch space noexec"
        ),
    }
}
