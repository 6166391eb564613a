//! `genward logs NAME [-f] [--gen N] [--lossless]`: the output the daemon still holds,
//! then (with `-f`) new output as it comes. With `--lossless` the subscription is
//! lossless (see docs/protocol.md): a recorder piping this into a slow sink gets every
//! byte, the process waiting for it, unless it stalls past the bound and is demoted.
//!
//! The child's standard output goes to ours, its standard error to ours, a PTY's single
//! stream to standard output; bytes are passed through exactly. Without `-f` the command
//! ends at the end of the replay: after subscribing it sends one more request, whose
//! answer the daemon queues behind the replayed records, so everything before that
//! answer is the retained log. (The daemon queues a replay of up to its per-client
//! outbox, 4 MiB, before answering; a larger `buffer` may end the listing early.)

use std::process::ExitCode;

use super::args::Matches;
use super::client::response_for;
use super::dispatch::{gen_arg, session_arg, write_stderr, write_stdout, CommandResult, Context};
use crate::core::Command;
use crate::proto::event::{Stream, WireEvent};
use crate::proto::framing::Message;
use crate::proto::request::{Lossless, Op, Replay, Target};

/// `genward logs`.
pub fn logs(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let only = gen_arg(m, "gen")?;
    let follow = m.flag("follow");
    let mut conn = ctx.connect()?;
    conn.request(&Op::Subscribe {
        target: Target::Session(session.clone()),
        replay: only.map_or(Replay::Start, Replay::Gen),
        lossless: m.flag("lossless").then(Lossless::default),
    })?;
    let marker = if follow {
        None
    } else {
        Some(conn.send(&Op::Core(Command::Get { session }))?)
    };
    loop {
        let msg = conn.next_message()?;
        if let Some(id) = marker {
            if response_for(&msg, id).is_some() {
                return Ok(ExitCode::SUCCESS);
            }
        }
        match &msg {
            Message::Event(WireEvent::Output(frame)) => {
                if only.is_some_and(|g| g != frame.gen) {
                    continue;
                }
                match frame.stream {
                    Stream::Stderr => write_stderr(&frame.data)?,
                    Stream::Stdout | Stream::Pty => write_stdout(&frame.data)?,
                }
            }
            Message::Event(WireEvent::Dropped { from, to, .. }) => {
                let n = to.saturating_sub(*from);
                write_stderr(
                    format!("[genward: {n} bytes of output were dropped here]\n").as_bytes(),
                )?;
            }
            Message::Event(WireEvent::Demoted { pos, .. }) => {
                write_stderr(
                    format!("[genward: no longer lossless from byte {pos}: this reader stalled]\n")
                        .as_bytes(),
                )?;
            }
            Message::Event(ev @ (WireEvent::Exited { .. } | WireEvent::SpawnFailed { .. }))
                if follow && only.is_some() && ev.gen() == only =>
            {
                // Nothing follows a generation's end.
                return Ok(ExitCode::SUCCESS);
            }
            _ => {}
        }
    }
}
