//! The `spawn` request's spec, both ways: decoded by the daemon, written by clients. The
//! two directions sit together so a new option is added to both at once.

use super::fields::{bad, bytes_of, opt_duration, opt_duration_named, signal, u16_member, Result};
use super::MAX_SPEC_BYTES;
use crate::core::{
    CpuQuota, Env, IoMode, OnBusy, OnExit, OnRecover, ResourceLimits, Restart, RestartPolicy, Spec,
    Stderr,
};
use crate::proto::duration::write_wire;
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::{write_array, write_str, FieldError, ObjWriter, Object, Value};

/// The arguments `spawn` accepts.
pub(super) const SPAWN_FIELDS: &[&str] = &[
    "session",
    "argv",
    "cwd",
    "env",
    "clear_env",
    "unset_env",
    "pty",
    "stderr",
    "stop_signal",
    "grace",
    "kill_grace",
    "drain",
    "on_exit",
    "on_busy",
    "restart",
    "buffer",
    "limits",
    "on_recover",
    "user",
    "group",
    "groups",
    "umask",
    "env_file",
    "rlimits",
    "log",
    "ready",
    "depends_on",
    "live",
];

/// Decodes the spec of a `spawn` request.
pub(super) fn spec(args: &Object) -> Result<Spec> {
    let argv = args.req_array("argv").map_err(bad)?;
    let argv = argv
        .iter()
        .enumerate()
        .map(|(i, v)| bytes_of(v, &format!("argv[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let mut spec = Spec::new(argv);
    spec.cwd = args
        .opt_str("cwd")
        .map_err(bad)?
        .map(|s| s.as_bytes().to_vec());
    spec.env = env(args)?;
    spec.io = io_mode(args)?;
    if let Some(sig) = signal(args, "stop_signal")? {
        spec.stop_signal = sig;
    }
    if let Some(d) = opt_duration(args, "grace")? {
        spec.grace = d;
    }
    if let Some(d) = opt_duration(args, "kill_grace")? {
        spec.kill_grace = d;
    }
    if let Some(d) = opt_duration(args, "drain")? {
        spec.drain = d;
    }
    spec.on_exit = match args.opt_str("on_exit").map_err(bad)? {
        None | Some("kill_group") => OnExit::KillGroup,
        Some("leave") => OnExit::Leave,
        Some(other) => {
            return Err(bad(FieldError::invalid(
                "on_exit",
                format!("`{other}` is not one of kill_group, leave"),
            )))
        }
    };
    if let Some(r) = args.opt_object("restart").map_err(bad)? {
        spec.restart = restart(r)?;
    }
    if let Some(n) = args.opt_u64("buffer").map_err(bad)? {
        spec.buffer_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(l) = args.opt_object("limits").map_err(bad)? {
        spec.limits = limits(l)?;
    }
    spec.on_recover = match args.opt_str("on_recover").map_err(bad)? {
        None | Some("stop") => OnRecover::Stop,
        Some("keep") => OnRecover::Keep,
        Some(other) => {
            return Err(bad(FieldError::invalid(
                "on_recover",
                format!("`{other}` is not one of stop, keep"),
            )))
        }
    };
    spec.run_as = super::run_as::decode(args)?;
    spec.log = super::log_file::decode(args)?;
    spec.ready = super::ready::decode_ready(args)?;
    spec.depends_on = super::ready::decode_depends_on(args)?;
    spec.live = super::ready::decode_live(args)?;
    check_size(&spec)?;
    Ok(spec)
}

/// Refuses a spec whose encoding (as `get` answers and the state directory keep it)
/// exceeds [`MAX_SPEC_BYTES`]: every answer that carries it must fit in one line.
fn check_size(spec: &Spec) -> Result<()> {
    let mut encoded = Vec::new();
    // What cannot be encoded at all was refused field by field while decoding.
    if super::write_spec_object(spec, &mut encoded).is_ok() && encoded.len() > MAX_SPEC_BYTES {
        return Err(ProtoError::new(
            ErrorCode::Limit,
            format!(
                "the spec is {} bytes encoded (argv, env and the rest together), beyond the limit of {MAX_SPEC_BYTES}",
                encoded.len()
            ),
        ));
    }
    Ok(())
}

fn limits(o: &Object) -> Result<ResourceLimits> {
    let unknown = |e: FieldError| {
        bad(FieldError::invalid(
            format!("limits.{}", e.field),
            "unknown field",
        ))
    };
    o.check_fields(&["memory_max", "pids_max", "cpu_max"])
        .map_err(unknown)?;
    let named = |e: FieldError| {
        bad(FieldError::invalid(
            format!("limits.{}", e.field),
            e.to_string(),
        ))
    };
    let cpu_max = match o.opt_object("cpu_max").map_err(named)? {
        None => None,
        Some(c) => {
            c.check_fields(&["quota_us", "period_us"]).map_err(|e| {
                bad(FieldError::invalid(
                    format!("limits.cpu_max.{}", e.field),
                    "unknown field",
                ))
            })?;
            let need = |k: &str| {
                c.opt_u64(k).map_err(named)?.ok_or_else(|| {
                    bad(FieldError::invalid(
                        format!("limits.cpu_max.{k}"),
                        "missing",
                    ))
                })
            };
            Some(CpuQuota {
                quota_us: need("quota_us")?,
                period_us: need("period_us")?,
            })
        }
    };
    Ok(ResourceLimits {
        memory_max: o.opt_u64("memory_max").map_err(named)?,
        pids_max: o.opt_u64("pids_max").map_err(named)?,
        cpu_max,
    })
}

fn env(args: &Object) -> Result<Env> {
    let mut env = Env {
        inherit: !args.opt_bool("clear_env").map_err(bad)?.unwrap_or(false),
        ..Env::default()
    };
    if let Some(set) = args.opt_object("env").map_err(bad)? {
        for (k, v) in set.iter() {
            let v = match v {
                Value::Str(s) => s.as_bytes().to_vec(),
                other => {
                    return Err(bad(FieldError::invalid(
                        format!("env.{k}"),
                        format!("expected string, got {}", other.type_name()),
                    )))
                }
            };
            env.set.push((k.as_bytes().to_vec(), v));
        }
    }
    if let Some(unset) = args.opt_array_of_str("unset_env").map_err(bad)? {
        env.unset = unset.into_iter().map(|s| s.as_bytes().to_vec()).collect();
    }
    Ok(env)
}

fn io_mode(args: &Object) -> Result<IoMode> {
    let stderr = match args.opt_str("stderr").map_err(bad)? {
        None | Some("pipe") => Stderr::Pipe,
        Some("merge") => Stderr::Merge,
        Some("null") => Stderr::Null,
        Some(other) => {
            return Err(bad(FieldError::invalid(
                "stderr",
                format!("`{other}` is not one of pipe, merge, null"),
            )))
        }
    };
    let pty = args.get("pty");
    let pipes = matches!(pty, None | Some(Value::Null) | Some(Value::Bool(false)));
    if !pipes && stderr != Stderr::Pipe {
        let why = "a PTY has one stream, stdout and stderr together: `stderr` is for pipes mode";
        return Err(bad(FieldError::invalid("stderr", why)));
    }
    match pty {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(IoMode::Pipes { stderr }),
        Some(Value::Bool(true)) => Ok(IoMode::Pty { rows: 24, cols: 80 }),
        Some(Value::Object(o)) => {
            o.check_fields(&["rows", "cols"]).map_err(|e| {
                bad(FieldError::invalid(
                    format!("pty.{}", e.field),
                    "unknown field",
                ))
            })?;
            Ok(IoMode::Pty {
                rows: u16_member(o, "rows", "pty.rows")?.unwrap_or(24),
                cols: u16_member(o, "cols", "pty.cols")?.unwrap_or(80),
            })
        }
        Some(v) => Err(bad(FieldError::invalid(
            "pty",
            format!(
                "expected true, false or {{\"rows\":..,\"cols\":..}}, got {}",
                v.type_name()
            ),
        ))),
    }
}

fn restart(o: &Object) -> Result<RestartPolicy> {
    o.check_fields(&["mode", "initial", "max", "reset_after", "max_restarts"])
        .map_err(|e| {
            bad(FieldError::invalid(
                format!("restart.{}", e.field),
                "unknown field",
            ))
        })?;
    // Every error names its member as `restart.X`.
    let named = |mut e: FieldError| {
        e.field = format!("restart.{}", e.field);
        bad(e)
    };
    let mode = match o.opt_str("mode").map_err(named)? {
        None | Some("never") => Restart::Never,
        Some("on-failure") | Some("on_failure") => Restart::OnFailure,
        Some("always") => Restart::Always,
        Some(other) => {
            return Err(bad(FieldError::invalid(
                "restart.mode",
                format!("`{other}` is not one of never, on-failure, always"),
            )))
        }
    };
    let mut p = RestartPolicy {
        mode,
        ..RestartPolicy::default()
    };
    if let Some(d) = opt_duration_named(o, "initial", "restart.initial")? {
        p.initial = d;
    }
    if let Some(d) = opt_duration_named(o, "max", "restart.max")? {
        p.max = d;
    }
    if let Some(d) = opt_duration_named(o, "reset_after", "restart.reset_after")? {
        p.reset_after = d;
    }
    p.max_restarts = max_restarts(o, p.max_restarts)?;
    Ok(p)
}

/// `max_restarts`: a count (one above `u32::MAX` is taken as that), `"infinity"` for no
/// bound, or absent (`null` included) for `default`.
fn max_restarts(o: &Object, default: Option<u32>) -> Result<Option<u32>> {
    match o.get("max_restarts") {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Str(s)) if s == "infinity" => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
            None => Err(bad(FieldError::invalid(
                "restart.max_restarts",
                format!(
                    "expected a non-negative integer or \"infinity\", got {}",
                    match v {
                        Value::Str(s) => format!("`{s}`"),
                        v => v.type_name().to_string(),
                    }
                ),
            ))),
        },
    }
}

pub(super) fn on_busy(args: &Object) -> Result<OnBusy> {
    match args.opt_str("on_busy").map_err(bad)? {
        None | Some("replace") => Ok(OnBusy::Replace),
        Some("overlap") => Ok(OnBusy::Overlap),
        Some("reject") => Ok(OnBusy::Reject),
        Some(other) => Err(bad(FieldError::invalid(
            "on_busy",
            format!("`{other}` is not one of replace, overlap, reject"),
        ))),
    }
}

/// What encoding returns: the wire cannot carry every spec (see [`write_spec`]).
type Encoded<T> = std::result::Result<T, FieldError>;

/// Appends a `spawn` request's spec members (after `session`). Only what differs from
/// [`Spec::new`]'s defaults is written: the decoder starts from the same defaults, so the
/// request decodes to this spec exactly, and a request reads like what a person would
/// write. Fails, naming the field, for what the wire cannot carry: bytes that are not
/// UTF-8, an env key set twice, unlimited restarts.
pub(super) fn write_spec(w: &mut ObjWriter<'_>, spec: &Spec, busy: OnBusy) -> Encoded<()> {
    let default = Spec::new(Vec::new());
    let argv = texts(&spec.argv, "argv")?;
    w.with("argv", |out| {
        write_array(&argv, out, |a, out| write_str(a, out))
    });
    if let Some(cwd) = &spec.cwd {
        w.str("cwd", text(cwd, "cwd")?);
    }
    if !spec.env.set.is_empty() {
        let mut set: Vec<(&str, &str)> = Vec::with_capacity(spec.env.set.len());
        // A hash set, not a scan of `set`: a request may carry tens of thousands of
        // entries, and this runs in the daemon's only loop before any size check.
        let mut seen = std::collections::HashSet::with_capacity(spec.env.set.len());
        for (k, v) in &spec.env.set {
            let k = text(k, "env")?;
            if !seen.insert(k) {
                return Err(FieldError::invalid(format!("env.{k}"), "set twice"));
            }
            let field = format!("env.{k}");
            set.push((k, text(v, &field)?));
        }
        w.with("env", |out| {
            let mut o = ObjWriter::new(out);
            for (k, v) in set {
                o.str(k, v);
            }
            o.finish();
        });
    }
    if !spec.env.inherit {
        w.bool("clear_env", true);
    }
    if !spec.env.unset.is_empty() {
        let unset = texts(&spec.env.unset, "unset_env")?;
        w.with("unset_env", |out| {
            write_array(&unset, out, |u, out| write_str(u, out))
        });
    }
    match spec.io {
        // The protocol's shorthand for the default size.
        IoMode::Pty { rows: 24, cols: 80 } => {
            w.bool("pty", true);
        }
        IoMode::Pty { rows, cols } => {
            w.with("pty", |out| {
                let mut o = ObjWriter::new(out);
                o.u64("rows", rows.into()).u64("cols", cols.into());
                o.finish();
            });
        }
        IoMode::Pipes { stderr } => match stderr {
            Stderr::Pipe => {}
            Stderr::Merge => {
                w.str("stderr", "merge");
            }
            Stderr::Null => {
                w.str("stderr", "null");
            }
        },
    }
    match busy {
        OnBusy::Replace => {}
        OnBusy::Overlap => {
            w.str("on_busy", "overlap");
        }
        OnBusy::Reject => {
            w.str("on_busy", "reject");
        }
    }
    if spec.restart != default.restart {
        let policy = restart_members(&spec.restart, &default.restart)?;
        w.with("restart", |out| write_policy(&spec.restart, &policy, out));
    }
    if spec.stop_signal != default.stop_signal {
        w.i64("stop_signal", spec.stop_signal.into());
    }
    for (key, d, default) in [
        ("grace", spec.grace, default.grace),
        ("kill_grace", spec.kill_grace, default.kill_grace),
        ("drain", spec.drain, default.drain),
    ] {
        if d != default {
            w.with(key, |out| write_wire(d, out));
        }
    }
    if spec.on_exit == OnExit::Leave {
        w.str("on_exit", "leave");
    }
    if spec.buffer_bytes != default.buffer_bytes {
        w.u64("buffer", spec.buffer_bytes as u64);
    }
    if !spec.limits.is_empty() {
        w.with("limits", |out| write_limits(&spec.limits, out));
    }
    if spec.on_recover == OnRecover::Keep {
        w.str("on_recover", "keep");
    }
    super::ready::write(w, spec.ready.as_ref(), &spec.depends_on)?;
    super::ready::write_live(w, spec.live.as_ref())?;
    super::run_as::write(w, &spec.run_as)?;
    super::log_file::write(w, &spec.log)
}

/// Which optional members a restart policy needs, checked before anything is written.
struct PolicyMembers {
    initial: bool,
    max: bool,
    reset_after: bool,
    /// Given unless it is the default: a count, or `None` for no bound (`"infinity"`).
    max_restarts: Option<Option<u32>>,
}

fn restart_members(p: &RestartPolicy, default: &RestartPolicy) -> Encoded<PolicyMembers> {
    let max_restarts = (p.max_restarts != default.max_restarts).then_some(p.max_restarts);
    Ok(PolicyMembers {
        initial: p.initial != default.initial,
        max: p.max != default.max,
        reset_after: p.reset_after != default.reset_after,
        max_restarts,
    })
}

fn write_policy(p: &RestartPolicy, members: &PolicyMembers, out: &mut Vec<u8>) {
    let mut o = ObjWriter::new(out);
    o.str(
        "mode",
        match p.mode {
            Restart::Never => "never",
            Restart::OnFailure => "on-failure",
            Restart::Always => "always",
        },
    );
    for (key, given, d) in [
        ("initial", members.initial, p.initial),
        ("max", members.max, p.max),
        ("reset_after", members.reset_after, p.reset_after),
    ] {
        if given {
            o.with(key, |out| write_wire(d, out));
        }
    }
    match members.max_restarts {
        Some(Some(n)) => {
            o.u64("max_restarts", n.into());
        }
        Some(None) => {
            o.str("max_restarts", "infinity");
        }
        None => {}
    }
    o.finish();
}

/// Bytes the spec holds as text on the wire.
fn text<'a>(bytes: &'a [u8], field: &str) -> Encoded<&'a str> {
    std::str::from_utf8(bytes)
        .map_err(|_| FieldError::invalid(field, "not valid UTF-8, which a request cannot carry"))
}

fn texts<'a>(items: &'a [Vec<u8>], field: &str) -> Encoded<Vec<&'a str>> {
    items
        .iter()
        .enumerate()
        .map(|(i, b)| text(b, &format!("{field}[{i}]")))
        .collect()
}

fn write_limits(l: &ResourceLimits, out: &mut Vec<u8>) {
    let mut o = ObjWriter::new(out);
    if let Some(n) = l.memory_max {
        o.u64("memory_max", n);
    }
    if let Some(n) = l.pids_max {
        o.u64("pids_max", n);
    }
    if let Some(c) = l.cpu_max {
        o.with("cpu_max", |out| {
            let mut c_w = ObjWriter::new(out);
            c_w.u64("quota_us", c.quota_us)
                .u64("period_us", c.period_us);
            c_w.finish();
        });
    }
    o.finish();
}
