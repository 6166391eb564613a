//! `genward wait NAME [--gen N]`, and how a generation's end reads to people and shells.
//!
//! The daemon answers `wait` with the generation's terminal event (`exited` or
//! `spawn_failed`); the exit status follows the shell convention of
//! [`exit_status`](super::exit_status): the code passes through (it is already 128+signal
//! for a signalled child), 127 when the command was not found, 126 when it could not be
//! executed, 1 for any other spawn failure, and 255 (never success) when nobody saw the
//! generation end (`lost`, with no code).

use std::process::ExitCode;

use super::args::Matches;
use super::client::ClientError;
use super::client::Connection;
use super::dispatch::{gen_arg, session_arg, write_stderr, CommandError, CommandResult, Context};
use super::exit_status::{shell_status, ChildEnd};
use crate::core::Command;
use crate::proto::event::{End, ExitCause, SpawnErrorKind, WireEvent};
use crate::proto::json::{Object, Value};
use crate::proto::request::Op;
use crate::proto::signal_name::signal_name;

/// The status a shell would give this end.
pub fn status(end: &End) -> u8 {
    match end {
        End::Exited {
            code: Some(code), ..
        } => shell_status(ChildEnd::Exited(*code)),
        // Nobody saw it end (lost across a daemon restart): a failure, never success.
        End::Exited { code: None, .. } => u8::MAX,
        End::SpawnFailed { error, .. } => match error.kind {
            SpawnErrorKind::NotFound => 127,
            SpawnErrorKind::PermissionDenied => 126,
            SpawnErrorKind::Other | SpawnErrorKind::Cancelled => 1,
        },
    }
}

/// One phrase: `exit 0`, `exit 143 (SIGTERM, stopped)`, `lost (exit status unknown)`,
/// `spawn failed (not_found): ...`.
pub fn describe(end: &End) -> String {
    match end {
        End::Exited {
            code: None, cause, ..
        } => format!("{} (exit status unknown)", cause.as_str()),
        End::Exited {
            code: Some(code),
            signal,
            cause,
            ..
        } => match (signal, cause) {
            (None, ExitCause::Exited) => format!("exit {code}"),
            (None, cause) => format!("exit {code} ({})", cause.as_str()),
            (Some(sig), cause) => {
                let name = signal_name(*sig).unwrap_or_else(|| sig.to_string());
                format!("exit {code} ({name}, {})", cause.as_str())
            }
        },
        End::SpawnFailed { error, .. } => match error.message.as_deref() {
            Some(message) if !message.is_empty() => {
                format!("spawn failed ({}): {message}", error.kind.as_str())
            }
            _ => format!("spawn failed ({})", error.kind.as_str()),
        },
    }
}

/// The `end` of a `wait` response: a terminal event, read by the event decoder.
pub fn end_of_wait(resp: &Object) -> Result<End, ClientError> {
    let end = resp
        .get("end")
        .and_then(Value::as_object)
        .ok_or_else(|| ClientError::Protocol("wait answered without an `end` object".into()))?;
    let event =
        WireEvent::decode(end).map_err(|e| ClientError::Protocol(format!("wait's `end`: {e}")))?;
    event.end().ok_or_else(|| {
        ClientError::Protocol(format!(
            "wait's `end` is a `{}` event, not a generation's end",
            event.name()
        ))
    })
}

/// The `last_end` of a `get` response's session, if it has one.
pub fn last_end(snap: &Object) -> Result<Option<End>, ClientError> {
    let end = snap
        .get("session")
        .and_then(Value::as_object)
        .and_then(|s| s.get("last_end"))
        .and_then(Value::as_object);
    end.map(End::decode)
        .transpose()
        .map_err(|e| ClientError::Protocol(format!("`last_end`: {e}")))
}

/// `genward wait --ready`: 0 once the generation is ready; 1, with the reason, when its
/// readiness failed or it ended first.
fn wait_ready(m: &Matches<'_>, ctx: &Context, session: String, gen: Option<u64>) -> CommandResult {
    let mut conn = connect_answering(ctx)?;
    let resp = conn
        .request_unbounded(&Op::WaitReady {
            session: session.clone(),
            gen,
        })
        .map_err(|e| not_that_gen(e, &session, gen))?;
    if m.flag("json") {
        super::control::print_end(&resp)?;
    }
    let event = resp
        .get("end")
        .and_then(Value::as_object)
        .ok_or_else(|| ClientError::Protocol("wait answered without an `end` object".into()))?;
    let event = WireEvent::decode(event)
        .map_err(|e| ClientError::Protocol(format!("wait's `end`: {e}")))?;
    let gen = event.gen().unwrap_or(0);
    let why = match &event {
        WireEvent::Ready { .. } => return Ok(ExitCode::SUCCESS),
        WireEvent::ReadyFailed { reason, .. } => format!("readiness failed: {reason}"),
        other => match other.end() {
            // The daemon answers with the end alone once a generation has ended, whether
            // it was ready first or not (an end does not record it).
            Some(end) => format!("has ended, not ready now: {}", describe(&end)),
            None => format!("unexpected `{}` event", other.name()),
        },
    };
    write_stderr(format!("genward: {session} gen {gen}: {why}\n").as_bytes())?;
    Ok(ExitCode::from(1))
}

/// A connection to a daemon that answers: its `hello` is answered at once (bounded by
/// GENWARD_TIMEOUT), where the answer to a `wait` takes as long as the generation runs.
fn connect_answering(ctx: &Context) -> Result<Connection, ClientError> {
    let mut conn = ctx.connect()?;
    conn.request(&Op::Hello)?;
    Ok(conn)
}

/// The daemon's refusal `e` to wait for generation `gen` (`--gen`): one that is not
/// running is not one to start, so the hint to start the session is no answer to it.
fn not_that_gen(e: ClientError, session: &str, gen: Option<u64>) -> CommandError {
    match (&e, gen) {
        (ClientError::Remote { code, message }, Some(_)) if code == "not_running" => {
            CommandError::Failed(format!(
                "{message}; see `genward ls {session}` for its current generation"
            ))
        }
        _ => e.into(),
    }
}

/// `genward wait`.
pub fn wait(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let session = session_arg(m)?;
    let gen = gen_arg(m, "gen")?;
    if m.flag("ready") {
        return wait_ready(m, ctx, session, gen);
    }
    let mut conn = connect_answering(ctx)?;
    let wait = Op::Wait {
        session: session.clone(),
        gen,
    };
    let json = m.flag("json");
    let end = match conn.request_unbounded(&wait) {
        Ok(resp) => {
            if json {
                super::control::print_end(&resp)?;
            }
            end_of_wait(&resp)?
        }
        // Nothing running: the answer is how the last generation ended, if known.
        Err(e) if gen.is_none() && e.code() == Some("not_running") => {
            let get = Op::Core(Command::Get {
                session: session.clone(),
            });
            let snap = conn.request(&get)?;
            let end = last_end(&snap)?.ok_or(e)?;
            if json {
                let last = snap
                    .get("session")
                    .and_then(Value::as_object)
                    .and_then(|s| s.get("last_end"))
                    .and_then(Value::as_object);
                if let Some(last) = last {
                    let mut o = super::json_out::session_gen(&session, end.gen());
                    for (k, v) in last.iter() {
                        o.insert(k, v.clone());
                    }
                    super::json_out::print(o)?;
                }
            }
            end
        }
        Err(e) => return Err(not_that_gen(e, &session, gen)),
    };
    if let Some(why) = unexpected_end(&end) {
        write_stderr(format!("genward: {session} gen {}: {why}\n", end.gen()).as_bytes())?;
    }
    Ok(ExitCode::from(status(&end)))
}

/// What to say about an end the program did not choose itself — it never started, was
/// stopped, replaced, killed by a signal or lost — so that a status like 143 never comes
/// without a word; `None` for a program's own exit, whatever its code (as a shell's
/// `wait` says nothing either).
pub fn unexpected_end(end: &End) -> Option<String> {
    match end {
        End::Exited {
            cause: ExitCause::Exited,
            ..
        } => None,
        End::Exited {
            cause: ExitCause::Superseded,
            ..
        } => Some(format!(
            "{}: it was replaced by a newer generation",
            describe(end)
        )),
        _ => Some(describe(end)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    fn end(json: &str) -> End {
        let v = parse(format!(r#"{{"id":1,"ok":true,"end":{json}}}"#).as_bytes()).unwrap();
        end_of_wait(v.as_object().unwrap()).unwrap()
    }

    #[test]
    fn ends_read_and_map_to_statuses() {
        let e = end(
            r#"{"event":"exited","session":"a","gen":3,"code":143,"signal":"SIGTERM","cause":"stopped","discarded":0,"truncated":false}"#,
        );
        assert_eq!((e.gen(), status(&e)), (3, 143));
        assert_eq!(describe(&e), "exit 143 (SIGTERM, stopped)");
        let e = end(
            r#"{"event":"exited","session":"a","gen":4,"code":0,"signal":null,"cause":"exited","discarded":0,"truncated":false}"#,
        );
        assert_eq!((status(&e), describe(&e)), (0, "exit 0".to_string()));
        let e = end(
            r#"{"event":"spawn_failed","session":"a","gen":5,"error":{"kind":"not_found","errno":2,"message":"No such file or directory (os error 2)"}}"#,
        );
        assert_eq!(status(&e), 127);
        assert!(describe(&e).starts_with("spawn failed (not_found): No such file"));
        let e = end(
            r#"{"event":"exited","session":"a","gen":4,"code":-5,"signal":null,"cause":"lost","discarded":0,"truncated":false}"#,
        );
        assert_eq!(status(&e), 255);
    }

    #[test]
    fn ends_the_program_did_not_choose_are_explained() {
        let own = end(
            r#"{"event":"exited","session":"a","gen":4,"code":3,"signal":null,"cause":"exited","discarded":0,"truncated":false}"#,
        );
        assert_eq!(unexpected_end(&own), None);
        let replaced = end(
            r#"{"event":"exited","session":"a","gen":3,"code":143,"signal":"SIGTERM","cause":"superseded","discarded":0,"truncated":false}"#,
        );
        assert_eq!(
            unexpected_end(&replaced).unwrap(),
            "exit 143 (SIGTERM, superseded): it was replaced by a newer generation"
        );
        let stopped = end(
            r#"{"event":"exited","session":"a","gen":3,"code":143,"signal":"SIGTERM","cause":"stopped","discarded":0,"truncated":false}"#,
        );
        assert_eq!(
            unexpected_end(&stopped).unwrap(),
            "exit 143 (SIGTERM, stopped)"
        );
    }

    #[test]
    fn a_lost_exit_has_no_code_and_never_reads_as_success() {
        let e = end(
            r#"{"event":"exited","session":"a","gen":6,"code":null,"signal":null,"cause":"lost","discarded":0,"truncated":false}"#,
        );
        assert_eq!(describe(&e), "lost (exit status unknown)");
        assert_eq!(status(&e), 255);
    }

    #[test]
    fn a_bad_end_is_a_protocol_error_naming_the_field() {
        let v =
            parse(br#"{"id":1,"ok":true,"end":{"event":"exited","session":"a","gen":1}}"#).unwrap();
        let e = end_of_wait(v.as_object().unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected data from the daemon: wait's `end`: `exited` event: field `code`: missing"
        );
        let v = parse(br#"{"id":1,"ok":true,"end":{"event":"unkillable","session":"a","gen":1}}"#)
            .unwrap();
        let e = end_of_wait(v.as_object().unwrap()).unwrap_err();
        assert!(e.to_string().contains("not a generation's end"), "{e}");
    }
}
