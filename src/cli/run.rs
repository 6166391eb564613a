//! `genward run NAME [options] -- CMD ARGS...`: a new generation of a session.
//!
//! The child runs in the daemon, not here, so what the user means by "here" is sent along:
//! a relative `--cwd` (and no `--cwd` at all) is this shell's working directory, and a PTY
//! session gets this terminal's `TERM` and size unless told otherwise. Prints the new
//! generation number, alone on a line, for scripts (`gen=$(genward run ...)`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::args::Matches;
use super::client::{u64_of, ClientError};
use super::dispatch::{session_arg, CommandError, CommandResult, Context};
use crate::core::{Command, IoMode, OnBusy, Restart, RestartPolicy, Spec};
use crate::proto::duration::parse_duration;
use crate::proto::request::Op;
use crate::sys::terminal::window_size;

/// Builds the `spawn` request from the command line.
pub fn spawn_op(m: &Matches<'_>, cwd_now: &Path) -> Result<Op, CommandError> {
    let session = session_arg(m)?;
    let argv = m.trailing().unwrap_or_default();
    let mut spec = Spec::new(argv.iter().map(|a| a.as_bytes().to_vec()).collect());
    let cwd = match m.value("cwd") {
        Some(dir) => cwd_now.join(dir),
        None => cwd_now.to_path_buf(),
    };
    let cwd = cwd
        .to_str()
        .ok_or_else(|| m.invalid("--cwd", &cwd.to_string_lossy(), "not valid UTF-8"))?;
    spec.cwd = Some(cwd.as_bytes().to_vec());

    for kv in m.values("env") {
        let Some((k, v)) = kv.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(m
                .invalid("--env", kv, "expected NAME=VALUE, e.g. --env PORT=8080")
                .into());
        };
        set_env(&mut spec, k, v);
    }
    let pty = m.flag("pty");
    if pty && !spec.env.set.iter().any(|(k, _)| k == b"TERM") {
        if let Some(term) = std::env::var("TERM").ok().filter(|t| !t.is_empty()) {
            set_env(&mut spec, "TERM", &term);
        }
    }
    if pty {
        spec.io = match window_size(std::io::stdin()) {
            Ok(ws) if ws.rows > 0 && ws.cols > 0 => IoMode::Pty {
                rows: ws.rows,
                cols: ws.cols,
            },
            // The protocol's default size.
            _ => IoMode::Pty { rows: 24, cols: 80 },
        };
    }
    let mut on_busy = OnBusy::default();
    for (flag, mode) in [
        ("replace", OnBusy::Replace),
        ("overlap", OnBusy::Overlap),
        ("reject", OnBusy::Reject),
    ] {
        if m.flag(flag) {
            on_busy = mode;
        }
    }
    if let Some(policy) = m.value("restart") {
        let mode = match policy {
            "never" => Restart::Never,
            "on-failure" => Restart::OnFailure,
            "always" => Restart::Always,
            _ => {
                return Err(m
                    .invalid("--restart", policy, "expected never, on-failure or always")
                    .into())
            }
        };
        spec.restart = RestartPolicy {
            mode,
            ..RestartPolicy::default()
        };
    }
    if let Some(grace) = m.value_with("grace", parse_duration)? {
        spec.grace = whole_millis(grace);
    }
    Ok(Op::Core(Command::Spawn {
        session,
        spec: Box::new(spec),
        on_busy,
    }))
}

/// Sets `key` to `value`, replacing an earlier `--env` of the same key in place (a request
/// cannot carry a key twice; the last one given wins, as in a shell).
fn set_env(spec: &mut Spec, key: &str, value: &str) {
    let value = value.as_bytes().to_vec();
    match spec.env.set.iter_mut().find(|(k, _)| k == key.as_bytes()) {
        Some((_, v)) => *v = value,
        None => spec.env.set.push((key.as_bytes().to_vec(), value)),
    }
}

/// A duration rounded up to whole milliseconds (so `1us` is not zero): the protocol's
/// plainest unit, and what `--grace` has always sent.
pub fn whole_millis(d: Duration) -> Duration {
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// `genward run`.
pub fn run(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let op = spawn_op(m, &here)?;
    let mut conn = ctx.connect()?;
    let resp = conn.request(&op)?;
    let gen = u64_of(&resp, "gen")
        .ok_or_else(|| ClientError::Protocol("spawn answered without `gen`".into()))?;
    println!("{gen}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{parse, Outcome};
    use crate::cli::commands::RUN;
    use crate::proto::envelope::RequestId;
    use crate::proto::json::{parse as parse_json, Value};
    use crate::proto::request::encode;

    fn spawn(words: &[&str]) -> Result<String, String> {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let Ok(Outcome::Args(m)) = parse(&RUN, &words) else {
            panic!("{words:?} does not parse")
        };
        // The request's arguments, as the daemon sees them after `id` and `op`.
        let op = spawn_op(&m, Path::new("/home/u")).map_err(|e| e.to_string())?;
        let mut line = Vec::new();
        encode(&RequestId::Null, &op, &mut line).unwrap();
        let Value::Object(mut args) = parse_json(&line[..line.len() - 1]).unwrap() else {
            panic!("a request is an object")
        };
        args.remove("id");
        args.remove("op");
        Ok(String::from_utf8(Value::Object(args).to_bytes()).unwrap())
    }

    #[test]
    fn options_become_spawn_fields() {
        let json = spawn(&[
            "web",
            "--cwd",
            "srv",
            "--env",
            "A=1=2",
            "--overlap",
            "--restart",
            "on-failure",
            "--grace",
            "1.5s",
            "--",
            "sh",
            "-c",
            "x",
        ])
        .unwrap();
        assert_eq!(
            json,
            r#"{"session":"web","argv":["sh","-c","x"],"cwd":"/home/u/srv","env":{"A":"1=2"},"on_busy":"overlap","restart":{"mode":"on-failure"},"grace":1500}"#
        );
    }

    #[test]
    fn absolute_cwd_and_default_cwd() {
        assert!(spawn(&["a", "--cwd", "/tmp", "--", "true"])
            .unwrap()
            .contains(r#""cwd":"/tmp""#));
        assert!(spawn(&["a", "--", "true"])
            .unwrap()
            .contains(r#""cwd":"/home/u""#));
    }

    #[test]
    fn bad_values_are_named() {
        let e = spawn(&["a", "--env", "NOEQUALS", "--", "true"]).unwrap_err();
        assert!(e.contains("--env") && e.contains("NAME=VALUE"), "{e}");
        let e = spawn(&["a", "--restart", "sometimes", "--", "true"]).unwrap_err();
        assert!(e.contains("never, on-failure or always"), "{e}");
        let e = spawn(&["a/b", "--", "true"]).unwrap_err();
        assert!(e.contains("NAME") && e.contains("'/'"), "{e}");
        let e = spawn(&["a", "--grace=-1s", "--", "true"]).unwrap_err();
        assert!(e.contains("--grace"), "{e}");
    }
}
