//! [`Op`] → request line: the client's side of a request.
//!
//! Members are written in a fixed order (`id`, `op`, `session`, `if_gen`, then the
//! operation's own) and only when they say something: an absent option and its default
//! decode alike, so the line stays what a person would type.

use super::spec::write_spec;
use super::{Lossless, Op, Replay, Target};
use crate::core::{Command, Scope};
use crate::proto::base64;
use crate::proto::duration::write_wire;
use crate::proto::envelope::RequestId;
use crate::proto::json::{FieldError, ObjWriter};

impl Op {
    /// The operation's name on the wire.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Hello => "hello",
            Op::ListPage { .. } => "list",
            Op::Subscribe { .. } => "subscribe",
            Op::Unsubscribe { .. } => "unsubscribe",
            Op::Wait { .. } | Op::WaitReady { .. } => "wait",
            Op::Upgrade { .. } => "upgrade",
            Op::Reload { .. } => "reload",
            Op::QuietWrite(_) => "write",
            Op::AttachedResize(_) => "resize",
            Op::Core(cmd) => match cmd {
                Command::Spawn { .. } => "spawn",
                Command::Write { .. } => "write",
                Command::CloseInput { .. } => "close_input",
                Command::Resize { .. } => "resize",
                Command::Signal { .. } => "signal",
                Command::Stop { .. } => "stop",
                Command::Restart { .. } => "restart",
                Command::Remove { .. } => "remove",
                Command::List => "list",
                Command::Get { .. } => "get",
                Command::Shutdown => "shutdown",
            },
        }
    }
}

/// Appends the request line for `op` under `id`, newline included. On error nothing is
/// appended, and the error names the field the wire cannot carry (bytes that are not
/// UTF-8 where the protocol wants text, say).
pub fn encode(id: &RequestId, op: &Op, out: &mut Vec<u8>) -> Result<(), FieldError> {
    let start = out.len();
    let written = write(id, op, out);
    if written.is_err() {
        out.truncate(start);
    }
    written
}

fn write(id: &RequestId, op: &Op, out: &mut Vec<u8>) -> Result<(), FieldError> {
    let mut w = ObjWriter::new(out);
    w.with("id", |out| id.write(out)).str("op", op.name());
    match op {
        Op::Hello => {}
        Op::Core(cmd) => command(&mut w, cmd)?,
        Op::QuietWrite(cmd) => {
            command(&mut w, cmd)?;
            w.bool("quiet", true);
        }
        Op::AttachedResize(cmd) => {
            command(&mut w, cmd)?;
            w.bool("attached", true);
        }
        Op::Subscribe {
            target,
            replay,
            lossless,
        } => {
            write_target(&mut w, target);
            write_replay(&mut w, *replay);
            if let Some(l) = lossless {
                w.bool("lossless", true);
                if l.demote_after != Lossless::DEFAULT_DEMOTE_AFTER {
                    w.with("demote_after", |out| write_wire(l.demote_after, out));
                }
            }
        }
        Op::Unsubscribe { target } => write_target(&mut w, target),
        Op::Wait { session, gen } => {
            w.str("session", session);
            if let Some(gen) = gen {
                w.u64("gen", *gen);
            }
        }
        Op::WaitReady { session, gen } => {
            w.str("session", session);
            if let Some(gen) = gen {
                w.u64("gen", *gen);
            }
            w.str("for", "ready");
        }
        Op::Upgrade { binary } => {
            if let Some(binary) = binary {
                w.str("binary", binary);
            }
        }
        Op::Reload { dry_run } => {
            if *dry_run {
                w.bool("dry_run", true);
            }
        }
        Op::ListPage { after, limit } => {
            if let Some(after) = after {
                w.str("after", after);
            }
            w.u64("limit", *limit as u64);
        }
    }
    w.finish();
    out.push(b'\n');
    Ok(())
}

fn command(w: &mut ObjWriter<'_>, cmd: &Command) -> Result<(), FieldError> {
    let addressed = |w: &mut ObjWriter<'_>, session: &str, if_gen: Option<u64>| {
        w.str("session", session);
        if let Some(gen) = if_gen {
            w.u64("if_gen", gen);
        }
    };
    match cmd {
        Command::Spawn {
            session,
            if_gen,
            spec,
            on_busy,
        } => {
            addressed(w, session, *if_gen);
            write_spec(w, spec, *on_busy)?;
        }
        Command::Write {
            session,
            if_gen,
            bytes,
        } => {
            addressed(w, session, *if_gen);
            write_input(w, bytes);
        }
        Command::CloseInput { session, if_gen } | Command::Restart { session, if_gen } => {
            addressed(w, session, *if_gen);
        }
        Command::Resize {
            session,
            if_gen,
            rows,
            cols,
        } => {
            addressed(w, session, *if_gen);
            w.u64("rows", (*rows).into()).u64("cols", (*cols).into());
        }
        Command::Signal {
            session,
            if_gen,
            signal,
            scope,
        } => {
            addressed(w, session, *if_gen);
            w.i64("signal", (*signal).into());
            if *scope != Scope::Leader {
                w.str("scope", scope.as_str());
            }
        }
        Command::Stop {
            session,
            if_gen,
            grace,
        } => {
            addressed(w, session, *if_gen);
            if let Some(grace) = grace {
                w.with("grace", |out| write_wire(*grace, out));
            }
        }
        Command::Remove { session } | Command::Get { session } => {
            w.str("session", session);
        }
        Command::List | Command::Shutdown => {}
    }
    Ok(())
}

/// Input as `data` when it is text no longer escaped than in base64, else as `data_b64`:
/// readable when it can be, never larger than base64, so a client that sizes its chunks
/// for base64 always stays within the line limit.
fn write_input(w: &mut ObjWriter<'_>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) if escaped_len(text) <= bytes.len().div_ceil(3) * 4 => {
            w.str("data", text);
        }
        _ => {
            w.str("data_b64", &base64::encode(bytes));
        }
    }
}

/// The length of `text` inside a JSON string, as [`write_str`](crate::proto::json::write_str)
/// escapes it.
fn escaped_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

fn write_target(w: &mut ObjWriter<'_>, target: &Target) {
    match target {
        Target::Session(session) => w.str("session", session),
        Target::All => w.bool("all", true),
    };
}

fn write_replay(w: &mut ObjWriter<'_>, replay: Replay) {
    match replay {
        Replay::Now => {}
        Replay::Tail(n) => {
            w.u64("tail", n);
        }
        Replay::Pos(p) => {
            w.u64("from_pos", p);
        }
        Replay::Gen(g) => {
            w.u64("from_gen", g);
        }
        Replay::Start => {
            w.bool("from_start", true);
        }
    }
}
