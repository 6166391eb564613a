//! The encoder: [`WireEvent`] → one event line (or one output frame).
//!
//! Members come in a fixed order, `event`, `session`, `gen` first, so lines are easy to
//! read and to grep; clients must not rely on the order.

use super::{End, WireEvent, WireSpawnError};
use crate::core::ExitCause;
use crate::proto::json::ObjWriter;
use crate::proto::signal_name::signal_name;

impl WireEvent<'_> {
    /// Appends the event: a JSON line, or for output the whole frame.
    pub fn write(&self, out: &mut Vec<u8>) {
        if let WireEvent::Output(frame) = self {
            frame.write(out);
            return;
        }
        let mut w = ObjWriter::new(out);
        w.str("event", self.name()).str("session", self.session());
        match self {
            WireEvent::Spawned { gen, pid, .. } => {
                w.u64("gen", *gen).u64("pid", (*pid).into());
            }
            WireEvent::SpawnFailed { gen, error, .. } => {
                w.u64("gen", *gen).with("error", |out| error.write(out));
            }
            WireEvent::Exited {
                gen,
                code,
                signal,
                cause,
                discarded,
                truncated,
                ..
            } => {
                w.u64("gen", *gen);
                exit_fields(&mut w, *code, *signal, *cause);
                w.u64("discarded", *discarded).bool("truncated", *truncated);
            }
            WireEvent::State { gen, state, .. } => {
                match gen {
                    Some(g) => w.u64("gen", *g),
                    None => w.null("gen"),
                };
                w.str("state", state.as_str());
            }
            WireEvent::Unkillable { gen, .. }
            | WireEvent::InputClosed { gen, .. }
            | WireEvent::Ready { gen, .. } => {
                w.u64("gen", *gen);
            }
            WireEvent::Unhealthy { gen, failures, .. } => {
                w.u64("gen", *gen).u64("failures", (*failures).into());
            }
            WireEvent::ReadyFailed { gen, reason, .. } => {
                w.u64("gen", *gen).str("reason", reason);
            }
            WireEvent::Dropped { from, to, .. } => {
                w.u64("from", *from).u64("to", *to);
            }
            WireEvent::Demoted { pos, reason, .. } => {
                w.u64("pos", *pos).str("reason", reason.as_str());
            }
            // Framed above; never a JSON line.
            WireEvent::Output(_) => {}
        }
        w.finish();
        out.push(b'\n');
    }
}

impl WireSpawnError {
    /// Appends the `error` object: `{"kind":..,"errno":..,"message":..}`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.str("kind", self.kind.as_str())
            .i64("errno", self.errno.into());
        if let Some(message) = &self.message {
            w.str("message", &crate::proto::error::bounded_message(message));
        }
        w.finish();
    }
}

impl End {
    /// Appends the end as a snapshot's `last_end` object. A spawn failure reads
    /// `"cause":"spawn_failed"`, so a client can tell the two shapes apart by `cause`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        match self {
            End::Exited {
                gen,
                code,
                signal,
                cause,
            } => {
                w.u64("gen", *gen);
                exit_fields(&mut w, *code, *signal, *cause);
            }
            End::SpawnFailed { gen, error } => {
                w.u64("gen", *gen)
                    .str("cause", "spawn_failed")
                    .with("error", |out| error.write(out));
            }
        }
        w.finish();
    }
}

/// `code` (`null` when unknown), `signal` (a name, or `null`), `cause`: shared by the
/// `exited` event and `last_end`, so the two always agree.
fn exit_fields(w: &mut ObjWriter<'_>, code: Option<i32>, signal: Option<i32>, cause: ExitCause) {
    match code {
        Some(c) => w.i64("code", c.into()),
        None => w.null("code"),
    };
    match signal {
        Some(s) => w.str("signal", &signal_name(s).unwrap_or_else(|| s.to_string())),
        None => w.null("signal"),
    };
    w.str("cause", cause.as_str());
}
