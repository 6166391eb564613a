//! The global options: `genward [--socket PATH] [--help] [--version] COMMAND`, with
//! `--socket` and `--version` also taken after the command (before any `--`).

use super::error::{suggest, ArgError, ArgErrorKind};
use super::spec::CommandSpec;

/// The global options and where the subcommand starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Global {
    /// `--socket PATH`, if given (the caller falls back to `GENWARD_SOCKET`).
    pub socket: Option<String>,
    /// `-h`/`--help` before the command.
    pub help: bool,
    /// `-V`/`--version` before the command.
    pub version: bool,
    /// The subcommand word, if any.
    pub command: Option<String>,
    /// Everything after the subcommand, for [`parse`](super::parse).
    pub rest: Vec<String>,
}

/// The global options also taken after the command: no command has an option of these
/// names (a test checks), so none is taken from a command.
pub const GLOBAL_AFTER_COMMAND: [&str; 2] = ["socket", "version"];

/// Splits the program's arguments (without the program name) into global options, the
/// subcommand and its arguments. Before the command every global option is recognised;
/// after it, `--socket` and `--version` too, up to a `--` (`-h`/`--help` there asks for
/// the command's help, and what follows `--` is the command's, verbatim).
pub fn parse_global(args: &[String]) -> Result<Global, ArgError> {
    let err = |kind| ArgError::new("genward", kind);
    let mut global = Global::default();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let socket = match arg.as_str() {
            "-h" | "--help" => {
                global.help = true;
                continue;
            }
            "-V" | "--version" => {
                global.version = true;
                continue;
            }
            "--" => break,
            "--socket" => match args.get(i) {
                Some(next) if !(next.len() > 1 && next.starts_with('-')) => {
                    i += 1;
                    next.as_str()
                }
                next => {
                    return Err(err(ArgErrorKind::MissingValue {
                        option: "--socket".into(),
                        meta: "PATH",
                        next: next.cloned(),
                    }))
                }
            },
            a if a.starts_with("--socket=") => &a["--socket=".len()..],
            a if a.len() > 1 && a.starts_with('-') => {
                let option = a.split('=').next().unwrap_or(a).to_string();
                let name = option.trim_start_matches('-');
                let suggestion =
                    suggest(name, ["socket", "help", "version"]).map(|s| format!("--{s}"));
                return Err(err(ArgErrorKind::UnknownOption { option, suggestion }));
            }
            _ => {
                i -= 1;
                break;
            }
        };
        set_socket(&mut global, socket)?;
    }
    if let Some(command) = args.get(i) {
        global.command = Some(command.clone());
        global.rest = global_after_command(&mut global, &args[i + 1..])?;
    }
    Ok(global)
}

/// Records `--socket`'s value: once, and not empty.
fn set_socket(global: &mut Global, socket: &str) -> Result<(), ArgError> {
    let err = |kind| ArgError::new("genward", kind);
    if global.socket.is_some() {
        return Err(err(ArgErrorKind::Repeated {
            option: "--socket".into(),
        }));
    }
    if socket.is_empty() {
        return Err(err(ArgErrorKind::InvalidValue {
            option: "--socket".into(),
            value: String::new(),
            reason: "needs the path of the daemon's socket".into(),
        }));
    }
    global.socket = Some(socket.to_string());
    Ok(())
}

/// Takes `--socket PATH`, `--socket=PATH` and `--version` out of the command's arguments
/// (up to a `--`); returns the rest, in order.
fn global_after_command(global: &mut Global, args: &[String]) -> Result<Vec<String>, ArgError> {
    let err = |kind| ArgError::new("genward", kind);
    let mut rest = Vec::with_capacity(args.len());
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let socket = match arg.as_str() {
            "--" => {
                rest.extend_from_slice(&args[i - 1..]);
                break;
            }
            "--version" => {
                global.version = true;
                continue;
            }
            "--socket" => match args.get(i) {
                Some(next) if !(next.len() > 1 && next.starts_with('-')) => {
                    i += 1;
                    next.as_str()
                }
                next => {
                    return Err(err(ArgErrorKind::MissingValue {
                        option: "--socket".into(),
                        meta: "PATH",
                        next: next.cloned(),
                    }))
                }
            },
            a if a.starts_with("--socket=") => &a["--socket=".len()..],
            _ => {
                rest.push(arg.clone());
                continue;
            }
        };
        set_socket(global, socket)?;
    }
    Ok(rest)
}

/// Looks up a subcommand, suggesting a close name for a typo.
pub fn find_command<'s>(
    commands: &'s [CommandSpec],
    name: &str,
) -> Result<&'s CommandSpec, ArgError> {
    commands.iter().find(|c| c.name == name).ok_or_else(|| {
        let suggestion = suggest(name, commands.iter().map(|c| c.name));
        ArgError::new(
            "genward",
            ArgErrorKind::UnknownCommand {
                name: name.to_string(),
                suggestion,
            },
        )
    })
}
