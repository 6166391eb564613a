//! Our own command-line parser: a small declarative spec per command, parsed by one
//! function, with errors that name the command and say what to do.
//!
//! The runtime dependency list is fixed, so there is no clap; the conventions are the
//! familiar GNU ones:
//! - options may come before, between or after positionals, until `--`;
//! - `--name VALUE` and `--name=VALUE`; `-s VALUE`, `-sVALUE`, and clustered short flags
//!   (`-fx`);
//! - a separate value may not start with `-` (so a forgotten value is reported, not
//!   swallowed); write `--name=-x` or `-s-x` for such values;
//! - `--` ends options: what follows is the command's trailing command line, taken
//!   verbatim (`run NAME -- CMD ARGS...`), or plain positionals for other commands;
//! - `-` alone is a positional (conventionally standard input);
//! - `-h`/`--help` anywhere before `--` asks for help on that command.

mod error;
mod global;
mod help;
mod parse;
mod spec;

pub use error::{ArgError, ArgErrorKind};
pub use global::{find_command, parse_global, Global, GLOBAL_AFTER_COMMAND};
pub use help::{command_help, global_help, usage, ENVIRONMENT, GLOBAL_OPTIONS};
pub use parse::{args_to_strings, parse, Matches, Outcome};
pub use spec::{CommandSpec, OptKind, OptSpec, PosSpec, TrailingSpec};

#[cfg(test)]
mod tests;
