//! `genward wait NAME [--gen N]`, and how a generation's end reads to people and shells.
//!
//! The daemon answers `wait` with the generation's terminal event (`exited` or
//! `spawn_failed`); the exit status follows the shell convention of
//! [`exit_status`](super::exit_status): the code passes through (it is already 128+signal
//! for a signalled child), 127 when the command was not found, 126 when it could not be
//! executed, 1 for any other spawn failure.

use std::process::ExitCode;

use super::args::Matches;
use super::client::{args, str_of, u64_of, ClientError};
use super::dispatch::{gen_arg, session_arg, CommandResult, Context};
use super::exit_status::{shell_status, ChildEnd};
use crate::proto::json::{Object, Value};

/// How a generation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The process ran and ended.
    Exited {
        /// The generation.
        gen: u64,
        /// Exit code, 128+signal for a signalled process.
        code: i64,
        /// The signal's name, if a signal ended it.
        signal: Option<String>,
        /// Why: `exited`, `signaled`, `stopped`, `killed`, `superseded`, `lost`.
        cause: String,
    },
    /// The process never started.
    SpawnFailed {
        /// The generation.
        gen: u64,
        /// `not_found`, `permission_denied`, `other`, `cancelled`.
        kind: String,
        /// The system's explanation, if any.
        message: String,
    },
}

impl End {
    /// Reads an `exited` or `spawn_failed` event object.
    pub fn from_event(obj: &Object) -> Option<End> {
        let gen = u64_of(obj, "gen")?;
        match str_of(obj, "event")? {
            "exited" => Some(End::Exited {
                gen,
                code: match obj.get("code")? {
                    Value::Number(n) => n.as_i64()?,
                    _ => return None,
                },
                signal: str_of(obj, "signal").map(str::to_string),
                cause: str_of(obj, "cause").unwrap_or("exited").to_string(),
            }),
            "spawn_failed" => {
                let error = obj.get("error").and_then(Value::as_object);
                let text = |k| error.and_then(|e| str_of(e, k)).unwrap_or("").to_string();
                Some(End::SpawnFailed {
                    gen,
                    kind: text("kind"),
                    message: text("message"),
                })
            }
            _ => None,
        }
    }

    /// Reads a session snapshot's `last_end`: an end event without its `event` name.
    pub fn from_last_end(obj: &Object) -> Option<End> {
        let mut event = obj.clone();
        let name = if str_of(obj, "cause") == Some("spawn_failed") {
            "spawn_failed"
        } else {
            "exited"
        };
        event.insert("event", name);
        End::from_event(&event)
    }

    /// The generation that ended.
    pub fn gen(&self) -> u64 {
        match self {
            End::Exited { gen, .. } | End::SpawnFailed { gen, .. } => *gen,
        }
    }

    /// The status a shell would give this end.
    pub fn status(&self) -> u8 {
        match self {
            End::Exited { code, .. } => {
                shell_status(ChildEnd::Exited(i32::try_from(*code).unwrap_or(-1)))
            }
            End::SpawnFailed { kind, .. } => match kind.as_str() {
                "not_found" => 127,
                "permission_denied" => 126,
                _ => 1,
            },
        }
    }

    /// One phrase: `exit 0`, `exit 143 (SIGTERM, stopped)`, `spawn failed: ...`.
    pub fn describe(&self) -> String {
        match self {
            End::Exited {
                code,
                signal,
                cause,
                ..
            } => match (signal, cause.as_str()) {
                (None, "exited") => format!("exit {code}"),
                (None, cause) => format!("exit {code} ({cause})"),
                (Some(sig), cause) => format!("exit {code} ({sig}, {cause})"),
            },
            End::SpawnFailed { kind, message, .. } if message.is_empty() => {
                format!("spawn failed ({kind})")
            }
            End::SpawnFailed { kind, message, .. } => {
                format!("spawn failed ({kind}): {message}")
            }
        }
    }
}

/// The `end` of a `wait` response.
pub fn end_of_wait(resp: &Object) -> Result<End, ClientError> {
    resp.get("end")
        .and_then(Value::as_object)
        .and_then(End::from_event)
        .ok_or_else(|| ClientError::Protocol("wait answered without a usable `end`".into()))
}

/// The `last_end` of a `get` response's session, as an [`End`].
pub fn last_end(snap: &Object) -> Option<End> {
    let end = snap
        .get("session")
        .and_then(Value::as_object)?
        .get("last_end")
        .and_then(Value::as_object)?;
    End::from_last_end(end)
}

/// `genward wait`.
pub fn wait(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let gen = gen_arg(m, "gen")?;
    let mut req = args([("session", session.as_str().into())]);
    if let Some(gen) = gen {
        req.insert("gen", gen);
    }
    let mut conn = ctx.connect()?;
    let end = match conn.request("wait", req) {
        Ok(resp) => end_of_wait(&resp)?,
        // Nothing running: the answer is how the last generation ended, if known.
        Err(e) if gen.is_none() && e.code() == Some("not_running") => {
            let snap = conn.request("get", args([("session", session.as_str().into())]))?;
            last_end(&snap).ok_or(e)?
        }
        Err(e) => return Err(e.into()),
    };
    if let End::SpawnFailed { .. } = end {
        eprintln!("genward: {session} gen {}: {}", end.gen(), end.describe());
    }
    Ok(ExitCode::from(end.status()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    fn end(json: &str) -> End {
        End::from_event(parse(json.as_bytes()).unwrap().as_object().unwrap()).unwrap()
    }

    #[test]
    fn ends_read_and_map_to_statuses() {
        let e = end(
            r#"{"event":"exited","session":"a","gen":3,"code":143,"signal":"SIGTERM","cause":"stopped"}"#,
        );
        assert_eq!((e.gen(), e.status()), (3, 143));
        assert_eq!(e.describe(), "exit 143 (SIGTERM, stopped)");
        let e = end(
            r#"{"event":"exited","session":"a","gen":4,"code":0,"signal":null,"cause":"exited"}"#,
        );
        assert_eq!((e.status(), e.describe()), (0, "exit 0".to_string()));
        let e = end(
            r#"{"event":"spawn_failed","session":"a","gen":5,"error":{"kind":"not_found","errno":2,"message":"No such file or directory (os error 2)"}}"#,
        );
        assert_eq!(e.status(), 127);
        assert!(e
            .describe()
            .starts_with("spawn failed (not_found): No such file"));
        let e = end(r#"{"event":"exited","session":"a","gen":4,"code":-5,"cause":"lost"}"#);
        assert_eq!(e.status(), 255);
    }
}
