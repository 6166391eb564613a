//! `--json` of every command that prints a result: one JSON object per line, in the
//! documented shapes (docs/cli-json.md), never a raw protocol reply.

mod util;

use serde_json::{json, Value};
use util::cli::gw;
use util::daemon::Daemon;

/// The lines of `stdout`, each parsed; none may carry the protocol's envelope.
fn objects(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            assert!(v.is_object(), "{l}");
            assert!(v.get("ok").is_none() && v.get("id").is_none(), "{l}");
            v
        })
        .collect()
}

#[test]
fn every_result_prints_as_documented_json() {
    let d = Daemon::start("cli-json", &[]);
    let run = objects(
        &gw(
            &d,
            &["run", "s", "--json", "--", "sh", "-c", "echo hi; exec cat"],
        )
        .ok(),
    );
    assert_eq!(run.len(), 1);
    let gen = run[0]["gen"].as_u64().unwrap();
    assert_eq!(run[0]["session"], "s");
    assert!(run[0]["pid"].as_u64().unwrap() > 0, "{run:?}");

    let logs = objects(&gw(&d, &["logs", "s", "--json"]).ok());
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["event"], "output");
    assert_eq!(logs[0]["data_b64"], "aGkK");
    assert!(logs[0]["t"].as_u64().is_some(), "{logs:?}");

    let restarted = objects(&gw(&d, &["restart", "s", "--json"]).ok());
    let next = restarted[0]["gen"].as_u64().unwrap();
    assert!(next > gen);
    // Once it started, as `run --json` says it.
    assert!(restarted[0]["pid"].as_u64().unwrap() > 0, "{restarted:?}");
    assert_eq!(
        restarted[0],
        json!({"session": "s", "gen": next, "pid": restarted[0]["pid"]})
    );

    let waited = objects(&gw(&d, &["wait", "s", "--gen", &gen.to_string(), "--json"]).stdout);
    assert_eq!(waited[0]["event"], "exited");
    assert_eq!(waited[0]["gen"], json!(gen));
    assert_eq!(waited[0]["cause"], "superseded");

    let stopped = objects(&gw(&d, &["stop", "s", "--json"]).ok());
    assert_eq!(stopped[0]["event"], "exited");
    assert_eq!(stopped[0]["gen"], json!(next));

    let failed = gw(&d, &["run", "f", "--json", "--", "/nonexistent/program"]);
    assert_eq!(failed.code, Some(127));
    let failed = objects(&failed.stdout);
    assert_eq!(failed[0]["event"], "spawn_failed");

    let listed = objects(&gw(&d, &["ls", "--json"]).ok());
    let names: Vec<&str> = listed.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["f", "s"], "one session per line: {listed:?}");
    let one = objects(&gw(&d, &["ls", "s", "--json"]).ok());
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["name"], "s");

    let upgraded = objects(&gw(&d, &["upgrade", "--json"]).ok());
    assert_eq!(upgraded[0]["version"], json!(env!("CARGO_PKG_VERSION")));
    assert!(upgraded[0]["pause_ms"].is_u64(), "{upgraded:?}");
}
