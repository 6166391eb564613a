//! The declarative description of a command's arguments.
//!
//! Specs are `const` data so that the whole command table is visible in one place and can
//! be checked by a test ([`CommandSpec::check`]) instead of at run time.

/// What an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptKind {
    /// On or off; giving a value (`--pty=1`) is an error.
    Flag,
    /// Exactly one value, named `meta` in help (`--grace DURATION`); at most once.
    Value {
        /// The placeholder shown in help and errors.
        meta: &'static str,
    },
    /// A value each time it is given, kept in order (`--env K=V` many times).
    Repeated {
        /// The placeholder shown in help and errors.
        meta: &'static str,
    },
}

/// One option: `--long`, optionally `-s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptSpec {
    /// The long name without dashes; also the key for [`Matches`](super::Matches) lookups.
    pub long: &'static str,
    /// The one-letter short name, if any.
    pub short: Option<char>,
    /// Flag, value or repeated value.
    pub kind: OptKind,
    /// One line for `--help`.
    pub help: &'static str,
    /// The values it takes, when they are a fixed set (`--restart never|on-failure|
    /// always`): what completion offers instead of file names. Empty: any value.
    pub choices: &'static [&'static str],
}

impl OptSpec {
    /// A boolean flag.
    pub const fn flag(long: &'static str, help: &'static str) -> Self {
        Self {
            long,
            short: None,
            kind: OptKind::Flag,
            help,
            choices: &[],
        }
    }

    /// An option taking one value.
    pub const fn value(long: &'static str, meta: &'static str, help: &'static str) -> Self {
        Self {
            long,
            short: None,
            kind: OptKind::Value { meta },
            help,
            choices: &[],
        }
    }

    /// An option that may be given many times, each with a value.
    pub const fn repeated(long: &'static str, meta: &'static str, help: &'static str) -> Self {
        Self {
            long,
            short: None,
            kind: OptKind::Repeated { meta },
            help,
            choices: &[],
        }
    }

    /// The same option with a short name.
    pub const fn short(self, short: char) -> Self {
        Self {
            short: Some(short),
            ..self
        }
    }

    /// The same option, taking (or, for signals, mostly taking) one of `choices`.
    pub const fn choices(self, choices: &'static [&'static str]) -> Self {
        Self { choices, ..self }
    }

    /// The value placeholder, for options that take one.
    pub const fn meta(&self) -> Option<&'static str> {
        match self.kind {
            OptKind::Flag => None,
            OptKind::Value { meta } | OptKind::Repeated { meta } => Some(meta),
        }
    }
}

/// One positional argument, e.g. `NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PosSpec {
    /// Upper-case name shown in usage; also the key for lookups.
    pub name: &'static str,
    /// Whether leaving it out is an error. Optional ones come after required ones.
    pub required: bool,
    /// One line for `--help`.
    pub help: &'static str,
    /// The long name of a value option that may give it instead (`--name=-x` for
    /// `NAME`): the way to pass a value that starts with `-`, which before `--` reads as
    /// an option, and after it is `run`'s command line.
    pub option: Option<&'static str>,
}

impl PosSpec {
    /// A positional that must be given.
    pub const fn required(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            required: true,
            help,
            option: None,
        }
    }

    /// A positional that may be left out.
    pub const fn optional(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            required: false,
            help,
            option: None,
        }
    }

    /// The same positional, which option `--long` (taking one value) may give instead.
    pub const fn or_option(self, long: &'static str) -> Self {
        Self {
            option: Some(long),
            ..self
        }
    }
}

/// The command line after `--`, taken verbatim (`run NAME -- CMD ARGS...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrailingSpec {
    /// Name shown in usage, e.g. `CMD`.
    pub name: &'static str,
    /// Whether at least one word after `--` is needed.
    pub required: bool,
    /// One line for `--help`.
    pub help: &'static str,
}

/// Everything the parser and the help text need to know about one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    /// The subcommand word, e.g. `run`.
    pub name: &'static str,
    /// One line: what the command does.
    pub summary: &'static str,
    /// Positionals in order.
    pub positionals: &'static [PosSpec],
    /// Options (`-h`/`--help` is implied for every command).
    pub options: &'static [OptSpec],
    /// Groups of which at most one member may be given. Members are option long names or
    /// positional names (`&["TEXT", "stdin", "eof"]`).
    pub exclusive: &'static [&'static [&'static str]],
    /// The command line after `--`, if the command runs one.
    pub trailing: Option<TrailingSpec>,
    /// Complete example invocations (without the leading `genward`), shown in help.
    pub examples: &'static [&'static str],
}

impl CommandSpec {
    /// A spec with only a name and summary, for building others with `..`.
    pub const fn new(name: &'static str, summary: &'static str) -> Self {
        Self {
            name,
            summary,
            positionals: &[],
            options: &[],
            exclusive: &[],
            trailing: None,
            examples: &[],
        }
    }

    /// Finds an option by long name.
    pub fn option(&self, long: &str) -> Option<&OptSpec> {
        self.options.iter().find(|o| o.long == long)
    }

    /// Finds an option by short name.
    pub fn short_option(&self, short: char) -> Option<&OptSpec> {
        self.options.iter().find(|o| o.short == Some(short))
    }

    /// Checks the spec for mistakes a parser would silently mishandle: duplicate names,
    /// a clash with `-h`/`--help`, optional positionals before required ones, exclusive
    /// groups naming unknown or repeatable things, no example. Used by tests.
    pub fn check(&self) -> Result<(), String> {
        let fail = |what: String| Err(format!("spec `{}`: {what}", self.name));
        for (i, o) in self.options.iter().enumerate() {
            if o.long.is_empty() || o.long.starts_with('-') || o.long.contains('=') {
                return fail(format!("bad long name `{}`", o.long));
            }
            if o.long == "help" || o.short == Some('h') {
                return fail("`--help`/`-h` is built in".into());
            }
            if self.options[..i]
                .iter()
                .any(|p| p.long == o.long || (o.short.is_some() && p.short == o.short))
            {
                return fail(format!("`--{}` defined twice", o.long));
            }
            if matches!(o.short, Some(c) if !c.is_ascii_alphanumeric()) {
                return fail(format!("bad short name for `--{}`", o.long));
            }
        }
        if self
            .positionals
            .windows(2)
            .any(|w| !w[0].required && w[1].required)
        {
            return fail("a required positional follows an optional one".into());
        }
        for group in self.exclusive {
            for member in *group {
                match (
                    self.option(member),
                    self.positionals.iter().any(|p| p.name == *member),
                ) {
                    (Some(o), _) if matches!(o.kind, OptKind::Repeated { .. }) => {
                        return fail(format!("repeatable `--{member}` in an exclusive group"));
                    }
                    (None, false) => {
                        return fail(format!("exclusive group names unknown `{member}`"))
                    }
                    _ => {}
                }
            }
        }
        for (i, p) in self.positionals.iter().enumerate() {
            let Some(long) = p.option else { continue };
            if !matches!(self.option(long), Some(o) if matches!(o.kind, OptKind::Value { .. })) {
                return fail(format!(
                    "`{}` may be given as `--{long}`, which takes no single value",
                    p.name
                ));
            }
            // Only the first positionals may be left out for their option: one given
            // after it would take its place.
            if self.positionals[..i].iter().any(|q| q.option.is_none()) {
                return fail(format!(
                    "`{}` given by an option follows a positional that is not",
                    p.name
                ));
            }
        }
        if self.examples.is_empty() {
            return fail("no example".into());
        }
        Ok(())
    }
}
