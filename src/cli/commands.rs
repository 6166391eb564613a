//! The argument specs of every `genward` command, in one table.
//!
//! Keeping them together makes the command line reviewable at a glance and lets one test
//! check that every command has sane names, `--help` and an example.

use super::args::{CommandSpec, OptSpec, PosSpec, TrailingSpec};

/// The signals completion offers for `kill -s` (any name or number is taken).
pub const SIGNALS: &[&str] = &[
    "TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT", "TSTP", "WINCH", "ALRM",
];

const NAME: PosSpec = PosSpec::required("NAME", "the session's name").or_option("name");
/// `NAME` as an option: a name may start with `-` (`-x`), which as a word before `--`
/// reads as an option, and after `--` is `run`'s command line. Every command that takes
/// a session's name takes it so, and (but `run`) after `--` too: `genward stop -- -x`.
const NAME_OPT: OptSpec = OptSpec::value(
    "name",
    "NAME",
    "the session's name, instead of NAME: --name=-x for a name that starts with `-`",
);
const IF_GEN: OptSpec = OptSpec::value(
    "if-gen",
    "GEN",
    "act only if GEN is still the current generation",
);
/// `--json` texts say what is printed, as docs/cli-json.md does: JSON lines of the
/// command's own, never the protocol's raw reply.
const JSON_EVENTS: OptSpec = OptSpec::flag(
    "json",
    "print each event as one JSON object per line, as on the wire (docs/cli-json.md)",
);

/// `--json` of `run` and `restart`.
const JSON_STARTED: OptSpec = OptSpec::flag(
    "json",
    "print {\"session\",\"gen\",\"pid\"} as one JSON object once it started ({\"session\",\"gen\"} if it has not within the wait), or its spawn_failed event (docs/cli-json.md)",
);

/// `--json` of `upgrade` and `reload`: their result as one JSON object.
const JSON_RESULT: OptSpec = OptSpec::flag(
    "json",
    "print the result as one JSON object (docs/cli-json.md)",
);

/// `genward daemon`.
pub const DAEMON: CommandSpec = CommandSpec {
    options: &[
        OptSpec::value(
            "state-dir",
            "DIR",
            "private state directory (default /run/genward as root, else $XDG_RUNTIME_DIR/genward; env GENWARD_STATE_DIR)",
        ),
        OptSpec::repeated("allow-uid", "UID", "also accept clients with this uid"),
        OptSpec::value(
            "ready-fd",
            "FD",
            "write a newline to FD once ready to serve, then close it (s6-style)",
        ),
        OptSpec::value(
            "reaper",
            "MODE",
            "auto (pidfds where available) or fallback (SIGCHLD + identity checks)",
        )
        .choices(&["auto", "fallback"]),
        OptSpec::value(
            "containment",
            "MODE",
            "auto (a cgroup per generation where the daemon may create them, else its session), cgroup (refuse to start without), or session",
        )
        .choices(&["auto", "cgroup", "session"]),
        OptSpec::flag(
            "subreaper",
            "adopt and reap orphaned descendants (the default; kept for compatibility)",
        ),
        OptSpec::flag(
            "no-subreaper",
            "leave orphaned descendants to init (a session's escaped processes are then found by scanning /proc)",
        ),
        OptSpec::value(
            "keeper-hold",
            "DURATION",
            "how long the keeper holds the sessions' I/O after a crash of the daemon, for the next one (default 10m)",
        ),
        OptSpec::value(
            "max-sessions",
            "N",
            "most sessions in the table; one more is refused with `limit` (default 100000)",
        ),
        OptSpec::value(
            "max-running",
            "N",
            "most generations waiting for dependencies, starting, running or stopping at once; a start beyond is refused with `limit`, a replacement waits for the generations it replaces (default 16384)",
        ),
        OptSpec::value(
            "config",
            "PATH",
            "run the sessions configured in PATH: a JSON file {\"sessions\": {NAME: {spawn fields}}}, or a directory of NAME.json files; read again on `genward reload` and SIGHUP",
        ),
        OptSpec::flag(
            "no-keeper",
            "run without a keeper: a crash of the daemon loses the sessions' I/O (they are still taken back)",
        ),
        OptSpec::flag(
            "output-to-stdout",
            "also write every session's output to standard output, line by line, as `NAME | line` (coloured on a terminal unless NO_COLOR is set), for docker logs or journald",
        ),
    ],
    examples: &[
        "daemon",
        "daemon --state-dir /srv/genward --allow-uid 1000 --ready-fd 3",
        "daemon --output-to-stdout",
        "daemon --config /etc/genward.d",
    ],
    exclusive: &[&["subreaper", "no-subreaper"]],
    ..CommandSpec::new("daemon", "run the supervisor in the foreground")
};

const CWD: OptSpec = OptSpec::value("cwd", "DIR", "working directory");
const ENV: OptSpec = OptSpec::repeated(
    "env",
    "K=V",
    "set an environment variable (after --env-file; the last of a name wins)",
);
const ENV_FILE: OptSpec = OptSpec::repeated(
    "env-file",
    "FILE",
    "set the KEY=VALUE lines of FILE (taken literally; blank lines and # comments skipped; at most 1 MiB)",
);
const UNSET_ENV: OptSpec = OptSpec::repeated(
    "unset-env",
    "K",
    "remove a variable from the inherited environment",
);
const CLEAR_ENV: OptSpec = OptSpec::flag(
    "clear-env",
    "start from an empty environment (only --env and --env-file)",
);
const DAEMON_ENV: OptSpec = OptSpec::flag(
    "daemon-env",
    "start from the daemon's environment instead of this command's (the default)",
);

const USER: OptSpec = OptSpec::value(
    "user",
    "USER",
    "run as this user (name or uid); needs a daemon running as root",
);
const GROUP: OptSpec = OptSpec::value(
    "group",
    "GROUP",
    "run in this group (name or gid; default the user's primary group)",
);
const GROUPS: OptSpec = OptSpec::value(
    "groups",
    "G,G",
    "supplementary groups, comma-separated (default the user's; empty for none)",
);
const UMASK: OptSpec = OptSpec::value("umask", "MODE", "file mode creation mask, octal (027)");
const DAEMON_ENV_FILE: OptSpec = OptSpec::value(
    "daemon-env-file",
    "FILE",
    "a KEY=VALUE file the daemon reads at every start, under --env (relative to here)",
);
const RLIMIT: OptSpec = OptSpec::repeated(
    "rlimit",
    "RES=LIMIT",
    "a resource limit: nofile=4096, core=0:infinity (soft:hard), as=infinity, ...",
);

const LOG: OptSpec = OptSpec::value(
    "log",
    "PATH",
    "also write the output to this file (relative to here), rotated by size",
);
const LOG_MAX_SIZE: OptSpec = OptSpec::value(
    "log-max-size",
    "SIZE",
    "rotate the --log file before it grows past SIZE (bytes, or 64K, 10M, 1G; default 10M, at least 4K)",
);
const LOG_KEEP: OptSpec = OptSpec::value(
    "log-keep",
    "N",
    "rotated --log files kept, PATH.1 to PATH.N (default 5; 0: the file is emptied instead)",
);

const NO_WAIT: OptSpec = OptSpec::flag(
    "no-wait",
    "print the generation at once, without waiting for the program to start",
);

/// `genward run`.
pub const RUN: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        OptSpec::flag("pty", "run in a pseudo-terminal (for `attach`)"),
        CWD,
        ENV,
        ENV_FILE,
        UNSET_ENV,
        CLEAR_ENV,
        DAEMON_ENV,
        NO_WAIT,
        OptSpec::flag("replace", "stop the running generation first (default)"),
        OptSpec::flag("overlap", "start now; stop the old generation meanwhile"),
        OptSpec::flag("reject", "fail if the session is running"),
        OptSpec::value("restart", "POLICY", "never, on-failure or always")
            .choices(&["never", "on-failure", "always"]),
        OptSpec::value(
            "grace",
            "DURATION",
            "time between SIGTERM and SIGKILL on stop",
        ),
        OptSpec::value(
            "ready-fd",
            "N",
            "ready when the program writes a newline to descriptor N (N >= 3)",
        ),
        OptSpec::value(
            "ready-output",
            "TEXT",
            "ready when a line of its output contains TEXT",
        ),
        OptSpec::value(
            "ready-tcp",
            "HOST:PORT",
            "ready when a TCP connection is accepted",
        ),
        OptSpec::value(
            "ready-unix",
            "PATH",
            "ready when the Unix socket accepts a connection",
        ),
        OptSpec::value(
            "ready-command",
            "SHELL-CMD",
            "ready when `sh -c SHELL-CMD` exits 0",
        ),
        OptSpec::value(
            "ready-timeout",
            "DURATION",
            "readiness fails after this long (default 60s)",
        ),
        OptSpec::repeated(
            "depends-on",
            "NAME=STATE",
            "start only once session NAME is ready, started or completed (NAME alone: ready)",
        ),
        OptSpec::value(
            "live-tcp",
            "HOST:PORT",
            "liveness: a TCP connection must be accepted",
        ),
        OptSpec::value(
            "live-unix",
            "PATH",
            "liveness: the Unix socket must accept a connection",
        ),
        OptSpec::value(
            "live-command",
            "SHELL-CMD",
            "liveness: `sh -c SHELL-CMD` must exit 0",
        ),
        OptSpec::value(
            "live-interval",
            "DURATION",
            "how often the liveness probe runs (default 10s)",
        ),
        OptSpec::value(
            "live-failures",
            "N",
            "failed probes in a row that stop it as unhealthy (default 3)",
        ),
        USER,
        GROUP,
        GROUPS,
        UMASK,
        DAEMON_ENV_FILE,
        RLIMIT,
        LOG,
        LOG_MAX_SIZE,
        LOG_KEEP,
        JSON_STARTED,
    ],
    exclusive: &[
        &["replace", "overlap", "reject"],
        &["clear-env", "daemon-env"],
        &[
            "ready-fd",
            "ready-output",
            "ready-tcp",
            "ready-unix",
            "ready-command",
        ],
        &["live-tcp", "live-unix", "live-command"],
    ],
    trailing: Some(TrailingSpec {
        name: "CMD",
        required: true,
        help: "the command and its arguments",
    }),
    examples: &[
        "run shell --pty -- bash -l",
        "run web --env PORT=8080 --grace 5s -- python -m http.server",
        "run job --env-file .env --unset-env DEBUG -- ./job.sh",
        "run web --user www-data --umask 027 --rlimit nofile=4096 -- ./serve",
        "run web --log /var/log/web.log --log-max-size 10M --log-keep 5 -- ./serve",
        "run web --depends-on db=ready --ready-tcp 127.0.0.1:8080 -- ./serve",
        "run --name=-x -- ./serve",
    ],
    ..CommandSpec::new(
        "run",
        "start CMD as a new generation of session NAME, in this command's environment and directory; waits until it has started (exit 127: program or directory not found, 126: not executable, 1: another failure, 75: not started within 15s, as it waits for a dependency or a predecessor); prints its generation first, also when it then fails",
    )
};

/// `genward ls`.
pub const LS: CommandSpec = CommandSpec {
    positionals: &[PosSpec::optional(
        "NAME",
        "show this session in full: its generations, latest ends and spec",
    )
    .or_option("name")],
    options: &[
        NAME_OPT,
        OptSpec::flag(
            "json",
            "print one JSON object per session, one per line, instead of the table (with NAME: that session's full object); never the protocol's raw reply (docs/cli-json.md)",
        ),
        OptSpec::value(
            "timeout",
            "DURATION",
            "give up, exit 1, if the daemon has not answered in full within DURATION (as shell completion does, so that a stuck daemon cannot hang a shell); 0 waits without limit, GENWARD_TIMEOUT's bound on each answer lifted too",
        ),
    ],
    examples: &["ls", "ls web", "ls --json", "ls --timeout 2s"],
    ..CommandSpec::new(
        "ls",
        "list sessions and their generations, or show one session in full",
    )
};

/// `genward attach`.
pub const ATTACH: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        OptSpec::value(
            "detach-key",
            "KEY",
            "key that detaches, leaving the terminal's modes as they were: ^\\ (default), C-a, ..., or none (the default when standard input is not a terminal: piped input is data); pressed twice quickly, it is sent through",
        ),
        OptSpec::value(
            "redraw",
            "HOW",
            "make a full-screen program redraw on attach: winch (default: SIGWINCH to the terminal's foreground group), ctrl-l (type Ctrl-L), or none",
        )
        .choices(&["winch", "ctrl-l", "none"]),
        OptSpec::flag(
            "read-only",
            "watch only: nothing typed is sent (but the detach key) and this terminal's size is not imposed",
        ),
    ],
    examples: &[
        "attach shell",
        "attach shell --detach-key C-a",
        "attach shell --read-only",
    ],
    ..CommandSpec::new("attach", "connect this terminal to a PTY session")
};

/// `genward logs`.
pub const LOGS: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        OptSpec::flag(
            "follow",
            "keep printing new output until the generation followed ends (the one running, or else the next to start); output dropped while this reader was behind is told on standard error, and what follows the gap starts a line of its own",
        )
        .short('f'),
        OptSpec::flag(
            "follow-restarts",
            "keep following the generations that come after it, until the session is removed",
        ),
        OptSpec::value("gen", "GEN", "output of this generation (an error if there is no such generation)"),
        OptSpec::value("lines", "N", "only the last N lines of what is retained").short('n'),
        OptSpec::value(
            "since",
            "WHEN",
            "output read since WHEN: a duration back (10m), @UNIX_SECONDS, or a time (2026-12-02T05:30:00Z)",
        ),
        OptSpec::flag(
            "json",
            "print JSON lines: each output frame (its bytes as data_b64), each dropped event and, when following, each start and end, the replayed ones too (docs/cli-json.md)",
        ),
        OptSpec::flag(
            "timestamps",
            "prefix each line with the time its first byte was read (UTC)",
        ),
        OptSpec::flag(
            "lossless",
            "with -f: never drop output; the process waits while this reader is behind (demoted after 30s of no reading)",
        ),
    ],
    examples: &[
        "logs web -f",
        "logs web -n 20 --timestamps",
        "logs web --since 10m",
        "logs build -f --lossless > build.log",
    ],
    // One generation's output ends with it: there is nothing after it to follow.
    exclusive: &[&["gen", "follow-restarts"]],
    ..CommandSpec::new("logs", "print a session's recent output")
};

/// `genward send`.
pub const SEND: CommandSpec = CommandSpec {
    positionals: &[
        NAME,
        PosSpec::optional(
            "TEXT",
            "text to write to the process's input (an empty TEXT writes nothing, but is refused as any write is when the session takes no input)",
        ),
    ],
    options: &[
        NAME_OPT,
        OptSpec::flag(
            "stdin",
            "send this command's standard input, all of it (waiting while the process's input queue is full)",
        ),
        OptSpec::flag("eof", "close the process's input"),
        IF_GEN,
    ],
    exclusive: &[&["TEXT", "stdin", "eof"]],
    examples: &["send job --stdin < input.txt", "send job --eof"],
    ..CommandSpec::new("send", "write to a session's input")
};

/// `genward stop`.
pub const STOP: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        OptSpec::value("grace", "DURATION", "time between SIGTERM and SIGKILL"),
        IF_GEN,
        OptSpec::flag(
            "json",
            "print the stopped generation's exited event (spawn_failed if it had not started) as one JSON object; nothing if nothing ran (docs/cli-json.md)",
        ),
    ],
    examples: &["stop web --grace 10s"],
    ..CommandSpec::new(
        "stop",
        "stop a session's process: SIGTERM, then SIGKILL after the grace",
    )
};

/// `genward kill`.
pub const KILL: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        OptSpec::value("signal", "SIGNAL", "signal to send (default TERM)")
            .short('s')
            .choices(SIGNALS),
        OptSpec::value(
            "scope",
            "WHO",
            "leader (default), foreground (the terminal's foreground job, as Ctrl-C would), or tree (every process of the generation)",
        )
        .choices(&["leader", "foreground", "tree"]),
        IF_GEN,
    ],
    examples: &["kill web -s HUP", "kill sh -s INT --scope foreground"],
    ..CommandSpec::new("kill", "send a signal to a session's process")
};

/// `genward restart`.
pub const RESTART: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        IF_GEN,
        JSON_STARTED,
        NO_WAIT,
        CWD,
        ENV,
        ENV_FILE,
        UNSET_ENV,
        CLEAR_ENV,
        DAEMON_ENV,
        USER,
        GROUP,
        GROUPS,
        UMASK,
        DAEMON_ENV_FILE,
        RLIMIT,
    ],
    exclusive: &[&["clear-env", "daemon-env"]],
    examples: &[
        "restart web",
        "restart web --env PORT=9090",
        "restart web --user www-data --rlimit nofile=8192",
        "restart web --no-wait",
    ],
    ..CommandSpec::new(
        "restart",
        "start a new generation with the same spec, or with changes to its directory, environment (which then starts from this command's, as run's does), user or limits; waits until it has started and exits as run does (127, 126, 1, 75), or with --no-wait returns at once as run does",
    )
};

/// `genward rm`.
pub const RM: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[NAME_OPT],
    examples: &["rm web", "rm -- -x"],
    ..CommandSpec::new("rm", "forget a session")
};

/// `genward wait`.
pub const WAIT: CommandSpec = CommandSpec {
    positionals: &[NAME],
    options: &[
        NAME_OPT,
        OptSpec::value("gen", "GEN", "wait for this generation"),
        OptSpec::flag(
            "ready",
            "wait until it is ready instead (exit 0), or say why it never will (exit 1)",
        ),
        OptSpec::flag(
            "json",
            "print the event that ended the wait as one JSON object: the generation's exited or spawn_failed (with --ready: ready or ready_failed, or the end that came first) (docs/cli-json.md)",
        ),
    ],
    examples: &[
        "wait build && echo done",
        "wait --ready db && genward run web ...",
    ],
    ..CommandSpec::new("wait", "wait for a generation to end; exit with its status")
};

/// `genward events`.
pub const EVENTS: CommandSpec = CommandSpec {
    options: &[JSON_EVENTS],
    examples: &["events --json"],
    ..CommandSpec::new("events", "print events as they happen")
};

/// `genward shutdown`.
pub const SHUTDOWN: CommandSpec = CommandSpec {
    examples: &["shutdown"],
    ..CommandSpec::new("shutdown", "stop every session and the daemon")
};

/// `genward reload`.
pub const RELOAD: CommandSpec = CommandSpec {
    options: &[
        OptSpec::flag(
            "dry-run",
            "only print what would change: sessions to start, stop, replace, and those left as they are",
        ),
        JSON_RESULT,
    ],
    examples: &["reload", "reload --dry-run"],
    ..CommandSpec::new(
        "reload",
        "read the daemon's --config again: start new sessions, stop removed ones, replace changed ones",
    )
};

/// `genward upgrade`.
pub const UPGRADE: CommandSpec = CommandSpec {
    options: &[
        OptSpec::value(
            "binary",
            "PATH",
            "run this program (default: the one the daemon was started as)",
        ),
        JSON_RESULT,
    ],
    examples: &["upgrade", "upgrade --binary /usr/local/bin/genward"],
    ..CommandSpec::new(
        "upgrade",
        "replace the daemon's program in place, keeping every session and connection",
    )
};

/// `genward completions`.
pub const COMPLETIONS: CommandSpec = CommandSpec {
    positionals: &[PosSpec::required("SHELL", "bash, zsh or fish")],
    examples: &[
        "completions bash > /etc/bash_completion.d/genward",
        "completions fish > ~/.config/fish/completions/genward.fish",
    ],
    ..CommandSpec::new(
        "completions",
        "print a shell completion script (bash, zsh or fish)",
    )
};

/// `genward man`.
pub const MAN: CommandSpec = CommandSpec {
    examples: &["man > genward.1"],
    ..CommandSpec::new("man", "print the manual page genward.1 (roff)")
};

/// Every command, in the order `genward --help` lists them.
pub const COMMANDS: &[CommandSpec] = &[
    DAEMON,
    RUN,
    LS,
    ATTACH,
    LOGS,
    SEND,
    STOP,
    KILL,
    RESTART,
    RM,
    WAIT,
    EVENTS,
    SHUTDOWN,
    RELOAD,
    UPGRADE,
    COMPLETIONS,
    MAN,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{command_help, find_command, global_help, parse, Outcome};

    #[test]
    fn every_spec_is_consistent_and_unique() {
        for (i, spec) in COMMANDS.iter().enumerate() {
            spec.check().unwrap();
            assert!(
                COMMANDS[..i].iter().all(|c| c.name != spec.name),
                "{} twice",
                spec.name
            );
        }
    }

    #[test]
    fn every_command_has_help_with_an_example() {
        for spec in COMMANDS {
            let help = match parse(spec, &["--help".to_string()]) {
                Ok(Outcome::Help(text)) => text,
                other => panic!("{}: {other:?}", spec.name),
            };
            assert_eq!(help, command_help(spec));
            assert!(
                help.contains(&format!("Usage: genward {}", spec.name)),
                "{help}"
            );
            assert!(
                help.contains(&format!("  genward {}", spec.examples[0])),
                "{help}"
            );
        }
        let top = global_help(COMMANDS);
        for spec in COMMANDS {
            assert!(
                top.contains(&format!("  {} ", spec.name)),
                "{} missing from\n{top}",
                spec.name
            );
        }
    }

    /// Splits an example like a shell would for the simple quoting examples use, stopping
    /// at `&&` or a redirection.
    fn shell_words(example: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word: Option<String> = None;
        let mut quoted = false;
        for c in example.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    word.get_or_insert_with(String::new);
                }
                ' ' if !quoted => words.extend(word.take()),
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        words.extend(word);
        words
            .into_iter()
            .take_while(|w| !["&&", "<", ">"].contains(&w.as_str()))
            .collect()
    }

    /// A session's name may start with `-` (`-x`): every command that takes one takes it
    /// as `--name=-x`, and (but `run`, whose `--` starts its command line) after `--`;
    /// given both ways it is refused, not guessed, and `-x` alone is answered with how.
    #[test]
    fn a_name_that_starts_with_a_dash_reaches_every_command() {
        let words = |w: &[&str]| -> Vec<String> { w.iter().map(|w| w.to_string()).collect() };
        let named: Vec<&CommandSpec> = COMMANDS
            .iter()
            .filter(|s| s.positionals.first().is_some_and(|p| p.name == "NAME"))
            .collect();
        assert!(named.len() >= 10, "{}", named.len());
        for spec in named {
            let cmd: &[&str] = if spec.trailing.is_some() {
                &["--", "true"]
            } else {
                &[]
            };
            let mut forms = vec![[&["--name=-x"][..], cmd].concat()];
            if spec.trailing.is_none() {
                forms.push(vec!["--", "-x"]);
            }
            for form in forms {
                match parse(spec, &words(&form)) {
                    Ok(Outcome::Args(m)) => assert_eq!(m.positional("NAME"), Some("-x")),
                    other => panic!("{} {form:?}: {other:?}", spec.name),
                }
            }
            // (`send web --name=-x` is TEXT `web` for session `-x`.)
            if spec.positionals.len() == 1 {
                let both = [&["web", "--name=-x"][..], cmd].concat();
                let e = parse(spec, &words(&both)).unwrap_err().to_string();
                assert!(
                    e.contains("`NAME` and `--name` cannot be used together"),
                    "{e}"
                );
            }
            let bare = [&["-x"][..], cmd].concat();
            let e = parse(spec, &words(&bare)).unwrap_err().to_string();
            assert!(e.contains("(did you mean `--name=-x`?)"), "{e}");
        }
    }

    #[test]
    fn examples_parse() {
        for spec in COMMANDS {
            for example in spec.examples {
                let mut words = shell_words(example);
                // Global options come before the command word.
                if words[0] == "--socket" {
                    words.drain(..2);
                }
                assert_eq!(words[0], spec.name);
                let found = find_command(COMMANDS, &words[0]).unwrap();
                assert!(
                    matches!(parse(found, &words[1..]), Ok(Outcome::Args(_))),
                    "example `{example}` does not parse: {:?}",
                    parse(found, &words[1..])
                );
            }
        }
    }
}
