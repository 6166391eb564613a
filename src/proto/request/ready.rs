//! The `spawn` options of readiness, start order and liveness (`ready`, `depends_on`,
//! `live`), both ways, beside the rest of the spec.
//!
//! ```text
//! "ready": {"output": "listening on", "timeout": "30s"}
//! "ready": {"tcp": "127.0.0.1:8080", "interval": "200ms"}
//! "ready": {"fd": 3} | {"unix": "/run/app.sock"} | {"command": ["pg_isready"]}
//! "depends_on": {"db": "ready", "migrate": "completed", "cache": "started"}
//! "live": {"command": ["curl", "-fs", "localhost:8080/health"], "interval": "10s", "failures": 3}
//! ```

use super::fields::{bad, opt_duration_named, Result};
use crate::core::{DependOn, Dependencies, LiveCheck, ReadyCheck, ReadyHow};
use crate::proto::duration::write_wire;
use crate::proto::error::ProtoError;
use crate::proto::json::{write_array, write_str, FieldError, ObjWriter, Object, Value};

/// The kinds `ready` takes, exactly one of which is given.
const KINDS: &[&str] = &["fd", "output", "tcp", "unix", "command"];

fn invalid(field: impl Into<String>, why: impl Into<String>) -> ProtoError {
    bad(FieldError::invalid(field, why))
}

/// A duration member of `ready`, its errors naming `ready.KEY`.
fn duration(o: &Object, key: &str) -> Result<Option<std::time::Duration>> {
    duration_in("ready", o, key)
}

/// A duration member of object `name`, its errors naming `name.KEY`.
fn duration_in(name: &str, o: &Object, key: &str) -> Result<Option<std::time::Duration>> {
    opt_duration_named(o, key, &format!("{name}.{key}"))
}

/// The object `name` of `args`, if given, with exactly one of `kinds` in it and nothing
/// but `extra` besides: the object and the kind. `example` shows the shape in the error
/// for anything but an object.
fn one_kind<'a>(
    args: &'a Object,
    name: &str,
    kinds: &[&'static str],
    extra: &[&'static str],
    example: &str,
) -> Result<Option<(&'a Object, &'static str)>> {
    let o = match args.get(name) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(v) => {
            return Err(invalid(
                name,
                format!(
                    "expected an object such as {example}, got {}",
                    v.type_name()
                ),
            ))
        }
    };
    let allowed: Vec<&str> = kinds.iter().chain(extra).copied().collect();
    o.check_fields(&allowed)
        .map_err(|e| invalid(format!("{name}.{}", e.field), "unknown field"))?;
    let given: Vec<&'static str> = kinds
        .iter()
        .copied()
        .filter(|k| o.get(k).is_some())
        .collect();
    let one_of = format!("give exactly one of {}", kinds.join(", "));
    match given.as_slice() {
        [one] => Ok(Some((o, *one))),
        [] => Err(invalid(name, one_of)),
        more => Err(invalid(
            name,
            format!("{one_of}, not {}", more.join(" and ")),
        )),
    }
}

/// Decodes `ready`, if given.
pub(super) fn decode_ready(args: &Object) -> Result<Option<ReadyCheck>> {
    let example = "{\"output\": \"listening\"}";
    let Some((o, kind)) = one_kind(args, "ready", KINDS, &["timeout", "interval"], example)? else {
        return Ok(None);
    };
    let field = |e: FieldError| {
        bad(FieldError {
            field: format!("ready.{}", e.field),
            problem: e.problem,
        })
    };
    let how = match kind {
        "fd" => {
            let n = o.req_u64("fd").map_err(field)?;
            let fd = u32::try_from(n).map_err(|_| core_bad(crate::core::readiness::bad_fd(n)))?;
            ReadyHow::Fd(fd)
        }
        "output" => ReadyHow::Output(o.req_str("output").map_err(field)?.as_bytes().to_vec()),
        "tcp" => ReadyHow::Tcp(o.req_str("tcp").map_err(field)?.to_owned()),
        "unix" => ReadyHow::Unix(o.req_str("unix").map_err(field)?.as_bytes().to_vec()),
        _ => {
            let argv = o.req_array_of_str("command").map_err(field)?;
            ReadyHow::Command(argv.iter().map(|a| a.as_bytes().to_vec()).collect())
        }
    };
    let mut check = ReadyCheck::new(how);
    if let Some(d) = duration(o, "timeout")? {
        check.timeout = d;
    }
    if let Some(d) = duration(o, "interval")? {
        check.interval = d;
    }
    check.validate().map_err(core_bad)?;
    Ok(Some(check))
}

/// The core's refusal of a check, as the answer's error.
fn core_bad(e: crate::core::Error) -> ProtoError {
    ProtoError::new(crate::proto::error::ErrorCode::BadRequest, e.message)
}

/// Decodes `depends_on`, if given.
pub(super) fn decode_depends_on(args: &Object) -> Result<Dependencies> {
    let mut deps = Dependencies::new();
    let o = match args.get("depends_on") {
        None | Some(Value::Null) => return Ok(deps),
        Some(Value::Object(o)) => o,
        Some(v) => {
            return Err(invalid(
                "depends_on",
                format!(
                    "expected an object such as {{\"db\": \"ready\"}}, got {}",
                    v.type_name()
                ),
            ))
        }
    };
    for (name, v) in o.iter() {
        let field = format!("depends_on.{name}");
        let want = match v {
            Value::Str(s) => DependOn::parse(s).ok_or_else(|| {
                invalid(
                    &field,
                    format!("`{s}` is not one of ready, started, completed"),
                )
            })?,
            other => {
                return Err(invalid(
                    field,
                    format!(
                        "expected ready, started or completed, got {}",
                        other.type_name()
                    ),
                ))
            }
        };
        if deps.insert(name.to_string(), want).is_some() {
            return Err(invalid(field, "named twice"));
        }
    }
    Ok(deps)
}

/// Appends `ready` and `depends_on` when the spec has them. Fails, naming the field, for
/// text the wire cannot carry (not UTF-8).
pub(super) fn write(
    w: &mut ObjWriter<'_>,
    ready: Option<&ReadyCheck>,
    deps: &Dependencies,
) -> std::result::Result<(), FieldError> {
    if let Some(r) = ready {
        let text = |b: &[u8], f: &str| -> std::result::Result<String, FieldError> {
            String::from_utf8(b.to_vec()).map_err(|_| {
                FieldError::invalid(f, "not valid UTF-8, which a request cannot carry")
            })
        };
        let value: Kind = match &r.how {
            ReadyHow::Fd(n) => Kind::Num(u64::from(*n)),
            ReadyHow::Output(t) => Kind::Text(text(t, "ready.output")?),
            ReadyHow::Tcp(t) => Kind::Text(t.clone()),
            ReadyHow::Unix(p) => Kind::Text(text(p, "ready.unix")?),
            ReadyHow::Command(argv) => Kind::List(
                argv.iter()
                    .enumerate()
                    .map(|(i, a)| text(a, &format!("ready.command[{i}]")))
                    .collect::<std::result::Result<_, _>>()?,
            ),
        };
        let default = ReadyCheck::new(ReadyHow::Fd(3));
        w.with("ready", |out| {
            let mut o = ObjWriter::new(out);
            let kind = r.how.kind();
            write_kind(&mut o, kind, &value);
            if r.timeout != default.timeout {
                o.with("timeout", |out| write_wire(r.timeout, out));
            }
            if r.interval != default.interval {
                o.with("interval", |out| write_wire(r.interval, out));
            }
            o.finish();
        });
    }
    if !deps.is_empty() {
        w.with("depends_on", |out| {
            let mut o = ObjWriter::new(out);
            for (name, want) in deps {
                o.str(name, want.as_str());
            }
            o.finish();
        });
    }
    Ok(())
}

/// The probe kinds `live` takes, exactly one of which is given.
const LIVE_KINDS: &[&str] = &["tcp", "unix", "command"];

/// Decodes `live`, if given.
pub(super) fn decode_live(args: &Object) -> Result<Option<LiveCheck>> {
    let example = "{\"tcp\": \"127.0.0.1:8080\"}";
    let Some((o, kind)) = one_kind(args, "live", LIVE_KINDS, &["interval", "failures"], example)?
    else {
        return Ok(None);
    };
    let field = |e: FieldError| {
        bad(FieldError {
            field: format!("live.{}", e.field),
            problem: e.problem,
        })
    };
    let how = match kind {
        "tcp" => ReadyHow::Tcp(o.req_str("tcp").map_err(field)?.to_owned()),
        "unix" => ReadyHow::Unix(o.req_str("unix").map_err(field)?.as_bytes().to_vec()),
        _ => {
            let argv = o.req_array_of_str("command").map_err(field)?;
            ReadyHow::Command(argv.iter().map(|a| a.as_bytes().to_vec()).collect())
        }
    };
    let mut check = LiveCheck::new(how);
    if let Some(d) = duration_in("live", o, "interval")? {
        check.interval = d;
    }
    if let Some(n) = o.opt_u64("failures").map_err(field)? {
        check.failures = u32::try_from(n).unwrap_or(u32::MAX);
    }
    check
        .validate()
        .map_err(|e| ProtoError::new(crate::proto::error::ErrorCode::BadRequest, e.message))?;
    Ok(Some(check))
}

/// Appends `live` when the spec has it.
pub(super) fn write_live(
    w: &mut ObjWriter<'_>,
    live: Option<&LiveCheck>,
) -> std::result::Result<(), FieldError> {
    let Some(l) = live else { return Ok(()) };
    let text = |b: &[u8], f: &str| -> std::result::Result<String, FieldError> {
        String::from_utf8(b.to_vec())
            .map_err(|_| FieldError::invalid(f, "not valid UTF-8, which a request cannot carry"))
    };
    let value = match &l.how {
        ReadyHow::Tcp(t) => Kind::Text(t.clone()),
        ReadyHow::Unix(p) => Kind::Text(text(p, "live.unix")?),
        ReadyHow::Command(argv) => Kind::List(
            argv.iter()
                .enumerate()
                .map(|(i, a)| text(a, &format!("live.command[{i}]")))
                .collect::<std::result::Result<_, _>>()?,
        ),
        ReadyHow::Fd(_) | ReadyHow::Output(_) => {
            return Err(FieldError::invalid("live", "not a probe"))
        }
    };
    let default = LiveCheck::new(ReadyHow::Tcp(String::new()));
    w.with("live", |out| {
        let mut o = ObjWriter::new(out);
        let kind = l.how.kind();
        write_kind(&mut o, kind, &value);
        if l.interval != default.interval {
            o.with("interval", |out| write_wire(l.interval, out));
        }
        if l.failures != default.failures {
            o.u64("failures", l.failures.into());
        }
        o.finish();
    });
    Ok(())
}

/// A `ready` kind's value, checked before anything is written.
enum Kind {
    Num(u64),
    Text(String),
    List(Vec<String>),
}

/// Writes a check's one kind member (`fd`, `output`, `tcp`, `unix` or `command`).
fn write_kind(o: &mut ObjWriter<'_>, kind: &str, value: &Kind) {
    match value {
        Kind::Num(n) => {
            o.u64(kind, *n);
        }
        Kind::Text(t) => {
            o.str(kind, t);
        }
        Kind::List(items) => {
            o.with(kind, |out| {
                write_array(items, out, |a, out| write_str(a, out))
            });
        }
    }
}
