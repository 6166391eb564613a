//! Lossless subscriptions: a slow reader gets a flood byte-exact while the child waits for
//! it, with the daemon's memory bounded and other sessions flowing; a reader that never
//! reads is demoted after its bound and the child runs on; one that goes lets the child
//! run on at once.

mod util;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::Duration;

use genward::testkit::proc;
use serde_json::{json, Value};
use util::cli::{command, wait_bounded};
use util::daemon::{output_of, Client, Daemon, Msg, PATIENCE};

/// `seq 1 n` as the test expects it, written into `out` from line `from`.
fn seq_text(from: u64, to: u64, out: &mut Vec<u8>) {
    for i in from..=to {
        out.extend_from_slice(i.to_string().as_bytes());
        out.push(b'\n');
    }
}

fn rss_kib(pid: u32) -> u64 {
    proc::status_number(pid, "VmRSS").expect("the daemon's VmRSS")
}

/// A session that waits for a line on its input, then floods `seq 1 n` to its output.
fn spawn_flood(c: &mut Client, session: &str, n: u64) -> u64 {
    let script = format!("read go; exec seq 1 {n}");
    let r = c.ok(json!({"op": "spawn", "session": session, "argv": ["sh", "-c", script]}));
    r["gen"].as_u64().unwrap()
}

fn go(c: &mut Client, session: &str) {
    c.ok(json!({"op": "write", "session": session, "data": "go\n"}));
}

/// A reader of a subscription's raw stream that takes `chunk` bytes per read and pauses
/// now and then: slower than the child writes, so that its queue fills.
struct SlowReader {
    inner: BufReader<Throttled>,
}

struct Throttled {
    stream: UnixStream,
    chunk: usize,
    read: u64,
}

impl Read for Throttled {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.chunk);
        let got = self.stream.read(&mut buf[..n])?;
        let before = self.read;
        self.read += got as u64;
        // A pause every 4 MiB: the reader is slower than the writer, not stopped.
        if before / (4 << 20) != self.read / (4 << 20) {
            std::thread::sleep(Duration::from_millis(40));
        }
        Ok(got)
    }
}

impl SlowReader {
    fn new(stream: UnixStream, chunk: usize) -> SlowReader {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        SlowReader {
            inner: BufReader::with_capacity(
                chunk,
                Throttled {
                    stream,
                    chunk,
                    read: 0,
                },
            ),
        }
    }

    /// The next message: a JSON line, or an output frame's header and payload.
    fn next(&mut self) -> (Value, Vec<u8>) {
        let mut line = Vec::new();
        let n = self.inner.read_until(b'\n', &mut line).expect("read");
        assert!(n > 0, "the daemon closed the connection");
        let v: Value = serde_json::from_slice(&line).expect("a JSON line");
        if v["event"] != "output" {
            return (v, Vec::new());
        }
        let mut data = vec![0; v["len"].as_u64().unwrap() as usize + 1];
        self.inner.read_exact(&mut data).expect("payload");
        assert_eq!(data.pop(), Some(b'\n'));
        (v, data)
    }
}

/// Reads a lossless subscription's flood of `seq 1 n` to its end and checks every byte,
/// every offset, and that nothing was dropped; `meanwhile` runs once, after `at` bytes.
fn read_flood_exactly(
    reader: &mut SlowReader,
    gen: u64,
    n: u64,
    at: u64,
    mut meanwhile: impl FnMut(),
) -> u64 {
    let mut expected = Vec::new();
    let mut next_line = 1;
    let mut checked: u64 = 0;
    let mut called = false;
    loop {
        let (v, data) = reader.next();
        match v["event"].as_str() {
            Some("output") if v["gen"] == gen => {
                assert_eq!(
                    v["offset"].as_u64(),
                    Some(checked),
                    "offsets are contiguous"
                );
                while expected.len() < data.len() && next_line <= n {
                    let to = (next_line + 4096).min(n);
                    seq_text(next_line, to, &mut expected);
                    next_line = to + 1;
                }
                assert!(
                    expected.len() >= data.len() && expected[..data.len()] == data[..],
                    "bytes differ after {checked} bytes"
                );
                expected.drain(..data.len());
                checked += data.len() as u64;
                if !called && checked >= at {
                    called = true;
                    meanwhile();
                }
            }
            Some("dropped") => panic!("a lossless subscriber was sent {v}"),
            Some("demoted") => panic!("a reader that reads was demoted: {v}"),
            Some("exited") if v["gen"] == gen => {
                assert_eq!(v["code"], 0, "{v}");
                assert!(
                    expected.is_empty() && next_line > n,
                    "ended after {checked} bytes"
                );
                return checked;
            }
            _ => {}
        }
    }
}

#[test]
fn a_slow_lossless_reader_gets_a_flood_byte_exact_while_the_rest_flows() {
    flood_to_a_slow_reader(8_000_000); // 68 MB
}

/// The same with a 1 GiB-class stream (`cargo test --test daemon_lossless -- --ignored`).
#[test]
#[ignore = "a 1 GiB flood: about 100 s in a debug build"]
fn a_slow_lossless_reader_gets_a_gigabyte_flood_byte_exact() {
    flood_to_a_slow_reader(120_000_000); // 1.04 GB
}

/// A slow lossless reader of `seq 1 n`; midway, another session and `list` are served.
fn flood_to_a_slow_reader(n: u64) {
    let d = Daemon::start("lossless", &[]);
    let mut c = d.client();
    let gen = spawn_flood(&mut c, "flood", n);
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "flood", "from_start": true, "lossless": true}));
    let mut reader = SlowReader::new(sub.stream().try_clone().unwrap(), 16 * 1024);
    let rss_before = rss_kib(d.pid);
    let mut rss_peak = rss_before;
    go(&mut c, "flood");
    let mut other_gen = 0;
    let total = read_flood_exactly(&mut reader, gen, n, 8 << 20, || {
        // The flood waits for this reader, which reads nothing now: another session's
        // output still reaches another client, and `list` answers.
        let mut o = d.client();
        o.ok(json!({"op": "subscribe", "all": true}));
        other_gen = o.ok(json!({"op": "spawn", "session": "other", "argv": ["seq", "1", "50000"]}))
            ["gen"]
            .as_u64()
            .unwrap();
        let got = o.events_until(|m| m.is("exited", other_gen));
        let mut want = Vec::new();
        seq_text(1, 50_000, &mut want);
        assert_eq!(output_of(&got, other_gen), want);
        let list = o.ok(json!({"op": "list"}));
        assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "{list}");
        rss_peak = rss_peak.max(rss_kib(d.pid));
    });
    rss_peak = rss_peak.max(rss_kib(d.pid));
    assert!(total > n * 7, "{total} bytes");
    eprintln!("{total} bytes; daemon RSS {rss_before} KiB before, {rss_peak} KiB at most");
    // Bounded: the session's log, the subscriber's queue and the journal's mapped
    // segments, whatever the flood's size.
    assert!(
        rss_peak < rss_before + 64 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_peak} KiB"
    );
    assert!(other_gen > gen);
}

#[test]
fn a_lossless_reader_that_never_reads_is_demoted_and_the_child_runs_on() {
    let d = Daemon::start("lossless-stuck", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = spawn_flood(&mut c, "stuck", 3_000_000);
    let pid = u64::from(c.spawned_pid(gen));
    let mut stuck = d.client();
    stuck.ok(
        json!({"op": "subscribe", "session": "stuck", "lossless": true,
                    "demote_after": "300ms"}),
    );
    go(&mut c, "stuck");
    // `c` reads everything it is sent (it may be sent `dropped`): the child ends.
    let seen = c.events_until(|m| m.is("exited", gen));
    let exited = seen.last().unwrap().json();
    assert_eq!(exited["code"], 0, "{exited}");
    assert!(pid > 0);
    let at = read_past_demotion(&mut stuck, gen);
    assert!(at > 0 && at < 20_000_000, "demoted at {at}");
}

/// Reads what a stuck lossless reader was sent until `gen`'s end: everything up to its
/// demotion, contiguous, then the event, then (as an ordinary subscriber) a `dropped` for
/// what it missed, and the end. Returns the position it was demoted at.
fn read_past_demotion(stuck: &mut Client, gen: u64) -> u64 {
    let mut got: u64 = 0;
    let mut demoted_at = None;
    loop {
        match stuck.next_event() {
            Msg::Output(h, data) if demoted_at.is_none() => {
                assert_eq!(h["pos"].as_u64(), Some(got), "contiguous before demotion");
                got += data.len() as u64;
            }
            Msg::Json(v) if v["event"] == "demoted" => {
                assert_eq!(v["session"], "stuck");
                assert_eq!(v["reason"], "stalled", "{v}");
                assert_eq!(v["pos"].as_u64(), Some(got), "{v}");
                demoted_at = Some(got);
            }
            Msg::Json(v) if v["event"] == "dropped" => {
                assert!(demoted_at.is_some(), "dropped before demotion: {v}");
            }
            Msg::Json(v) if v["event"] == "exited" && v["gen"] == gen => break,
            _ => {}
        }
    }
    demoted_at.expect("a demoted event")
}

#[test]
fn an_upgrade_keeps_a_subscription_lossless() {
    let d = Daemon::start("lossless-upgrade", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = spawn_flood(&mut c, "stuck", 3_000_000);
    let mut stuck = d.client();
    stuck.ok(
        json!({"op": "subscribe", "session": "stuck", "lossless": true,
                    "demote_after": "300ms"}),
    );
    let up = c.request(json!({"op": "upgrade"}));
    assert_eq!(up["ok"], true, "{up}");
    go(&mut c, "stuck");
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["code"], 0);
    // Still lossless after the upgrade: held, then demoted, never dropped before.
    read_past_demotion(&mut stuck, gen);
}

#[test]
fn an_upgrade_while_a_lossless_reader_is_behind_loses_nothing() {
    let d = Daemon::start("lossless-upgrade-behind", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let n = 3_000_000; // 20 MB
    let gen = spawn_flood(&mut c, "flood", n);
    let pid = u64::from(c.spawned_pid(gen));
    drop(c);
    let mut sub = d.client();
    sub.ok(
        json!({"op": "subscribe", "session": "flood", "from_start": true, "lossless": true,
                "demote_after": "1h"}),
    );
    let mut c = d.client();
    go(&mut c, "flood");
    // Held: the session's log (raised for the lossless reader beyond its 1 MiB buffer)
    // and the reader's queue are full of what it has not read.
    util::sys::await_blocked_in_write(pid);
    let up = c.request(json!({"op": "upgrade"}));
    assert_eq!(up["ok"], true, "{up}");
    let mut reader = SlowReader::new(sub.stream().try_clone().unwrap(), 64 * 1024);
    let total = read_flood_exactly(&mut reader, gen, n, u64::MAX, || {});
    assert!(total > n * 6, "{total} bytes");
}

#[test]
fn a_lossless_reader_that_goes_lets_the_child_run_on() {
    let d = Daemon::start("lossless-gone", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = spawn_flood(&mut c, "held", 3_000_000);
    let pid = u64::from(c.spawned_pid(gen));
    let mut held = d.client();
    // A bound far beyond the test's patience: only its going can let the child run on.
    held.ok(
        json!({"op": "subscribe", "session": "held", "lossless": true,
                   "demote_after": "1h"}),
    );
    go(&mut c, "held");
    util::sys::await_blocked_in_write(pid);
    drop(held);
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["code"], 0);
    // The reader that went was never demoted: nobody was told anything about it.
    assert!(!seen.iter().any(|m| m.json()["event"] == "demoted"));
}

#[test]
fn with_two_lossless_readers_the_stuck_one_is_demoted_and_the_next_generation_is_paced_too() {
    let d = Daemon::start("lossless-two", &[]);
    let mut c = d.client();
    let n = 3_000_000;
    let gen = spawn_flood(&mut c, "stuck", n);
    let mut stuck = d.client();
    stuck.ok(
        json!({"op": "subscribe", "session": "stuck", "lossless": true,
                    "demote_after": "300ms"}),
    );
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "stuck", "lossless": true}));
    let mut reader = SlowReader::new(sub.stream().try_clone().unwrap(), 64 * 1024);
    go(&mut c, "stuck");
    // The slowest paces the child: the stuck one, until it is demoted; the one that reads
    // gets every byte either way.
    read_flood_exactly(&mut reader, gen, n, 0, || {});
    read_past_demotion(&mut stuck, gen);
    // A generation that replaces it is paced for the remaining lossless reader too.
    let next = spawn_flood(&mut c, "stuck", n);
    go(&mut c, "stuck");
    read_flood_exactly(&mut reader, next, n, 0, || {});
}

#[test]
fn logs_lossless_gets_every_byte_to_a_slow_pipe() {
    let d = Daemon::start("lossless-cli", &[]);
    let mut c = d.client();
    let n = 3_000_000; // 21 MB: more than every queue on the way holds
    let script = format!("echo ready; read go; exec seq 1 {n}");
    let r = c.ok(json!({"op": "spawn", "session": "flood", "argv": ["sh", "-c", script]}));
    let gen = r["gen"].as_u64().unwrap().to_string();
    let args = ["logs", "flood", "-f", "--gen", &gen, "--lossless"];
    let mut logs = command(&d, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn genward logs");
    let mut out = BufReader::new(logs.stdout.take().unwrap());
    // Subscribed once it prints what came before the flood.
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first, "ready\n");
    go(&mut c, "flood");
    // A sink far slower than `seq`: 16 KiB reads with a pause after each.
    let mut rest = Vec::new();
    let mut chunk = vec![0; 16 << 10];
    loop {
        let got = out.read(&mut chunk).unwrap();
        if got == 0 {
            break;
        }
        rest.extend_from_slice(&chunk[..got]);
        std::thread::sleep(Duration::from_micros(500));
    }
    let mut want = Vec::new();
    seq_text(1, n, &mut want);
    assert!(rest == want, "{} bytes of {}", rest.len(), want.len());
    assert_eq!(wait_bounded(logs).status.code(), Some(0));
}

/// A session's log is raised for a lossless reader (so that what it has not read yet is
/// not cut) and goes back to the session's own `buffer` once no lossless reader is left:
/// a later reader from position 0 finds only the last `buffer` bytes, after a `dropped`.
#[test]
fn the_log_raised_for_a_lossless_reader_goes_back_to_its_size_when_the_reader_leaves() {
    let d = Daemon::start("lossless-lowered", &[]);
    let mut c = d.client();
    // About 2.3 MB of output: more than the 1 MiB `buffer`, less than the raised log.
    let n = 350_000;
    let gen = spawn_flood(&mut c, "big", n);
    let mut reader = d.client();
    reader.ok(json!({"op": "subscribe", "session": "big", "lossless": true}));
    go(&mut c, "big");
    let seen = reader.events_until(|m| m.is("exited", gen));
    let mut expected = Vec::new();
    seq_text(1, n, &mut expected);
    assert!(output_of(&seen, gen) == expected, "every byte, in order");
    // While the lossless reader is there, everything it was sent is still retained.
    let mut early = d.client();
    early.ok(json!({"op": "subscribe", "session": "big", "from_start": true}));
    let replay = early.events_until(|m| m.is("exited", gen));
    assert!(!replay.iter().any(|m| m.json()["event"] == "dropped"));
    assert!(output_of(&replay, gen) == expected);
    reader.ok(json!({"op": "unsubscribe", "session": "big"}));
    let mut late = d.client();
    late.ok(json!({"op": "subscribe", "session": "big", "from_pos": 0}));
    let replay = late.events_until(|m| m.is("exited", gen));
    let first = replay[0].json();
    assert_eq!(first["event"], "dropped", "{first}");
    let kept = output_of(&replay, gen);
    assert!(
        kept.len() <= 1 << 20 && expected.ends_with(&kept),
        "{} bytes kept",
        kept.len()
    );
}

/// Removing a session lets its output flow at once: what its process still writes while
/// being stopped is read, not held for a lossless reader that takes nothing until the
/// drain deadline throws it away (for every subscriber).
#[test]
fn removing_a_session_lets_output_held_for_a_lossless_reader_flow() {
    let d = Daemon::start("lossless-remove", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = spawn_flood(&mut c, "held", 3_000_000);
    let pid = u64::from(c.spawned_pid(gen));
    let mut stuck = d.client();
    stuck.ok(
        json!({"op": "subscribe", "session": "held", "lossless": true,
                    "demote_after": "1h"}),
    );
    go(&mut c, "held");
    util::sys::await_blocked_in_write(pid);
    c.ok(json!({"op": "remove", "session": "held"}));
    let seen = c.events_until(|m| m.is("exited", gen));
    let exited = seen.last().unwrap().json();
    assert_eq!(exited["cause"], "stopped", "{exited}");
    assert_eq!(
        exited["truncated"], false,
        "nothing was held until the drain deadline: {exited}"
    );
    assert_eq!(exited["discarded"], 0, "{exited}");
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    // The reader is told its subscription is an ordinary one now, then how it ended.
    let seen =
        stuck.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    let demoted = seen
        .iter()
        .position(|m| m.json()["event"] == "demoted" && m.json()["reason"] == "removing");
    let end = seen.iter().position(|m| m.is("exited", gen));
    assert!(demoted.is_some() && end.is_some(), "{seen:?}");
}
