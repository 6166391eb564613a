//! `genward logs NAME [-f] [--gen N]`: the output the daemon still holds, then (with
//! `-f`) new output as it comes.
//!
//! The child's standard output goes to ours, its standard error to ours, a PTY's single
//! stream to standard output; bytes are passed through exactly. Without `-f` the command
//! ends at the end of the replay: after subscribing it sends one more request, whose
//! answer the daemon queues behind the replayed records, so everything before that
//! answer is the retained log. (The daemon queues a replay of up to its per-client
//! outbox, 4 MiB, before answering; a larger `buffer` may end the listing early.)

use std::process::ExitCode;

use super::args::Matches;
use super::client::{args, event_of, response_for, u64_of};
use super::dispatch::{gen_arg, session_arg, write_stderr, write_stdout, CommandResult, Context};
use crate::core::Stream;
use crate::proto::framing::Message;

/// `genward logs`.
pub fn logs(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let only = gen_arg(m, "gen")?;
    let follow = m.flag("follow");
    let mut conn = ctx.connect()?;
    let mut sub = args([("session", session.as_str().into())]);
    match only {
        Some(gen) => sub.insert("from_gen", gen),
        None => sub.insert("from_start", true),
    }
    conn.request("subscribe", sub)?;
    let marker = if follow {
        None
    } else {
        Some(conn.send("get", args([("session", session.as_str().into())]))?)
    };
    loop {
        let msg = conn.next_message()?;
        if let Some(id) = marker {
            if response_for(&msg, id).is_some() {
                return Ok(ExitCode::SUCCESS);
            }
        }
        match &msg {
            Message::Output(frame) => {
                if only.is_some_and(|g| g != frame.gen) {
                    continue;
                }
                match frame.stream {
                    Stream::Stderr => write_stderr(&frame.data)?,
                    Stream::Stdout | Stream::Pty => write_stdout(&frame.data)?,
                }
            }
            Message::Json(_) => match event_of(&msg) {
                Some(("dropped", ev)) => {
                    let (from, to) = (u64_of(ev, "from"), u64_of(ev, "to"));
                    let n = to.unwrap_or(0).saturating_sub(from.unwrap_or(0));
                    write_stderr(
                        format!("[genward: {n} bytes of output were dropped here]\n").as_bytes(),
                    )?;
                }
                Some(("exited" | "spawn_failed", ev))
                    if follow && only.is_some() && u64_of(ev, "gen") == only =>
                {
                    // Nothing follows a generation's end.
                    return Ok(ExitCode::SUCCESS);
                }
                _ => {}
            },
        }
    }
}
