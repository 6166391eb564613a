//! The state directory at scale: how long a daemon's start takes to read N session files
//! (and how much memory that costs beyond the records themselves), what a durable session
//! write and a descriptor write cost, and what the generation reservation costs per spawn.
//!
//! `cargo bench --bench store` (optionally `-- <sessions>`, default 10,000; try 100000).
//! The state directory is made under the system's temporary directory: on a RAM-backed
//! one (`/run`, `$XDG_RUNTIME_DIR`, the daemon's default) `fsync` is nearly free; on a
//! disk it is not, and the write figures say so. Under `cargo test` (no `--bench`) it
//! runs on a few files as a smoke test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use genward::store::names::SESSIONS_DIR;
use genward::store::session_codec::encode_session;
use genward::store::{Descriptor, GenAllocator, IoKind, Store};
use genward::testkit::scratch::ScratchDir;
use genward::testkit::state::{place_file, sample_session};

/// The process's peak resident memory (`VmHWM`), KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn per_op(total: Duration, n: usize) -> String {
    format!("{:>8.1} µs/op", total.as_secs_f64() * 1e6 / n.max(1) as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let sessions: usize = if bench {
        args.iter().find_map(|a| a.parse().ok()).unwrap_or(10_000)
    } else {
        20
    };
    let dir = ScratchDir::new("bench-store");
    let store = Store::open(&dir).expect("open the state directory");

    // Placed without fsync: this measures reading, not making the fixture.
    let mut file_bytes = 0;
    for i in 0..sessions {
        let bytes = encode_session(&sample_session(&format!("session-{i:06}"))).unwrap();
        file_bytes += bytes.len();
        place_file(
            &dir.join(SESSIONS_DIR).join(format!("session-{i:06}.json")),
            &bytes,
        );
    }
    let before = peak_rss_kib();
    let start = Instant::now();
    let loaded = store.load_sessions(sessions).expect("load");
    let load = start.elapsed();
    let after = peak_rss_kib();
    assert_eq!(loaded.records.len(), sessions);
    assert_eq!(loaded.bad, 0);

    let writes = sessions.min(1000);
    let start = Instant::now();
    for record in loaded.records.iter().take(writes) {
        store.write_session(record).expect("write");
    }
    let write = start.elapsed();

    let d = Descriptor {
        session: Arc::from("web"),
        gen: 1,
        pid: 4242,
        pgid: 4242,
        sid: 4242,
        identity: Some("linux1:0f1e-2d:77:12345".into()),
        started_unix_ms: 1_700_000_000_000,
        io: IoKind::Pty,
        dir_id: store.id().clone(),
        cgroup: None,
    };
    let start = Instant::now();
    for gen in 1..=writes as u64 {
        store
            .write_descriptor(&Descriptor { gen, ..d.clone() })
            .expect("write descriptor");
    }
    let describe = start.elapsed();
    let start = Instant::now();
    for gen in 1..=writes as u64 {
        store.remove_descriptor(gen).expect("remove descriptor");
    }
    let undescribe = start.elapsed();

    let (mut alloc, first) = GenAllocator::open(&store, 1).expect("allocator");
    let spawns = if bench { 1_000_000 } else { 10 };
    let start = Instant::now();
    for next in first + 1..=first + spawns {
        alloc.reserve(&store, next).expect("reserve");
    }
    let reserve = start.elapsed();

    if !bench {
        println!("store bench: smoke run ok (use `cargo bench --bench store` to measure)");
        return;
    }
    println!(
        "load {sessions} session files ({:.1} MiB)   {:>8.1} ms  {}  peak RSS +{} KiB",
        file_bytes as f64 / (1 << 20) as f64,
        load.as_secs_f64() * 1e3,
        per_op(load, sessions),
        after.saturating_sub(before)
    );
    println!(
        "write a session durably ({writes}x)          {}",
        per_op(write, writes)
    );
    println!(
        "write a descriptor durably ({writes}x)       {}",
        per_op(describe, writes)
    );
    println!(
        "remove a descriptor ({writes}x)              {}",
        per_op(undescribe, writes)
    );
    println!(
        "reserve per spawn ({spawns} spawns, {} writes) {:>8.1} ns/op",
        spawns / (genward::store::highwater::BLOCK / 2),
        reserve.as_secs_f64() * 1e9 / spawns as f64
    );
}
