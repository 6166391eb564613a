//! `genward ls [--json] [NAME]`: every session and its generations, or one session in full.
//!
//! One row per tracked generation, so a superseded generation that is still stopping or
//! draining is visible next to its successor; a session with no generation left (exited,
//! stopped, failed to spawn) still has its row. An entry we cannot read is shown as such
//! and the rest of the table is printed: one bad entry never hides the others.
//!
//! The table is read page by page (the `list` op's paged form) and printed as each page
//! arrives, so neither side ever holds more than a page, however many sessions there are.
//!
//! With `NAME`, the session as `get` answers for it: its state, current generation and
//! restart count, each live generation, how its latest generations ended, and its spec.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::args::Matches;
use super::client::{objects_of, str_of, u64_of, ClientError, Patience};
use super::dispatch::{
    session_arg, write_stderr, write_stdout, CommandError, CommandResult, Context,
};
use super::list_pages::Pages;
use super::table::{render, Column, Streamed};
use super::wait::describe;
use crate::core::Command;
use crate::proto::duration::format_compact;
use crate::proto::event::End;
use crate::proto::json::{Object, Value};
use crate::proto::request::Op;

const COLUMNS: [Column<'static>; 8] = [
    Column::left("SESSION"),
    Column::right("GEN"),
    Column::right("PID"),
    Column::left("TREE"),
    Column::left("STATE"),
    Column::right("RESTARTS"),
    Column::right("UPTIME"),
    Column::left("LAST EXIT"),
];

/// The table for the `sessions` array of a `list` response, at wall time `now_unix_ms`.
pub fn render_sessions(sessions: &[Value], now_unix_ms: u64) -> String {
    render(&COLUMNS, &table_rows(sessions, 0, now_unix_ms))
}

/// The rows for `sessions`, the first of which is entry `first` of the whole listing.
fn table_rows(sessions: &[Value], first: usize, now_unix_ms: u64) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (i, entry) in sessions.iter().enumerate() {
        match entry.as_object() {
            Some(s) => session_rows(s, now_unix_ms, &mut rows),
            None => rows.push(vec![
                format!("(entry {})", first + i),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("unreadable: {}", entry.type_name()),
            ]),
        }
    }
    rows
}

fn session_rows(s: &Object, now: u64, rows: &mut Vec<Vec<String>>) {
    let name = str_of(s, "name").unwrap_or("(unnamed)").to_string();
    let state = str_of(s, "state").unwrap_or("?").to_string();
    let current = u64_of(s, "current");
    let restarts = u64_of(s, "restarts").map_or_else(|| "?".into(), |n| n.to_string());
    let last = s
        .get("last_end")
        .and_then(Value::as_object)
        .map(last_end)
        .unwrap_or_else(|| "-".into());
    let gens = objects_of(s, "generations");
    let waiting = str_of(s, "waiting");
    if gens.is_empty() {
        let mut state = state;
        if let Some(at) = u64_of(s, "restart_at_unix_ms") {
            let wait = Duration::from_millis(at.saturating_sub(now));
            state = format!("{state} (restart in {})", format_compact(wait));
        }
        rows.push(vec![
            name,
            "-".into(),
            "-".into(),
            "-".into(),
            state,
            restarts,
            "-".into(),
            last,
        ]);
        return;
    }
    for (i, g) in gens.iter().enumerate() {
        let gen = u64_of(g, "gen");
        let lifecycle = str_of(g, "lifecycle").unwrap_or("?");
        let mut state = generation_state(&state, current, waiting, g);
        match str_of(g, "ready") {
            Some("starting") if lifecycle == "running" => state.push_str(" [not ready]"),
            Some("ready_failed") => {
                let why = str_of(g, "ready_error").unwrap_or("?");
                state.push_str(&format!(" [ready failed: {why}]"));
            }
            _ => {}
        }
        let uptime = match (lifecycle, u64_of(g, "since_unix_ms")) {
            ("running", Some(since)) => {
                format_compact(Duration::from_millis(now.saturating_sub(since)))
            }
            _ => "-".into(),
        };
        rows.push(vec![
            name.clone(),
            gen.map_or_else(|| "?".into(), |g| g.to_string()),
            u64_of(g, "pid").map_or_else(|| "-".into(), |p| p.to_string()),
            // What holds its process tree: `cgroup` or `session` (see `hello`).
            str_of(g, "containment").unwrap_or("-").to_string(),
            state,
            if i == 0 {
                restarts.clone()
            } else {
                String::new()
            },
            uptime,
            if i == 0 { last.clone() } else { String::new() },
        ]);
    }
}

/// What a generation's STATE says: the session's state for its current generation (with
/// the generation's own step when they differ), `superseded (...)` for a replaced one,
/// whether it was taken back after a daemon crash, and for the current generation what it
/// waits for (the session's `waiting`: its dependencies), in the table and `ls NAME` alike.
fn generation_state(
    session_state: &str,
    current: Option<u64>,
    waiting: Option<&str>,
    g: &Object,
) -> String {
    let gen = u64_of(g, "gen");
    let lifecycle = str_of(g, "lifecycle").unwrap_or("?");
    let state = if gen.is_some() && gen == current {
        if session_state == lifecycle {
            session_state.to_string()
        } else {
            format!("{session_state} ({lifecycle})")
        }
    } else if g.get("superseded") == Some(&Value::Bool(true)) {
        format!("superseded ({lifecycle})")
    } else {
        lifecycle.to_string()
    };
    // Taken back after a daemon crash: its output and input were lost with that daemon;
    // while its identity is not verified, nothing is sent to it.
    let state = match g.get("adopted").map(Value::as_object) {
        Some(Some(a)) if a.get("verified") == Some(&Value::Bool(false)) => {
            format!("{state}, adopted, unverified")
        }
        Some(_) => format!("{state}, adopted"),
        None => state,
    };
    match waiting {
        Some(why) if gen.is_some() && gen == current => format!("{state}: {why}"),
        _ => state,
    }
}

/// `gen 3: exit 143 (SIGTERM, stopped)`.
fn last_end(end: &Object) -> String {
    let gen = u64_of(end, "gen").map_or_else(|| "?".into(), |g| g.to_string());
    match End::decode(end) {
        Ok(e) => format!("gen {gen}: {}", describe(&e)),
        Err(_) => format!("gen {gen}: ?"),
    }
}

/// One session in full, from the `session` object of a `get` answer: state, current
/// generation, restarts, live generations, latest ends, spec.
pub fn render_session(s: &Object, now: u64) -> String {
    let mut out = String::new();
    let mut field = |key: &str, value: String| out.push_str(&format!("{key:<10}  {value}\n"));
    let state = str_of(s, "state").unwrap_or("?");
    let current = u64_of(s, "current");
    field(
        "session",
        str_of(s, "name").unwrap_or("(unnamed)").to_string(),
    );
    let mut shown_state = state.to_string();
    if let Some(at) = u64_of(s, "restart_at_unix_ms") {
        let wait = Duration::from_millis(at.saturating_sub(now));
        shown_state = format!("{shown_state} (restart in {})", format_compact(wait));
    }
    field("state", shown_state);
    field(
        "current",
        current.map_or_else(|| "-".into(), |g| format!("gen {g}")),
    );
    field(
        "restarts",
        u64_of(s, "restarts").map_or_else(|| "?".into(), |n| n.to_string()),
    );
    let gens = objects_of(s, "generations");
    out.push_str("\nGenerations:\n");
    if gens.is_empty() {
        out.push_str("  (none running)\n");
    } else {
        let rows: Vec<Vec<String>> = gens
            .iter()
            .map(|g| {
                let since = u64_of(g, "since_unix_ms").map_or_else(
                    || "-".into(),
                    |t| format_compact(Duration::from_millis(now.saturating_sub(t))),
                );
                vec![
                    u64_of(g, "gen").map_or_else(|| "?".into(), |g| g.to_string()),
                    u64_of(g, "pid").map_or_else(|| "-".into(), |p| p.to_string()),
                    str_of(g, "containment").unwrap_or("-").to_string(),
                    generation_state(state, current, str_of(s, "waiting"), g),
                    since,
                ]
            })
            .collect();
        let table = render(
            &[
                Column::right("GEN"),
                Column::right("PID"),
                Column::left("TREE"),
                Column::left("STATE"),
                Column::right("FOR"),
            ],
            &rows,
        );
        for line in table.lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out.push_str("\nRecent ends (oldest first):\n");
    let ends: Vec<&Object> = s
        .get("recent_ends")
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_object)
        .collect();
    if ends.is_empty() {
        match s.get("last_end").and_then(Value::as_object) {
            Some(end) => out.push_str(&format!("  {}\n", last_end(end))),
            None => out.push_str("  (none)\n"),
        }
    }
    for end in ends {
        out.push_str(&format!("  {}\n", last_end(end)));
    }
    out.push_str("\nSpec:\n");
    match s.get("spec").and_then(Value::as_object) {
        Some(spec) => {
            let width = spec.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (key, value) in spec.iter() {
                let value = String::from_utf8_lossy(&value.to_bytes()).into_owned();
                out.push_str(&format!("  {key:<width$}  {value}\n"));
            }
        }
        None => out.push_str("  (not known)\n"),
    }
    out
}

/// `genward ls NAME`.
fn ls_one(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let mut conn = ctx.connect()?;
    let resp = conn.request(&Op::Core(Command::Get { session }))?;
    let s = resp
        .get("session")
        .and_then(Value::as_object)
        .ok_or_else(|| ClientError::Protocol("get answered without `session`".into()))?;
    if m.flag("json") {
        super::json_out::print(s.clone())?;
        return Ok(ExitCode::SUCCESS);
    }
    write_stdout(render_session(s, now_unix_ms()).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `genward ls`.
pub fn ls(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    // As GENWARD_TIMEOUT reads it: 0 waits without limit, so the same value means the
    // same in both places.
    let timeout = m.value_with("timeout", Patience::parse)?;
    let unbounded;
    let ctx = match timeout {
        Some(Patience(Some(limit))) => {
            give_up_after(limit);
            ctx
        }
        // No limit at all: nor the one GENWARD_TIMEOUT puts on each answer.
        Some(Patience(None)) => {
            unbounded = Context {
                patience: Patience(None),
                ..ctx.clone()
            };
            &unbounded
        }
        None => ctx,
    };
    if m.positional("NAME").is_some() {
        return ls_one(m, ctx);
    }
    let mut conn = ctx.connect()?;
    let mut out = if m.flag("json") {
        Listing::Json { written: 0 }
    } else {
        Listing::Table {
            table: Streamed::new(&COLUMNS),
            entries: 0,
        }
    };
    let now = now_unix_ms();
    let mut pages = Pages::new();
    while let Some(sessions) = pages.next(&mut conn)? {
        out.part(&sessions, now)?;
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// Ends this process with status 1 once `limit` has passed (`ls --timeout`): a bound on
/// the whole command, the connect included, so that a daemon that never answers (stopped,
/// or its queue of connections full) cannot hang the shell completion that asks it.
fn give_up_after(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let line = format!(
            "genward ls: no answer from the daemon within {}\n",
            format_compact(limit)
        );
        let _ = write_stderr(line.as_bytes());
        // Exits without waiting for the main thread, which may be blocked on the daemon.
        std::process::exit(1);
    });
}

/// Where the listing goes as pages arrive: a table, or JSON lines, one session object per
/// line (docs/cli-json.md).
enum Listing<'a> {
    Table { table: Streamed<'a>, entries: usize },
    Json { written: usize },
}

impl Listing<'_> {
    fn part(&mut self, sessions: &[Value], now: u64) -> Result<(), CommandError> {
        match self {
            Listing::Table { table, entries } => {
                let rows = table_rows(sessions, *entries, now);
                *entries += sessions.len();
                write_stdout(table.part(&rows).as_bytes())
            }
            Listing::Json { written } => {
                // JSON lines: one session object per line (docs/cli-json.md).
                let mut bytes = Vec::new();
                for s in sessions {
                    bytes.extend_from_slice(&s.to_bytes());
                    bytes.push(b'\n');
                    *written += 1;
                }
                write_stdout(&bytes)
            }
        }
    }

    fn finish(self) -> Result<(), CommandError> {
        match self {
            // No session: the header alone, as for an empty table.
            Listing::Table { mut table, .. } => {
                let none: [Vec<String>; 0] = [];
                write_stdout(table.part(&none).as_bytes())
            }
            Listing::Json { .. } => Ok(()),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    fn table(json: &str, now: u64) -> String {
        let v = parse(json.as_bytes()).unwrap();
        render_sessions(v.as_array().unwrap(), now)
    }

    #[test]
    fn superseded_generations_failed_sessions_and_bad_entries_all_show() {
        let text = table(
            r#"[
            {"name":"web","state":"running","current":5,"restarts":0,
             "last_end":{"gen":3,"code":0,"signal":null,"cause":"exited"},
             "generations":[
               {"gen":4,"pid":100,"lifecycle":"stopping","since_unix_ms":1000,"superseded":true,"containment":"cgroup"},
               {"gen":5,"pid":101,"lifecycle":"running","since_unix_ms":61000,"superseded":false,"containment":"cgroup"}]},
            {"name":"bad","state":"failed","current":null,"restarts":3,
             "last_end":{"gen":9,"cause":"spawn_failed","error":{"kind":"not_found","errno":2}},
             "generations":[]},
            42
            ]"#,
            126_000,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "SESSION    GEN  PID  TREE    STATE                  RESTARTS  UPTIME  LAST EXIT",
                "web          4  100  cgroup  superseded (stopping)         0       -  gen 3: exit 0",
                "web          5  101  cgroup  running                           1m05s",
                "bad          -    -  -       failed                        3       -  gen 9: spawn failed (not_found)",
                "(entry 2)    -    -  -       unreadable: integer",
            ]
        );
    }

    #[test]
    fn processes_taken_back_say_so_and_whether_they_are_verified() {
        let text = table(
            r#"[
            {"name":"kept","state":"running","current":7,"restarts":0,"last_end":null,
             "generations":[
               {"gen":7,"pid":70,"lifecycle":"running","since_unix_ms":1000,"superseded":false,
                "adopted":{"since_unix_ms":1000,"io_lost":true,"verified":true}}]},
            {"name":"unsure","state":"stopping","current":8,"restarts":0,"last_end":null,
             "generations":[
               {"gen":8,"pid":80,"lifecycle":"running","since_unix_ms":1000,"superseded":false,
                "adopted":{"since_unix_ms":1000,"io_lost":true,"verified":false}}]}
            ]"#,
            2_000,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("running, adopted "), "{text}");
        assert!(
            lines[2].contains("stopping (running), adopted, unverified"),
            "{text}"
        );
    }

    #[test]
    fn one_session_in_full() {
        let v = parse(
            br#"{"name":"web","state":"backoff","current":null,"restarts":2,
             "restart_at_unix_ms":5000,
             "last_end":{"gen":4,"code":1,"signal":null,"cause":"exited"},
             "generations":[],
             "recent_ends":[
               {"gen":3,"code":143,"signal":"SIGTERM","cause":"superseded"},
               {"gen":4,"code":1,"signal":null,"cause":"exited"}],
             "spec":{"argv":["sh","-c","exit 1"],"grace":5000}}"#,
        )
        .unwrap();
        let text = render_session(v.as_object().unwrap(), 2_000);
        for needle in [
            "session     web\n",
            "state       backoff (restart in 3s)\n",
            "current     -\n",
            "restarts    2\n",
            "  (none running)\n",
            "  gen 3: exit 143 (SIGTERM, superseded)\n  gen 4: exit 1\n",
            "  argv   [\"sh\",\"-c\",\"exit 1\"]\n",
            "  grace  5000\n",
        ] {
            assert!(text.contains(needle), "{needle:?} not in\n{text}");
        }
    }

    #[test]
    fn what_a_pending_generation_waits_for_shows_in_the_table_and_in_full() {
        let json = r#"{"name":"w","state":"starting","current":2,"restarts":0,
             "waiting":"nosuchdep: no such session","last_end":null,
             "generations":[
               {"gen":2,"pid":null,"lifecycle":"pending","since_unix_ms":1000,"superseded":false}],
             "recent_ends":[],"spec":{"argv":["true"]}}"#;
        let said = "starting (pending): nosuchdep: no such session";
        let text = table(&format!("[{json}]"), 2_000);
        assert!(text.lines().nth(1).unwrap().contains(said), "{text}");
        let v = parse(json.as_bytes()).unwrap();
        let text = render_session(v.as_object().unwrap(), 2_000);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("2 "))
            .unwrap();
        assert!(row.contains(said), "{text}");
    }
}
