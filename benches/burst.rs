//! One client's burst, and everyone else: a client writes thousands of pipelined requests
//! at once while a second client sends `hello` every 2 ms and times each answer. Beside
//! it, in the same run, the second client's `hello` with no burst: the baseline.
//!
//! The bursts: `remove`s and `stop`s of sessions that wait for a dependency that never
//! comes (no process: what is measured is the requests and the records they change), and
//! `spawn`s of `true`. Each with the state directory on tmpfs (the default's place,
//! `/run`) and on the disk the build lives on (`target/tmp`), where every record written
//! costs a `rename` or an `unlink` and the flushes.
//!
//! Then a burst of ends: `n` sessions running `sleep`, and the daemon told to shut down
//! (SIGTERM, as `docker stop` or an init system would): the time until it has exited, every
//! session stopped and its end written.
//!
//! Run with `cargo bench --bench burst` (`make bench`); `GENWARD_BIN` runs another build
//! of the daemon (compare builds side by side). Prints markdown tables.

#[path = "../tests/util/daemon.rs"]
mod daemon;
#[path = "util/rounds.rs"]
mod rounds;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use daemon::{Client, Daemon, Msg};
use serde_json::{json, Value};

/// How often the other client asks.
const EVERY: Duration = Duration::from_millis(2);

#[derive(Clone, Copy)]
enum Burst {
    Remove,
    Stop,
    Spawn,
}

impl Burst {
    fn name(self) -> &'static str {
        match self {
            Burst::Remove => "remove",
            Burst::Stop => "stop",
            Burst::Spawn => "spawn",
        }
    }

    fn request(self, i: usize) -> Value {
        let session = format!("b{i}");
        match self {
            Burst::Remove => json!({"id": i, "op": "remove", "session": session}),
            Burst::Stop => json!({"id": i, "op": "stop", "session": session}),
            Burst::Spawn => json!({"id": i, "op": "spawn", "session": session, "argv": ["true"]}),
        }
    }
}

/// Sessions that wait for a dependency that never comes: records, no processes.
fn waiting_sessions(c: &mut Client, n: usize) {
    let spawns: Vec<Value> = (0..n)
        .map(|i| {
            json!({"op": "spawn", "session": format!("b{i}"), "argv": ["true"],
                   "depends_on": {"never": "started"}})
        })
        .collect();
    for r in c.pipelined(&spawns) {
        assert_eq!(r["ok"], json!(true), "{r}");
    }
}

/// The other client's `hello`s until `stop`, each answer's time.
fn ask_until(mut c: Client, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let mut took = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        c.ok(json!({"op": "hello"}));
        took.push(t.elapsed());
        thread::sleep(EVERY);
    }
    took
}

struct Row {
    burst_secs: f64,
    during: Vec<Duration>,
}

/// `n` requests of `burst` written at once; the other client asking meanwhile.
fn run(burst: Burst, n: usize) -> Row {
    let d = Daemon::start("burst", &[]);
    let mut a = d.client();
    if !matches!(burst, Burst::Spawn) {
        waiting_sessions(&mut a, n);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let other = {
        let (c, stop) = (d.client(), stop.clone());
        thread::spawn(move || ask_until(c, stop))
    };
    thread::sleep(Duration::from_millis(50));
    let mut bytes = Vec::new();
    for i in 0..n {
        serde_json::to_writer(&mut bytes, &burst.request(i)).unwrap();
        bytes.push(b'\n');
    }
    let t = Instant::now();
    a.send_raw(&bytes);
    let mut answered = 0;
    while answered < n {
        if let Msg::Json(r) = a.read_msg() {
            if r["id"].as_u64().is_some() {
                assert_eq!(r["ok"], json!(true), "{r}");
                answered += 1;
            }
        }
    }
    let burst_secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let during = other.join().unwrap();
    Row { burst_secs, during }
}

/// `n` sessions running, then SIGTERM: seconds until the daemon exited.
fn shutdown(n: usize) -> f64 {
    let mut d = Daemon::start("burst-shutdown", &[]);
    let mut a = d.client();
    a.ok(json!({"op": "subscribe", "all": true}));
    for first in (0..n).step_by(32) {
        let mut bytes = Vec::new();
        let last = n.min(first + 32);
        for i in first..last {
            let spawn = json!({"id": i, "op": "spawn", "session": format!("s{i}"),
                               "argv": ["sleep", "1000"]});
            serde_json::to_writer(&mut bytes, &spawn).unwrap();
            bytes.push(b'\n');
        }
        a.send_raw(&bytes);
        let mut spawned = 0;
        while spawned < last - first {
            if let Msg::Json(m) = a.read_msg() {
                assert_ne!(m["ok"], json!(false), "{m}");
                spawned += usize::from(m["event"] == "spawned");
            }
        }
    }
    drop(a);
    let t = Instant::now();
    assert_eq!(d.terminate(), Some(0));
    t.elapsed().as_secs_f64()
}

/// The other client's `hello` with nothing else going on.
fn idle() -> Vec<Duration> {
    let d = Daemon::start("burst-idle", &[]);
    let mut c = d.client();
    (0..200)
        .map(|_| {
            let t = Instant::now();
            c.ok(json!({"op": "hello"}));
            let took = t.elapsed();
            thread::sleep(EVERY);
            took
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// p50 / p99 / max of `v`, in milliseconds.
fn spread(mut v: Vec<Duration>) -> String {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    format!(
        "{:.1} / {:.1} / {:.1} ms",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(v[v.len() - 1])
    )
}

fn main() {
    let (full, _) = rounds::run_kind();
    let n = if full { 1500 } else { 40 };
    let places = [
        ("tmpfs", Path::new("/dev/shm")),
        ("disk", Path::new(env!("CARGO_TARGET_TMPDIR"))),
    ];
    println!(
        "| state directory | burst | answered in | the other client's `hello`: p50 / p99 / max |"
    );
    println!("| --- | --- | ---: | ---: |");
    for (place, dir) in places {
        if !dir.is_dir() {
            println!("| {place} | SKIP: no {} | | |", dir.display());
            continue;
        }
        // SAFETY: no other thread runs between the rows (each row joins its own).
        unsafe { std::env::set_var("TMPDIR", dir) };
        println!("| {place} | none | | {} |", spread(idle()));
        for burst in [Burst::Remove, Burst::Stop, Burst::Spawn] {
            let row = run(burst, n);
            println!(
                "| {place} | {n} `{}`s | {:.2} s | {} |",
                burst.name(),
                row.burst_secs,
                spread(row.during)
            );
        }
    }
    println!();
    println!(
        "| state directory | sessions running | `shutdown` (SIGTERM) until the daemon exited |"
    );
    println!("| --- | ---: | ---: |");
    for (place, dir) in places {
        if !dir.is_dir() {
            println!("| {place} | SKIP: no {} | |", dir.display());
            continue;
        }
        // SAFETY: no other thread runs now.
        unsafe { std::env::set_var("TMPDIR", dir) };
        println!("| {place} | {n} | {:.2} s |", shutdown(n));
    }
}
