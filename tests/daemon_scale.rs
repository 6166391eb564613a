//! Many sessions through one daemon: its table limits, and ten thousand sessions served
//! as one.

mod util;

use serde_json::{json, Value};
use util::daemon::{Client, Daemon, Msg};

/// Requests sent before their answers are read: keeps the socket busy without letting a
/// batch of starts pile up more children (and descriptors) than a test machine allows.
const BATCH: usize = 250;

/// Sends `reqs` in batches, each request's answer read before the next batch, and
/// returns the answers in order.
fn pipelined(c: &mut Client, reqs: &[Value]) -> Vec<Value> {
    let mut answers = Vec::with_capacity(reqs.len());
    for (b, batch) in reqs.chunks(BATCH).enumerate() {
        let mut bytes = Vec::new();
        for (i, req) in batch.iter().enumerate() {
            let mut req = req.clone();
            req["id"] = json!(format!("p{b}.{i}"));
            serde_json::to_writer(&mut bytes, &req).unwrap();
            bytes.push(b'\n');
        }
        c.send_raw(&bytes);
        let mut got = vec![Value::Null; batch.len()];
        let mut left = batch.len();
        while left > 0 {
            let Msg::Json(v) = c.read_msg() else { continue };
            let Some(id) = v["id"].as_str().map(str::to_owned) else {
                continue;
            };
            let (rb, i) = id[1..].split_once('.').unwrap();
            if rb.parse::<usize>().unwrap() == b {
                got[i.parse::<usize>().unwrap()] = v;
                left -= 1;
            }
        }
        answers.extend(got);
    }
    answers
}

#[test]
fn ten_thousand_sessions_are_served_and_the_next_is_refused_with_limit() {
    const N: usize = 10_000;
    let d = Daemon::start("scale-10k", &["--max-sessions", "10000"]);
    let mut c = d.client();
    let spawns: Vec<Value> = (0..N)
        .map(|i| json!({"op": "spawn", "session": format!("s{i}"), "argv": ["true"]}))
        .collect();
    for (i, r) in pipelined(&mut c, &spawns).iter().enumerate() {
        assert_eq!(r["ok"], json!(true), "spawn of s{i}: {r}");
    }
    let r = c.err(
        json!({"op": "spawn", "session": "one-more", "argv": ["true"]}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("10000 sessions"), "{r}");
    // Every session answers for itself, and an existing one still takes a new start.
    let gets: Vec<Value> = (0..N)
        .map(|i| json!({"op": "get", "session": format!("s{i}")}))
        .collect();
    for (i, r) in pipelined(&mut c, &gets).iter().enumerate() {
        assert_eq!(r["ok"], json!(true), "get of s{i}: {r}");
        assert_eq!(r["session"]["name"], json!(format!("s{i}")), "{r}");
    }
    c.ok(json!({"op": "spawn", "session": "s0", "argv": ["true"]}));
}

#[test]
fn a_start_beyond_the_live_generations_limit_is_refused_with_limit() {
    let d = Daemon::start("scale-running", &["--max-running", "2"]);
    let mut c = d.client();
    for name in ["a", "b"] {
        c.ok(json!({"op": "spawn", "session": name, "argv": ["sleep", "1000"]}));
    }
    let r = c.err(
        json!({"op": "spawn", "session": "c", "argv": ["sleep", "1000"]}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("2 generations"), "{r}");
    c.ok(json!({"op": "shutdown"}));
}

#[test]
fn a_limit_that_is_not_a_positive_count_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_genward"))
        .args(["daemon", "--max-sessions", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-sessions 0"), "{err}");
}
