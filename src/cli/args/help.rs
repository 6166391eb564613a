//! `--help` text, generated from the same spec the parser uses so the two cannot drift.

use super::parse::command_name;
use super::spec::{CommandSpec, OptKind, OptSpec};

/// The global options, for `genward --help`, the man page and the shell completions.
pub const GLOBAL_OPTIONS: &[OptSpec] = &[
    OptSpec::value(
        "socket",
        "PATH",
        "the daemon's socket (also GENWARD_SOCKET); before or after COMMAND",
    ),
    OptSpec::flag("help", "show this help").short('h'),
    OptSpec::flag("version", "print the version").short('V'),
];

/// The environment variables genward reads, for `genward --help` and the man page's
/// ENVIRONMENT: errors about them point to `genward --help`, so that is where they are.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "GENWARD_SOCKET",
        "the daemon's socket, when --socket is not given",
    ),
    (
        "GENWARD_TIMEOUT",
        "how long a command waits for an answer the daemon gives at once (the reply to a request, a page of ls), as a duration such as 30s, 500ms or 2m; default 30s; 0 waits without limit. A daemon that has not answered by then (stopped, overloaded, or not a genward daemon) makes the command fail naming the socket; a request already sent may still be carried out. It does not bound what a command waits for by its meaning: wait, logs -f, events, attach, stop waiting for the end, run waiting for the start, shutdown, upgrade",
    ),
    (
        "GENWARD_STATE_DIR",
        "the daemon's state directory, when --state-dir is not given",
    ),
];

/// The full help for one command: usage, arguments, options, exclusive groups, examples.
pub fn command_help(spec: &CommandSpec) -> String {
    let name = command_name(spec);
    let mut out = format!("{name}: {}\n\nUsage: {}\n", spec.summary, usage(spec));
    let mut args: Vec<(String, String)> = spec
        .positionals
        .iter()
        .map(|p| {
            let help = match p.option {
                Some(long) => format!(
                    "{} (or --{long}={}: for one that starts with `-`)",
                    p.help, p.name
                ),
                None => p.help.to_string(),
            };
            (p.name.to_string(), help)
        })
        .collect();
    if let Some(t) = spec.trailing {
        args.push((format!("{}...", t.name), t.help.to_string()));
    }
    if !args.is_empty() {
        out.push_str("\nArguments:\n");
        out.push_str(&two_columns(&args));
    }
    let mut opts: Vec<(String, String)> = spec
        .options
        .iter()
        .map(|o| {
            let short = o
                .short
                .map_or_else(|| "    ".to_string(), |c| format!("-{c}, "));
            let meta = o.meta().map_or_else(String::new, |m| format!(" {m}"));
            let repeat = if matches!(o.kind, OptKind::Repeated { .. }) {
                " (repeatable)"
            } else {
                ""
            };
            (
                format!("{short}--{}{meta}", o.long),
                format!("{}{repeat}", o.help),
            )
        })
        .collect();
    opts.push(("-h, --help".to_string(), "show this help".to_string()));
    out.push_str("\nOptions:\n");
    out.push_str(&two_columns(&opts));
    for group in spec.exclusive {
        let shown: Vec<String> = group
            .iter()
            .map(|m| {
                if spec.option(m).is_some() {
                    format!("--{m}")
                } else {
                    m.to_string()
                }
            })
            .collect();
        out.push_str(&format!("\nAt most one of: {}\n", shown.join(", ")));
    }
    if !spec.examples.is_empty() {
        out.push_str(if spec.examples.len() == 1 {
            "\nExample:\n"
        } else {
            "\nExamples:\n"
        });
        for example in spec.examples {
            out.push_str(&format!("  genward {example}\n"));
        }
    }
    out
}

/// `genward run [OPTIONS] NAME -- CMD...`
pub fn usage(spec: &CommandSpec) -> String {
    let mut words = vec![command_name(spec)];
    if !spec.options.is_empty() {
        words.push("[OPTIONS]".to_string());
    }
    for p in spec.positionals {
        words.push(if p.required {
            p.name.to_string()
        } else {
            format!("[{}]", p.name)
        });
    }
    if let Some(t) = spec.trailing {
        words.push(if t.required {
            format!("-- {}...", t.name)
        } else {
            format!("[-- {}...]", t.name)
        });
    }
    words.join(" ")
}

/// The top-level help: global options and one line per command.
pub fn global_help(commands: &[CommandSpec]) -> String {
    let mut out = String::from(
        "genward: supervise named sessions of long-running processes\n\n\
         Usage: genward [--socket PATH] COMMAND [ARGS]...\n\nCommands:\n",
    );
    let rows: Vec<(String, String)> = commands
        .iter()
        .map(|c| (c.name.to_string(), c.summary.to_string()))
        .collect();
    out.push_str(&two_columns(&rows));
    out.push_str("\nOptions:\n");
    let opts: Vec<(String, String)> = GLOBAL_OPTIONS
        .iter()
        .map(|o| {
            let short = o
                .short
                .map_or_else(|| "    ".to_string(), |c| format!("-{c}, "));
            let meta = o.meta().map_or_else(String::new, |m| format!(" {m}"));
            (format!("{short}--{}{meta}", o.long), o.help.to_string())
        })
        .collect();
    out.push_str(&two_columns(&opts));
    out.push_str("\nEnvironment (empty is as unset):\n");
    let vars: Vec<(String, String)> = ENVIRONMENT
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    out.push_str(&two_columns(&vars));
    out.push_str("\nRun `genward COMMAND --help` for a command's options and an example.\n");
    out
}

fn two_columns(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    rows.iter()
        .map(|(left, right)| {
            let pad = width - left.chars().count();
            format!("  {left}{}  {right}\n", " ".repeat(pad)).replace(" \n", "\n")
        })
        .collect()
}
