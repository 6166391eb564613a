//! Request arguments → [`Op`]: the daemon's side of a request.

use super::fields::{bad, input_bytes, opt_duration, session, signal, u16_field, Result};
use super::spec::{on_busy, spec, SPAWN_FIELDS};
use super::{Lossless, Op, Replay, Target};
use crate::core::check_session_name;
use crate::core::{Command, Scope};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::{FieldError, Object, Value};
use crate::proto::list::{PAGE_DEFAULT, PAGE_MAX};

/// Decodes the arguments of operation `op`.
pub fn decode(op: &str, args: &Object) -> Result<Op> {
    let fields = |allowed: &[&str]| args.check_fields(allowed).map_err(bad);
    let if_gen = || args.opt_u64("if_gen").map_err(bad);
    Ok(match op {
        "hello" => {
            fields(&["version"])?;
            Op::Hello
        }
        "spawn" => {
            // `if_gen` is the request's, not the spec's: a config entry or a stored spec
            // has none.
            let allowed: Vec<&str> = SPAWN_FIELDS.iter().copied().chain(["if_gen"]).collect();
            fields(&allowed)?;
            Op::Core(Command::Spawn {
                session: session(args)?,
                if_gen: if_gen()?,
                spec: Box::new(spec(args)?),
                on_busy: on_busy(args)?,
            })
        }
        "write" => {
            fields(&["session", "if_gen", "data", "data_b64", "quiet"])?;
            let write = Command::Write {
                session: session(args)?,
                if_gen: if_gen()?,
                bytes: input_bytes(args)?,
            };
            match args.opt_bool("quiet").map_err(bad)? {
                Some(true) => Op::QuietWrite(write),
                None | Some(false) => Op::Core(write),
            }
        }
        "close_input" => {
            fields(&["session", "if_gen"])?;
            Op::Core(Command::CloseInput {
                session: session(args)?,
                if_gen: if_gen()?,
            })
        }
        "resize" => {
            fields(&["session", "if_gen", "rows", "cols", "attached"])?;
            let need = |k: &str| {
                u16_field(args, k)?.ok_or_else(|| bad(FieldError::missing(k)))
            };
            let resize = Command::Resize {
                session: session(args)?,
                if_gen: if_gen()?,
                rows: need("rows")?,
                cols: need("cols")?,
            };
            match args.opt_bool("attached").map_err(bad)? {
                Some(true) => Op::AttachedResize(resize),
                None | Some(false) => Op::Core(resize),
            }
        }
        "signal" => {
            fields(&["session", "if_gen", "signal", "scope"])?;
            Op::Core(Command::Signal {
                session: session(args)?,
                if_gen: if_gen()?,
                signal: signal(args, "signal")?
                    .ok_or_else(|| bad(FieldError::missing("signal")))?,
                scope: match args.opt_str("scope").map_err(bad)? {
                    None | Some("leader") => Scope::Leader,
                    Some("foreground") => Scope::Foreground,
                    Some("tree") => Scope::Tree,
                    Some(other) => {
                        return Err(bad(FieldError::invalid(
                            "scope",
                            format!("`{other}` is not one of leader, foreground, tree"),
                        )))
                    }
                },
            })
        }
        "stop" => {
            fields(&["session", "if_gen", "grace"])?;
            Op::Core(Command::Stop {
                session: session(args)?,
                if_gen: if_gen()?,
                grace: opt_duration(args, "grace")?,
            })
        }
        "restart" => {
            fields(&["session", "if_gen"])?;
            Op::Core(Command::Restart {
                session: session(args)?,
                if_gen: if_gen()?,
            })
        }
        "remove" => {
            fields(&["session"])?;
            Op::Core(Command::Remove {
                session: session(args)?,
            })
        }
        "list" => {
            fields(&["after", "limit"])?;
            list(args)?
        }
        "get" => {
            fields(&["session"])?;
            Op::Core(Command::Get {
                session: session(args)?,
            })
        }
        "subscribe" => {
            fields(&[
                "session",
                "all",
                "tail",
                "from_pos",
                "from_gen",
                "from_start",
                "lossless",
                "demote_after",
            ])?;
            let (target, replay) = (target(args)?, replay(args)?);
            if target == Target::All && matches!(replay, Replay::Pos(_)) {
                // Positions count one session's output: the same number means unrelated
                // places in every other session.
                return Err(ProtoError::new(
                    ErrorCode::BadRequest,
                    "`from_pos` is a position in one session's output: with `all`, give \
                     `from_gen`, `tail` or `from_start`",
                ));
            }
            Op::Subscribe {
                target,
                replay,
                lossless: lossless(args)?,
            }
        }
        "unsubscribe" => {
            fields(&["session", "all"])?;
            Op::Unsubscribe {
                target: target(args)?,
            }
        }
        "wait" => {
            fields(&["session", "gen", "for"])?;
            let session = session(args)?;
            let gen = args.opt_u64("gen").map_err(bad)?;
            match args.opt_str("for").map_err(bad)? {
                None | Some("end") => Op::Wait { session, gen },
                Some("ready") => Op::WaitReady { session, gen },
                Some(other) => {
                    return Err(bad(FieldError::invalid(
                        "for",
                        format!("`{other}` is not one of end, ready"),
                    )))
                }
            }
        }
        "upgrade" => {
            fields(&["binary"])?;
            let binary = args.opt_str("binary").map_err(bad)?;
            // The daemon's working directory is nobody's business: the path is absolute.
            if binary.is_some_and(|b| !b.starts_with('/') || b.contains('\0')) {
                return Err(ProtoError::new(
                    ErrorCode::BadRequest,
                    "`binary` must be an absolute path without NUL bytes",
                ));
            }
            Op::Upgrade {
                binary: binary.map(str::to_owned),
            }
        }
        "reload" => {
            fields(&["dry_run"])?;
            Op::Reload {
                dry_run: args.opt_bool("dry_run").map_err(bad)?.unwrap_or(false),
            }
        }
        "shutdown" => {
            fields(&[])?;
            Op::Core(Command::Shutdown)
        }
        other => {
            return Err(ProtoError::new(
                ErrorCode::UnknownOp,
                format!(
                    "unknown op `{}`; known: hello, spawn, write, close_input, resize, signal, stop, restart, remove, list, get, subscribe, unsubscribe, wait, upgrade, reload, shutdown",
                    other.chars().take(64).collect::<String>()
                ),
            ))
        }
    })
}

fn target(args: &Object) -> Result<Target> {
    let named = args.get("session").filter(|v| !matches!(v, Value::Null));
    match (named, args.opt_bool("all").map_err(bad)?) {
        (Some(_), Some(true)) => Err(ProtoError::new(
            ErrorCode::BadRequest,
            "give `session` or `all`, not both",
        )),
        (_, Some(true)) => Ok(Target::All),
        _ => Ok(Target::Session(session(args)?)),
    }
}

/// `"lossless": true`, with an optional `demote_after` (which means nothing without it).
fn lossless(args: &Object) -> Result<Option<Lossless>> {
    let on = args.opt_bool("lossless").map_err(bad)?.unwrap_or(false);
    let after = opt_duration(args, "demote_after")?;
    match (on, after) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(ProtoError::new(
            ErrorCode::BadRequest,
            "`demote_after` applies to a lossless subscription: give `lossless: true`",
        )),
        (true, Some(d)) if d.is_zero() || d > Lossless::MAX_DEMOTE_AFTER => {
            Err(bad(FieldError::invalid(
                "demote_after",
                format!(
                    "must be above 0 and at most {}s",
                    Lossless::MAX_DEMOTE_AFTER.as_secs()
                ),
            )))
        }
        (true, after) => Ok(Some(Lossless {
            demote_after: after.unwrap_or(Lossless::DEFAULT_DEMOTE_AFTER),
        })),
    }
}

fn replay(args: &Object) -> Result<Replay> {
    let given = [
        ("tail", args.opt_u64("tail").map_err(bad)?),
        ("from_pos", args.opt_u64("from_pos").map_err(bad)?),
        ("from_gen", args.opt_u64("from_gen").map_err(bad)?),
    ];
    let start = args.opt_bool("from_start").map_err(bad)?.unwrap_or(false);
    let n = given.iter().filter(|(_, v)| v.is_some()).count() + usize::from(start);
    if n > 1 {
        return Err(ProtoError::new(
            ErrorCode::BadRequest,
            "give at most one of `tail`, `from_pos`, `from_gen`, `from_start`",
        ));
    }
    Ok(match given {
        [(_, Some(n)), _, _] => Replay::Tail(n),
        [_, (_, Some(p)), _] => Replay::Pos(p),
        [_, _, (_, Some(g))] => Replay::Gen(g),
        _ if start => Replay::Start,
        _ => Replay::Now,
    })
}

/// `list`: the classic form (every session) without `after` and `limit`, else a page.
fn list(args: &Object) -> Result<Op> {
    let after = args.opt_str("after").map_err(bad)?;
    if let Some(name) = after.filter(|a| !a.is_empty()) {
        // Any name sorts, but one no session can have is a client's mistake, said.
        check_session_name(name).map_err(|why| bad(FieldError::invalid("after", why)))?;
    }
    let limit = args.opt_u64("limit").map_err(bad)?;
    if after.is_none() && limit.is_none() {
        return Ok(Op::Core(Command::List));
    }
    let limit = match limit {
        None => PAGE_DEFAULT,
        Some(0) => return Err(bad(FieldError::invalid("limit", "must be at least 1"))),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(PAGE_MAX),
    };
    Ok(Op::ListPage {
        after: after.map(str::to_owned),
        limit,
    })
}
