//! `genward ls [--json]`: every session and its generations.
//!
//! One row per tracked generation, so a superseded generation that is still stopping or
//! draining is visible next to its successor; a session with no generation left (exited,
//! stopped, failed to spawn) still has its row. An entry we cannot read is shown as such
//! and the rest of the table is printed: one bad entry never hides the others.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::args::Matches;
use super::client::{str_of, u64_of, ClientError};
use super::dispatch::{write_stdout, CommandResult, Context};
use super::table::{render, Column};
use super::wait::describe;
use crate::core::Command;
use crate::proto::duration::format_compact;
use crate::proto::event::End;
use crate::proto::json::{Object, Value};
use crate::proto::request::Op;

const COLUMNS: [Column<'static>; 7] = [
    Column::left("SESSION"),
    Column::right("GEN"),
    Column::right("PID"),
    Column::left("TREE"),
    Column::left("STATE"),
    Column::right("UPTIME"),
    Column::left("LAST EXIT"),
];

/// The table for the `sessions` array of a `list` response, at wall time `now_unix_ms`.
pub fn render_sessions(sessions: &[Value], now_unix_ms: u64) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (i, entry) in sessions.iter().enumerate() {
        match entry.as_object() {
            Some(s) => session_rows(s, now_unix_ms, &mut rows),
            None => rows.push(vec![
                format!("(entry {i})"),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("unreadable: {}", entry.type_name()),
            ]),
        }
    }
    render(&COLUMNS, &rows)
}

fn session_rows(s: &Object, now: u64, rows: &mut Vec<Vec<String>>) {
    let name = str_of(s, "name").unwrap_or("(unnamed)").to_string();
    let state = str_of(s, "state").unwrap_or("?").to_string();
    let current = u64_of(s, "current");
    let last = s
        .get("last_end")
        .and_then(Value::as_object)
        .map(last_end)
        .unwrap_or_else(|| "-".into());
    let gens: Vec<&Object> = s
        .get("generations")
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_object)
        .collect();
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
            "-".into(),
            last,
        ]);
        return;
    }
    for (i, g) in gens.iter().enumerate() {
        let gen = u64_of(g, "gen");
        let lifecycle = str_of(g, "lifecycle").unwrap_or("?");
        let state = if gen.is_some() && gen == current {
            if state == lifecycle {
                state.clone()
            } else {
                format!("{state} ({lifecycle})")
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
            uptime,
            if i == 0 { last.clone() } else { String::new() },
        ]);
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

/// `genward ls`.
pub fn ls(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let mut conn = ctx.connect()?;
    let resp = conn.request(&Op::Core(Command::List))?;
    let sessions = resp
        .get("sessions")
        .and_then(Value::as_array)
        .ok_or_else(|| ClientError::Protocol("list answered without `sessions`".into()))?;
    if m.flag("json") {
        let mut out = Value::Object(resp.clone()).to_bytes();
        out.push(b'\n');
        write_stdout(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    write_stdout(render_sessions(sessions, now).as_bytes())?;
    Ok(ExitCode::SUCCESS)
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
                "SESSION    GEN  PID  TREE    STATE                  UPTIME  LAST EXIT",
                "web          4  100  cgroup  superseded (stopping)       -  gen 3: exit 0",
                "web          5  101  cgroup  running                 1m05s",
                "bad          -    -  -       failed                      -  gen 9: spawn failed (not_found)",
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
}
