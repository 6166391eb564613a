//! Wire requests → what the daemon does: a core command, or one of the daemon's own
//! operations (hello, subscriptions, wait, shutdown).
//!
//! Decoding is strict: unknown fields, wrong types and out-of-range values are rejected
//! with a message naming the field, and nothing is executed.

use std::time::Duration;

use crate::cli::duration::parse_duration;
use crate::cli::signal_name::parse_signal;
use crate::core::{
    check_session_name, Command, Env, IoMode, OnBusy, OnExit, Restart, RestartPolicy, Spec, Stderr,
};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::{FieldError, Object, Value};

/// What a subscription covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One session.
    Session(String),
    /// Every session, present and future.
    All,
}

/// Where a new subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Only what happens from now on.
    Now,
    /// At least the last `n` retained output bytes (and the events among them).
    Tail(u64),
    /// From a session-wide output position seen earlier (`pos` of an output event).
    Pos(u64),
    /// From the first retained record about generation `gen` or a newer one.
    Gen(u64),
    /// Everything still retained.
    Start,
}

/// A decoded operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Handled by the core.
    Core(Command),
    /// Protocol version, capabilities, daemon identity.
    Hello,
    /// Start receiving events.
    Subscribe { target: Target, replay: Replay },
    /// Stop receiving events.
    Unsubscribe { target: Target },
    /// Answer once generation `gen` (default: the current one) has ended.
    Wait { session: String, gen: Option<u64> },
    /// Stop every session and exit.
    Shutdown,
}

type Result<T> = std::result::Result<T, ProtoError>;

fn bad(e: FieldError) -> ProtoError {
    e.into()
}

fn session(args: &Object) -> Result<String> {
    let name = args.req_str("session").map_err(bad)?;
    check_session_name(name).map_err(|why| bad(FieldError::invalid("session", why)))?;
    Ok(name.to_owned())
}

/// A duration: an integer number of milliseconds, or a string such as `"5s"`, `"250ms"`.
fn opt_duration(args: &Object, key: &str) -> Result<Option<Duration>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) => parse_duration(s)
            .map(Some)
            .map_err(|e| bad(FieldError::invalid(key, e.to_string()))),
        Some(v) => match v.as_u64() {
            Some(ms) => Ok(Some(Duration::from_millis(ms))),
            None => Err(bad(FieldError::invalid(
                key,
                format!(
                    "expected milliseconds or a duration string like \"5s\", got {}",
                    v.type_name()
                ),
            ))),
        },
    }
}

/// A signal: a number or a name (`"TERM"`, `"SIGTERM"`, `"15"`).
fn signal(args: &Object, key: &str) -> Result<Option<i32>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) => parse_signal(s)
            .map(Some)
            .map_err(|e| bad(FieldError::invalid(key, e.to_string()))),
        Some(v) => match v.as_u64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => parse_signal(&n.to_string())
                .map(Some)
                .map_err(|e| bad(FieldError::invalid(key, e.to_string()))),
            None => Err(bad(FieldError::invalid(
                key,
                format!("expected a signal name or number, got {}", v.type_name()),
            ))),
        },
    }
}

fn bytes_of(v: &Value, field: &str) -> Result<Vec<u8>> {
    match v {
        Value::Str(s) => Ok(s.as_bytes().to_vec()),
        other => Err(bad(FieldError::invalid(
            field,
            format!("expected string, got {}", other.type_name()),
        ))),
    }
}

/// Input bytes: `data` (UTF-8 text) or `data_b64` (arbitrary bytes), exactly one.
fn input_bytes(args: &Object) -> Result<Vec<u8>> {
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
        (None, None) => Err(ProtoError::new(
            ErrorCode::BadRequest,
            "missing field `data` (text) or `data_b64` (bytes)",
        )),
    }
}

fn u16_field(obj: &Object, key: &str) -> Result<Option<u16>> {
    match obj.opt_u64(key).map_err(bad)? {
        None => Ok(None),
        Some(n) => u16::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .map(Some)
            .ok_or_else(|| bad(FieldError::invalid(key, format!("{n} is not in 1..=65535")))),
    }
}

fn spec(args: &Object) -> Result<Spec> {
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

fn on_busy(args: &Object) -> Result<OnBusy> {
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

fn target(args: &Object) -> Result<Target> {
    match (args.get("session"), args.opt_bool("all").map_err(bad)?) {
        (Some(_), Some(true)) => Err(ProtoError::new(
            ErrorCode::BadRequest,
            "give `session` or `all`, not both",
        )),
        (_, Some(true)) => Ok(Target::All),
        _ => Ok(Target::Session(session(args)?)),
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

const SPAWN_FIELDS: &[&str] = &[
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
            fields(SPAWN_FIELDS)?;
            Op::Core(Command::Spawn {
                session: session(args)?,
                spec: Box::new(spec(args)?),
                on_busy: on_busy(args)?,
            })
        }
        "write" => {
            fields(&["session", "if_gen", "data", "data_b64"])?;
            Op::Core(Command::Write {
                session: session(args)?,
                if_gen: if_gen()?,
                bytes: input_bytes(args)?,
            })
        }
        "close_input" => {
            fields(&["session", "if_gen"])?;
            Op::Core(Command::CloseInput {
                session: session(args)?,
                if_gen: if_gen()?,
            })
        }
        "resize" => {
            fields(&["session", "if_gen", "rows", "cols"])?;
            let need = |k: &str| {
                u16_field(args, k)?.ok_or_else(|| {
                    ProtoError::new(ErrorCode::BadRequest, format!("missing field `{k}`"))
                })
            };
            Op::Core(Command::Resize {
                session: session(args)?,
                if_gen: if_gen()?,
                rows: need("rows")?,
                cols: need("cols")?,
            })
        }
        "signal" => {
            fields(&["session", "if_gen", "signal"])?;
            Op::Core(Command::Signal {
                session: session(args)?,
                if_gen: if_gen()?,
                signal: signal(args, "signal")?.ok_or_else(|| {
                    ProtoError::new(ErrorCode::BadRequest, "missing field `signal`")
                })?,
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
            fields(&[])?;
            Op::Core(Command::List)
        }
        "get" => {
            fields(&["session"])?;
            Op::Core(Command::Get {
                session: session(args)?,
            })
        }
        "subscribe" => {
            fields(&["session", "all", "tail", "from_pos", "from_gen", "from_start"])?;
            Op::Subscribe {
                target: target(args)?,
                replay: replay(args)?,
            }
        }
        "unsubscribe" => {
            fields(&["session", "all"])?;
            Op::Unsubscribe {
                target: target(args)?,
            }
        }
        "wait" => {
            fields(&["session", "gen"])?;
            Op::Wait {
                session: session(args)?,
                gen: args.opt_u64("gen").map_err(bad)?,
            }
        }
        "shutdown" => {
            fields(&[])?;
            Op::Shutdown
        }
        other => {
            return Err(ProtoError::new(
                ErrorCode::UnknownOp,
                format!(
                    "unknown op `{}`; known: hello, spawn, write, close_input, resize, signal, stop, restart, remove, list, get, subscribe, unsubscribe, wait, shutdown",
                    other.chars().take(64).collect::<String>()
                ),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    fn dec(json: &str) -> Result<Op> {
        let v = parse(json.as_bytes()).unwrap();
        let mut obj = v.as_object().unwrap().clone();
        let op = obj.remove("op").unwrap();
        decode(op.as_str().unwrap(), &obj)
    }

    fn err(json: &str) -> String {
        let e = dec(json).unwrap_err();
        format!("{}: {}", e.code.as_str(), e.message)
    }

    #[test]
    fn spawn_with_every_option() {
        let op = dec(
            r#"{"op":"spawn","session":"web","argv":["sh","-c","x"],"cwd":"/tmp",
            "env":{"A":"1"},"unset_env":["B"],"clear_env":true,"pty":{"rows":30,"cols":100},
            "stop_signal":"INT","grace":"2s","kill_grace":1500,"drain":"100ms",
            "on_exit":"leave","on_busy":"overlap",
            "restart":{"mode":"on-failure","initial":"1s","max":"30s","max_restarts":3},
            "buffer":65536}"#,
        )
        .unwrap();
        let Op::Core(Command::Spawn {
            session,
            spec,
            on_busy,
        }) = op
        else {
            panic!("{op:?}")
        };
        assert_eq!(session, "web");
        assert_eq!(on_busy, OnBusy::Overlap);
        assert_eq!(
            spec.argv,
            vec![b"sh".to_vec(), b"-c".to_vec(), b"x".to_vec()]
        );
        assert_eq!(
            spec.io,
            IoMode::Pty {
                rows: 30,
                cols: 100
            }
        );
        assert_eq!(spec.stop_signal, libc::SIGINT);
        assert_eq!(spec.grace, Duration::from_secs(2));
        assert_eq!(spec.kill_grace, Duration::from_millis(1500));
        assert_eq!(spec.on_exit, OnExit::Leave);
        assert!(!spec.env.inherit);
        assert_eq!(spec.restart.mode, Restart::OnFailure);
        assert_eq!(spec.restart.max_restarts, Some(3));
        assert_eq!(spec.buffer_bytes, 65536);
    }

    #[test]
    fn bad_session_names_are_refused_precisely() {
        for (name, why) in [
            ("../x", "start with `.`"),
            ("a/b", "contains '/'"),
            ("", "is empty"),
            (&"a".repeat(65), "limit 64"),
            ("a\u{0}b", "contains '\\0'"),
            (".hidden", "start with `.`"),
        ] {
            let req = format!(
                r#"{{"op":"get","session":{}}}"#,
                serde_json::to_string(name).unwrap()
            );
            let e = err(&req);
            assert!(e.starts_with("bad_request: field `session`"), "{e}");
            assert!(e.contains(why), "{name:?}: {e}");
        }
    }

    #[test]
    fn type_and_field_errors_name_the_field() {
        assert!(
            err(r#"{"op":"write","session":"a","if_gen":"3","data":"x"}"#).contains("`if_gen`")
        );
        assert!(err(r#"{"op":"stop","session":"a","gracee":"3s"}"#).contains("gracee"));
        assert!(err(r#"{"op":"signal","session":"a","signal":"SIGNOPE"}"#).contains("signal"));
        assert!(err(r#"{"op":"signal","session":"a","signal":999}"#).contains("signal"));
        assert!(err(r#"{"op":"spawn","session":"a","argv":[1]}"#).contains("argv[0]"));
        assert!(err(r#"{"op":"resize","session":"a","rows":0,"cols":80}"#).contains("rows"));
        assert!(err(r#"{"op":"frobnicate"}"#).starts_with("unknown_op"));
        assert!(
            err(r#"{"op":"subscribe","session":"a","tail":5,"from_pos":1}"#)
                .contains("at most one")
        );
        assert!(err(r#"{"op":"write","session":"a"}"#).contains("data"));
    }

    #[test]
    fn subscriptions_and_waits() {
        assert_eq!(
            dec(r#"{"op":"subscribe","all":true,"tail":100}"#).unwrap(),
            Op::Subscribe {
                target: Target::All,
                replay: Replay::Tail(100)
            }
        );
        assert_eq!(
            dec(r#"{"op":"subscribe","session":"s"}"#).unwrap(),
            Op::Subscribe {
                target: Target::Session("s".into()),
                replay: Replay::Now
            }
        );
        assert_eq!(
            dec(r#"{"op":"wait","session":"s","gen":4}"#).unwrap(),
            Op::Wait {
                session: "s".into(),
                gen: Some(4)
            }
        );
        assert_eq!(
            dec(r#"{"op":"write","session":"s","data_b64":"AP8="}"#).unwrap(),
            Op::Core(Command::Write {
                session: "s".into(),
                if_gen: None,
                bytes: vec![0, 255]
            })
        );
    }
}
