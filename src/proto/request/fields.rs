//! Readers for the argument types requests share: session names, durations, signals,
//! input bytes, small integers. Each error names the field it is about.

use std::time::Duration;

use crate::core::check_session_name;
use crate::proto::duration::{parse_duration, DurationError};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::{FieldError, Number, Object, Value};
use crate::proto::signal_name::{max_signal, parse_signal, SignalError};

pub(super) type Result<T> = std::result::Result<T, ProtoError>;

pub(super) fn bad(e: FieldError) -> ProtoError {
    e.into()
}

pub(super) fn session(args: &Object) -> Result<String> {
    let name = args.req_str("session").map_err(bad)?;
    check_session_name(name).map_err(|why| bad(FieldError::invalid("session", why)))?;
    Ok(name.to_owned())
}

/// A duration: an integer number of milliseconds, or a string with units such as `"5s"`,
/// `"250ms"`.
pub(super) fn opt_duration(args: &Object, key: &str) -> Result<Option<Duration>> {
    opt_duration_named(args, key, key)
}

/// [`opt_duration`] of a member of a nested object, its errors naming `field` (such as
/// `ready.timeout`).
///
/// A string without a unit is refused: on the wire a bare number means milliseconds, and
/// `"5"` read as five seconds beside `5` read as five milliseconds would be a trap (the
/// command line, which has no bare milliseconds, reads `5` as seconds).
pub(super) fn opt_duration_named(
    args: &Object,
    key: &str,
    field: &str,
) -> Result<Option<Duration>> {
    let invalid = |why: String| bad(FieldError::invalid(field, why));
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            Err(invalid(format!(
                "`{s}` has no unit: give a number of milliseconds, or a string with its unit such as \"{s}s\" or \"{s}ms\""
            )))
        }
        Some(Value::Str(s)) => parse_duration(s).map(Some).map_err(|e| match e {
            // The command line's wording speaks of lone numbers as seconds: not here.
            DurationError::MissingUnit(s) => invalid(format!(
                "missing unit in `{s}`: every number in a duration string needs its unit"
            )),
            e => invalid(e.to_string()),
        }),
        Some(v) => match v.as_u64() {
            Some(ms) => Ok(Some(Duration::from_millis(ms))),
            None => Err(invalid(format!(
                "expected milliseconds or a duration string like \"5s\", got {}",
                v.type_name()
            ))),
        },
    }
}

/// A signal: a number or a name (`"TERM"`, `"SIGTERM"`, `"15"`).
pub(super) fn signal(args: &Object, key: &str) -> Result<Option<i32>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) => parse_signal(s)
            .map(Some)
            .map_err(|e| bad(FieldError::invalid(key, e.to_string()))),
        // Any integer is read as the number it is, so one out of range is refused as such
        // (showing the number sent), never as a wrong type.
        Some(Value::Number(Number::U64(n))) => parse_signal(&n.to_string())
            .map(Some)
            .map_err(|e| bad(FieldError::invalid(key, e.to_string()))),
        Some(Value::Number(Number::I64(n))) => {
            let e = SignalError::OutOfRange {
                input: n.to_string(),
                max: max_signal(),
            };
            Err(bad(FieldError::invalid(key, e.to_string())))
        }
        Some(v) => Err(bad(FieldError::invalid(
            key,
            format!("expected a signal name or number, got {}", v.type_name()),
        ))),
    }
}

pub(super) fn bytes_of(v: &Value, field: &str) -> Result<Vec<u8>> {
    match v {
        Value::Str(s) => Ok(s.as_bytes().to_vec()),
        other => Err(bad(FieldError::invalid(
            field,
            format!("expected string, got {}", other.type_name()),
        ))),
    }
}

/// Input bytes: `data` (UTF-8 text) or `data_b64` (arbitrary bytes), exactly one.
pub(super) fn input_bytes(args: &Object) -> Result<Vec<u8>> {
    match (args.get("data"), args.get("data_b64")) {
        (Some(v), None) => bytes_of(v, "data"),
        (None, Some(Value::Str(s))) => crate::proto::base64::decode(s)
            .map_err(|e| bad(FieldError::invalid("data_b64", e.to_string()))),
        (None, Some(v)) => Err(bad(FieldError::invalid(
            "data_b64",
            format!("expected string, got {}", v.type_name()),
        ))),
        (Some(_), Some(_)) => Err(ProtoError::new(
            ErrorCode::BadRequest,
            "give `data` or `data_b64`, not both",
        )),
        (None, None) => Err(bad(FieldError::invalid(
            "data",
            "missing; give `data` (text) or `data_b64` (bytes)",
        ))),
    }
}

pub(super) fn u16_field(obj: &Object, key: &str) -> Result<Option<u16>> {
    u16_member(obj, key, key)
}

/// [`u16_field`] of a member of a nested object, its errors naming `field` (such as
/// `pty.rows`).
pub(super) fn u16_member(obj: &Object, key: &str, field: &str) -> Result<Option<u16>> {
    let n = obj.opt_u64(key).map_err(|mut e| {
        e.field = field.to_owned();
        bad(e)
    })?;
    match n {
        None => Ok(None),
        Some(n) => u16::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .map(Some)
            .ok_or_else(|| {
                bad(FieldError::invalid(
                    field,
                    format!("{n} is not in 1..=65535"),
                ))
            }),
    }
}
