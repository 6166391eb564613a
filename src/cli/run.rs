//! `genward run NAME [options] -- CMD ARGS...`: a new generation of a session.
//!
//! The child runs in the daemon, not here, so what the user means by "here" is sent along:
//! a relative `--cwd` (and no `--cwd` at all) is this shell's working directory, and a PTY
//! session gets this terminal's `TERM` and size unless told otherwise. Prints the new
//! generation number, alone on a line, for scripts (`gen=$(genward run ...)`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::args::Matches;
use super::client::{u64_of, ClientError};
use super::dispatch::{session_arg, CommandError, CommandResult, Context};
use crate::proto::duration::parse_duration;
use crate::proto::json::{Object, Value};
use crate::sys::terminal::window_size;

/// Builds the `spawn` request's arguments from the command line.
pub fn spawn_args(m: &Matches<'_>, cwd_now: &Path) -> Result<Object, CommandError> {
    let session = session_arg(m)?;
    let mut args = Object::new();
    args.insert("session", session);
    let argv = m.trailing().unwrap_or_default();
    args.insert(
        "argv",
        Value::Array(argv.iter().map(|a| Value::from(a.as_str())).collect()),
    );
    let cwd = match m.value("cwd") {
        Some(dir) => cwd_now.join(dir),
        None => cwd_now.to_path_buf(),
    };
    let cwd = cwd
        .to_str()
        .ok_or_else(|| m.invalid("--cwd", &cwd.to_string_lossy(), "not valid UTF-8"))?
        .to_string();
    args.insert("cwd", cwd);

    let mut env = Object::new();
    for kv in m.values("env") {
        let Some((k, v)) = kv.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(m
                .invalid("--env", kv, "expected NAME=VALUE, e.g. --env PORT=8080")
                .into());
        };
        env.insert(k, v);
    }
    let pty = m.flag("pty");
    if pty && env.get("TERM").is_none() {
        if let Some(term) = std::env::var("TERM").ok().filter(|t| !t.is_empty()) {
            env.insert("TERM", term);
        }
    }
    if !env.is_empty() {
        args.insert("env", env);
    }
    if pty {
        match window_size(std::io::stdin()) {
            Ok(ws) if ws.rows > 0 && ws.cols > 0 => {
                let mut size = Object::new();
                size.insert("rows", u64::from(ws.rows));
                size.insert("cols", u64::from(ws.cols));
                args.insert("pty", size);
            }
            _ => args.insert("pty", true),
        }
    }
    for mode in ["replace", "overlap", "reject"] {
        if m.flag(mode) {
            args.insert("on_busy", mode);
        }
    }
    if let Some(policy) = m.value("restart") {
        if !["never", "on-failure", "always"].contains(&policy) {
            return Err(m
                .invalid("--restart", policy, "expected never, on-failure or always")
                .into());
        }
        let mut restart = Object::new();
        restart.insert("mode", policy);
        args.insert("restart", restart);
    }
    if let Some(grace) = m.value_with("grace", parse_duration)? {
        args.insert("grace", millis(grace));
    }
    Ok(args)
}

/// A duration as the protocol's integer milliseconds (rounded up, so `1us` is not zero).
pub fn millis(d: std::time::Duration) -> u64 {
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// `genward run`.
pub fn run(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let args = spawn_args(m, &here)?;
    let mut conn = ctx.connect()?;
    let resp = conn.request("spawn", args)?;
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

    fn spawn(words: &[&str]) -> Result<String, String> {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let Ok(Outcome::Args(m)) = parse(&RUN, &words) else {
            panic!("{words:?} does not parse")
        };
        spawn_args(&m, Path::new("/home/u"))
            .map(|o| String::from_utf8(Value::Object(o).to_bytes()).unwrap())
            .map_err(|e| e.to_string())
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
