//! Daemon figures, each side by side with its baseline in one run:
//! - bytes/s from a child to one subscriber (pipes) vs `head | cat` on a plain pipe,
//! - bytes/s in PTY mode vs `script`,
//! - bytes/s from a child to one subscriber while 500 others have stopped reading, vs none,
//! - spawns per second through the daemon (spawn, see it exit, again) vs a shell loop,
//! - RSS idle and with 1,000 sleeping sessions,
//! - wake-ups per second while idle.
//!
//! Run with `cargo bench --bench daemon` (`make bench`). Prints a markdown table.

#[path = "../tests/util/daemon.rs"]
mod daemon;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daemon::Daemon;
use genward::testkit::proc;
use serde_json::json;

/// Sizes for a real run (`cargo bench` passes `--bench`) and for the smoke run that
/// `cargo test --all-targets` makes of every bench target.
struct Sizes {
    pipe_bytes: u64,
    pty_bytes: u64,
    sessions: usize,
    idle: Duration,
    stalled: usize,
    spawns: usize,
}

const FULL: Sizes = Sizes {
    pipe_bytes: 2 << 30,
    pty_bytes: 256 << 20,
    sessions: 1000,
    idle: Duration::from_secs(3),
    stalled: 500,
    spawns: 2000,
};

const SMOKE: Sizes = Sizes {
    pipe_bytes: 1 << 20,
    pty_bytes: 64 << 10,
    sessions: 10,
    idle: Duration::from_millis(50),
    stalled: 5,
    spawns: 10,
};

fn status_field(pid: u32, key: &str) -> u64 {
    proc::status_number(pid, key).unwrap_or(0)
}

fn shell_secs(script: &str) -> f64 {
    let t = Instant::now();
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
    t.elapsed().as_secs_f64()
}

/// Seconds from spawn to exit of `argv`, with one subscriber reading, and the bytes it got.
/// A subscription is lossy by design: a reader slower than the child (on a loaded machine)
/// is told what it missed rather than slowing the child, so a full run reports what was
/// dropped; the smoke run, far below the buffer, must get every byte.
fn through_daemon(d: &Daemon, session: &str, pty: bool, argv: &[&str], expect: u64) -> (f64, u64) {
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut req = json!({"op": "spawn", "session": session, "argv": argv, "buffer": 64 << 20});
    if pty {
        req["pty"] = json!(true);
    }
    let t = Instant::now();
    let gen = c.ok(req)["gen"].as_u64().unwrap();
    let got = fast_read_until_exit(&mut c, gen);
    let secs = t.elapsed().as_secs_f64();
    let stat = proc::stat(d.child.id()).expect("the daemon's stat");
    eprintln!(
        "{session}: {secs:.2}s, got {got} of {expect}; daemon utime {} stime {} ticks",
        stat.utime, stat.stime
    );
    if expect < 64 << 20 {
        assert_eq!(got, expect, "{session}: bytes delivered");
    }
    (secs, got)
}

/// `N MiB/s`, with what the reader missed if it fell behind.
fn rate(got: u64, expect: u64, secs: f64) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut text = format!("{:.0} MiB/s", mib(got) / secs);
    if got < expect {
        text.push_str(&format!(" ({:.0} MiB dropped)", mib(expect - got)));
    }
    text
}

/// Reads frames as a tuned client would: large reads, headers scanned for `len` without a
/// JSON parser, payloads skipped in place. Returns output bytes received before `exited`.
fn fast_read_until_exit(c: &mut daemon::Client, gen: u64) -> u64 {
    use std::io::Read;
    let exited = r#"{"event":"exited","session":"#;
    let gen_tag = format!(r#""gen":{gen},"#);
    let mut stream = c.stream();
    let mut buf = vec![0u8; 4 << 20];
    let (mut start, mut end) = (0usize, 0usize);
    let mut got = 0u64;
    let mut skip = 0usize; // payload bytes (plus newline) still to skip
    loop {
        if start == end || (skip == 0 && !buf[start..end].contains(&b'\n')) {
            if start > 0 {
                buf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            let n = stream.read(&mut buf[end..]).unwrap();
            assert!(n > 0, "daemon closed");
            end += n;
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
        let line = &buf[start..start + nl];
        start += nl + 1;
        let text = std::str::from_utf8(line).unwrap();
        if let Some(i) = text.find(r#""len":"#) {
            let digits: String = text[i + 6..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let len: usize = digits.parse().unwrap();
            got += len as u64;
            skip = len + 1;
        } else if text.starts_with(exited) && text.contains(&gen_tag) {
            return got;
        }
    }
}

fn main() {
    let z = if std::env::args().any(|a| a == "--bench") {
        FULL
    } else {
        SMOKE
    };
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mib = |b: u64, s: f64| b as f64 / s / (1 << 20) as f64;

    // Memory and wake-ups.
    let idle_daemon = Daemon::start("bench-idle", &[]);
    let pid = idle_daemon.child.id();
    let mut c = idle_daemon.client();
    c.ok(json!({"op": "hello"}));
    let rss_idle = status_field(pid, "VmRSS");
    let switches = |pid| {
        status_field(pid, "voluntary_ctxt_switches")
            + status_field(pid, "nonvoluntary_ctxt_switches")
    };
    // Let the loop go back to sleep after answering, then count.
    std::thread::sleep(Duration::from_millis(500));
    let before = switches(pid);
    let idle = z.idle;
    std::thread::sleep(idle);
    let wakeups = (switches(pid) - before) as f64 / idle.as_secs_f64();
    rows.push((
        "wake-ups while idle".into(),
        format!("{wakeups:.2}/s"),
        "0/s (goal)".into(),
        "".into(),
    ));
    rows.push((
        "RSS idle".into(),
        format!("{:.1} MiB", rss_idle as f64 / 1024.0),
        "".into(),
        "".into(),
    ));
    c.ok(json!({"op": "subscribe", "all": true}));
    for i in 0..z.sessions {
        c.ok(json!({"op": "spawn", "session": format!("s{i}"), "argv": ["sleep", "1000"]}));
    }
    let rss_1000 = status_field(pid, "VmRSS");
    let mut idle_daemon = idle_daemon;
    assert_eq!(idle_daemon.terminate(), Some(0));
    rows.push((
        format!("RSS with {} sleeping sessions", z.sessions),
        format!("{:.1} MiB", rss_1000 as f64 / 1024.0),
        "".into(),
        "".into(),
    ));
    let d = Daemon::start("bench", &[]);

    // Throughput, pipes.
    let n = z.pipe_bytes.to_string();
    let base = shell_secs(&format!("head -c {n} /dev/zero | cat > /dev/null"));
    let relay = shell_secs(&format!("head -c {n} /dev/zero | cat | cat > /dev/null"));
    let (ours, got) = through_daemon(
        &d,
        "pipe",
        false,
        &["head", "-c", &n, "/dev/zero"],
        z.pipe_bytes,
    );
    rows.push((
        "pipes: child → subscriber".into(),
        rate(got, z.pipe_bytes, ours),
        format!("{:.0} MiB/s (`head | cat`)", mib(z.pipe_bytes, base)),
        format!("{:.2}", base / ours),
    ));
    rows.push((
        "pipes: the same, against a two-hop relay".into(),
        rate(got, z.pipe_bytes, ours),
        format!("{:.0} MiB/s (`head | cat | cat`)", mib(z.pipe_bytes, relay)),
        format!("{:.2}", relay / ours),
    ));

    // The same flood with subscribers that stopped reading: a blocked client must cost
    // nothing until it is writable again.
    let stalled: Vec<std::os::unix::net::UnixStream> = (0..z.stalled)
        .map(|_| {
            use std::io::{BufRead, Write};
            let mut s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
            s.write_all(b"{\"id\":1,\"op\":\"subscribe\",\"all\":true}\n")
                .unwrap();
            let mut line = String::new();
            std::io::BufReader::new(&s).read_line(&mut line).unwrap();
            assert!(line.contains("\"ok\":true"), "{line}");
            s
        })
        .collect();
    let n = z.pipe_bytes.to_string();
    let (with_stalled, got_stalled) = through_daemon(
        &d,
        "pipe-stalled",
        false,
        &["head", "-c", &n, "/dev/zero"],
        z.pipe_bytes,
    );
    rows.push((
        format!("pipes with {} stalled subscribers", stalled.len()),
        rate(got_stalled, z.pipe_bytes, with_stalled),
        format!("{} (none stalled)", rate(got, z.pipe_bytes, ours)),
        format!("{:.2}", ours / with_stalled),
    ));
    drop(stalled);

    // Throughput, PTY.
    let n = z.pty_bytes.to_string();
    let base = shell_secs(&format!(
        "script -qfec 'head -c {n} /dev/zero' /dev/null > /dev/null"
    ));
    let (ours, got) = through_daemon(
        &d,
        "pty",
        true,
        &["head", "-c", &n, "/dev/zero"],
        z.pty_bytes,
    );
    rows.push((
        "pty: child → subscriber".into(),
        rate(got, z.pty_bytes, ours),
        format!("{:.0} MiB/s (`script`)", mib(z.pty_bytes, base)),
        format!("{:.2}", base / ours),
    ));

    // Spawn rate through the daemon: start `true`, see it exit, again — against a shell
    // doing the same fork/exec/wait loop.
    let t = Instant::now();
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "pipe"}));
    for _ in 0..z.spawns {
        let gen = c.ok(json!({"op": "spawn", "session": "pipe", "argv": ["true"]}))["gen"]
            .as_u64()
            .unwrap();
        c.events_until(|m| m.is("exited", gen));
    }
    let ours = t.elapsed().as_secs_f64();
    let base = shell_secs(&format!(
        "i=0; while [ $i -lt {} ]; do /bin/true; i=$((i+1)); done",
        z.spawns
    ));
    rows.push((
        "spawn → exit, one at a time".into(),
        format!("{:.0} /s", z.spawns as f64 / ours),
        format!("{:.0} /s (shell loop)", z.spawns as f64 / base),
        format!("{:.2}", base / ours),
    ));

    let mut d = d;
    assert_eq!(d.terminate(), Some(0));

    println!("| measure | genward | baseline | baseline / genward time |");
    println!("|---|---|---|---|");
    for (a, b, c, r) in rows {
        println!("| {a} | {b} | {c} | {r} |");
    }
}
