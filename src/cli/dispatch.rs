//! From a parsed command line to the command that runs it, and what every client command
//! shares: the socket, the session argument, and how failures are reported.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

use super::args::{ArgError, ArgErrorKind, Matches};
use super::client::{socket_path, ClientError, Connection, Patience, TIMEOUT_ENV};
use crate::core::check_session_name;

/// Why a client command failed.
#[derive(Debug)]
pub enum CommandError {
    /// The arguments were wrong: printed as a usage error, exit status 2.
    Usage(ArgError),
    /// Anything else: printed as `genward: ...`, exit status 1.
    Failed(String),
    /// Standard output was closed by its reader (`genward logs web | head`): nothing
    /// more to say; exit status 141 as if SIGPIPE had ended us.
    BrokenPipe,
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Usage(e) => write!(f, "{e}"),
            CommandError::Failed(m) => f.write_str(m),
            CommandError::BrokenPipe => f.write_str("standard output closed"),
        }
    }
}

impl From<ArgError> for CommandError {
    fn from(e: ArgError) -> Self {
        CommandError::Usage(e)
    }
}

impl From<ClientError> for CommandError {
    fn from(e: ClientError) -> Self {
        CommandError::Failed(e.to_string())
    }
}

/// What a command returns.
pub type CommandResult = Result<ExitCode, CommandError>;

/// Writes `bytes` to standard output and flushes, so streamed output is seen at once.
pub fn write_stdout(bytes: &[u8]) -> Result<(), CommandError> {
    write_to(&mut std::io::stdout().lock(), bytes)
}

/// Writes `bytes` to standard error and flushes.
pub fn write_stderr(bytes: &[u8]) -> Result<(), CommandError> {
    write_to(&mut std::io::stderr().lock(), bytes)
}

fn write_to(w: &mut impl std::io::Write, bytes: &[u8]) -> Result<(), CommandError> {
    match w.write_all(bytes).and_then(|()| w.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CommandError::BrokenPipe),
        Err(e) => Err(CommandError::Failed(format!("writing output: {e}"))),
    }
}

/// The global options a client command needs.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// `--socket`, if given (`GENWARD_SOCKET` and the default are applied on connect).
    pub socket: Option<PathBuf>,
    /// How long an answer the daemon gives at once is awaited (`GENWARD_TIMEOUT`, read
    /// by [`run_client_command`]).
    pub patience: Patience,
}

impl Context {
    /// Connects to the daemon.
    pub fn connect(&self) -> Result<Connection, ClientError> {
        Connection::connect_with(&socket_path(self.socket.clone())?, self.patience)
    }
}

/// `GENWARD_TIMEOUT`, or the default; a bad value is a usage error.
fn patience_from_env() -> Result<Patience, CommandError> {
    Patience::from_env().map_err(|(value, reason)| {
        CommandError::Usage(ArgError::new(
            "genward",
            ArgErrorKind::InvalidValue {
                option: TIMEOUT_ENV.to_string(),
                value,
                reason,
            },
        ))
    })
}

/// The `NAME` positional, checked by the daemon's own rule so a bad name is refused here
/// with the same explanation.
pub fn session_arg(m: &Matches<'_>) -> Result<String, CommandError> {
    let name = m.positional("NAME").unwrap_or_default();
    check_session_name(name).map_err(|why| m.invalid("NAME", name, why))?;
    Ok(name.to_string())
}

/// An optional generation-number option (`--if-gen`, `--gen`).
pub fn gen_arg(m: &Matches<'_>, long: &str) -> Result<Option<u64>, CommandError> {
    Ok(m.value_with(long, |v| {
        v.parse::<u64>()
            .map_err(|_| "expected a generation number such as 3")
    })?)
}

/// Runs client command `name` (every command but `daemon`).
pub fn run_client_command(name: &str, m: &Matches<'_>, ctx: &Context) -> CommandResult {
    // Only for the commands that talk to the daemon.
    let ctx = &match name {
        "completions" | "man" => ctx.clone(),
        _ => Context {
            patience: patience_from_env()?,
            ..ctx.clone()
        },
    };
    match name {
        "run" => super::run::run(m, ctx),
        "ls" => super::ls::ls(m, ctx),
        "attach" => super::attach::attach(m, ctx),
        "logs" => super::logs::logs(m, ctx),
        "send" => super::control::send(m, ctx),
        "stop" => super::control::stop(m, ctx),
        "kill" => super::control::kill(m, ctx),
        "restart" => super::control::restart(m, ctx),
        "rm" => super::control::rm(m, ctx),
        "wait" => super::wait::wait(m, ctx),
        "events" => super::events::events(m, ctx),
        "shutdown" => super::control::shutdown(m, ctx),
        "upgrade" => super::control::upgrade(m, ctx),
        "reload" => super::control::reload(m, ctx),
        "completions" => super::completions::completions(m),
        "man" => super::completions::man(m),
        other => Err(CommandError::Failed(format!(
            "`{other}` is not a client command"
        ))),
    }
}
