//! The decoder: an event line's object → [`WireEvent`], and a snapshot's `last_end` →
//! [`End`].
//!
//! Strict about what it knows: every member the daemon always sends is required, with
//! its type, and `null` only where the daemon writes `null` (`code`, `signal`, a state's
//! `gen`). Members it does not know are ignored, as the protocol asks of clients, so a
//! newer daemon may add some.

use std::borrow::Cow;

use super::{End, EventError, WireEvent, WireSpawnError};
use crate::proto::json::{FieldError, FieldProblem, Object, Value};
use crate::proto::names::read_name;
use crate::proto::signal_name::parse_signal;

type Result<T> = std::result::Result<T, FieldError>;

impl WireEvent<'static> {
    /// Decodes an event line's object. An output event is a frame (its payload follows
    /// the line), so it is read by the [`FrameDecoder`](crate::proto::framing::FrameDecoder)
    /// and refused here.
    pub fn decode(obj: &Object) -> std::result::Result<WireEvent<'static>, EventError> {
        let name = obj.req_str("event").map_err(EventError::Name)?;
        let (event, decoded) = match name {
            "spawned" => ("spawned", spawned(obj)),
            "spawn_failed" => ("spawn_failed", spawn_failed(obj)),
            "exited" => ("exited", exited(obj)),
            "state" => ("state", state(obj)),
            "unkillable" => ("unkillable", unkillable(obj)),
            "input_closed" => ("input_closed", input_closed(obj)),
            "ready" => ("ready", ready(obj)),
            "ready_failed" => ("ready_failed", ready_failed(obj)),
            "unhealthy" => ("unhealthy", unhealthy(obj)),
            "dropped" => ("dropped", dropped(obj)),
            "demoted" => ("demoted", demoted(obj)),
            "output" => (
                "output",
                Err(FieldError::invalid(
                    "len",
                    "an output event is a frame; read it with the frame decoder",
                )),
            ),
            other => return Err(EventError::Unknown(other.to_owned())),
        };
        decoded.map_err(|error| EventError::Field { event, error })
    }
}

impl End {
    /// Decodes a snapshot's `last_end` object (a spawn failure has `"cause":"spawn_failed"`).
    pub fn decode(obj: &Object) -> Result<End> {
        let gen = obj.req_u64("gen")?;
        if obj.req_str("cause")? == "spawn_failed" {
            return Ok(End::SpawnFailed {
                gen,
                error: spawn_error(obj)?,
            });
        }
        Ok(End::Exited {
            gen,
            code: code(obj)?,
            signal: signal(obj)?,
            cause: read_name(obj, "cause")?,
        })
    }
}

fn session(obj: &Object) -> Result<Cow<'static, str>> {
    Ok(Cow::Owned(obj.req_str("session")?.to_owned()))
}

/// A member that must be present but may be `null`.
fn nullable<'a>(obj: &'a Object, key: &str) -> Result<Option<&'a Value>> {
    match obj.get(key) {
        None => Err(FieldError {
            field: key.to_owned(),
            problem: FieldProblem::Missing,
        }),
        Some(Value::Null) => Ok(None),
        Some(v) => Ok(Some(v)),
    }
}

fn code(obj: &Object) -> Result<Option<i32>> {
    if nullable(obj, "code")?.is_none() {
        return Ok(None);
    }
    let code = obj.req_i64("code")?;
    i32::try_from(code)
        .map(Some)
        .map_err(|_| FieldError::invalid("code", format!("{code} is not an exit code")))
}

fn signal(obj: &Object) -> Result<Option<i32>> {
    if nullable(obj, "signal")?.is_none() {
        return Ok(None);
    }
    parse_signal(obj.req_str("signal")?)
        .map(Some)
        .map_err(|e| FieldError::invalid("signal", e.to_string()))
}

/// The `error` object of a spawn failure; its fields are named `error.kind`, ...
fn spawn_error(obj: &Object) -> Result<WireSpawnError> {
    let nested = |e: FieldError| FieldError {
        field: format!("error.{}", e.field),
        ..e
    };
    let error = obj.req_object("error")?;
    let errno = error.req_i64("errno").map_err(nested)?;
    Ok(WireSpawnError {
        kind: read_name(error, "kind").map_err(nested)?,
        errno: i32::try_from(errno)
            .map_err(|_| FieldError::invalid("error.errno", format!("{errno} is not an errno")))?,
        message: error.opt_str("message").map_err(nested)?.map(str::to_owned),
    })
}

fn spawned(obj: &Object) -> Result<WireEvent<'static>> {
    let (session, gen) = (session(obj)?, obj.req_u64("gen")?);
    let pid = obj.req_u64("pid")?;
    Ok(WireEvent::Spawned {
        session,
        gen,
        pid: u32::try_from(pid)
            .map_err(|_| FieldError::invalid("pid", format!("{pid} is not a pid")))?,
    })
}

fn spawn_failed(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::SpawnFailed {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
        error: spawn_error(obj)?,
    })
}

fn exited(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::Exited {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
        code: code(obj)?,
        signal: signal(obj)?,
        cause: read_name(obj, "cause")?,
        discarded: obj.req_u64("discarded")?,
        truncated: obj.req_bool("truncated")?,
    })
}

fn state(obj: &Object) -> Result<WireEvent<'static>> {
    let session = session(obj)?;
    let gen = match nullable(obj, "gen")? {
        None => None,
        Some(_) => Some(obj.req_u64("gen")?),
    };
    Ok(WireEvent::State {
        session,
        gen,
        state: read_name(obj, "state")?,
    })
}

fn unkillable(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::Unkillable {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
    })
}

fn input_closed(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::InputClosed {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
    })
}

fn ready(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::Ready {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
    })
}

fn unhealthy(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::Unhealthy {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
        failures: u32::try_from(obj.req_u64("failures")?).unwrap_or(u32::MAX),
    })
}

fn ready_failed(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::ReadyFailed {
        session: session(obj)?,
        gen: obj.req_u64("gen")?,
        reason: Cow::Owned(obj.req_str("reason")?.to_owned()),
    })
}

fn demoted(obj: &Object) -> Result<WireEvent<'static>> {
    let reason = match obj.opt_str("reason")? {
        None | Some("stalled") => super::Demotion::Stalled,
        Some("removing") => super::Demotion::Removing,
        Some(other) => {
            return Err(FieldError::invalid(
                "reason",
                format!("`{other}` is not stalled or removing"),
            ))
        }
    };
    Ok(WireEvent::Demoted {
        session: session(obj)?,
        pos: obj.req_u64("pos")?,
        reason,
    })
}

fn dropped(obj: &Object) -> Result<WireEvent<'static>> {
    Ok(WireEvent::Dropped {
        session: session(obj)?,
        from: obj.req_u64("from")?,
        to: obj.req_u64("to")?,
    })
}
