//! The `genward` binary: argv → config → daemon or client; outcome → exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use genward::cli::args::{
    args_to_strings, find_command, global_help, parse, parse_global, ArgError, Matches, Outcome,
};
use genward::cli::commands::COMMANDS;
use genward::cli::dispatch::{
    run_client_command, write_stderr, write_stdout, CommandError, Context,
};
use genward::driver::upgrade::{self, ResumeArgs};
use genward::driver::{ContainmentMode, Daemon, DaemonConfig};
use genward::store::state_dir;
use genward::sys::process::ReaperMode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(msg) => {
            // Nothing more to do if standard error is closed too.
            let _ = write_stderr(format!("genward: {msg}\n").as_bytes());
            ExitCode::from(1)
        }
    }
}

fn usage_error(e: ArgError) -> Result<ExitCode, String> {
    let _ = write_stderr(format!("{e}\n").as_bytes());
    Ok(ExitCode::from(ArgError::EXIT_STATUS))
}

/// The status for standard output closed by its reader, as if SIGPIPE had ended us.
fn broken_pipe() -> ExitCode {
    ExitCode::from(128 + libc::SIGPIPE as u8)
}

/// Prints `text` on standard output and exits with `code`; 141 if it was closed.
fn print_then(text: &str, code: ExitCode) -> Result<ExitCode, String> {
    match write_stdout(text.as_bytes()) {
        Ok(()) => Ok(code),
        Err(CommandError::BrokenPipe) => Ok(broken_pipe()),
        Err(e) => Err(e.to_string()),
    }
}

fn run() -> Result<ExitCode, String> {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw
        .first()
        .is_some_and(|a| a == genward::keeper::SUBCOMMAND)
    {
        // The daemon's keeper (not a command for people: not in --help).
        return Ok(genward::keeper::main(&raw[1..]));
    }
    if raw
        .first()
        .is_some_and(|a| a == genward::lookup::SUBCOMMAND)
    {
        // The daemon's lookup helper (not a command for people either).
        return Ok(genward::lookup::main(&raw[1..]));
    }
    if raw
        .first()
        .is_some_and(|a| a == genward::log_writer::SUBCOMMAND)
    {
        // The daemon's log writer (not a command for people either).
        return Ok(genward::log_writer::main(&raw[1..]));
    }
    let args = match args_to_strings(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(e) => return usage_error(e),
    };
    // Hidden commands of an upgrade: never typed by a person, so not in the table that
    // --help, completions and the manual are made from.
    match args.first().map(String::as_str) {
        Some(upgrade::PROBE_COMMAND) => {
            return print_then(&upgrade::probe::answer(), ExitCode::SUCCESS);
        }
        Some(upgrade::RESUME_COMMAND) => return resume(&args[1..]),
        _ => {}
    }
    let global = match parse_global(&args) {
        Ok(g) => g,
        Err(e) => return usage_error(e),
    };
    if global.version {
        let version = format!("genward {}\n", env!("CARGO_PKG_VERSION"));
        return print_then(&version, ExitCode::SUCCESS);
    }
    let Some(name) = global.command.as_deref().filter(|_| !global.help) else {
        if global.help {
            return print_then(&global_help(COMMANDS), ExitCode::SUCCESS);
        }
        // No command is a usage error: on standard error with status 2, as every other
        // (as git's usage), with the help there since it is what such a caller needs.
        let _ = write_stderr(global_help(COMMANDS).as_bytes());
        return Ok(ExitCode::from(ArgError::EXIT_STATUS));
    };
    let spec = match find_command(COMMANDS, name) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let matches = match parse(spec, &global.rest) {
        Ok(Outcome::Help(text)) => return print_then(&text, ExitCode::SUCCESS),
        Ok(Outcome::Args(m)) => m,
        Err(e) => return usage_error(e),
    };
    let socket = global.socket.map(PathBuf::from);
    if name == "daemon" {
        return daemon(&matches, socket);
    }
    let ctx = Context {
        socket,
        ..Context::default()
    };
    match run_client_command(name, &matches, &ctx) {
        Ok(code) => Ok(code),
        Err(CommandError::Usage(e)) => usage_error(e),
        Err(CommandError::BrokenPipe) => Ok(broken_pipe()),
        Err(CommandError::Failed(msg)) => Err(msg),
    }
}

fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
}

/// The daemon again after `upgrade` executed this program: resumed from the image, or —
/// if it cannot be — the previous program executed again on the same image, which
/// resumes and tells the requester the upgrade was rolled back.
fn resume(rest: &[String]) -> Result<ExitCode, String> {
    init_logging();
    let args = ResumeArgs::parse(rest).map_err(|e| format!("{}: {e}", upgrade::RESUME_COMMAND))?;
    let why = match Daemon::resume(&args) {
        Ok(daemon) => {
            daemon.run().map_err(|e| format!("event loop: {e}"))?;
            return Ok(ExitCode::SUCCESS);
        }
        Err(why) => why,
    };
    log::error!("could not resume after an upgrade: {why}");
    if args.rolled_back.is_some() {
        return Err(format!(
            "the previous program could not resume either: {why}"
        ));
    }
    let back = ResumeArgs {
        rolled_back: Some(why.clone()),
        ..args
    };
    let mut argv = vec![std::env::args_os()
        .next()
        .unwrap_or_else(|| "genward".into())];
    argv.extend(back.to_args());
    // SAFETY: the number was checked open by `Daemon::resume`, which took nothing.
    let previous = unsafe { std::os::fd::BorrowedFd::borrow_raw(back.previous_program_fd) };
    let e = genward::sys::reexec::exec(previous, &argv);
    Err(format!(
        "could not resume ({why}), and running the previous program again failed: {e}"
    ))
}

/// A table limit from the command line: a positive count.
fn limit(value: &str) -> Option<usize> {
    // Digits only: Rust's parser would also take a leading `+`.
    Some(value)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
}

/// A daemon option's value refused: a usage error (exit status 2), as the parser's own.
fn bad_option(m: &Matches<'_>, option: &str, value: &str, why: &str) -> ExitCode {
    let _ = write_stderr(format!("{}\n", m.invalid(option, value, why)).as_bytes());
    ExitCode::from(ArgError::EXIT_STATUS)
}

fn daemon(m: &Matches<'_>, socket: Option<PathBuf>) -> Result<ExitCode, String> {
    // Before anything is opened, so that nothing can take the number if it is not open.
    let ready_fd = match m.value("ready-fd") {
        None => None,
        Some(fd) => {
            let Some(n) = fd.parse().ok().filter(|&n: &i32| n >= 0) else {
                return Ok(bad_option(
                    m,
                    "--ready-fd",
                    fd,
                    "not a file descriptor number",
                ));
            };
            // A number that is not an open, writable descriptor above 2 is the value's
            // fault: a usage error, as any other bad value.
            match genward::sys::fd::adopt_inherited_writer(n) {
                Ok(w) => Some(w),
                Err(e) => return Ok(bad_option(m, "--ready-fd", fd, &e.to_string())),
            }
        }
    };
    init_logging();
    let (state, socket) = state_dir::resolve(m.value("state-dir").map(PathBuf::from), socket)
        .map_err(|e| e.to_string())?;
    // Absolute, as meant here: the keeper and re-executions start from `/`.
    let absolute =
        |p: PathBuf| std::path::absolute(&p).map_err(|e| format!("{}: {e}", p.display()));
    let mut cfg = DaemonConfig::new(absolute(state)?, absolute(socket)?);
    cfg.ready_fd = ready_fd;
    for uid in m.values("allow-uid") {
        // (uid_t)-1 names no user: chown(2) and setreuid(2) read it as "unchanged".
        let Some(n) = uid.parse().ok().filter(|&n: &u32| n != u32::MAX) else {
            return Ok(bad_option(m, "--allow-uid", uid, "not a numeric uid"));
        };
        cfg.allow_uids.push(n);
    }
    cfg.reaper = match m.value("reaper") {
        None | Some("auto") => ReaperMode::Auto,
        Some("fallback") => ReaperMode::Fallback,
        Some(other) => {
            return Ok(bad_option(
                m,
                "--reaper",
                other,
                "expected auto or fallback",
            ))
        }
    };
    cfg.subreaper = !m.flag("no-subreaper");
    cfg.containment = match m.value("containment") {
        None | Some("auto") => ContainmentMode::Auto,
        Some("cgroup") => ContainmentMode::Cgroup,
        Some("session") => ContainmentMode::Session,
        Some(other) => {
            let why = "expected auto, cgroup or session";
            return Ok(bad_option(m, "--containment", other, why));
        }
    };
    if let Some(hold) = m.value("keeper-hold") {
        // The keeper is told its hold in milliseconds: a duration is at most 2^64−1 of
        // them, so any that parses fits.
        let d = match genward::proto::duration::parse_duration(hold) {
            Ok(d) => d,
            Err(e) => return Ok(bad_option(m, "--keeper-hold", hold, &e.to_string())),
        };
        // It counts whole milliseconds: less would be a hold of none.
        if d.as_millis() == 0 {
            let why = "a keeper that holds nothing (it counts whole milliseconds); use --no-keeper";
            return Ok(bad_option(m, "--keeper-hold", hold, why));
        }
        cfg.keeper_hold = Some(d);
    }
    const COUNT: &str = "expected a positive count";
    if let Some(n) = m.value("max-sessions") {
        let Some(count) = limit(n) else {
            return Ok(bad_option(m, "--max-sessions", n, COUNT));
        };
        cfg.max_sessions = count;
    }
    if let Some(n) = m.value("max-running") {
        let Some(count) = limit(n) else {
            return Ok(bad_option(m, "--max-running", n, COUNT));
        };
        cfg.max_running = count;
    }
    cfg.output_to_stdout = m.flag("output-to-stdout");
    if let Some(path) = m.value("config") {
        // The daemon reads it again on reload: absolute, as meant here.
        let path = std::path::absolute(path).map_err(|e| format!("--config {path}: {e}"))?;
        cfg.config = Some(path);
    }
    if m.flag("no-keeper") {
        cfg.keeper_hold = None;
    }
    let daemon = Daemon::new(cfg).map_err(|e| e.to_string())?;
    daemon.run().map_err(|e| format!("event loop: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
