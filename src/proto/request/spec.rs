//! The `spawn` request's spec: what to run and how, on the wire.

use super::fields::{bad, bytes_of, opt_duration, signal, u16_field, Result};
use crate::core::{Env, IoMode, OnBusy, OnExit, Restart, RestartPolicy, Spec, Stderr};
use crate::proto::json::{FieldError, Object, Value};

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
    Ok(spec)
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
    match args.get("pty") {
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
                rows: u16_field(o, "rows")?.unwrap_or(24),
                cols: u16_field(o, "cols")?.unwrap_or(80),
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
    let mode = match o.opt_str("mode").map_err(bad)? {
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
    if let Some(d) = opt_duration(o, "initial")? {
        p.initial = d;
    }
    if let Some(d) = opt_duration(o, "max")? {
        p.max = d;
    }
    if let Some(d) = opt_duration(o, "reset_after")? {
        p.reset_after = d;
    }
    if let Some(n) = o.opt_u64("max_restarts").map_err(bad)? {
        p.max_restarts = Some(u32::try_from(n).unwrap_or(u32::MAX));
    }
    Ok(p)
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
