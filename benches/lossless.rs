//! The slow-reader flood: a child writes N bytes flat out to one subscriber that reads a
//! little slower than it writes (64 KiB reads with a short pause after each). Side by side
//! in one run: an ordinary subscription (the daemon keeps reading; the reader is told what
//! it missed) and a lossless one (the daemon stops reading while the reader is behind; the
//! child waits). For each: bytes delivered, bytes dropped, the time to the child's end,
//! and the daemon's peak RSS (a fresh daemon per row, so the peak is that row's).
//!
//! Run with `cargo bench --bench lossless` (`make bench`). Prints a markdown table.

#[path = "../tests/util/daemon.rs"]
mod daemon;

use std::io::Read;
use std::time::{Duration, Instant};

use daemon::Daemon;
use genward::testkit::proc;
use serde_json::json;

/// Bytes the child writes: 10 GiB for a real run (`cargo bench` passes `--bench`), the
/// size the lossless mode is meant for, far beyond any buffer; a little for the smoke run
/// `cargo test --all-targets` makes of every bench target.
fn flood_bytes(full: bool) -> u64 {
    if full {
        10 << 30
    } else {
        8 << 20
    }
}

/// The reader's pause after each read: what makes it a little slower than the child.
const PAUSE: Duration = Duration::from_micros(100);

/// Largest read the reader makes.
const READ: usize = 64 << 10;

struct Row {
    delivered: u64,
    dropped: u64,
    dropped_events: u64,
    secs: f64,
    peak_rss_kib: u64,
}

/// One flood through a fresh daemon to one slow subscriber.
fn flood(lossless: bool, bytes: u64) -> Row {
    let d = Daemon::start("bench-lossless", &[]);
    let mut c = d.client();
    let script = format!("read go; exec head -c {bytes} /dev/zero");
    let gen = c.ok(json!({"op": "spawn", "session": "flood", "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "flood", "lossless": lossless}));
    let t = Instant::now();
    c.ok(json!({"op": "write", "session": "flood", "data": "go\n"}));
    let (delivered, dropped, dropped_events) = slow_read_until_exit(&sub, gen);
    let secs = t.elapsed().as_secs_f64();
    let peak_rss_kib = proc::status_number(d.pid, "VmHWM").unwrap_or(0);
    Row {
        delivered,
        dropped,
        dropped_events,
        secs,
        peak_rss_kib,
    }
}

/// Reads frames with small reads and a pause after each, until `gen`'s `exited`: output
/// bytes received, bytes reported dropped, and `dropped` events.
fn slow_read_until_exit(c: &daemon::Client, gen: u64) -> (u64, u64, u64) {
    let exited = r#"{"event":"exited","session":"#;
    let gen_tag = format!(r#""gen":{gen},"#);
    let mut stream = c.stream();
    let mut buf = vec![0u8; 1 << 20];
    let (mut start, mut end) = (0usize, 0usize);
    let (mut got, mut dropped, mut events) = (0u64, 0u64, 0u64);
    let mut skip = 0usize; // payload bytes (plus newline) still to skip
    let number = |text: &str, key: &str| -> u64 {
        let i = text.find(key).expect(key) + key.len();
        let digits: String = text[i..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap()
    };
    loop {
        if start == end || (skip == 0 && !buf[start..end].contains(&b'\n')) {
            if start > 0 {
                buf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            let room = (buf.len() - end).min(READ);
            let n = stream.read(&mut buf[end..end + room]).unwrap();
            assert!(n > 0, "daemon closed");
            end += n;
            std::thread::sleep(PAUSE);
        }
        if skip > 0 {
            let k = skip.min(end - start);
            start += k;
            skip -= k;
            continue;
        }
        let Some(nl) = buf[start..end].iter().position(|&b| b == b'\n') else {
            continue;
        };
        let text = std::str::from_utf8(&buf[start..start + nl])
            .unwrap()
            .to_owned();
        start += nl + 1;
        if text.starts_with(r#"{"event":"output""#) {
            let len = number(&text, r#""len":"#);
            got += len;
            skip = len as usize + 1;
        } else if text.starts_with(r#"{"event":"dropped""#) {
            dropped += number(&text, r#""to":"#) - number(&text, r#""from":"#);
            events += 1;
        } else if text.starts_with(exited) && text.contains(&gen_tag) {
            return (got, dropped, events);
        }
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let bytes = flood_bytes(full);
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    println!(
        "| slow reader, {:.0} MiB flood | delivered | dropped (events) | time | MiB/s delivered | daemon peak RSS |",
        mib(bytes)
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, lossless) in [("ordinary subscription", false), ("lossless", true)] {
        let r = flood(lossless, bytes);
        if lossless {
            assert_eq!(r.delivered, bytes, "{name}: every byte");
        }
        assert_eq!(
            r.delivered + r.dropped,
            bytes,
            "{name}: delivered + dropped"
        );
        println!(
            "| {name} | {:.1} MiB | {:.1} MiB ({}) | {:.2} s | {:.0} | {:.1} MiB |",
            mib(r.delivered),
            mib(r.dropped),
            r.dropped_events,
            r.secs,
            mib(r.delivered) / r.secs,
            r.peak_rss_kib as f64 / 1024.0
        );
    }
}
