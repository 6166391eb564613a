//! The one-request commands: `send`, `stop`, `kill`, `restart`, `rm`, `shutdown`.
//!
//! Each addresses the session's current generation, or with `--if-gen N` only generation
//! N: if the session has moved on, the daemon refuses (`stale_generation`) and nothing
//! happens, so a command meant for a process can never reach its successor.

use std::io::Read;
use std::process::ExitCode;

use super::args::Matches;
use super::client::{args, response_for, u64_of, ClientError, Connection};
use super::dispatch::{gen_arg, session_arg, CommandError, CommandResult, Context};
use super::run::millis;
use super::wait::{describe, end_of_wait};
use crate::proto::base64;
use crate::proto::duration::parse_duration;
use crate::proto::event::{SessionState, WireEvent};
use crate::proto::framing::Message;
use crate::proto::json::Object;
use crate::proto::signal_name::parse_signal;

/// Raw bytes per `write` request from `send --stdin`: base64 makes them 4/3 larger, well
/// inside the 1 MiB request line.
const SEND_CHUNK: usize = 256 * 1024;

fn target(m: &Matches<'_>) -> Result<(String, Object), CommandError> {
    let session = session_arg(m)?;
    let mut req = args([("session", session.as_str().into())]);
    if let Some(gen) = gen_arg(m, "if-gen")? {
        req.insert("if_gen", gen);
    }
    Ok((session, req))
}

/// `genward send NAME TEXT|--stdin|--eof`.
pub fn send(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (_, mut req) = target(m)?;
    if m.flag("eof") {
        ctx.connect()?.request("close_input", req)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(text) = m.positional("TEXT") {
        req.insert("data", text);
        ctx.connect()?.request("write", req)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !m.flag("stdin") {
        return Err(m
            .invalid("TEXT", "", "nothing to send: give TEXT, --stdin or --eof")
            .into());
    }
    let mut conn = ctx.connect()?;
    // Every chunk goes to one generation: the first write learns which (unless --if-gen
    // chose it), and the rest carry it as `if_gen`, so a replacement midway cannot
    // receive the second half of the input.
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; SEND_CHUNK];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CommandError::Failed(format!("reading standard input: {e}"))),
        };
        let mut chunk = req.clone();
        chunk.insert("data_b64", base64::encode(&buf[..n]));
        let resp = conn.request("write", chunk)?;
        if let Some(gen) = u64_of(&resp, "gen") {
            req.insert("if_gen", gen);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `genward stop NAME [--grace D]`: asks for the stop sequence and waits until the
/// generation has ended; prints how it ended.
pub fn stop(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (session, mut req) = target(m)?;
    if let Some(grace) = m.value_with("grace", parse_duration)? {
        req.insert("grace", millis(grace));
    }
    let mut conn = ctx.connect()?;
    // Subscribed first, so an `unkillable` report cannot slip past.
    conn.request("subscribe", args([("session", session.as_str().into())]))?;
    let Some(gen) = u64_of(&conn.request("stop", req)?, "gen") else {
        eprintln!("genward: `{session}` was not running");
        return Ok(ExitCode::SUCCESS);
    };
    let wait_id = conn.send(
        "wait",
        args([("session", session.as_str().into()), ("gen", gen.into())]),
    )?;
    loop {
        let msg = conn.next_message()?;
        if let Message::Event(WireEvent::Unkillable { gen: g, .. }) = &msg {
            if *g == gen {
                return Err(CommandError::Failed(format!(
                    "{session} gen {gen} survived SIGKILL (stuck in the kernel?); it is still tracked and shown by `genward ls`"
                )));
            }
        }
        if let Some(resp) = response_for(&msg, wait_id) {
            let end = end_of_wait(&resp?)?;
            println!("{session} gen {gen}: {}", describe(&end));
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// `genward kill NAME [-s SIG]`.
pub fn kill(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (_, mut req) = target(m)?;
    let number = m
        .value_with("signal", parse_signal)?
        .unwrap_or(libc::SIGTERM);
    req.insert("signal", u64::try_from(number).unwrap_or(0));
    ctx.connect()?.request("signal", req)?;
    Ok(ExitCode::SUCCESS)
}

/// `genward restart NAME`: prints the new generation.
pub fn restart(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let (_, req) = target(m)?;
    let resp = ctx.connect()?.request("restart", req)?;
    match u64_of(&resp, "gen") {
        Some(gen) => println!("{gen}"),
        None => return Err(ClientError::Protocol("restart answered without `gen`".into()).into()),
    }
    Ok(ExitCode::SUCCESS)
}

/// `genward rm NAME`: stops every generation and forgets the session; returns once the
/// daemon reports it removed.
pub fn rm(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let mut conn = ctx.connect()?;
    // Every session's events, because the session's own log goes away with it.
    conn.request("subscribe", args([("all", true.into())]))?;
    conn.request("remove", args([("session", session.as_str().into())]))?;
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
                    "{session} gen {gen} survived SIGKILL (stuck in the kernel?); the session stays until it ends"
                )));
            }
            _ => {}
        }
    }
}

/// `genward shutdown`: returns once the daemon has stopped every session and exited (its
/// end of the connection closed).
pub fn shutdown(_m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let mut conn: Connection = ctx.connect()?;
    conn.request("shutdown", Object::new())?;
    loop {
        match conn.next_message() {
            Ok(_) => continue,
            Err(ClientError::Lost(_)) => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(e.into()),
        }
    }
}
