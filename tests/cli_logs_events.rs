//! `genward logs` (replay, per generation, following) and `genward events` (people's
//! lines and JSON) against a real daemon.

mod util;

use serde_json::Value;
use util::cli::{gw, gw_ok, Streaming};
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
