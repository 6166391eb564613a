//! `genward run` and `genward ls` against a real daemon: generations printed, every
//! session listed (running, superseded, failed), `--json` one session per line.

mod util;

use serde_json::Value;
use util::cli::{await_line, gw, gw_ok};
use util::daemon::Daemon;

fn row<'a>(table: &'a str, session: &str, gen: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&session) && cols.get(1) == Some(&gen))
        .unwrap_or_else(|| panic!("no row {session} {gen} in\n{table}"))
}

/// `ls --json`: one session object per line, gathered as `{"sessions": [...]}`.
fn list(d: &Daemon) -> Value {
    let sessions: Vec<Value> = gw(d, &["ls", "--json"])
        .ok()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    serde_json::json!({ "sessions": sessions })
}

fn pid_of(d: &Daemon, session: &str, gen: u64) -> i32 {
    let list = list(d);
    let s = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == session)
        .unwrap();
    let g = s["generations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["gen"] == gen)
        .unwrap();
    g["pid"].as_i64().unwrap() as i32
}

#[test]
fn run_prints_increasing_generations_and_ls_lists_them() {
    let d = Daemon::start("cli-run", &[]);
    let g1: u64 = gw_ok(&d, &["run", "web", "--", "sleep", "600"])
        .parse()
        .unwrap();
    let g2: u64 = gw_ok(&d, &["run", "job", "--", "sh", "-c", "exit 3"])
        .parse()
        .unwrap();
    assert!(g2 > g1);
    let g3: u64 = gw_ok(
        &d,
        &["run", "bad", "--no-wait", "--", "/nonexistent/program"],
    )
    .parse()
    .unwrap();
    assert!(g3 > g2);
    // Both short-lived generations have ended once `wait` answers.
    assert_eq!(
        gw(&d, &["wait", "job", "--gen", &g2.to_string()]).code,
        Some(3)
    );
    assert_eq!(
        gw(&d, &["wait", "bad", "--gen", &g3.to_string()]).code,
        Some(127)
    );

    let table = gw(&d, &["ls"]).ok();
    assert!(table.starts_with("SESSION"), "{table}");
    for title in ["GEN", "PID", "TREE", "STATE", "UPTIME", "LAST EXIT"] {
        assert!(table.lines().next().unwrap().contains(title), "{table}");
    }
    let web = row(&table, "web", &g1.to_string());
    assert!(["cgroup", "session"].contains(&web[3]), "{table}");
    assert_eq!(web[4], "running", "{table}");
    let job = row(&table, "job", "-");
    assert!(
        job.join(" ").contains(&format!("gen {g2}: exit 3")),
        "{table}"
    );
    let failed = row(&table, "bad", "-");
    assert_eq!(failed[4], "failed", "{table}");
    assert!(
        failed.join(" ").contains("spawn failed (not_found)"),
        "{table}"
    );

    let json = list(&d);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 3);

    gw(&d, &["stop", "web"]).ok();
}

#[test]
fn a_superseded_generation_is_listed_next_to_its_successor() {
    let d = Daemon::start("cli-superseded", &[]);
    // The first generation ignores SIGTERM and has a long grace, so after an overlapping
    // replacement it is still stopping, deterministically, until we kill it ourselves.
    // It says when the trap is set: only then can the replacement's SIGTERM not end it.
    let old: u64 = gw_ok(
        &d,
        &[
            "run",
            "svc",
            "--grace",
            "10m",
            "--",
            "sh",
            "-c",
            "trap '' TERM; echo ready; exec sleep 600",
        ],
    )
    .parse()
    .unwrap();
    await_line(&d, "svc", old, "ready");
    let new: u64 = gw_ok(
        &d,
        &[
            "run",
            "svc",
            "--overlap",
            "--",
            "sh",
            "-c",
            "echo up; exec sleep 600",
        ],
    )
    .parse()
    .unwrap();
    // A spawn is answered before the process runs: wait until it says it does.
    await_line(&d, "svc", new, "up");
    let table = gw(&d, &["ls"]).ok();
    let old_row = row(&table, "svc", &old.to_string()).join(" ");
    assert!(old_row.contains("superseded (stopping)"), "{table}");
    assert_eq!(
        row(&table, "svc", &new.to_string())[4],
        "running",
        "{table}"
    );

    let pid = pid_of(&d, "svc", old);
    // SAFETY: kill with the pid of a process this test started (through the daemon), still
    // unreaped: the daemon has not reported its end.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(
        gw(&d, &["wait", "svc", "--gen", &old.to_string()]).code,
        Some(137)
    );
    gw(&d, &["stop", "svc"]).ok();
}

#[test]
fn run_sends_env_cwd_and_refuses_a_busy_session_with_reject() {
    let d = Daemon::start("cli-run-opts", &[]);
    let dir = d.dir.join("work");
    std::fs::create_dir(&dir).unwrap();
    let gen = gw(
        &d,
        &[
            "run",
            "env",
            "--cwd",
            dir.to_str().unwrap(),
            "--env",
            "GREETING=hi there",
            "--",
            "sh",
            "-c",
            "echo \"$GREETING from $(pwd)\"; sleep 600",
        ],
    )
    .ok();
    let gen = gen.trim();
    let busy = gw(&d, &["run", "env", "--reject", "--", "true"]);
    assert_eq!(busy.code, Some(1), "{busy:?}");
    assert!(busy.stderr.starts_with("genward: "), "{busy:?}");
    // The line is in the logs once the child has printed it, and not necessarily before.
    let line = format!("hi there from {}", dir.display());
    await_line(&d, "env", gen, &line);
    let logs = gw(&d, &["logs", "env", "--gen", gen]).ok();
    assert_eq!(logs, format!("{line}\n"));
    gw(&d, &["stop", "env"]).ok();
}
