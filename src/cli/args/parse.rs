//! Turning one command's arguments into [`Matches`] according to its [`CommandSpec`].

use std::ffi::OsString;
use std::fmt;

use super::error::{suggest, ArgError, ArgErrorKind};
use super::help::command_help;
use super::spec::{CommandSpec, OptKind, OptSpec};

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<'s> {
    /// `-h`/`--help` was given: print this text and exit successfully.
    Help(String),
    /// The parsed arguments.
    Args(Matches<'s>),
}

/// The parsed arguments of one command, looked up by the names in its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matches<'s> {
    spec: &'s CommandSpec,
    /// (index into `spec.options`, value) in the order given.
    given: Vec<(usize, Option<String>)>,
    positionals: Vec<String>,
    trailing: Option<Vec<String>>,
}

impl<'s> Matches<'s> {
    /// The spec these arguments were parsed against.
    pub fn spec(&self) -> &'s CommandSpec {
        self.spec
    }

    /// Whether the flag (or any option) `long` was given.
    pub fn flag(&self, long: &str) -> bool {
        self.given_named(long).next().is_some()
    }

    /// The value of single-value option `long`, if given.
    pub fn value(&self, long: &str) -> Option<&str> {
        self.given_named(long).filter_map(|v| v.as_deref()).last()
    }

    /// Every value of repeatable option `long`, in the order given.
    pub fn values(&self, long: &str) -> Vec<&str> {
        self.given_named(long)
            .filter_map(|v| v.as_deref())
            .collect()
    }

    /// The positional named `name` in the spec (`"NAME"`), if given.
    pub fn positional(&self, name: &str) -> Option<&str> {
        let index = self.spec.positionals.iter().position(|p| p.name == name)?;
        self.positionals.get(index).map(String::as_str)
    }

    /// All positionals in order.
    pub fn positionals(&self) -> &[String] {
        &self.positionals
    }

    /// The words after `--`, verbatim, for commands with a trailing command line;
    /// `None` when there was no `--`.
    pub fn trailing(&self) -> Option<&[String]> {
        self.trailing.as_deref()
    }

    /// Parses the value of option `long` with `parse`, turning its error into an
    /// [`ArgError`] that names the command, the option and the value.
    pub fn value_with<T, E: fmt::Display>(
        &self,
        long: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, ArgError> {
        match self.value(long) {
            None => Ok(None),
            Some(v) => parse(v)
                .map(Some)
                .map_err(|e| self.invalid(&format!("--{long}"), v, e)),
        }
    }

    /// An [`ArgErrorKind::InvalidValue`] error for this command, for checks the spec
    /// cannot express (a bad session name in `NAME`, a bad `K=V`).
    pub fn invalid(&self, what: &str, value: &str, reason: impl fmt::Display) -> ArgError {
        ArgError::new(
            command_name(self.spec),
            ArgErrorKind::InvalidValue {
                option: what.to_string(),
                value: value.to_string(),
                reason: reason.to_string(),
            },
        )
    }

    /// An [`ArgErrorKind::MissingInput`] error for this command: optional positional
    /// `name` is needed after all, or what `how` says instead.
    pub fn missing(&self, name: &'static str, how: &'static str) -> ArgError {
        ArgError::new(
            command_name(self.spec),
            ArgErrorKind::MissingInput { name, how },
        )
    }

    /// An [`ArgErrorKind::Refused`] error for this command: the arguments as a whole
    /// are beyond what the daemon takes (`reason` says which limit, and what to do).
    pub fn refused(&self, reason: impl fmt::Display) -> ArgError {
        ArgError::new(
            command_name(self.spec),
            ArgErrorKind::Refused {
                reason: reason.to_string(),
            },
        )
    }

    /// An [`ArgErrorKind::Requires`] error for this command: `option` works only with
    /// `needs`.
    pub fn requires(&self, option: &str, needs: &str) -> ArgError {
        ArgError::new(
            command_name(self.spec),
            ArgErrorKind::Requires {
                option: option.to_string(),
                needs: needs.to_string(),
            },
        )
    }

    /// The values given for option `long` (`None` entries for flags), in order.
    fn given_named(&self, long: &str) -> impl Iterator<Item = &Option<String>> + '_ {
        let index = self.spec.options.iter().position(|o| o.long == long);
        self.given
            .iter()
            .filter(move |(i, _)| Some(*i) == index)
            .map(|(_, v)| v)
    }
}

/// `genward run`, as errors and help name the command.
pub(super) fn command_name(spec: &CommandSpec) -> String {
    format!("genward {}", spec.name)
}

/// Converts the process arguments to text, refusing (not mangling) any that is not UTF-8:
/// names, values and command lines travel to the daemon as JSON text.
pub fn args_to_strings(args: impl IntoIterator<Item = OsString>) -> Result<Vec<String>, ArgError> {
    args.into_iter()
        .enumerate()
        .map(|(i, a)| {
            a.into_string().map_err(|bad| {
                let lossy = bad.to_string_lossy().into_owned();
                ArgError::new(
                    "genward",
                    ArgErrorKind::NotUnicode {
                        position: i + 1,
                        lossy,
                    },
                )
            })
        })
        .collect()
}

/// Parses `args` (the words after the subcommand) against `spec`.
///
/// # Examples
///
/// ```
/// use genward::cli::args::{parse, CommandSpec, OptSpec, Outcome, PosSpec};
/// const STOP: CommandSpec = CommandSpec {
///     positionals: &[PosSpec::required("NAME", "session")],
///     options: &[OptSpec::value("grace", "DURATION", "time before SIGKILL")],
///     examples: &["stop web --grace 5s"],
///     ..CommandSpec::new("stop", "stop a session")
/// };
/// let args: Vec<String> = ["web", "--grace=5s"].iter().map(|s| s.to_string()).collect();
/// let Ok(Outcome::Args(m)) = parse(&STOP, &args) else { panic!() };
/// assert_eq!((m.positional("NAME"), m.value("grace")), (Some("web"), Some("5s")));
/// ```
pub fn parse<'s>(spec: &'s CommandSpec, args: &[String]) -> Result<Outcome<'s>, ArgError> {
    let err = |kind| ArgError::new(command_name(spec), kind);
    let dashdash = args.iter().position(|a| a == "--");
    let (before, after) = match dashdash {
        Some(i) => (&args[..i], Some(&args[i + 1..])),
        None => (args, None),
    };
    // Separate values never start with `-`, so these words are always the help option.
    if before.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Outcome::Help(command_help(spec)));
    }
    let mut m = Matches {
        spec,
        given: Vec::new(),
        positionals: Vec::new(),
        trailing: None,
    };
    let mut rest = before.iter();
    while let Some(arg) = rest.next() {
        if let Some(body) = arg.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            if name == "help" {
                // Only `--help=...` reaches here: plain `--help` was handled above.
                return Err(err(ArgErrorKind::FlagWithValue {
                    option: "--help".into(),
                }));
            }
            let Some(index) = spec.options.iter().position(|o| o.long == name) else {
                let suggestion =
                    suggest(name, spec.options.iter().map(|o| o.long)).map(|s| format!("--{s}"));
                return Err(err(ArgErrorKind::UnknownOption {
                    option: format!("--{name}"),
                    suggestion,
                }));
            };
            let opt = &spec.options[index];
            let written = format!("--{name}");
            let value = match (opt.kind, inline) {
                (OptKind::Flag, Some(_)) => {
                    return Err(err(ArgErrorKind::FlagWithValue { option: written }))
                }
                (OptKind::Flag, None) => None,
                (_, Some(v)) => Some(v.to_string()),
                (_, None) => Some(next_value(opt, written.clone(), &mut rest).map_err(err)?),
            };
            record(&mut m, index, written, value).map_err(err)?;
        } else if arg.len() > 1 && arg.starts_with('-') {
            parse_short_cluster(spec, &mut m, &arg[1..], &mut rest).map_err(err)?;
        } else {
            m.positionals.push(arg.clone());
        }
    }
    match (after, spec.trailing) {
        (Some(words), Some(_)) => m.trailing = Some(words.to_vec()),
        (Some(words), None) => m.positionals.extend(words.iter().cloned()),
        (None, _) => {}
    }
    positionals_from_options(spec, &mut m).map_err(err)?;
    check_counts(spec, &m, dashdash.is_some()).map_err(err)?;
    check_exclusive(spec, &m).map_err(err)?;
    Ok(Outcome::Args(m))
}

/// `-fx`, `-sTERM`, `-s TERM`: flags until the first option that takes a value, which
/// takes the rest of the word or else the next word.
fn parse_short_cluster<'a>(
    spec: &CommandSpec,
    m: &mut Matches<'_>,
    cluster: &str,
    rest: &mut impl Iterator<Item = &'a String>,
) -> Result<(), ArgErrorKind> {
    for (pos, c) in cluster.char_indices() {
        let Some(index) = spec.options.iter().position(|o| o.short == Some(c)) else {
            let suggestion = if pos == 0 {
                whole_word_suggestion(spec, cluster)
            } else {
                None
            };
            return Err(ArgErrorKind::UnknownOption {
                option: format!("-{c}"),
                suggestion,
            });
        };
        let opt = &spec.options[index];
        let written = format!("-{c}");
        if opt.kind == OptKind::Flag {
            record(m, index, written, None)?;
            continue;
        }
        let attached = &cluster[pos + c.len_utf8()..];
        let value = if attached.is_empty() {
            next_value(opt, written.clone(), rest)?
        } else {
            attached.to_string()
        };
        return record(m, index, written, Some(value));
    }
    Ok(())
}

/// What an unknown `-word` was most likely meant as: `-grace` as `--grace`, or `kill`'s
/// familiar `-9`/`-TERM` as `-s 9` for a command with a short `SIGNAL` option.
fn whole_word_suggestion(spec: &CommandSpec, word: &str) -> Option<String> {
    let signal_option = spec.options.iter().find(|o| o.meta() == Some("SIGNAL"));
    if let Some(short) = signal_option.and_then(|o| o.short) {
        if crate::proto::signal_name::parse_signal(word).is_ok() {
            return Some(format!("-{short} {word}"));
        }
    }
    suggest(word, spec.options.iter().map(|o| o.long))
        .map(|s| format!("--{s}"))
        // `stop -x`: most likely a session named `-x`.
        .or_else(|| {
            let long = spec.positionals.iter().find_map(|p| p.option)?;
            Some(format!("--{long}=-{word}"))
        })
}

/// The next word as an option's value, unless it looks like an option itself.
fn next_value<'a>(
    opt: &OptSpec,
    written: String,
    rest: &mut impl Iterator<Item = &'a String>,
) -> Result<String, ArgErrorKind> {
    let meta = opt.meta().unwrap_or("VALUE");
    match rest.next() {
        Some(next) if next.len() > 1 && next.starts_with('-') => Err(ArgErrorKind::MissingValue {
            option: written,
            meta,
            next: Some(next.clone()),
        }),
        Some(next) => Ok(next.clone()),
        None => Err(ArgErrorKind::MissingValue {
            option: written,
            meta,
            next: None,
        }),
    }
}

fn record(
    m: &mut Matches<'_>,
    index: usize,
    written: String,
    value: Option<String>,
) -> Result<(), ArgErrorKind> {
    let already = m.given.iter().any(|(i, _)| *i == index);
    match m.spec.options[index].kind {
        // Saying a flag twice means the same as once.
        OptKind::Flag if already => return Ok(()),
        OptKind::Value { .. } if already => return Err(ArgErrorKind::Repeated { option: written }),
        _ => {}
    }
    let meta = m.spec.options[index].meta();
    if let (Some(meta), Some(v)) = (meta, &value) {
        // `u64::from_str` takes `+5`; a number option does not, whatever parses it.
        if NUMBER_METAS.contains(&meta) && v.starts_with('+') {
            return Err(ArgErrorKind::InvalidValue {
                option: written,
                value: v.clone(),
                reason: "expected a number in digits only, without a sign".into(),
            });
        }
        // An empty path is no path: refused here, naming the option, rather than read
        // as the current directory or failing later with a raw error.
        if let Some((_, what)) = PATH_METAS.iter().find(|(p, _)| *p == meta) {
            if v.is_empty() {
                return Err(ArgErrorKind::InvalidValue {
                    option: written,
                    value: String::new(),
                    reason: format!("needs {what}"),
                });
            }
        }
    }
    m.given.push((index, value));
    Ok(())
}

/// The placeholders of options whose value is a plain number (a size with a unit too).
const NUMBER_METAS: &[&str] = &["N", "GEN", "FD", "UID", "SIZE"];

/// The placeholders of options whose value is a path, with what an empty one lacks.
pub(super) const PATH_METAS: &[(&str, &str)] = &[
    ("PATH", "a path"),
    ("DIR", "the path of a directory"),
    ("FILE", "the path of a file"),
];

/// Puts a positional given as its option (`--name=-x` for `NAME`, see
/// [`PosSpec::option`](super::spec::PosSpec::option)) in its place, before the
/// positionals given as words; given both ways, it is an error rather than a guess.
fn positionals_from_options(spec: &CommandSpec, m: &mut Matches<'_>) -> Result<(), ArgErrorKind> {
    for (i, p) in spec.positionals.iter().enumerate() {
        let Some(long) = p.option else { continue };
        let Some(value) = m.value(long).map(str::to_string) else {
            continue;
        };
        if m.positionals.len() >= spec.positionals.len() {
            return Err(ArgErrorKind::Exclusive {
                first: p.name.to_string(),
                second: format!("--{long}"),
            });
        }
        let at = i.min(m.positionals.len());
        m.positionals.insert(at, value);
    }
    Ok(())
}

fn check_counts(
    spec: &CommandSpec,
    m: &Matches<'_>,
    had_dashdash: bool,
) -> Result<(), ArgErrorKind> {
    if let Some(extra) = m.positionals.get(spec.positionals.len()) {
        let trailing = if had_dashdash {
            None
        } else {
            spec.trailing.map(|t| t.name)
        };
        return Err(ArgErrorKind::UnexpectedArgument {
            arg: extra.clone(),
            trailing,
        });
    }
    if let Some(missing) = spec
        .positionals
        .iter()
        .skip(m.positionals.len())
        .find(|p| p.required)
    {
        return Err(ArgErrorKind::MissingPositional { name: missing.name });
    }
    match spec.trailing {
        Some(t) if t.required && !matches!(&m.trailing, Some(words) if !words.is_empty()) => {
            Err(ArgErrorKind::MissingTrailing { name: t.name })
        }
        _ => Ok(()),
    }
}

fn check_exclusive(spec: &CommandSpec, m: &Matches<'_>) -> Result<(), ArgErrorKind> {
    for group in spec.exclusive {
        let mut present = group.iter().filter_map(|member| {
            if spec.option(member).is_some() {
                m.flag(member).then(|| format!("--{member}"))
            } else {
                m.positional(member).map(|_| member.to_string())
            }
        });
        if let (Some(first), Some(second)) = (present.next(), present.next()) {
            return Err(ArgErrorKind::Exclusive { first, second });
        }
    }
    Ok(())
}
