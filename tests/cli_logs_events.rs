//! `genward logs` (replay, per generation, following) and `genward events` (people's
//! lines and JSON) against a real daemon.

mod util;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use genward::proto::base64;
use serde_json::{json, Value};
use util::cli::{command, gw, gw_ok, wait_bounded, Streaming};
use util::daemon::Daemon;

#[test]
fn logs_replays_stdout_and_stderr_byte_exact() {
    let d = Daemon::start("cli-logs", &[]);
    let gen = gw_ok(
        &d,
        &[
            "run",
            "p",
            "--",
            "sh",
            "-c",
            r"printf 'out\377\000\n'; printf 'err\n' >&2",
        ],
    );
    assert_eq!(gw(&d, &["wait", "p", "--gen", &gen]).code, Some(0));
    let out = gw(&d, &["logs", "p"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.raw, b"out\xff\x00\n");
    assert_eq!(out.stderr, "err\n");
}

#[test]
fn logs_gen_shows_one_generation_only() {
    let d = Daemon::start("cli-logs-gen", &[]);
    let first = gw_ok(&d, &["run", "p", "--", "echo", "first"]);
    assert_eq!(gw(&d, &["wait", "p", "--gen", &first]).code, Some(0));
    let second = gw_ok(&d, &["run", "p", "--", "echo", "second"]);
    assert_eq!(gw(&d, &["wait", "p", "--gen", &second]).code, Some(0));
    assert_eq!(gw(&d, &["logs", "p", "--gen", &first]).ok(), "first\n");
    assert_eq!(gw(&d, &["logs", "p", "--gen", &second]).ok(), "second\n");
    assert_eq!(gw(&d, &["logs", "p"]).ok(), "first\nsecond\n");
    let missing = gw(&d, &["logs", "nobody"]);
    assert_eq!(missing.code, Some(1));
    assert!(missing.stderr.contains("no session"), "{missing:?}");
}

#[test]
fn logs_follow_prints_new_output_and_ends_with_its_generation() {
    let d = Daemon::start("cli-logs-f", &[]);
    let gen = gw_ok(&d, &["run", "cat", "--", "cat"]);
    gw(&d, &["send", "cat", "before\n"]).ok();
    let mut follow = Streaming::start(&d, &["logs", "cat", "-f", "--gen", &gen]);
    follow.until(|l| l == "before");
    gw(&d, &["send", "cat", "after\n"]).ok();
    follow.until(|l| l == "after");
    gw(&d, &["send", "cat", "--eof"]).ok();
    // With --gen, following ends when that generation does.
    assert_eq!(follow.finish(), Some(0));
}

#[test]
fn events_prints_one_line_per_event() {
    let d = Daemon::start("cli-events", &[]);
    let mut events = Streaming::start(&d, &["events"]);
    let mut json = Streaming::start(&d, &["events", "--json"]);
    // Both subscriptions are in place once each has reported something: a ticking
    // session produces output until both have.
    let tick = "while :; do echo tick; sleep 0.1; done";
    let probe = gw_ok(&d, &["run", "probe", "--", "sh", "-c", tick]);
    events.until(|l| l.starts_with(&format!("probe gen {probe}: ")));
    json.until(|l| l.contains("\"probe\""));
    gw(&d, &["stop", "probe"]).ok();

    let gen = gw_ok(&d, &["run", "e", "--", "sh", "-c", "echo hi; exit 4"]);
    let lines = events.until(|l| l.starts_with(&format!("e gen {gen}: exit")));
    let lines: Vec<String> = lines.into_iter().filter(|l| l.starts_with("e ")).collect();
    assert!(
        lines.contains(&format!("e gen {gen}: 3 bytes on stdout")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("e gen {gen}: spawned, pid "))),
        "{lines:?}"
    );
    assert_eq!(lines.last().unwrap(), &format!("e gen {gen}: exit 4"));

    let lines = json.until(|l| l.contains("\"exited\"") && l.contains("\"e\""));
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["session"] == "e")
        .collect();
    let output = parsed
        .iter()
        .find(|v| v["event"] == "output" && v["session"] == "e")
        .unwrap();
    assert_eq!(output["data_b64"], "aGkK");
    let exited = parsed.last().unwrap();
    assert_eq!(exited["code"], 4);
    assert_eq!(exited["gen"].to_string(), gen);
}

#[test]
fn logs_follow_ends_with_its_generation_even_when_its_exit_was_evicted() {
    // A reader that falls behind by more than the session's replay log is told `dropped`,
    // and the records in that range — the followed generation's `exited` among them —
    // are never sent to it. `logs -f` must still stop when that generation has ended,
    // not follow its successor for ever.
    let d = Daemon::start("cli-logs-f-evicted", &[]);
    let mut c = d.client();
    let flood = "head -c 16000000 /dev/zero | tr '\\0' x | fold -w 100; echo";
    let first = c.ok(serde_json::json!({
        "op": "spawn", "session": "s", "buffer": 4096,
        "argv": ["sh", "-c", format!("echo hello; read go; {flood}")]
    }))["gen"]
        .as_u64()
        .unwrap();
    let mut follow = Streaming::start(&d, &["logs", "s", "-f"]);
    follow.until(|l| l == "hello");
    // The reader stops reading; its generation floods and ends, and a flooding successor
    // starts: the end is evicted from the 4 KiB log long before the reader comes back.
    follow.signal(libc::SIGSTOP);
    gw(&d, &["send", "s", "go\n"]).ok();
    assert_eq!(
        gw(&d, &["wait", "s", "--gen", &first.to_string()]).code,
        Some(0)
    );
    let next = c.ok(serde_json::json!({
        "op": "spawn", "session": "s", "buffer": 4096,
        "argv": ["sh", "-c", format!("{flood}; echo done; sleep 60")]
    }))["gen"]
        .as_u64()
        .unwrap();
    util::cli::await_line(&d, "s", next, "done");
    follow.signal(libc::SIGCONT);
    assert_eq!(follow.finish(), Some(0));
    gw(&d, &["stop", "s", "--grace", "1s"]);
}

/// `logs --follow-restarts --json` prints every generation's `spawned`, output and end in
/// order, exactly once, those that started and ended while its replay was being read
/// included. The replay here cannot end while the generations run: the session retains
/// far more output than the daemon's queue for a client, the socket and the pipe hold,
/// and the test does not read the command's output meanwhile.
#[test]
fn logs_follow_restarts_json_shows_the_generations_that_ran_during_its_replay() {
    let d = Daemon::start("cli-logs-replay-gens", &[]);
    let mut c = d.client();
    let len: u64 = 12 << 20;
    let spawn = |c: &mut util::daemon::Client, argv: Value| {
        let req = json!({"op": "spawn", "session": "s", "buffer": 32 << 20, "argv": argv});
        let gen = c.ok(req)["gen"].as_u64().unwrap();
        assert_eq!(
            gw(&d, &["wait", "s", "--gen", &gen.to_string()]).code,
            Some(0)
        );
        gen
    };
    let big = spawn(&mut c, json!(["head", "-c", len.to_string(), "/dev/zero"]));

    let mut logs = command(&d, &["logs", "s", "--follow-restarts", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn genward");
    let mut out = BufReader::new(logs.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["gen"], json!(big), "{first}");
    // The replay is under way, and stays so while nothing reads its output.
    let quick: Vec<u64> = (1..=3)
        .map(|i| spawn(&mut c, json!(["echo", format!("gen-{i}")])))
        .collect();
    let last = *quick.last().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = vec![first.trim_end().to_string()];
    let deadline = std::time::Instant::now() + util::daemon::PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no end of gen {last} ({e}); saw {}", summary(&seen)));
        let v: Value = serde_json::from_str(&line).unwrap();
        seen.push(line);
        if v["event"] == "exited" && v["gen"] == json!(last) {
            break;
        }
    }
    // Caught up: removing the session ends the following.
    gw(&d, &["rm", "s"]).ok();
    let status = wait_bounded(logs).status;
    reader.join().unwrap();
    seen.extend(lines.try_iter());
    assert_eq!(status.code(), Some(0), "{}", summary(&seen));

    let events: Vec<Value> = seen
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // No gap and no duplicate: the session's output, position after position.
    let mut pos = 0;
    for v in events.iter().filter(|v| v["event"] == "output") {
        assert_eq!(v["pos"].as_u64(), Some(pos), "{v}");
        pos += v["len"].as_u64().unwrap();
    }
    assert_eq!(pos, len + 3 * "gen-1\n".len() as u64);
    // Each generation: spawned, its output, exited; one after the other.
    let mut order = Vec::new();
    for v in &events {
        assert_ne!(v["event"], "dropped", "{v}");
        let gen = v["gen"].as_u64().unwrap();
        if order.last() != Some(&gen) {
            assert!(!order.contains(&gen), "gen {gen} again: {}", summary(&seen));
            order.push(gen);
        }
    }
    let gens: Vec<u64> = std::iter::once(big).chain(quick.iter().copied()).collect();
    assert_eq!(order, gens, "{}", summary(&seen));
    for (i, gen) in gens.iter().enumerate() {
        let of: Vec<&Value> = events.iter().filter(|v| v["gen"] == json!(gen)).collect();
        let names: Vec<&str> = of.iter().map(|v| v["event"].as_str().unwrap()).collect();
        assert_eq!(names.first(), Some(&"spawned"), "gen {gen}: {names:?}");
        assert_eq!(names.last(), Some(&"exited"), "gen {gen}: {names:?}");
        let middle = &names[1..names.len() - 1];
        assert!(
            !middle.is_empty() && middle.iter().all(|n| *n == "output"),
            "gen {gen}: {names:?}"
        );
        if i > 0 {
            let data: Vec<u8> = of[1..of.len() - 1]
                .iter()
                .flat_map(|v| base64::decode(v["data_b64"].as_str().unwrap()).unwrap())
                .collect();
            assert_eq!(data, format!("gen-{i}\n").as_bytes());
        }
    }
}

/// The lines of `logs --json` without their output's bytes, for a failure message.
fn summary(lines: &[String]) -> String {
    let names: Vec<String> = lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_default();
            format!("{} {}", v["event"], v["gen"])
        })
        .collect();
    // Runs of the same line (the big generation's frames) shown once, counted.
    let mut runs: Vec<(String, usize)> = Vec::new();
    for n in names {
        match runs.last_mut() {
            Some((last, count)) if *last == n => *count += 1,
            _ => runs.push((n, 1)),
        }
    }
    let out: Vec<String> = runs
        .into_iter()
        .map(|(n, count)| {
            if count > 1 {
                format!("{n} x{count}")
            } else {
                n
            }
        })
        .collect();
    out.join(", ")
}
