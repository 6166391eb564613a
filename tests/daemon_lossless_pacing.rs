//! Lossless pacing at its edges: a reader that takes a little at a time, less than its
//! socket must free before the daemon is told there is room, is never demoted, nor is
//! one that reads in small pieces, less than one of the daemon's big writes per
//! `demote_after`; output a
//! generation's other processes write after its leader exited is paced too, up to the
//! drain deadline, and never dropped.

mod util;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::daemon::{Client, Daemon, PATIENCE};

/// A subscriber's connection read by hand: how much and when is the test's to decide.
struct Raw {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Raw {
    /// A new connection that sends `req` and reads its answer, which must be a success.
    fn subscribe(d: &Daemon, req: Value) -> Raw {
        let mut stream = UnixStream::connect(&d.socket).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        stream.write_all(&line).unwrap();
        let mut raw = Raw {
            stream,
            buf: Vec::new(),
        };
        let (answer, _) = raw.next();
        assert_eq!(answer["ok"], true, "{answer}");
        raw
    }

    /// One read of at most `max` bytes into the buffer; how many it got.
    fn read_some(&mut self, max: usize) -> usize {
        let at = self.buf.len();
        self.buf.resize(at + max, 0);
        let n = self.stream.read(&mut self.buf[at..]).expect("read");
        assert!(n > 0, "the daemon closed the connection");
        self.buf.truncate(at + n);
        n
    }

    /// Bytes the daemon wrote that this side has not read yet.
    fn queued(&self) -> u64 {
        rustix::io::ioctl_fionread(&self.stream).expect("FIONREAD")
    }

    /// Waits (bounded) until the daemon wrote more than `was` is still queued.
    fn await_more_than(&self, was: u64) {
        let deadline = Instant::now() + PATIENCE;
        while self.queued() <= was {
            assert!(Instant::now() < deadline, "the daemon never wrote again");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The next message: a JSON line, or an output frame's header and payload.
    fn next(&mut self) -> (Value, Vec<u8>) {
        let end = loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                break i;
            }
            self.read_some(256 << 10);
        };
        let v: Value = serde_json::from_slice(&self.buf[..end]).expect("a JSON line");
        self.buf.drain(..=end);
        if v["event"] != "output" {
            return (v, Vec::new());
        }
        let len = v["len"].as_u64().unwrap() as usize;
        while self.buf.len() < len + 1 {
            self.read_some(256 << 10);
        }
        assert_eq!(self.buf[len], b'\n');
        let data = self.buf[..len].to_vec();
        self.buf.drain(..=len);
        (v, data)
    }

    /// Everything up to `gen`'s `exited`, which it returns: output must come at
    /// contiguous positions, with neither `dropped` nor `demoted`. Also returns the
    /// output bytes per stream (stdout, stderr).
    fn read_to_end(&mut self, gen: u64) -> (Value, u64, Vec<u8>) {
        let (mut stdout, mut stderr) = (0, Vec::new());
        let mut pos = None;
        loop {
            let (v, data) = self.next();
            match v["event"].as_str() {
                Some("output") => {
                    let at = v["pos"].as_u64().unwrap();
                    assert_eq!(*pos.get_or_insert(at), at, "contiguous: {v}");
                    pos = Some(at + data.len() as u64);
                    if v["stream"] == "stderr" {
                        stderr.extend_from_slice(&data);
                    } else {
                        stdout += data.len() as u64;
                    }
                }
                Some("dropped") => panic!("a lossless subscriber was sent {v}"),
                Some("demoted") => panic!("a lossless subscriber was demoted: {v}"),
                Some("exited") if v["gen"] == gen => return (v, stdout, stderr),
                _ => {}
            }
        }
    }
}

fn current_gen(c: &mut Client, session: &str) -> Value {
    let got = c.ok(json!({"op": "get", "session": session}));
    got["session"]["generations"][0].clone()
}

#[test]
fn a_lossless_reader_that_takes_a_little_at_a_time_is_never_demoted() {
    let d = Daemon::start("lossless-trickle", &[]);
    let mut c = d.client();
    let r =
        c.ok(json!({"op": "spawn", "session": "tr", "argv": ["sh", "-c", "exec cat /dev/zero"]}));
    let gen = r["gen"].as_u64().unwrap();
    let mut sub = Raw::subscribe(
        &d,
        json!({"op": "subscribe", "session": "tr", "lossless": true, "demote_after": "1s"}),
    );
    let deadline = Instant::now() + PATIENCE;
    let pid = loop {
        if let Some(pid) = current_gen(&mut c, "tr")["pid"].as_u64() {
            break pid;
        }
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its socket and queue are full and the child waits for it.
    util::sys::await_blocked_in_write(pid);
    // Each read frees far less of the socket than the poll waits for before it reports
    // room, and the next read comes only once the daemon wrote again: a reader that takes
    // bytes, however slowly, keeps its subscription lossless.
    for _ in 0..4 {
        // Counted from before the read: a write between the read and a count after it
        // would be taken for what was there, and the next one waited for in vain.
        let before = sub.queued();
        let took = sub.read_some(64 << 10) as u64;
        sub.await_more_than(before.saturating_sub(took));
    }
    c.ok(json!({"op": "stop", "session": "tr"}));
    let (exited, _, _) = sub.read_to_end(gen);
    assert_eq!(exited["cause"], "stopped", "{exited}");
}

#[test]
fn a_lossless_reader_that_reads_small_pieces_steadily_is_never_demoted() {
    let d = Daemon::start("lossless-small-reads", &[]);
    let mut c = d.client();
    const FLOOD: u64 = 20_000_000;
    // Following every session, so paced from the first byte.
    let mut sub = Raw::subscribe(
        &d,
        json!({"op": "subscribe", "all": true, "lossless": true, "demote_after": "1s"}),
    );
    let r = c.ok(json!({"op": "spawn", "session": "sr",
                        "argv": ["head", "-c", FLOOD.to_string(), "/dev/zero"]}));
    let gen = r["gen"].as_u64().unwrap();
    let deadline = Instant::now() + PATIENCE;
    let pid = loop {
        if let Some(pid) = current_gen(&mut c, "sr")["pid"].as_u64() {
            break pid;
        }
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its socket and queue are full and the child waits for it.
    util::sys::await_blocked_in_write(pid);
    // The scenario itself: 4 KiB every 200 ms (20 KiB per `demote_after`: less than the
    // kernel buffers an unbounded write fills, more than the 16 KiB the protocol says is
    // enough) for six periods of `demote_after`, each read keeping to the schedule
    // however late the one before it was. It keeps taking bytes: it must stay lossless.
    let start = Instant::now();
    for k in 1..=30 {
        sub.read_some(4 << 10);
        let next = start + Duration::from_millis(200 * k);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    // Then everything, at full speed: every byte at contiguous positions, and neither
    // `demoted` nor `dropped` on the way (`read_to_end` fails on either).
    let (exited, stdout, _) = sub.read_to_end(gen);
    assert_eq!(stdout, FLOOD, "{exited}");
    assert_eq!(exited["discarded"], 0, "{exited}");
}

#[test]
fn output_held_when_the_leader_exits_stays_paced_for_a_lossless_reader() {
    let d = Daemon::start("lossless-drain", &[]);
    let mut c = d.client();
    // A writer of 20 MB (far more than the session's log holds) starts and says its pid;
    // the leader exits when told; the drain deadline is far beyond the test's patience.
    let pid_file = d.dir.join("writer.pid");
    let script = format!(
        "head -c 20000000 /dev/zero & echo $! > {}; read go; exit 0",
        pid_file.display()
    );
    let mut sub = Raw::subscribe(
        &d,
        json!({"op": "subscribe", "all": true, "lossless": true, "demote_after": "1h"}),
    );
    // Following every session, so paced from the first byte. An ordinary follower too,
    // to be told when the leader is gone (it never paces).
    c.ok(json!({"op": "subscribe", "all": true}));
    let r = c.ok(
        json!({"op": "spawn", "session": "e", "argv": ["sh", "-c", script],
                        "on_exit": "leave", "drain": "1h"}),
    );
    let gen = r["gen"].as_u64().unwrap();
    c.events_until(|m| m.is("spawned", gen));
    // (Nothing reports a file written: it is looked at, within the patience.)
    let deadline = Instant::now() + PATIENCE;
    let writer: u64 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the writer never said its pid");
        std::thread::yield_now();
    };
    // Held while the leader runs (this reader takes nothing) ...
    util::sys::await_blocked_in_write(writer);
    c.ok(json!({"op": "write", "session": "e", "data": "go\n"}));
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "exiting");
    // ... and still held once it is gone: read to its end instead, the rest would be
    // dropped for this reader.
    util::sys::await_blocked_in_write(writer);
    let (exited, stdout, _) = sub.read_to_end(gen);
    assert_eq!(stdout, 20_000_000, "{exited}");
    assert_eq!(exited["truncated"], false, "{exited}");
    assert_eq!(exited["discarded"], 0, "{exited}");
}

#[test]
fn at_the_drain_deadline_held_output_is_discarded_and_counted_never_dropped() {
    let d = Daemon::start("lossless-drain-deadline", &[]);
    let mut c = d.client();
    let script = "read go; head -c 20000000 /dev/zero & exit 0";
    let r = c.ok(
        json!({"op": "spawn", "session": "e", "argv": ["sh", "-c", script],
                        "on_exit": "leave", "drain": "300ms"}),
    );
    let gen = r["gen"].as_u64().unwrap();
    let mut sub = Raw::subscribe(
        &d,
        json!({"op": "subscribe", "session": "e", "from_start": true, "lossless": true,
               "demote_after": "1h"}),
    );
    c.ok(json!({"op": "write", "session": "e", "data": "go\n"}));
    // The reader takes nothing until the generation has ended: the drain deadline, not
    // the reader, bounds how long its end waits.
    let end = c.ok(json!({"op": "wait", "session": "e", "gen": gen}));
    let end = &end["end"];
    assert_eq!(end["truncated"], true, "{end}");
    assert!(end["discarded"].as_u64().unwrap() > 0, "{end}");
    let (exited, stdout, _) = sub.read_to_end(gen);
    assert_eq!(&exited, end);
    assert!(stdout < 20_000_000, "{stdout} bytes");
}
