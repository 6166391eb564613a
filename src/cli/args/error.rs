//! Argument errors: each names the command, what was wrong, and what to do next.

use std::fmt;

/// What was wrong with the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgErrorKind {
    /// No subcommand was given.
    MissingCommand,
    /// A subcommand we do not have; `suggestion` is a close match, if any.
    UnknownCommand {
        name: String,
        suggestion: Option<&'static str>,
    },
    /// An option the command does not have, as written (`--gracee`, `-x`).
    UnknownOption {
        option: String,
        suggestion: Option<String>,
    },
    /// An option that needs a value got none. `next` is the following argument when it
    /// was refused for starting with `-`.
    MissingValue {
        option: String,
        meta: &'static str,
        next: Option<String>,
    },
    /// A flag written with a value (`--pty=1`).
    FlagWithValue { option: String },
    /// A single-value option given more than once.
    Repeated { option: String },
    /// Two members of a mutually exclusive group, as shown to the user.
    Exclusive { first: String, second: String },
    /// A positional the command has no room for; `trailing` names the command's
    /// after-`--` part, because then the user most likely forgot the `--`.
    UnexpectedArgument {
        arg: String,
        trailing: Option<&'static str>,
    },
    /// A required positional is missing.
    MissingPositional { name: &'static str },
    /// An optional positional the command needs after all, as `how` says another way to
    /// give what it stands for (`send NAME` without TEXT, `--stdin` or `--eof`).
    MissingInput {
        name: &'static str,
        how: &'static str,
    },
    /// The command line after `--` is missing.
    MissingTrailing { name: &'static str },
    /// An argument (1-based, after the program name) is not valid UTF-8.
    NotUnicode { position: usize, lossy: String },
    /// An option given without another it only works with (`--lossless` without `-f`).
    Requires { option: String, needs: String },
    /// The arguments together are beyond one of the daemon's limits, as `reason` says.
    Refused { reason: String },
    /// A value the command could not use, with the reason from its parser.
    InvalidValue {
        option: String,
        value: String,
        reason: String,
    },
}

/// An argument error for `command` (`genward` or `genward run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// The command as the user would type it: `genward` or `genward run`.
    pub command: String,
    /// What was wrong.
    pub kind: ArgErrorKind,
}

impl ArgError {
    /// An error about `kind` in `command` (`"genward run"`).
    pub fn new(command: impl Into<String>, kind: ArgErrorKind) -> Self {
        Self {
            command: command.into(),
            kind,
        }
    }

    /// The conventional exit status for a usage error.
    pub const EXIT_STATUS: u8 = 2;
}

impl fmt::Display for ArgError {
    /// The message, with any control character of what the user typed written as an
    /// escape (`\u{1b}`), as the daemon's messages do: a value is never a terminal
    /// control sequence.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = Unescaped(self).to_string();
        for c in text.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_unicode())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// An [`ArgError`]'s message as it is put together, control characters and all.
struct Unescaped<'a>(&'a ArgError);

impl fmt::Display for Unescaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cmd = &self.0.command;
        write!(f, "{cmd}: ")?;
        match &self.0.kind {
            ArgErrorKind::MissingCommand => {
                return write!(f, "no command given; see `{cmd} --help`")
            }
            ArgErrorKind::UnknownCommand { name, suggestion } => {
                write!(f, "unknown command `{name}`")?;
                if let Some(s) = suggestion {
                    write!(f, " (did you mean `{s}`?)")?;
                }
            }
            ArgErrorKind::UnknownOption { option, suggestion } => {
                write!(f, "unknown option `{option}`")?;
                if let Some(s) = suggestion {
                    write!(f, " (did you mean `{s}`?)")?;
                }
            }
            ArgErrorKind::MissingValue { option, meta, next } => {
                write!(f, "option `{option}` needs a value ({meta})")?;
                if let Some(next) = next {
                    let joined = if option.starts_with("--") {
                        format!("{option}={next}")
                    } else {
                        format!("{option}{next}")
                    };
                    write!(f, "; if `{next}` is the value, write `{joined}`")?;
                }
            }
            ArgErrorKind::FlagWithValue { option } => {
                write!(
                    f,
                    "`{option}` is a flag and takes no value; write just `{option}`"
                )?;
            }
            ArgErrorKind::Repeated { option } => {
                write!(f, "`{option}` given more than once; give it once")?
            }
            ArgErrorKind::Exclusive { first, second } => {
                write!(
                    f,
                    "`{first}` and `{second}` cannot be used together; pick one"
                )?;
            }
            ArgErrorKind::UnexpectedArgument {
                arg,
                trailing: Some(name),
            } => {
                write!(f, "unexpected argument `{arg}`; put the {name} after `--`")?;
            }
            ArgErrorKind::UnexpectedArgument {
                arg,
                trailing: None,
            } => write!(f, "unexpected argument `{arg}`")?,
            ArgErrorKind::MissingPositional { name } => write!(f, "missing {name}")?,
            ArgErrorKind::MissingInput { name, how } => write!(f, "missing {name}: {how}")?,
            ArgErrorKind::MissingTrailing { name } => write!(f, "missing {name} after `--`")?,
            ArgErrorKind::NotUnicode { position, lossy } => write!(
                f,
                "argument {position} (`{lossy}`) is not valid UTF-8; only text can be passed on"
            )?,
            ArgErrorKind::Requires { option, needs } => {
                write!(f, "`{option}` needs {needs}")?;
            }
            ArgErrorKind::Refused { reason } => f.write_str(reason)?,
            ArgErrorKind::InvalidValue {
                option,
                value,
                reason,
            } => {
                write!(f, "bad value `{value}` for `{option}`: {reason}")?;
            }
        }
        write!(f, "; see `{cmd} --help`")
    }
}

impl std::error::Error for ArgError {}

/// The candidate closest to `word` by edit distance, if it is close enough to be a typo.
pub(super) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = if word.chars().count() <= 3 { 1 } else { 2 };
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Edit distance over chars where swapping two neighbours counts as one edit (`rnu` is
/// one typo from `run`). Inputs are short words, capped to keep it cheap.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(64).collect();
    let b: Vec<char> = b.chars().take(64).collect();
    // d[i][j]: distance between the first i chars of a and the first j chars of b.
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j - 1] + cost)
                .min(d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_only_for_near_misses() {
        let names = ["grace", "env", "pty", "replace"];
        assert_eq!(suggest("gracee", names), Some("grace"));
        assert_eq!(suggest("envv", names), Some("env"));
        assert_eq!(suggest("ptty", names), Some("pty"));
        assert_eq!(suggest("xyz", names), None);
        assert_eq!(suggest("", names), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("日本", "日本語"), 1);
        assert_eq!(edit_distance("rnu", "run"), 1);
        assert_eq!(suggest("rnu", ["run", "rm"]), Some("run"));
    }

    #[test]
    fn messages_name_command_and_next_step() {
        let e = ArgError::new(
            "genward run",
            ArgErrorKind::UnknownOption {
                option: "--gracee".into(),
                suggestion: None,
            },
        );
        assert_eq!(
            e.to_string(),
            "genward run: unknown option `--gracee`; see `genward run --help`"
        );
        let e = ArgError::new(
            "genward stop",
            ArgErrorKind::MissingValue {
                option: "--grace".into(),
                meta: "DURATION",
                next: Some("-5s".into()),
            },
        );
        assert!(e.to_string().contains("write `--grace=-5s`"), "{e}");
        let e = ArgError::new(
            "genward kill",
            ArgErrorKind::MissingValue {
                option: "-s".into(),
                meta: "SIGNAL",
                next: Some("-9".into()),
            },
        );
        assert!(e.to_string().contains("write `-s-9`"), "{e}");
    }

    #[test]
    fn control_characters_of_a_value_are_escaped() {
        let e = ArgError::new(
            "genward run",
            ArgErrorKind::InvalidValue {
                option: "NAME".into(),
                value: "\u{1b}[2J\nx".into(),
                reason: "bad".into(),
            },
        );
        let text = e.to_string();
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.contains(r"`\u{1b}[2J\u{a}x`"), "{text}");
    }
}
