//! `genward run NAME [options] -- CMD ARGS...`: a new generation of a session.
//!
//! The child runs in the daemon, not here, so what the user means by "here" is sent along:
//! a relative `--cwd` (and no `--cwd` at all) is this shell's working directory, this
//! command's environment is the child's (unless `--daemon-env` or `--clear-env`), and a
//! PTY session gets this terminal's `TERM` and size unless told otherwise.
//!
//! `run` then waits until the generation has started (`spawned`) or could not
//! (`spawn_failed`), subscribed to the session before the spawn so neither can be missed,
//! and fails with the daemon's reason and the shell's status (127, 126, 1). Prints the new
//! generation number, alone on a line, for scripts (`gen=$(genward run ...)`).

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::args::Matches;
use super::client::{objects_of, str_of, u64_of, ClientError, Connection};
use super::dispatch::{
    session_arg, write_stderr, write_stdout, CommandError, CommandResult, Context,
};
use super::wait::{describe, status};
use crate::core::{
    check_id_name, Command, IoMode, OnBusy, Restart, RestartPolicy, Rlimit, RlimitBound,
    RlimitValue, Spec,
};
use crate::env_file::{check_env_name, read_env_file};
use crate::proto::duration::parse_duration;
use crate::proto::event::WireEvent;
use crate::proto::framing::Message;
use crate::proto::json::{Object, Value};
use crate::proto::request::{Op, Replay, Target};
use crate::sys::terminal::window_size;

/// How long `run` waits for the generation to start (a replaced predecessor is stopped
/// first, within its grace; dependencies may take longer) before it says what it waits
/// for and leaves it starting.
pub const START_WAIT: Duration = Duration::from_secs(15);

/// `run`'s exit status when its generation has not started within [`START_WAIT`]:
/// sysexits' `EX_TEMPFAIL` (it may start later).
const NOT_STARTED_YET: u8 = 75;

/// This process's environment, as the child would inherit it from a shell. Variables the
/// protocol cannot carry (a name or value that is not UTF-8) are left out; see
/// [`warn_not_utf8`].
pub fn caller_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Says on standard error, once per variable, which of this process's variables
/// [`caller_env`] left out, except those `--unset-env` removes anyway.
fn warn_not_utf8(unset: &[&str]) {
    for name in not_utf8(std::env::vars_os(), unset) {
        let line = format!(
            "genward: warning: environment variable `{name}` is not valid UTF-8 and is not passed on (the protocol carries only text)\n"
        );
        // A warning lost with a closed standard error changes nothing of the start.
        let _ = super::dispatch::write_stderr(line.as_bytes());
    }
}

/// The names (escaped) of the variables of `vars` that are not text, but for those in
/// `unset`.
fn not_utf8(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    unset: &[&str],
) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    vars.into_iter()
        .filter(|(k, v)| match (k.to_str(), v.to_str()) {
            (Some(k), None) => !unset.contains(&k),
            (Some(_), Some(_)) => false,
            (None, _) => true,
        })
        .map(|(k, _)| escaped(k.as_bytes()))
        .collect()
}

/// `bytes` as text for a message: control characters as `\u{1b}`, bytes that are not
/// UTF-8 as `\xff`.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() || c == '\\' {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Builds the `spawn` request from the command line, run in directory `cwd_now` with
/// environment `caller_env` (see [`caller_env`]).
pub fn spawn_op(
    m: &Matches<'_>,
    cwd_now: &Path,
    caller_env: &[(String, String)],
) -> Result<Op, CommandError> {
    let session = session_arg(m)?;
    let argv = m.trailing().unwrap_or_default();
    let mut spec = Spec::new(argv.iter().map(|a| a.as_bytes().to_vec()).collect());
    set_cwd(m, &mut spec, cwd_now)?;
    set_environment(m, &mut spec, caller_env)?;
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
    set_readiness(m, &mut spec)?;
    set_run_as(m, &mut spec, cwd_now)?;
    super::log_opts::set_log(m, &mut spec, cwd_now)?;
    super::spec_fields::check_spec(m, &session, &spec)?;
    Ok(Op::Core(Command::Spawn {
        session,
        if_gen: None,
        spec: Box::new(spec),
        on_busy,
    }))
}

/// The spec's `ready` and `depends_on` per `--ready-*` and `--depends-on` (their values
/// checked by the core's rules, [`check_spec`](super::spec_fields::check_spec)).
fn set_readiness(m: &Matches<'_>, spec: &mut Spec) -> Result<(), CommandError> {
    use crate::core::{DependOn, ReadyCheck, ReadyHow};
    let how = if let Some(n) = m.value("ready-fd") {
        let n = n
            .parse::<u32>()
            .map_err(|_| m.invalid("--ready-fd", n, "expected a descriptor number"))?;
        Some(ReadyHow::Fd(n))
    } else if let Some(t) = m.value("ready-output") {
        Some(ReadyHow::Output(t.as_bytes().to_vec()))
    } else if let Some(a) = m.value("ready-tcp") {
        Some(ReadyHow::Tcp(a.to_string()))
    } else if let Some(p) = m.value("ready-unix") {
        Some(ReadyHow::Unix(p.as_bytes().to_vec()))
    } else {
        m.value("ready-command")
            .map(|c| ReadyHow::Command(vec![b"sh".to_vec(), b"-c".to_vec(), c.as_bytes().to_vec()]))
    };
    let timeout = m.value_with("ready-timeout", parse_duration)?;
    match (how, timeout) {
        (Some(how), timeout) => {
            let mut check = ReadyCheck::new(how);
            if let Some(t) = timeout {
                check.timeout = whole_millis(t);
            }
            spec.ready = Some(check);
        }
        (None, Some(_)) => {
            return Err(m
                .requires("--ready-timeout", "one of the --ready-* options")
                .into())
        }
        (None, None) => {}
    }
    set_liveness(m, spec)?;
    for dep in m.values("depends-on") {
        let (name, state) = dep.split_once('=').unwrap_or((dep, "ready"));
        let want = DependOn::parse(state).ok_or_else(|| {
            m.invalid(
                "--depends-on",
                dep,
                "expected NAME=ready, NAME=started or NAME=completed",
            )
        })?;
        spec.depends_on.insert(name.to_string(), want);
    }
    Ok(())
}

/// The spec's `live` per `--live-*` (its values checked as `--ready-*`'s are).
fn set_liveness(m: &Matches<'_>, spec: &mut Spec) -> Result<(), CommandError> {
    use crate::core::{LiveCheck, ReadyHow};
    let how = if let Some(a) = m.value("live-tcp") {
        Some(ReadyHow::Tcp(a.to_string()))
    } else if let Some(p) = m.value("live-unix") {
        Some(ReadyHow::Unix(p.as_bytes().to_vec()))
    } else {
        m.value("live-command")
            .map(|c| ReadyHow::Command(vec![b"sh".to_vec(), b"-c".to_vec(), c.as_bytes().to_vec()]))
    };
    let interval = m.value_with("live-interval", parse_duration)?;
    let failures = match m.value("live-failures") {
        None => None,
        Some(n) => Some(
            n.parse::<u32>()
                .map_err(|_| m.invalid("--live-failures", n, "expected a number"))?,
        ),
    };
    let Some(how) = how else {
        let given = match (interval, failures) {
            (Some(_), _) => "--live-interval",
            (None, Some(_)) => "--live-failures",
            (None, None) => return Ok(()),
        };
        let probes = "one of --live-tcp, --live-unix, --live-command";
        return Err(m.requires(given, probes).into());
    };
    let mut check = LiveCheck::new(how);
    if let Some(i) = interval {
        check.interval = whole_millis(i);
    }
    if let Some(n) = failures {
        check.failures = n;
    }
    spec.live = Some(check);
    Ok(())
}

/// The spec's working directory: `--cwd` (relative to `cwd_now`), else `cwd_now`.
pub fn set_cwd(m: &Matches<'_>, spec: &mut Spec, cwd_now: &Path) -> Result<(), CommandError> {
    let cwd = match m.value("cwd") {
        Some(dir) => cwd_now.join(dir),
        None => cwd_now.to_path_buf(),
    };
    let cwd = cwd
        .to_str()
        .ok_or_else(|| m.invalid("--cwd", &cwd.to_string_lossy(), "not valid UTF-8"))?;
    spec.cwd = Some(cwd.as_bytes().to_vec());
    Ok(())
}

/// The spec's environment per the command line: the caller's (`caller_env`) unless
/// `--daemon-env` or `--clear-env`, then `--env-file`s, then `--env`s, less
/// `--unset-env`s.
pub fn set_environment(
    m: &Matches<'_>,
    spec: &mut Spec,
    caller_env: &[(String, String)],
) -> Result<(), CommandError> {
    spec.env = Default::default();
    let mut unset = Vec::new();
    for k in m.values("unset-env") {
        check_env_name(k).map_err(|why| m.invalid("--unset-env", k, why))?;
        unset.push(k);
    }
    if m.flag("daemon-env") {
        spec.env.inherit = true;
        spec.env.unset = unset.iter().map(|k| k.as_bytes().to_vec()).collect();
    } else {
        spec.env.inherit = false;
        if !m.flag("clear-env") {
            warn_not_utf8(&unset);
            for (k, v) in caller_env {
                if !unset.contains(&k.as_str()) && check_env_name(k).is_ok() && !v.contains('\0') {
                    set_env(spec, k, v);
                }
            }
        }
    }
    for file in m.values("env-file") {
        let vars =
            read_env_file(Path::new(file)).map_err(|why| m.invalid("--env-file", file, why))?;
        for (k, v) in vars {
            set_env(spec, &k, &v);
        }
    }
    for kv in m.values("env") {
        let Some((k, v)) = kv.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(m
                .invalid("--env", kv, "expected NAME=VALUE, e.g. --env PORT=8080")
                .into());
        };
        check_env_name(k).map_err(|why| m.invalid("--env", kv, why))?;
        if v.contains('\0') {
            return Err(m.invalid("--env", kv, "a value cannot contain NUL").into());
        }
        set_env(spec, k, v);
    }
    Ok(())
}

/// The options of whom the process runs as (`run`'s and `restart`'s).
pub const RUN_AS_OPTIONS: [&str; 6] = [
    "user",
    "group",
    "groups",
    "umask",
    "daemon-env-file",
    "rlimit",
];

/// Whom the spec runs as, per the command line: each option given replaces that part of
/// `spec.run_as`; the rest is kept (so `restart --user` keeps the session's limits). The
/// daemon checks names and permissions; here only the form is checked, as the protocol
/// would, so a mistake is reported against the option that made it.
pub fn set_run_as(m: &Matches<'_>, spec: &mut Spec, cwd_now: &Path) -> Result<(), CommandError> {
    let r = &mut spec.run_as;
    for (opt, slot) in [("user", &mut r.user), ("group", &mut r.group)] {
        if let Some(v) = m.value(opt) {
            check_id_name(opt, v).map_err(|e| m.invalid(&format!("--{opt}"), v, e.message))?;
            *slot = Some(v.to_owned());
        }
    }
    if let Some(v) = m.value("groups") {
        let groups: Vec<String> = v
            .split(',')
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect();
        for g in &groups {
            check_id_name("groups", g).map_err(|e| m.invalid("--groups", v, e.message))?;
        }
        r.groups = Some(groups);
    }
    if let Some(v) = m.value("umask") {
        let octal = !v.is_empty() && v.len() <= 4 && v.bytes().all(|b| (b'0'..=b'7').contains(&b));
        match u32::from_str_radix(v, 8) {
            Ok(mask) if octal && mask <= 0o777 => r.umask = Some(mask),
            _ => {
                return Err(m
                    .invalid("--umask", v, "expected an octal mode, 000 to 777")
                    .into())
            }
        }
    }
    if let Some(v) = m.value("daemon-env-file") {
        // The daemon has its own working directory: send the path this shell means.
        let path = cwd_now.join(v);
        let path = path
            .to_str()
            .ok_or_else(|| m.invalid("--daemon-env-file", v, "not valid UTF-8"))?;
        r.env_file = Some(path.as_bytes().to_vec());
    }
    for kv in m.values("rlimit") {
        let (res, limit) = parse_rlimit(kv).map_err(|why| m.invalid("--rlimit", kv, why))?;
        match r.rlimits.iter_mut().find(|(have, _)| *have == res) {
            Some((_, v)) => *v = limit,
            None => r.rlimits.push((res, limit)),
        }
        r.rlimits.sort_by_key(|(res, _)| *res);
    }
    Ok(())
}

/// `RES=LIMIT`, LIMIT a number or `infinity`, or `SOFT:HARD` of those.
fn parse_rlimit(kv: &str) -> Result<(Rlimit, RlimitValue), String> {
    let (name, value) = kv
        .split_once('=')
        .ok_or("expected RESOURCE=LIMIT, e.g. nofile=4096 or core=0:infinity")?;
    let res = Rlimit::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Rlimit::ALL.iter().map(|r| r.name()).collect();
        format!("unknown resource `{name}`; one of {}", known.join(", "))
    })?;
    let bound = |s: &str| match s {
        "infinity" | "unlimited" => Ok(RlimitBound::Infinity),
        n => match n.parse::<u64>() {
            Ok(n) if n != u64::MAX => Ok(RlimitBound::Finite(n)),
            _ => Err(format!("`{n}` is not a number or infinity")),
        },
    };
    let (soft, hard) = match value.split_once(':') {
        Some((s, h)) => (bound(s)?, bound(h)?),
        None => (bound(value)?, bound(value)?),
    };
    let fits = match (soft, hard) {
        (_, RlimitBound::Infinity) => true,
        (RlimitBound::Infinity, _) => false,
        (RlimitBound::Finite(s), RlimitBound::Finite(h)) => s <= h,
    };
    if !fits {
        return Err("the soft limit is above the hard limit".into());
    }
    Ok((res, RlimitValue { soft, hard }))
}

/// Sets `key` to `value`, replacing an earlier value of the same key in place (a request
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
    let op = spawn_op(m, &here, &caller_env())?;
    let session = session_arg(m)?;
    let mut conn = ctx.connect()?;
    let wait = !m.flag("no-wait");
    if wait {
        // Subscribed before the spawn: its `spawned` or `spawn_failed` cannot be missed.
        // A session that does not exist yet is followed among all of them.
        let subscribe = |target| Op::Subscribe {
            target,
            replay: Replay::Now,
            lossless: None,
        };
        match conn.request(&subscribe(Target::Session(session.clone()))) {
            Err(e) if e.code() == Some("no_such_session") => {
                conn.request(&subscribe(Target::All))?;
            }
            other => {
                other?;
            }
        }
    }
    let resp = conn
        .request(&op)
        .map_err(|e| super::spec_fields::usage_for(m, e))?;
    let gen = u64_of(&resp, "gen")
        .ok_or_else(|| ClientError::Protocol("spawn answered without `gen`".into()))?;
    let json = m.flag("json");
    if !wait {
        return print_unwaited(&session, gen, json);
    }
    await_start(&mut conn, &session, gen, json)
}

/// What `run --no-wait` and `restart --no-wait` print: generation `gen` of `session`, at
/// once (with `json`, `{"session","gen"}`), and success; whether it starts is `wait`'s or
/// `ls`'s to tell.
pub fn print_unwaited(session: &str, gen: u64, json: bool) -> CommandResult {
    if json {
        super::json_out::print(super::json_out::session_gen(session, gen))?;
    } else {
        write_stdout(format!("{gen}\n").as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints generation `gen` of `session` (unless `json`) and waits until it has started,
/// on a connection subscribed to the session before the request that made it: exits 0
/// once it has (with `json`, printing `{"session","gen","pid"}`), with the shell's status
/// for why it could not (127, 126, 1; with `json`, its `spawn_failed` event), or
/// [`NOT_STARTED_YET`] when it has not within [`START_WAIT`]. `run`'s wait, and
/// `restart`'s.
pub fn await_start(conn: &mut Connection, session: &str, gen: u64, json: bool) -> CommandResult {
    if !json {
        write_stdout(format!("{gen}\n").as_bytes())?;
    }
    let deadline = Instant::now() + START_WAIT;
    loop {
        let Some(msg) = next_before(conn, deadline)? else {
            if json {
                super::json_out::print(super::json_out::session_gen(session, gen))?;
            }
            // What it waits for, as the daemon sees it now: no event says so.
            let why = conn
                .request(&Op::Core(Command::Get {
                    session: session.to_owned(),
                }))
                .ok()
                .and_then(|resp| not_started_why(resp.get("session")?.as_object()?, gen))
                .map_or_else(String::new, |why| format!(" ({why})"));
            let line = format!(
                "genward: {session} gen {gen}: not started within {}s{why}; `genward ls` shows it\n",
                START_WAIT.as_secs()
            );
            write_stderr(line.as_bytes())?;
            // Not a failure (it may start later), nor a start: `run ... && next` stops.
            return Ok(ExitCode::from(NOT_STARTED_YET));
        };
        let Message::Event(ev) = msg else { continue };
        if ev.session() != session {
            continue;
        }
        match &ev {
            WireEvent::Spawned { gen: g, pid, .. } if *g == gen => {
                if json {
                    let mut o = super::json_out::session_gen(session, gen);
                    o.insert("pid", u64::from(*pid));
                    super::json_out::print(o)?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            WireEvent::SpawnFailed { gen: g, .. } if *g == gen => {
                let end = ev
                    .end()
                    .ok_or_else(|| ClientError::Protocol("spawn_failed without an end".into()))?;
                if json {
                    super::json_out::print(super::events::event_object(&ev))?;
                }
                write_stderr(
                    format!("genward: {session} gen {gen}: {}\n", describe(&end)).as_bytes(),
                )?;
                return Ok(ExitCode::from(status(&end)));
            }
            _ => {}
        }
    }
}

/// Why generation `gen` has not started, from its session's `get` snapshot `s`: what it
/// waits for (the session's `waiting`: a dependency), or a predecessor still stopping (a
/// superseded generation still listed); `None` when the snapshot says neither.
fn not_started_why(s: &Object, gen: u64) -> Option<String> {
    if u64_of(s, "current") == Some(gen) {
        if let Some(why) = str_of(s, "waiting") {
            return Some(why.to_string());
        }
    }
    let before = objects_of(s, "generations")
        .into_iter()
        .filter(|g| g.get("superseded") == Some(&Value::Bool(true)))
        .filter_map(|g| u64_of(g, "gen"))
        .filter(|&g| g < gen)
        .max()?;
    Some(format!("its predecessor, gen {before}, has not ended yet"))
}

/// The next message, or `None` once `deadline` has passed without one.
fn next_before(conn: &mut Connection, deadline: Instant) -> Result<Option<Message>, ClientError> {
    loop {
        if let Some(msg) = conn.pop_message()? {
            return Ok(Some(msg));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let mut pfd = libc::pollfd {
            fd: conn.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis() + 1).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, borrowed for the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(ClientError::Lost(format!("waiting for the daemon: {e}")));
        }
        if n > 0 && !conn.read_available()? {
            return Err(ClientError::Lost("the daemon closed the connection".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{parse, Outcome};
    use crate::cli::commands::RUN;
    use crate::proto::envelope::RequestId;
    use crate::proto::json::parse as parse_json;
    use crate::proto::request::encode;

    fn spawn(words: &[&str]) -> Result<String, String> {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let Ok(Outcome::Args(m)) = parse(&RUN, &words) else {
            panic!("{words:?} does not parse")
        };
        // The request's arguments, as the daemon sees them after `id` and `op`.
        let op = spawn_op(
            &m,
            Path::new("/home/u"),
            &[("HOME".into(), "/home/u".into())],
        )
        .map_err(|e| e.to_string())?;
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
    fn an_unreadable_env_file_is_named() {
        let e = spawn(&["a", "--env-file", "/nonexistent/genward.env", "--", "true"]).unwrap_err();
        assert!(e.contains("--env-file") && e.contains("cannot open"), "{e}");
    }

    #[test]
    fn run_as_options_become_spawn_fields() {
        let json = spawn(&[
            "a",
            "--user",
            "www-data",
            "--group",
            "33",
            "--groups",
            "adm,4",
            "--umask",
            "27",
            "--daemon-env-file",
            "app.env",
            "--rlimit",
            "nofile=4096",
            "--rlimit",
            "core=0:infinity",
            "--rlimit",
            "nofile=8192",
            "--",
            "true",
        ])
        .unwrap();
        for part in [
            r#""user":"www-data","group":"33","groups":["adm","4"],"umask":"027""#,
            r#""env_file":"/home/u/app.env""#,
            r#""rlimits":{"core":{"soft":0,"hard":"infinity"},"nofile":8192}"#,
        ] {
            assert!(json.contains(part), "{part} in {json}");
        }
        assert!(spawn(&["a", "--groups", "", "--", "true"])
            .unwrap()
            .contains(r#""groups":[]"#));
        for (opt, value, want) in [
            ("--umask", "0o27", "octal"),
            ("--umask", "1000", "octal"),
            ("--user", "a:b", "user"),
            ("--rlimit", "files=3", "unknown resource"),
            ("--rlimit", "nofile", "RESOURCE=LIMIT"),
            ("--rlimit", "nofile=9:3", "above"),
            ("--rlimit", "nofile=lots", "lots"),
        ] {
            let e = spawn(&["a", opt, value, "--", "true"]).unwrap_err();
            assert!(e.contains(opt) && e.contains(want), "{opt} {value}: {e}");
        }
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
            r#"{"session":"web","argv":["sh","-c","x"],"cwd":"/home/u/srv","env":{"HOME":"/home/u","A":"1=2"},"clear_env":true,"on_busy":"overlap","restart":{"mode":"on-failure"},"grace":1500}"#
        );
    }

    #[test]
    fn log_options_become_the_log_member() {
        let json = spawn(&[
            "web",
            "--log",
            "logs/web.log",
            "--log-max-size",
            "64K",
            "--log-keep",
            "0",
            "--",
            "true",
        ])
        .unwrap();
        assert!(
            json.ends_with(r#""log":{"path":"/home/u/logs/web.log","max_size":65536,"keep":0}}"#),
            "{json}"
        );
        let e = spawn(&["a", "--log-keep", "3", "--", "true"]).unwrap_err();
        assert!(e.contains("--log-keep") && e.contains("needs --log"), "{e}");
        let e = spawn(&["a", "--log", "/l", "--log-max-size", "10X", "--", "true"]).unwrap_err();
        assert!(e.contains("--log-max-size"), "{e}");
    }

    #[test]
    fn readiness_and_dependency_options_become_spawn_fields() {
        let json = spawn(&[
            "web",
            "--ready-output",
            "listening",
            "--ready-timeout",
            "30s",
            "--depends-on",
            "db=ready",
            "--depends-on",
            "migrate=completed",
            "--",
            "true",
        ])
        .unwrap();
        for part in [
            r#""ready":{"output":"listening","timeout":30000}"#,
            r#""depends_on":{"db":"ready","migrate":"completed"}"#,
        ] {
            assert!(json.contains(part), "{part} in {json}");
        }
        assert!(spawn(&["a", "--ready-command", "pg_isready", "--", "true"])
            .unwrap()
            .contains(r#""ready":{"command":["sh","-c","pg_isready"]}"#));
        let e = spawn(&["a", "--depends-on", "db=up", "--", "true"]).unwrap_err();
        assert!(e.contains("--depends-on"), "{e}");
        let e = spawn(&["a", "--ready-timeout", "1s", "--", "true"]).unwrap_err();
        assert!(e.contains("`--ready-timeout` needs"), "{e}");
        let e = spawn(&["a", "--live-failures", "2", "--", "true"]).unwrap_err();
        assert!(
            e.contains("`--live-failures` needs one of --live-tcp"),
            "{e}"
        );
        let json = spawn(&[
            "a",
            "--live-tcp",
            "127.0.0.1:80",
            "--live-interval",
            "5s",
            "--live-failures",
            "2",
            "--",
            "true",
        ])
        .unwrap();
        assert!(
            json.contains(r#""live":{"tcp":"127.0.0.1:80","interval":5000,"failures":2}"#),
            "{json}"
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

    #[test]
    fn environment_is_the_callers_unless_told_otherwise() {
        // The caller's, with --unset-env removing and --env overriding.
        let json = spawn(&["a", "--unset-env", "NOPE", "--env", "HOME=/x", "--", "true"]).unwrap();
        assert!(
            json.contains(r#""env":{"HOME":"/x"},"clear_env":true"#),
            "{json}"
        );
        let json = spawn(&["a", "--unset-env", "HOME", "--", "true"]).unwrap();
        assert!(
            !json.contains("HOME") && json.contains(r#""clear_env":true"#),
            "{json}"
        );
        // Empty: only what is set.
        let json = spawn(&["a", "--clear-env", "--env", "X=1", "--", "true"]).unwrap();
        assert!(
            json.contains(r#""env":{"X":"1"},"clear_env":true"#),
            "{json}"
        );
        // The daemon's: the protocol's default, with unset_env.
        let json = spawn(&["a", "--daemon-env", "--unset-env", "Y", "--", "true"]).unwrap();
        assert!(
            !json.contains("clear_env") && !json.contains("HOME"),
            "{json}"
        );
        assert!(json.contains(r#""unset_env":["Y"]"#), "{json}");
        let words: Vec<String> = ["a", "--daemon-env", "--clear-env", "--", "true"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let e = parse(&RUN, &words).unwrap_err().to_string();
        assert!(
            e.contains("--clear-env") && e.contains("--daemon-env"),
            "{e}"
        );
        let e = spawn(&["a", "--unset-env", "A=B", "--", "true"]).unwrap_err();
        assert!(e.contains("--unset-env") && e.contains("'='"), "{e}");
        let e = spawn(&["a", "--env", "A B=1", "--", "true"]).unwrap_err();
        assert!(e.contains("whitespace"), "{e}");
    }

    #[test]
    fn a_start_not_seen_in_time_says_what_it_waits_for() {
        let why = |json: &str, gen| {
            let v = parse_json(json.as_bytes()).unwrap();
            not_started_why(v.as_object().unwrap(), gen)
        };
        // A dependency: what the session's `waiting` says, not a predecessor it lacks.
        let dep = r#"{"name":"w","state":"starting","current":2,"waiting":"nosuchdep: no such session",
            "generations":[{"gen":2,"pid":null,"lifecycle":"pending","superseded":false}]}"#;
        assert_eq!(why(dep, 2).as_deref(), Some("nosuchdep: no such session"));
        let replacing = r#"{"name":"w","state":"starting","current":5,
            "generations":[{"gen":4,"pid":40,"lifecycle":"stopping","superseded":true},
                           {"gen":5,"pid":null,"lifecycle":"pending","superseded":false}]}"#;
        assert_eq!(
            why(replacing, 5).as_deref(),
            Some("its predecessor, gen 4, has not ended yet")
        );
        // Nothing known: no reason made up.
        let alone = r#"{"name":"w","state":"starting","current":2,
            "generations":[{"gen":2,"pid":null,"lifecycle":"pending","superseded":false}]}"#;
        assert_eq!(why(alone, 2), None);
        // Another generation's wait is not this one's.
        assert_eq!(why(dep, 3), None);
    }
}
