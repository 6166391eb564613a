//! The one-request commands: `send`, `stop`, `kill`, `restart`, `rm`, `shutdown`,
//! `upgrade`.
//!
//! Each addresses the session's current generation, or with `--if-gen N` only generation
//! N: if the session has moved on, the daemon refuses (`stale_generation`) and nothing
//! happens, so a command meant for a process can never reach its successor.

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use super::args::Matches;
use super::client::{response_for, str_of, u64_of, ClientError, Connection, Response};
use super::dispatch::{
    gen_arg, session_arg, write_stderr, write_stdout, CommandError, CommandResult, Context,
};
use super::run::whole_millis;
use super::wait::{describe, end_of_wait};
use crate::core::{Command, Scope};
use crate::proto::duration::parse_duration;
use crate::proto::event::{SessionState, WireEvent};
use crate::proto::framing::Message;
use crate::proto::request::{Op, Replay, Target};
use crate::proto::signal_name::parse_signal;

/// Raw bytes per `write` request from `send --stdin`: the request carries them as base64
/// at worst (4/3 larger), well inside the 1 MiB request line.
const SEND_CHUNK: usize = 256 * 1024;

/// The session and the `--if-gen` precondition.
fn target(m: &Matches<'_>) -> Result<(String, Option<u64>), CommandError> {
    Ok((session_arg(m)?, gen_arg(m, "if-gen")?))
}

fn subscribe(target: Target) -> Op {
    Op::Subscribe {
        target,
        replay: Replay::Now,
        lossless: None,
    }
}

/// `genward send NAME TEXT|--stdin|--eof`.
pub fn send(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (session, mut if_gen) = target(m)?;
    if m.flag("eof") {
        ctx.connect()?
            .request(&Op::Core(Command::CloseInput { session, if_gen }))?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(text) = m.positional("TEXT") {
        let bytes = text.as_bytes().to_vec();
        ctx.connect()?.request(&Op::Core(Command::Write {
            session,
            if_gen,
            bytes,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    if !m.flag("stdin") {
        return Err(m.missing("TEXT", "give TEXT, --stdin or --eof").into());
    }
    let mut conn = ctx.connect()?;
    // Every chunk goes to one generation: the first write learns which (unless --if-gen
    // chose it), and the rest carry it as `if_gen`, so a replacement midway cannot
    // receive the second half of the input.
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; SEND_CHUNK];
    // Bytes the daemon took for the generation so far.
    let mut sent: u64 = 0;
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CommandError::Failed(format!("reading standard input: {e}"))),
        };
        let resp = match write_when_room(&mut conn, &session, if_gen, &buf[..n]) {
            Ok(resp) => resp,
            Err(e) => {
                let gen = if_gen.filter(|_| sent > 0);
                return Err(cut_short(&mut conn, &session, gen, sent, e));
            }
        };
        sent += n as u64;
        if let Some(gen) = u64_of(&resp, "gen") {
            if_gen = Some(gen);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why `send --stdin` stopped, when a write was refused after earlier ones to generation
/// `gen` (`Some` once `sent` bytes went to it) were taken: the daemon's words alone
/// (`current generation is none, not 7; nothing was done`) would deny the bytes already
/// passed on. Any other refusal is the daemon's, as it says it.
fn cut_short(
    conn: &mut Connection,
    session: &str,
    gen: Option<u64>,
    sent: u64,
    e: ClientError,
) -> CommandError {
    let Some(gen) = gen else { return e.into() };
    let what = match e.code() {
        Some("input_closed") => "its input was closed".to_string(),
        Some("not_running") => "it ended".to_string(),
        // No longer current: ended, or replaced by the one that is now (asked of the
        // daemon, which only said "not current").
        Some("stale_generation") => {
            let now = conn
                .request(&Op::Core(Command::Get {
                    session: session.to_owned(),
                }))
                .ok()
                .and_then(|resp| {
                    let s = resp.get("session")?.as_object()?;
                    Some(u64_of(s, "current"))
                });
            match now {
                Some(Some(now)) if now != gen => format!("it was replaced by gen {now}"),
                Some(_) => "it ended".to_string(),
                None => "it ended or was replaced".to_string(),
            }
        }
        Some("no_such_session") => "its session was removed".to_string(),
        _ => return e.into(),
    };
    CommandError::Failed(format!(
        "{session} gen {gen}: {what} while standard input was being sent to it: {sent} bytes had been passed on to it (the process may not have read them all); the rest was not sent"
    ))
}

/// Writes `bytes`, waiting while the generation's input queue is full (refused with
/// `limit`) as a writer to a full pipe waits: the process gets the whole input, in order.
fn write_when_room(
    conn: &mut Connection,
    session: &str,
    if_gen: Option<u64>,
    bytes: &[u8],
) -> Result<Response, ClientError> {
    let mut pause = Duration::from_millis(5);
    loop {
        let write = Op::Core(Command::Write {
            session: session.to_string(),
            if_gen,
            bytes: bytes.to_vec(),
        });
        match conn.request(&write) {
            Err(e) if e.code() == Some("limit") => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// `genward stop NAME [--grace D]`: asks for the stop sequence and waits until the
/// generation has ended; prints how it ended.
pub fn stop(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (session, if_gen) = target(m)?;
    let grace = m.value_with("grace", parse_duration)?.map(whole_millis);
    let mut conn = ctx.connect()?;
    // Subscribed first, so an `unkillable` report cannot slip past.
    conn.request(&subscribe(Target::Session(session.clone())))?;
    let stop = Op::Core(Command::Stop {
        session: session.clone(),
        if_gen,
        grace,
    });
    // Asked first, to say what a stop with nothing running did: a restart waiting out
    // its backoff is cancelled.
    let get = Op::Core(Command::Get {
        session: session.clone(),
    });
    let waiting = match conn.request(&get) {
        Ok(r) => {
            let state = r.get("session").and_then(|s| s.as_object());
            state.and_then(|s| str_of(s, "state")) == Some("backoff")
        }
        // A refusal (no such session, say) is the stop's to report.
        Err(ClientError::Remote { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    let Some(gen) = u64_of(&conn.request(&stop)?, "gen") else {
        let what = match waiting {
            true => "its pending restart is cancelled",
            false => "was not running; nothing to stop",
        };
        write_stderr(format!("genward: {session}: {what}\n").as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    };
    // One that survived SIGKILL before this stop is not reported again: asked now, after
    // subscribing, so that neither a past nor a later report slips past.
    if unkillable(&mut conn, &session)?.contains(&gen) {
        return Err(CommandError::Failed(format!(
            "{session} gen {gen}: survived SIGKILL (stuck in the kernel?); it is still tracked and shown by `genward ls`"
        )));
    }
    let wait_id = conn.send(&Op::Wait {
        session: session.clone(),
        gen: Some(gen),
    })?;
    loop {
        let msg = conn.next_message()?;
        if let Message::Event(WireEvent::Unkillable { gen: g, .. }) = &msg {
            if *g == gen {
                return Err(CommandError::Failed(format!(
                    "{session} gen {gen}: survived SIGKILL (stuck in the kernel?); it is still tracked and shown by `genward ls`"
                )));
            }
        }
        if let Some(resp) = response_for(&msg, wait_id) {
            let resp = resp?;
            let end = end_of_wait(&resp)?;
            if m.flag("json") {
                return print_end(&resp).map(|()| ExitCode::SUCCESS);
            }
            write_stdout(format!("{session} gen {gen}: {}\n", describe(&end)).as_bytes())?;
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// `genward kill NAME [-s SIG]`.
pub fn kill(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (session, if_gen) = target(m)?;
    let signal = m
        .value_with("signal", parse_signal)?
        .unwrap_or(libc::SIGTERM);
    let scope = m
        .value_with("scope", |v| match v {
            "leader" => Ok(Scope::Leader),
            "foreground" => Ok(Scope::Foreground),
            "tree" => Ok(Scope::Tree),
            _ => Err("expected leader, foreground or tree"),
        })?
        .unwrap_or(Scope::Leader);
    ctx.connect()?.request(&Op::Core(Command::Signal {
        session,
        if_gen,
        signal,
        scope,
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `restart` was given changes to the spec's directory or environment (which
/// then starts from this command's, as `run`'s does).
fn place_changes(m: &Matches<'_>) -> bool {
    ["clear-env", "daemon-env"].iter().any(|f| m.flag(f))
        || ["cwd", "env", "env-file", "unset-env"]
            .iter()
            .any(|o| !m.values(o).is_empty())
}

/// Whether `restart` was given changes to the spec: its directory, environment, user or
/// limits.
fn restart_changes(m: &Matches<'_>) -> bool {
    place_changes(m)
        || super::run::RUN_AS_OPTIONS
            .iter()
            .any(|o| !m.values(o).is_empty())
}

/// `genward restart NAME`: prints the new generation and waits until it has started, as
/// `run` does, with `run`'s exit statuses (127, 126, 1 when it could not start, 75 when
/// it has not yet); with `--no-wait`, as `run --no-wait`, it returns at once. With changes
/// (`--env`, `--cwd`, `--user`, ...), the session's spec is read, changed as `run` would
/// make it — a changed directory or environment then starts from this command's, as
/// `run`'s does — and started as a replacement.
pub fn restart(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (session, if_gen) = target(m)?;
    let mut conn = ctx.connect()?;
    let op = if restart_changes(m) {
        changed_spawn(m, &mut conn, &session, if_gen)?
    } else {
        Op::Core(Command::Restart {
            session: session.clone(),
            if_gen,
        })
    };
    let wait = !m.flag("no-wait");
    if wait {
        // Subscribed before the restart: its `spawned` or `spawn_failed` cannot be missed.
        conn.request(&subscribe(Target::Session(session.clone())))?;
    }
    let resp = conn
        .request(&op)
        .map_err(|e| super::spec_fields::usage_for(m, e))?;
    let Some(gen) = u64_of(&resp, "gen") else {
        return Err(ClientError::Protocol("restart answered without `gen`".into()).into());
    };
    if !wait {
        return super::run::print_unwaited(&session, gen, m.flag("json"));
    }
    super::run::await_start(&mut conn, &session, gen, m.flag("json"))
}

/// The `spawn` that restarts `session` with the command line's changes to its spec.
fn changed_spawn(
    m: &Matches<'_>,
    conn: &mut Connection,
    session: &str,
    if_gen: Option<u64>,
) -> Result<Op, CommandError> {
    let snap = conn.request(&Op::Core(Command::Get {
        session: session.to_owned(),
    }))?;
    let s = snap
        .get("session")
        .and_then(crate::proto::json::Value::as_object)
        .ok_or_else(|| ClientError::Protocol("get answered without `session`".into()))?;
    // `--if-gen` is not checked against this snapshot: the `spawn` carries it, and the
    // daemon decides it with the spawn, so a session that moves on meanwhile (its restart
    // policy, another client) is left alone, its newer spec included. A daemon from before
    // `spawn` took `if_gen` (this program installed, the daemon not upgraded yet) would
    // refuse the member: with it, the snapshot is all there is to check against.
    let if_gen = match if_gen {
        Some(g) if !spawn_takes_if_gen(conn)? => {
            let current = u64_of(s, "current");
            if current != Some(g) {
                let now = current.map_or("none".to_string(), |c| c.to_string());
                return Err(CommandError::Failed(format!(
                    "{session}: current generation is {now}, not {g}; nothing was done (see `genward ls` for the current one)"
                )));
            }
            None
        }
        other => other,
    };
    let spec = s
        .get("spec")
        .and_then(crate::proto::json::Value::as_object)
        .ok_or_else(|| ClientError::Protocol("get answered without `spec`".into()))?;
    let mut spec = crate::proto::request::decode_spec_object(spec)
        .map_err(|e| ClientError::Protocol(format!("the session's spec: {}", e.message)))?;
    let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
    // A new user or limit alone keeps the spec's environment.
    if place_changes(m) {
        super::run::set_environment(m, &mut spec, &super::run::caller_env())?;
    }
    if !m.values("cwd").is_empty() {
        super::run::set_cwd(m, &mut spec, &here)?;
    }
    // Only what the command line names changes; the rest of whom it runs as stays.
    super::run::set_run_as(m, &mut spec, &here)?;
    super::spec_fields::check_spec(m, session, &spec)?;
    Ok(Op::Core(Command::Spawn {
        session: session.to_owned(),
        if_gen,
        spec: Box::new(spec),
        on_busy: crate::core::OnBusy::Replace,
    }))
}

/// Whether the daemon's `spawn` takes `if_gen` (its `hello` lists `spawn_if_gen`).
fn spawn_takes_if_gen(conn: &mut Connection) -> Result<bool, CommandError> {
    let hello = conn.request(&Op::Hello)?;
    Ok(hello
        .get("capabilities")
        .and_then(crate::proto::json::Value::as_array)
        .is_some_and(|caps| caps.iter().any(|c| c.as_str() == Some("spawn_if_gen"))))
}

/// `genward rm NAME`: stops every generation and forgets the session; returns once the
/// daemon reports it removed.
pub fn rm(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let mut conn = ctx.connect()?;
    // Every session's events, because the session's own log goes away with it.
    conn.request(&subscribe(Target::All))?;
    conn.request(&Op::Core(Command::Remove {
        session: session.clone(),
    }))?;
    // A generation that survived SIGKILL before this remove is not reported again.
    if let Some(gen) = unkillable(&mut conn, &session)?.first() {
        return Err(CommandError::Failed(format!(
            "{session} gen {gen}: survived SIGKILL (stuck in the kernel?); the session stays until it ends"
        )));
    }
    loop {
        let msg = conn.next_message()?;
        let Message::Event(ev) = &msg else {
            continue;
        };
        if ev.session() != session {
            continue;
        }
        match ev {
            WireEvent::State {
                state: SessionState::Removed,
                ..
            } => return Ok(ExitCode::SUCCESS),
            WireEvent::Unkillable { gen, .. } => {
                return Err(CommandError::Failed(format!(
                    "{session} gen {gen}: survived SIGKILL (stuck in the kernel?); the session stays until it ends"
                )));
            }
            _ => {}
        }
    }
}

/// The generations of `session` that survived SIGKILL (`lifecycle: unkillable`), as `get`
/// answers now; none if the daemon cannot say (the session gone meanwhile, say). An
/// error only when the daemon did not answer.
fn unkillable(conn: &mut Connection, session: &str) -> Result<Vec<u64>, ClientError> {
    let snap = match conn.request(&Op::Core(Command::Get {
        session: session.to_owned(),
    })) {
        Ok(snap) => snap,
        Err(ClientError::Remote { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(snap
        .get("session")
        .and_then(crate::proto::json::Value::as_object)
        .and_then(|s| s.get("generations"))
        .and_then(crate::proto::json::Value::as_array)
        .unwrap_or(&[])
        .iter()
        .filter_map(crate::proto::json::Value::as_object)
        .filter(|g| str_of(g, "lifecycle") == Some("unkillable"))
        .filter_map(|g| u64_of(g, "gen"))
        .collect())
}

/// `genward shutdown`: returns once the daemon has stopped every session and exited (its
/// end of the connection closed).
pub fn shutdown(_m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let mut conn: Connection = ctx.connect()?;
    conn.request(&Op::Core(Command::Shutdown))?;
    loop {
        match conn.next_message() {
            Ok(_) => continue,
            Err(ClientError::Lost(_)) => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(e.into()),
        }
    }
}

/// `genward upgrade [--binary PATH]`: the daemon replaces its program in place and
/// answers from the program that runs afterwards — the new one, or the old one again
/// with why the new one could not take over (then this fails).
pub fn upgrade(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    // The daemon opens the path from its own directory: a relative one is made
    // absolute here, where the user meant it.
    let binary =
        match m.value("binary") {
            None => None,
            Some("") => {
                return Err(m
                    .invalid("--binary", "", "expected the path of a program")
                    .into())
            }
            Some(b) => {
                let path = std::env::current_dir()
                    .map_err(|e| CommandError::Failed(format!("--binary {b}: {e}")))?
                    .join(b);
                Some(path.to_str().map(str::to_owned).ok_or_else(|| {
                    CommandError::Failed(format!("--binary {b}: not a UTF-8 path"))
                })?)
            }
        };
    // Answered once the upgrade is over, which may take a while (generations still
    // starting are waited for): not bounded by GENWARD_TIMEOUT.
    // A `hello` first, answered at once: a daemon that does not answer (stopped, say) is
    // given up on after GENWARD_TIMEOUT rather than waited for without end.
    let mut conn = ctx.connect()?;
    conn.request(&Op::Hello)?;
    let resp = conn.request_unbounded(&Op::Upgrade { binary })?;
    if m.flag("json") {
        super::json_out::print(super::json_out::without_envelope(&resp))?;
        return Ok(ExitCode::SUCCESS);
    }
    let version = str_of(&resp, "version").unwrap_or("?");
    let previous = str_of(&resp, "previous").unwrap_or("?");
    let pause = u64_of(&resp, "pause_ms").unwrap_or(0);
    let line = format!("genward {version} runs (was {previous}; the daemon paused {pause} ms)\n");
    write_stdout(line.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `genward reload [--dry-run] [--json]`: the daemon reads its configuration again and
/// says what it changed (or, dry, would change).
pub fn reload(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let dry_run = m.flag("dry-run");
    let resp = ctx.connect()?.request(&Op::Reload { dry_run })?;
    if m.flag("json") {
        super::json_out::print(super::json_out::without_envelope(&resp))?;
        return Ok(ExitCode::SUCCESS);
    }
    let (plan, _) = crate::proto::reload::read_plan(&resp)
        .map_err(|e| ClientError::Protocol(format!("reload answer: {e}")))?;
    write_stdout(describe_plan(&plan, dry_run).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// A plan as people read it: one line per kind of change, what stays as it is last.
pub fn describe_plan(plan: &crate::core::Plan, dry_run: bool) -> String {
    let (start, stop, replace) = if dry_run {
        ("would start", "would stop", "would replace")
    } else {
        ("started", "stopping", "replaced")
    };
    let mut out = String::new();
    for (what, names) in [
        (start, &plan.start),
        (stop, &plan.stop),
        (replace, &plan.replace),
        ("busy, left running (on_busy reject)", &plan.busy),
        ("unchanged", &plan.unchanged),
    ] {
        if !names.is_empty() {
            out.push_str(&format!("{what}: {}\n", names.join(" ")));
        }
    }
    if plan.is_empty() {
        out.push_str("nothing to change\n");
    }
    out
}

/// Prints the `end` of a `wait` answer: the generation's terminal event, as the daemon
/// wrote it.
pub fn print_end(resp: &crate::proto::json::Object) -> Result<(), CommandError> {
    match resp.get("end") {
        Some(crate::proto::json::Value::Object(end)) => super::json_out::print(end.clone()),
        _ => Err(ClientError::Protocol("wait answered without an `end` object".into()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_session_is_a_change_not_nothing_to_change() {
        let plan = crate::core::Plan {
            busy: vec!["web".into()],
            unchanged: vec!["db".into()],
            ..Default::default()
        };
        assert_eq!(
            describe_plan(&plan, false),
            "busy, left running (on_busy reject): web\nunchanged: db\n"
        );
        let nothing = crate::core::Plan {
            unchanged: vec!["db".into()],
            ..Default::default()
        };
        assert_eq!(
            describe_plan(&nothing, true),
            "unchanged: db\nnothing to change\n"
        );
    }
}
