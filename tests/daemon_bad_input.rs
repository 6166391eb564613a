//! Hostile and broken clients: each gets a clear error or a counted drop, everyone else
//! keeps being served, and the daemon's memory and descriptors come back.

mod util;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use genward::testkit::proc::{self, fd_count};
use serde_json::{json, Value};
use util::daemon::{Client, Daemon, Msg};

fn rss_kib(pid: u32) -> u64 {
    proc::status_number(pid, "VmRSS").expect("the daemon's VmRSS")
}

/// Sends one raw line and returns the error response.
fn raw_error(c: &mut Client, line: &[u8]) -> Value {
    c.send_raw(line);
    match c.read_msg() {
        Msg::Json(v) => {
            assert_eq!(v["ok"], false, "{v}");
            v
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_requests_get_specific_errors_and_change_nothing() {
    let d = Daemon::start("bad-requests", &[]);
    let mut c = d.client();
    let e = raw_error(&mut c, b"{not json\n");
    assert_eq!(e["error"]["code"], "bad_request");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("byte"),
        "{e}"
    );
    let e = raw_error(&mut c, b"[1,2]\n");
    assert_eq!(e["error"]["code"], "bad_request");
    let e = c.err(json!({"op": "frobnicate"}), "unknown_op");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("frobnicate"));
    c.err(
        json!({"op": "spawn", "session": "a", "argv": "ls"}),
        "bad_request",
    );
    c.err(
        json!({"op": "spawn", "session": "a", "argv": []}),
        "bad_request",
    );
    c.err(
        json!({"op": "write", "session": "a", "if_gen": -1, "data": "x"}),
        "bad_request",
    );
    c.err(json!({"op": "get", "session": 5}), "bad_request");
    for name in ["../x", "", &"a".repeat(65), "a\u{0}b", "a b", ".x"] {
        let e = c.err(
            json!({"op": "spawn", "session": name, "argv": ["true"]}),
            "bad_request",
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains("session"),
            "{e}"
        );
    }
    c.err(
        json!({"op": "spawn", "session": "a", "argv": ["true"], "stop_signal": "SIGFOO"}),
        "bad_request",
    );
    c.err(
        json!({"op": "signal", "session": "a", "signal": 0}),
        "bad_request",
    );
    c.err(
        json!({"op": "signal", "session": "nobody", "signal": "TERM"}),
        "no_such_session",
    );
    // Nothing was created by any of that.
    assert_eq!(c.ok(json!({"op": "list"}))["sessions"], json!([]));
}

/// "An empty line is an invalid request": each is answered (one answer per line, so a
/// client counting them never waits), and the connection goes on.
#[test]
fn blank_lines_are_answered_as_invalid_requests() {
    let d = Daemon::start("blank-lines", &[]);
    let mut c = d.client();
    for line in [&b"\n"[..], b"   \n", b"\r\n", b" \t \r\n"] {
        let e = raw_error(&mut c, line);
        assert_eq!(e["error"]["code"], "bad_request", "{e}");
        assert_eq!(e["id"], Value::Null, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("empty line"),
            "{e}"
        );
    }
    c.ok(json!({"op": "hello"}));
}

#[test]
fn a_ten_mebibyte_line_is_refused_and_the_connection_survives() {
    let d = Daemon::start("long-line", &[]);
    let mut c = d.client();
    let mut line = br#"{"op":"hello","pad":""#.to_vec();
    line.resize(10 << 20, b'x');
    line.extend_from_slice(b"\"}\n");
    let writer = {
        let mut w = UnixStream::connect(&d.socket).unwrap();
        std::thread::spawn(move || {
            let _ = w.write_all(&line);
            w
        })
    };
    // Same connection semantics, checked on a separate client: the long-line client gets
    // one `limit` error and can go on.
    let mut w = writer.join().unwrap();
    let mut resp = Vec::new();
    let mut byte = [0u8; 1];
    while resp.last() != Some(&b'\n') {
        w.read_exact(&mut byte).unwrap();
        resp.push(byte[0]);
    }
    let v: Value = serde_json::from_slice(&resp).unwrap();
    assert_eq!(v["error"]["code"], "limit", "{v}");
    w.write_all(b"{\"id\":9,\"op\":\"hello\"}\n").unwrap();
    resp.clear();
    while resp.last() != Some(&b'\n') {
        w.read_exact(&mut byte).unwrap();
        resp.push(byte[0]);
    }
    let v: Value = serde_json::from_slice(&resp).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    c.ok(json!({"op": "hello"}));
}

#[test]
fn vanishing_clients_and_a_thousand_connections_leave_nothing_behind() {
    let d = Daemon::start("many-clients", &[]);
    let pid = d.child.id();
    let mut c = d.client();
    // The first record any session logs opens the output journal's segment: one
    // descriptor for the daemon's lifetime, counted in the baseline.
    let gen = c.ok(json!({"op": "spawn", "session": "first", "argv": ["true"]}))["gen"].clone();
    c.ok(json!({"op": "wait", "session": "first", "gen": gen}));
    let fds_before = fd_count(pid);
    // A client that asks for a large answer and disappears before reading it.
    c.ok(json!({"op": "spawn", "session": "big", "argv": ["sh", "-c", "head -c 900000 /dev/zero; sleep 1000"]}));
    for _ in 0..20 {
        let mut v = UnixStream::connect(&d.socket).unwrap();
        v.write_all(
            b"{\"op\":\"subscribe\",\"session\":\"big\",\"from_start\":true}\n{\"op\":\"list\"}\n",
        )
        .unwrap();
        drop(v);
    }
    // The test itself holds 1,000 sockets: make sure its own soft limit allows that.
    // SAFETY: plain getrlimit/setrlimit on our own process with a valid struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let mut conns = Vec::new();
    for i in 0..1000 {
        let mut s =
            UnixStream::connect(&d.socket).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        s.write_all(b"{\"id\":1,\"op\":\"hello\"}\n").unwrap();
        conns.push(s);
    }
    for s in &mut conns {
        let mut buf = [0u8; 1];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(buf[0], b'{');
    }
    c.ok(json!({"op": "hello"}));
    drop(conns);
    c.ok(json!({"op": "stop", "session": "big"}));
    c.ok(json!({"op": "remove", "session": "big"}));
    // Once the daemon has seen every hang-up, its descriptors are back where they were.
    let mut settled = false;
    for _ in 0..200 {
        c.ok(json!({"op": "hello"}));
        if fd_count(pid) <= fds_before {
            settled = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10)); // hang-ups have no event we can observe from outside
    }
    assert!(settled, "daemon fds {} > {fds_before}", fd_count(pid));
}

#[test]
fn a_subscriber_that_never_reads_costs_bounded_memory_and_gets_a_counted_drop() {
    let d = Daemon::start("stalled", &[]);
    let pid = d.child.id();
    let mut c = d.client();
    c.ok(json!({"op": "hello"}));
    let rss_before = rss_kib(pid);
    // The stalled subscriber: subscribes to everything and then never reads.
    let mut stalled = d.client();
    stalled.ok(json!({"op": "subscribe", "all": true}));
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "flood",
        "argv": ["head", "-c", "104857600", "/dev/zero"]}))["gen"]
        .as_u64()
        .unwrap();
    // The reading client sees the child finish: the stalled one blocked nobody.
    c.events_until(|m| m.is("exited", gen));
    let rss_peak = rss_kib(pid);
    assert!(
        rss_peak < rss_before + 32 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_peak} KiB"
    );
    // The stalled subscriber now reads: a `dropped` names the range it missed, and the
    // byte accounting adds up to what the child wrote.
    let mut got = 0u64;
    let mut dropped = 0u64;
    stalled.events_until(|m| {
        match m {
            Msg::Output(_, data) => got += data.len() as u64,
            Msg::Json(v) if v["event"] == "dropped" => {
                dropped += v["to"].as_u64().unwrap() - v["from"].as_u64().unwrap()
            }
            _ => {}
        }
        m.is("exited", gen)
    });
    assert!(
        dropped > 0,
        "a stalled subscriber must have missed something"
    );
    assert_eq!(
        got + dropped,
        100 << 20,
        "delivered {got} + dropped {dropped}"
    );
}

#[test]
fn pending_waits_per_connection_are_bounded() {
    let d = Daemon::start("waits", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "spawn", "session": "w", "argv": ["sleep", "1000"]}));
    let mut lines = Vec::new();
    for i in 0..1025 {
        lines.extend_from_slice(
            format!("{{\"id\":{i},\"op\":\"wait\",\"session\":\"w\"}}\n").as_bytes(),
        );
    }
    let mut w = d.client();
    w.send_raw(&lines);
    // The first 1024 wait; the 1025th is refused at once.
    match w.read_msg() {
        Msg::Json(v) => {
            assert_eq!(v["id"], 1024, "{v}");
            assert_eq!(v["error"]["code"], "limit", "{v}");
        }
        other => panic!("{other:?}"),
    }
    // Ending the generation answers all of them.
    c.ok(json!({"op": "stop", "session": "w"}));
    for _ in 0..1024 {
        match w.read_msg() {
            Msg::Json(v) => assert_eq!(v["ok"], true, "{v}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_subscriber_under_an_endless_flood_still_gets_answers() {
    let d = Daemon::start("flood-answers", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "z", "argv": ["cat", "/dev/zero"]}))["gen"]
        .as_u64()
        .unwrap();
    // Requests keep being read and answered while output keeps the queue full.
    for _ in 0..20 {
        c.ok(json!({"op": "hello"}));
    }
    c.ok(json!({"op": "stop", "session": "z", "if_gen": gen}));
    c.events_until(|m| m.is("exited", gen));
}

#[test]
fn pipelined_requests_from_a_client_that_never_reads_are_bounded() {
    let d = Daemon::start("pipelined", &[]);
    let pid = d.child.id();
    let mut c = d.client();
    for i in 0..50 {
        c.ok(json!({"op": "spawn", "session": format!("s{i}"), "argv": ["sleep", "1000"]}));
    }
    let rss_before = rss_kib(pid);
    // 10,000 `list`s (each answer ~15 kB) sent at once, answers never read.
    let mut hog = UnixStream::connect(&d.socket).unwrap();
    let lines = b"{\"op\":\"list\"}\n".repeat(10_000);
    let writer = std::thread::spawn(move || {
        let _ = hog.write_all(&lines);
        hog
    });
    // Everyone else is still served, promptly enough to be answered at all.
    for _ in 0..20 {
        c.ok(json!({"op": "hello"}));
    }
    let rss_after = rss_kib(pid);
    assert!(
        rss_after < rss_before + 48 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    drop(writer);
    c.ok(json!({"op": "shutdown"}));
}

#[test]
fn tiny_pipelined_requests_cost_their_bytes_not_an_allocation_each() {
    const HOGS: usize = 24;
    let d = Daemon::start("tiny-lines", &[]);
    let pid = d.child.id();
    let mut c = d.client();
    c.ok(json!({"op": "hello"}));
    let rss_before = rss_kib(pid);
    // Each hog fills its socket with empty lines (one byte each, every one an invalid
    // request with an answer) and reads none of the answers: its requests pile up in
    // the daemon, at one read's worth of bytes each, however many lines that is.
    let hogs: Vec<UnixStream> = (0..HOGS)
        .map(|_| {
            let mut hog = UnixStream::connect(&d.socket).unwrap();
            hog.set_nonblocking(true).unwrap();
            let lines = vec![b'\n'; 64 * 1024];
            while hog.write(&lines).is_ok() {}
            hog.set_nonblocking(false).unwrap();
            hog
        })
        .collect();
    // An answer on each hog means the daemon has read from it.
    for mut hog in &hogs {
        hog.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let mut first = [0u8; 1];
        assert_eq!(
            hog.read(&mut first).unwrap(),
            1,
            "the daemon answered a hog"
        );
    }
    c.ok(json!({"op": "hello"}));
    let rss_after = rss_kib(pid);
    // About 1 MiB of answers and one read's worth of requests each; an allocation per
    // line was more than 4 MiB each.
    assert!(
        rss_after < rss_before + (HOGS as u64) * 2 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    drop(hogs);
    c.ok(json!({"op": "shutdown"}));
}

#[test]
fn unfinished_lines_of_many_connections_are_bounded_together() {
    const HOGS: usize = 200;
    const LINE: usize = 1_000_000; // within the 1 MiB line limit
    let d = Daemon::start("many-long-lines", &[]);
    let pid = d.child.id();
    let mut c = d.client();
    c.ok(json!({"op": "hello"}));
    let rss_before = rss_kib(pid);
    // Each hog sends most of a long line and stops: 200 MB in unfinished lines, each
    // within the line limit. The daemon keeps 64 MiB of them; past that, a connection
    // holding more than 16 KiB has its line refused.
    let blank = vec![b' '; LINE];
    let mut hogs: Vec<Client> = (0..HOGS)
        .map(|_| {
            let mut hog = d.client();
            hog.send_raw(&blank);
            hog
        })
        .collect();
    let rss_peak = rss_kib(pid);
    assert!(
        rss_peak < rss_before + 80 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_peak} KiB"
    );
    // Each hog ends its line and says hello: a line kept is answered as the blank line it
    // is, a refused one was answered at once, and every connection is served after it.
    let mut refused = 0;
    for hog in &mut hogs {
        hog.send_raw(b"\n{\"id\":1,\"op\":\"hello\"}\n");
        let first = match hog.read_msg() {
            Msg::Json(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(first["ok"], false, "{first}");
        let message = first["error"]["message"].as_str().unwrap();
        if first["error"]["code"] == "limit" {
            assert!(
                message.contains("refused at 16384 bytes") && message.contains("64 MiB"),
                "{first}"
            );
            refused += 1;
        } else {
            assert_eq!(first["error"]["code"], "bad_request", "{first}");
        }
        match hog.read_msg() {
            Msg::Json(v) => assert_eq!(v["ok"], true, "{v}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(refused >= HOGS - 70, "only {refused} lines refused");
    // Once they are gone, a line of the full length is read again.
    drop(hogs);
    let mut big = d.client();
    let mut line = b"{\"id\":2,\"op\":\"hello\"".to_vec();
    line.resize(LINE, b' ');
    line.extend_from_slice(b"}\n");
    big.send_raw(&line);
    match big.read_msg() {
        Msg::Json(v) => assert_eq!(v["ok"], true, "{v}"),
        other => panic!("{other:?}"),
    }
    c.ok(json!({"op": "shutdown"}));
}

#[test]
fn what_a_client_sent_never_makes_a_line_from_the_daemon_too_long() {
    const LINE: usize = 1 << 20;
    let d = Daemon::start("long-lines", &[]);
    let mut c = d.client();
    // A spec beyond the limit is refused, and nothing is made.
    let big = "x".repeat(300 << 10);
    let r = c.err(
        json!({"op": "spawn", "session": "big", "argv": ["true"], "env": {"A": big}}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("beyond the limit of 262144"), "{message}");
    c.err(json!({"op": "get", "session": "big"}), "no_such_session");

    // A program path within it, quoted (and escaped twice) in every failure's message:
    // each start fails, and every line the daemon sends stays within the line limit.
    let path = format!("/{}", "\"".repeat(120_000));
    let stream = UnixStream::connect(&d.socket).unwrap();
    stream
        .set_read_timeout(Some(util::daemon::PATIENCE))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut send = |v: Value| {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        writer.write_all(&line).unwrap();
    };
    let mut longest = 0;
    let mut until = |pred: &dyn Fn(&Value) -> bool| -> Value {
        loop {
            let mut line = Vec::new();
            std::io::BufRead::read_until(&mut reader, b'\n', &mut line).unwrap();
            assert!(line.len() <= LINE + 1, "a line of {} bytes", line.len());
            longest = longest.max(line.len());
            let v: Value = serde_json::from_slice(&line).unwrap();
            if pred(&v) {
                return v;
            }
        }
    };
    send(json!({"id": 1, "op": "subscribe", "all": true}));
    until(&|v| v["id"] == 1);
    for id in 2..5 {
        send(json!({"id": id, "op": "spawn", "session": "q", "argv": [path]}));
        let gen = until(&|v| v["id"] == id)["gen"].clone();
        until(&|v| v["event"] == "spawn_failed" && v["gen"] == gen);
    }
    send(json!({"id": 5, "op": "get", "session": "q"}));
    let got = until(&|v| v["id"] == 5);
    assert_eq!(
        got["session"]["recent_ends"].as_array().map(Vec::len),
        Some(3),
        "{got}"
    );
    send(json!({"id": 6, "op": "list", "limit": 1}));
    let page = until(&|v| v["id"] == 6);
    assert_eq!(page["sessions"].as_array().map(Vec::len), Some(1), "{page}");
    send(json!({"id": 7, "op": "list"}));
    until(&|v| v["id"] == 7 && v["ok"] == true);
    eprintln!("longest line: {longest} bytes");
}
