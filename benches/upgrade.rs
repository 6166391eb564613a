//! How long `upgrade` keeps the daemon from serving, with 10 and 1,000 sessions (each
//! with a line of retained output, a subscriber following all of them), side by side with
//! what the same daemon costs when it is killed and started again on its state directory
//! instead (ready again, every process adopted — and every session's I/O lost).
//!
//! The pause is the daemon's own measure (`pause_ms` in the answer: from the loop's last
//! turn before the exec to the first after); the round trip is the client's, from sending
//! `upgrade` to its answer. Run with `cargo bench --bench upgrade`.

#[path = "../tests/util/daemon.rs"]
mod daemon;

use std::time::Instant;

use daemon::Daemon;
use serde_json::json;

fn stats(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    let median = v[v.len() / 2];
    format!("{:.1} / {:.1} / {:.1} ms", v[0], median, v[v.len() - 1])
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (sizes, rounds): (&[usize], usize) = if full { (&[10, 1000], 10) } else { (&[3], 2) };
    println!("| sessions | upgrade pause (min / median / max) | upgrade round trip | kill and restart until ready |");
    println!("|---:|---:|---:|---:|");
    for &n in sizes {
        let mut d = Daemon::start("bench-upgrade", &[]);
        let mut c = d.client();
        for i in 0..n {
            c.ok(json!({"op": "spawn", "session": format!("s{i}"),
                "argv": ["sh", "-c", "echo up; exec sleep 1000"]}));
        }
        let mut sub = d.client();
        sub.ok(json!({"op": "subscribe", "all": true, "from_start": true}));
        let mut pauses = Vec::new();
        let mut trips = Vec::new();
        for _ in 0..rounds {
            let start = Instant::now();
            let answer = c.ok(json!({"op": "upgrade"}));
            trips.push(start.elapsed().as_secs_f64() * 1000.0);
            pauses.push(answer["pause_ms"].as_f64().unwrap());
        }
        let mut restarts = Vec::new();
        for _ in 0..rounds.min(3) {
            drop(c);
            let start = Instant::now();
            d.crash_and_restart(&[]);
            restarts.push(start.elapsed().as_secs_f64() * 1000.0);
            c = d.client();
        }
        println!(
            "| {n} | {} | {} | {} |",
            stats(pauses),
            stats(trips),
            stats(restarts)
        );
        c.ok(json!({"op": "shutdown"}));
        let _ = d.child.wait();
        drop(sub);
    }
}
