//! `genward ls NAME` against a real daemon: one session in full (state, current generation,
//! restarts, latest ends, spec), the RESTARTS column of `ls`, and what a pending generation
//! waits for, in `ls`, `ls NAME` and `run`.

mod util;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::cli::{await_line, command, gw, gw_ok};
use util::daemon::{Daemon, PATIENCE};

/// The cell of `session`'s first row under the right-aligned column `title`.
fn cell(table: &str, session: &str, title: &str) -> String {
    let header = table.lines().next().unwrap();
    let start = header
        .find(title)
        .unwrap_or_else(|| panic!("no {title} in\n{table}"));
    let end = start + title.len();
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(session))
        .unwrap_or_else(|| panic!("no row {session} in\n{table}"));
    line[line.len().min(start)..line.len().min(end)]
        .trim()
        .to_string()
}

#[test]
fn ls_name_shows_one_session_in_full() {
    let d = Daemon::start("cli-ls-one", &[]);
    let g1 = gw_ok(
        &d,
        &["run", "web", "--", "sh", "-c", "echo one; exec sleep 600"],
    );
    await_line(&d, "web", &g1, "one");
    let g2 = gw_ok(
        &d,
        &["run", "web", "--", "sh", "-c", "echo two; exec sleep 600"],
    );
    await_line(&d, "web", &g2, "two");

    let text = gw(&d, &["ls", "web"]).ok();
    for needle in [
        "session     web\n".to_string(),
        "state       running\n".to_string(),
        format!("current     gen {g2}\n"),
        "restarts    0\n".to_string(),
        format!("  gen {g1}: "),
        "superseded".to_string(),
        "echo two; exec sleep 600".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle:?} not in\n{text}");
    }
    assert!(!text.contains("echo one"), "{text}");

    // `--json`: the session object itself, on one line.
    let json: Value = serde_json::from_str(&gw(&d, &["ls", "web", "--json"]).ok()).unwrap();
    assert!(
        json.get("ok").is_none() && json.get("id").is_none(),
        "{json}"
    );
    let s = &json;
    assert_eq!(s["name"], "web");
    assert_eq!(s["current"].to_string(), g2);
    assert_eq!(s["recent_ends"][0]["gen"].to_string(), g1);
    assert_eq!(s["recent_ends"][0]["cause"], "superseded");
    assert_eq!(s["spec"]["argv"][0], "sh");

    let missing = gw(&d, &["ls", "nosuch"]);
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert!(missing.stderr.contains("nosuch"), "{missing:?}");
    let bad = gw(&d, &["ls", ".hidden"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");

    gw(&d, &["stop", "web"]).ok();
}

#[test]
fn ls_counts_restarts() {
    let d = Daemon::start("cli-ls-restarts", &[]);
    gw_ok(
        &d,
        &[
            "run",
            "flap",
            "--restart",
            "always",
            "--",
            "sh",
            "-c",
            "exit 1",
        ],
    );
    gw_ok(&d, &["run", "calm", "--", "sleep", "600"]);
    let deadline = Instant::now() + PATIENCE;
    let restarts = loop {
        let json: Value = serde_json::from_str(&gw(&d, &["ls", "flap", "--json"]).ok()).unwrap();
        let n = json["restarts"].as_u64().unwrap();
        if n >= 1 {
            break n;
        }
        assert!(Instant::now() < deadline, "flap never restarted: {json}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let table = gw(&d, &["ls"]).ok();
    assert!(
        table.lines().next().unwrap().contains("RESTARTS"),
        "{table}"
    );
    let shown: u64 = cell(&table, "flap", "RESTARTS").parse().unwrap();
    assert!(shown >= restarts, "{table}");
    assert_eq!(cell(&table, "calm", "RESTARTS"), "0", "{table}");
    let one = gw(&d, &["ls", "flap"]).ok();
    assert!(!one.contains("restarts    0\n"), "{one}");
    gw(&d, &["stop", "flap"]).ok();
    gw(&d, &["stop", "calm"]).ok();
}

#[test]
fn ls_and_ls_name_say_what_a_pending_generation_waits_for() {
    let d = Daemon::start("cli-ls-waiting", &[]);
    let gen = gw_ok(
        &d,
        &[
            "run",
            "--no-wait",
            "w",
            "--depends-on",
            "nosuchdep=ready",
            "--",
            "true",
        ],
    );
    let said = "starting (pending): nosuchdep: no such session";
    let table = gw(&d, &["ls"]).ok();
    assert!(table.contains(said), "{table}");
    let text = gw(&d, &["ls", "w"]).ok();
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(gen.as_str()))
        .unwrap_or_else(|| panic!("no generation {gen} in\n{text}"));
    assert!(row.contains(said), "{text}");
    gw(&d, &["rm", "w"]).ok();
}

/// `run` gives up waiting for the start after a while (15 s) and says why: here a
/// dependency, not a predecessor the session does not have.
#[test]
fn run_waiting_for_a_dependency_says_so() {
    let d = Daemon::start("cli-run-waiting", &[]);
    let mut child = command(
        &d,
        &["run", "w", "--depends-on", "nosuchdep=ready", "--", "true"],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // A bound against a hang, as `gw`'s, past the 15 s `run` waits: not a measurement.
    let deadline = Instant::now() + Duration::from_secs(15) + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("genward run did not finish: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Not started yet, not failed: EX_TEMPFAIL, so that `run ... && next` stops.
    assert_eq!(out.status.code(), Some(75), "{stdout}{stderr}");
    let gen = stdout.trim();
    assert!(
        stderr.contains(&format!(
            "w gen {gen}: not started within 15s (nosuchdep: no such session)"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("predecessor"), "{stderr}");
    gw(&d, &["rm", "w"]).ok();
}
