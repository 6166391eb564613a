//! What the daemon sends: replies to core commands, error lines, events, output frames.
//!
//! The driver's entry points into the wire format, under the names it has always used;
//! each delegates to the one encoder of its kind ([`WireEvent`], [`OutputFrame`],
//! [`snapshot`](super::snapshot)).

use crate::core::{Error as CoreError, ErrorCode as CoreCode, Event, Response, Stream};
use crate::proto::envelope::{begin_ok_response, RequestId};
use crate::proto::error::{write_error_response, ErrorCode, ProtoError};
use crate::proto::event::{Demotion, WireEvent};
use crate::proto::framing::OutputFrame;
use crate::proto::json::ObjWriter;
use crate::proto::list;
use crate::proto::snapshot::session;
pub use crate::proto::snapshot::Clock;

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
        CoreCode::BadConfig => ErrorCode::BadConfig,
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
        // Bounded by the line limit: too large a table is a `limit` error naming pages.
        Ok(Response::List(sessions)) => list::write_all(id, sessions, clock, out),
        Ok(Response::Ok) => ok_line(id, out, |_| {}),
        Ok(Response::Gen(gen)) => ok_line(id, out, |w| {
            w.u64("gen", *gen);
        }),
        Ok(Response::Session(s)) => ok_line(id, out, |w| {
            w.with("session", |out| session(s, clock, out));
        }),
    }
}

/// A success line whose members `members` writes.
fn ok_line(id: &RequestId, out: &mut Vec<u8>, members: impl FnOnce(&mut ObjWriter<'_>)) {
    let mut w = begin_ok_response(id, out);
    members(&mut w);
    w.finish();
    out.push(b'\n');
}

/// Appends an error response line.
pub fn error(id: &RequestId, e: &ProtoError, out: &mut Vec<u8>) {
    write_error_response(id, e, out);
}

/// Appends an event line (output is framed by [`output_frame`]).
pub fn event(ev: &Event, out: &mut Vec<u8>) {
    WireEvent::from_core(ev).write(out);
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
        t: None,
        data: data.into(),
    };
    frame.write(out);
}

/// Appends a `dropped` event: the subscriber missed session output `[from, to)`.
pub fn dropped(session: &str, from: u64, to: u64, out: &mut Vec<u8>) {
    let event = WireEvent::Dropped {
        session: session.into(),
        from,
        to,
    };
    event.write(out);
}

/// Appends a `demoted` event: the subscriber's lossless subscription to `session` is an
/// ordinary one from output position `pos` on.
pub fn demoted(session: &str, pos: u64, reason: Demotion, out: &mut Vec<u8>) {
    let event = WireEvent::Demoted {
        session: session.into(),
        pos,
        reason,
    };
    event.write(out);
}
