//! What the daemon sends: core responses, events and snapshots → wire JSON.
//!
//! Times in the core are milliseconds since the daemon started; on the wire they become
//! Unix milliseconds (`*_unix_ms`) so clients can show them without knowing our epoch.

use crate::core::{
    Error as CoreError, ErrorCode as CoreCode, Event, GenerationSnapshot, LastEnd, Response,
    SessionSnapshot, SpawnError, Stream, Time,
};
use crate::proto::envelope::{begin_ok_response, RequestId};
use crate::proto::error::{write_error_response, ErrorCode, ProtoError};
use crate::proto::framing::OutputFrame;
use crate::proto::json::ObjWriter;
use crate::proto::signal_name::signal_name;

/// Converts core times to Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Unix milliseconds at core time zero.
    pub epoch_unix_ms: u64,
}

impl Clock {
    fn unix_ms(self, t: Time) -> u64 {
        self.epoch_unix_ms.saturating_add(t.as_millis())
    }
}

/// The wire error for a core error.
pub fn core_error(e: &CoreError) -> ProtoError {
    let code = match e.code {
        CoreCode::BadRequest => ErrorCode::BadRequest,
        CoreCode::NoSuchSession => ErrorCode::NoSuchSession,
        CoreCode::Busy => ErrorCode::Busy,
        CoreCode::StaleGeneration => ErrorCode::StaleGeneration,
        CoreCode::Limit => ErrorCode::Limit,
        CoreCode::NotRunning => ErrorCode::NotRunning,
        CoreCode::InputClosed => ErrorCode::InputClosed,
    };
    ProtoError::new(code, e.message.clone())
}

/// Appends a complete response line for a core reply.
pub fn reply(
    id: &RequestId,
    result: &Result<Response, CoreError>,
    clock: Clock,
    out: &mut Vec<u8>,
) {
    match result {
        Err(e) => write_error_response(id, &core_error(e), out),
        Ok(resp) => {
            let mut w = begin_ok_response(id, out);
            match resp {
                Response::Ok => {}
                Response::Gen(gen) => {
                    w.u64("gen", *gen);
                }
                Response::List(sessions) => {
                    w.with("sessions", |out| {
                        out.push(b'[');
                        for (i, s) in sessions.iter().enumerate() {
                            if i > 0 {
                                out.push(b',');
                            }
                            session(s, clock, out);
                        }
                        out.push(b']');
                    });
                }
                Response::Session(s) => {
                    w.with("session", |out| session(s, clock, out));
                }
            }
            w.finish();
            out.push(b'\n');
        }
    }
}

/// Appends an error response line.
pub fn error(id: &RequestId, e: &ProtoError, out: &mut Vec<u8>) {
    write_error_response(id, e, out);
}

fn spawn_error(e: &SpawnError, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.str("kind", e.kind.as_str()).i64("errno", e.errno.into());
    if e.errno != 0 {
        w.str(
            "message",
            &std::io::Error::from_raw_os_error(e.errno).to_string(),
        );
    }
    w.finish();
}

fn signal_field(w: &mut ObjWriter<'_>, key: &str, signal: Option<i32>) {
    match signal {
        None => {
            w.null(key);
        }
        Some(s) => {
            let name = signal_name(s).unwrap_or_else(|| s.to_string());
            w.str(key, &name);
        }
    }
}

/// An exit code, `null` when unknown (a generation lost across a restart).
fn code_field(w: &mut ObjWriter<'_>, code: Option<i32>) {
    match code {
        Some(c) => w.i64("code", c.into()),
        None => w.null("code"),
    };
}

fn last_end(end: &LastEnd, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    match end {
        LastEnd::Exited {
            gen,
            code,
            signal,
            cause,
        } => {
            w.u64("gen", *gen);
            code_field(&mut w, *code);
            signal_field(&mut w, "signal", *signal);
            w.str("cause", cause.as_str());
        }
        LastEnd::SpawnFailed { gen, error } => {
            w.u64("gen", *gen)
                .str("cause", "spawn_failed")
                .with("error", |out| spawn_error(error, out));
        }
    }
    w.finish();
}

fn generation(g: &GenerationSnapshot, clock: Clock, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.u64("gen", g.gen);
    match g.pid {
        Some(pid) => w.u64("pid", pid.into()),
        None => w.null("pid"),
    };
    w.str("lifecycle", g.lifecycle.as_str())
        .u64("since_unix_ms", clock.unix_ms(g.since))
        .bool("superseded", g.superseded);
    if let Some(cause) = g.cause {
        w.str("cause", cause.as_str());
    }
    w.with("offsets", |out| {
        let mut o = ObjWriter::new(out);
        for (stream, n) in &g.offsets {
            o.u64(stream.as_str(), *n);
        }
        o.finish();
    })
    .u64("discarded", g.discarded)
    .u64("pending_input", g.pending_input as u64);
    w.finish();
}

fn session(s: &SessionSnapshot, clock: Clock, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.str("name", &s.name).str("state", s.state.as_str());
    match s.current {
        Some(g) => w.u64("current", g),
        None => w.null("current"),
    };
    w.u64("restarts", s.restarts.into());
    if let Some(t) = s.restart_at {
        w.u64("restart_at_unix_ms", clock.unix_ms(t));
    }
    match &s.last_end {
        Some(end) => w.with("last_end", |out| last_end(end, out)),
        None => w.null("last_end"),
    };
    w.with("generations", |out| {
        out.push(b'[');
        for (i, g) in s.generations.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            generation(g, clock, out);
        }
        out.push(b']');
    });
    w.finish();
}

/// Appends an event line (not for output events: see [`output_header`]).
pub fn event(ev: &Event, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    match ev {
        Event::Spawned { session, gen, pid } => {
            w.str("event", "spawned")
                .str("session", session)
                .u64("gen", *gen)
                .u64("pid", (*pid).into());
        }
        Event::SpawnFailed {
            session,
            gen,
            error,
        } => {
            w.str("event", "spawn_failed")
                .str("session", session)
                .u64("gen", *gen)
                .with("error", |out| spawn_error(error, out));
        }
        Event::Exited {
            session,
            gen,
            code,
            signal,
            cause,
            discarded,
            truncated,
        } => {
            w.str("event", "exited")
                .str("session", session)
                .u64("gen", *gen);
            code_field(&mut w, *code);
            signal_field(&mut w, "signal", *signal);
            w.str("cause", cause.as_str())
                .u64("discarded", *discarded)
                .bool("truncated", *truncated);
        }
        Event::State {
            session,
            gen,
            state,
        } => {
            w.str("event", "state").str("session", session);
            match gen {
                Some(g) => w.u64("gen", *g),
                None => w.null("gen"),
            };
            w.str("state", state.as_str());
        }
        Event::Unkillable { session, gen } => {
            w.str("event", "unkillable")
                .str("session", session)
                .u64("gen", *gen);
        }
        Event::InputClosed { session, gen } => {
            w.str("event", "input_closed")
                .str("session", session)
                .u64("gen", *gen);
        }
        Event::Output { .. } => {
            debug_assert!(false, "output events are framed by output_header");
        }
    }
    w.finish();
    out.push(b'\n');
}

/// Appends an output frame: the header line announcing `data.len()` raw bytes, the bytes,
/// and a newline. `pos` is the session-wide output position (for resuming).
pub fn output_frame(
    session: &str,
    gen: u64,
    stream: Stream,
    offset: u64,
    pos: u64,
    data: &[u8],
    out: &mut Vec<u8>,
) {
    let frame = OutputFrame {
        session: session.into(),
        gen,
        stream,
        offset,
        pos,
        data: data.into(),
    };
    frame.write(out);
}

/// Appends a `dropped` event: the subscriber missed session output `[from, to)`.
pub fn dropped(session: &str, from: u64, to: u64, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.str("event", "dropped")
        .str("session", session)
        .u64("from", from)
        .u64("to", to);
    w.finish();
    out.push(b'\n');
}
