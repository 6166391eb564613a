//! What every command shares: `--help` with an example, `--version`, the socket from
//! `--socket` or `GENWARD_SOCKET`, and errors that say what to do.

mod util;

use util::cli::{genward, gw, gw_ok, run_cmd};
use util::daemon::Daemon;

const CLIENT_COMMANDS: &[&str] = &[
    "run", "ls", "attach", "logs", "send", "stop", "kill", "restart", "rm", "wait", "events",
    "shutdown", "upgrade",
];

#[test]
fn every_command_has_help_with_an_example() {
    for name in CLIENT_COMMANDS {
        let out = run_cmd(genward(&[name, "--help"]), b"");
        assert_eq!(out.code, Some(0), "{name}: {out:?}");
        assert!(
            out.stdout.contains(&format!("Usage: genward {name}")),
            "{name}: {}",
            out.stdout
        );
        assert!(
            out.stdout.contains(&format!("\n  genward {name}")),
            "{name} has no example: {}",
            out.stdout
        );
    }
    let top = run_cmd(genward(&["--help"]), b"").ok();
    for name in CLIENT_COMMANDS {
        assert!(top.contains(&format!("  {name} ")), "{name} missing: {top}");
    }
}

#[test]
fn version_prints_the_package_version() {
    let out = run_cmd(genward(&["--version"]), b"").ok();
    assert_eq!(out, format!("genward {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn no_daemon_says_how_to_start_one() {
    let dir = std::env::temp_dir().join(format!("gw-nodaemon-{}", std::process::id()));
    let socket = dir.join("absent.sock");
    for args in [
        vec!["ls"],
        vec!["run", "x", "--", "true"],
        vec!["attach", "x"],
    ] {
        let mut full = vec!["--socket", socket.to_str().unwrap()];
        full.extend(args.iter().copied());
        let out = run_cmd(genward(&full), b"");
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert_eq!(
            out.stderr,
            format!(
                "genward: no daemon at {}: start one with `genward daemon` (or point --socket / GENWARD_SOCKET at a running one)\n",
                socket.display()
            )
        );
    }
}

#[test]
fn the_socket_comes_from_the_environment_too() {
    let d = Daemon::start("cli-env-socket", &[]);
    let mut cmd = genward(&["run", "e", "--", "true"]);
    cmd.env("GENWARD_SOCKET", &d.socket);
    let gen = run_cmd(cmd, b"").ok();
    assert!(gen.trim().parse::<u64>().is_ok(), "{gen}");
    // --socket wins over the environment.
    let mut cmd = genward(&["--socket", d.socket.to_str().unwrap(), "ls"]);
    cmd.env("GENWARD_SOCKET", d.dir.join("elsewhere.sock"));
    assert!(run_cmd(cmd, b"").ok().contains("\ne "));
}

#[test]
fn bad_arguments_are_usage_errors_that_change_nothing() {
    let d = Daemon::start("cli-usage", &[]);
    for (args, needle) in [
        (vec!["run", "a/b", "--", "true"], "NAME"),
        (vec!["run", "ok"], "CMD"),
        (vec!["run", "ok", "--env", "X", "--", "true"], "NAME=VALUE"),
        (
            vec!["run", "ok", "--grace", "soon", "--", "true"],
            "--grace",
        ),
        (vec!["wait", "ok", "--gen", "three"], "generation number"),
        (vec!["stop", "ok", "--if-gen=-1"], "--if-gen"),
        (vec!["attach", "ok", "--detach-key", "F1"], "detach key"),
    ] {
        let out = gw(&d, &args);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {out:?}");
    }
    assert_eq!(
        gw(&d, &["ls"]).ok(),
        "SESSION  GEN  PID  TREE  STATE  RESTARTS  UPTIME  LAST EXIT\n"
    );
}

/// A value only the daemon's rules refuse is a usage error too (exit 2), naming the
/// option typed, never the protocol field it fills; nothing is started.
#[test]
fn values_the_daemon_refuses_are_usage_errors_naming_the_option() {
    let d = Daemon::start("cli-usage-daemon-rules", &[]);
    let many_groups = (1..=300)
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let long_path = format!("/tmp/{}", "s".repeat(200));
    let run = |opts: &[&str]| -> Vec<String> {
        let mut words = vec!["run", "ok"];
        words.extend(opts);
        words.extend(["--", "true"]);
        words.into_iter().map(String::from).collect()
    };
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (
            run(&["--log", "/tmp/l.log", "--log-max-size", "1K"]),
            "--log-max-size",
            "log.max_size",
        ),
        (
            run(&["--log", "/tmp/l.log", "--log-keep", "5000"]),
            "--log-keep",
            "log.keep",
        ),
        (run(&["--log", "logs/"]), "--log", "log.path"),
        (run(&["--ready-fd", "2"]), "--ready-fd", "ready.fd"),
        (run(&["--ready-output="]), "--ready-output", "ready.output"),
        (run(&["--ready-tcp", "nohost"]), "--ready-tcp", "ready.tcp"),
        (
            run(&["--ready-unix", &long_path]),
            "--ready-unix",
            "ready.unix",
        ),
        (
            run(&["--ready-output", "up", "--ready-timeout", "0s"]),
            "--ready-timeout",
            "ready.timeout",
        ),
        (
            run(&["--live-tcp", "127.0.0.1:1", "--live-interval", "1ms"]),
            "--live-interval",
            "live.interval",
        ),
        (
            run(&["--live-tcp", "127.0.0.1:1", "--live-failures", "0"]),
            "--live-failures",
            "live.failures",
        ),
        (
            run(&["--live-unix", &long_path]),
            "--live-unix",
            "live.unix",
        ),
        (run(&["--depends-on", "ok"]), "--depends-on", "depends_on"),
        (
            run(&["--depends-on", "db=ready", "--depends-on", "a/b=ready"]),
            "--depends-on `a/b=ready`",
            "depends_on",
        ),
        (run(&["--groups", &many_groups]), "--groups", "groups:"),
        (
            vec![
                "restart".into(),
                "r".into(),
                "--groups".into(),
                many_groups.clone(),
            ],
            "--groups",
            "groups:",
        ),
    ];
    let r = gw_ok(&d, &["run", "r", "--", "sleep", "600"]);
    for (args, option, field) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = gw(&d, &args);
        let shown: Vec<&str> = args.iter().map(|a| &a[..a.len().min(40)]).collect();
        assert_eq!(out.code, Some(2), "{shown:?}: {out:?}");
        let (opt, value) = option.split_once(' ').unwrap_or((option, ""));
        assert!(
            out.stderr.contains(&format!("`{opt}`")),
            "{shown:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(value.trim_matches('`')),
            "{shown:?}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains(field), "{shown:?}: {}", out.stderr);
    }
    // Nothing was started: `ok` does not exist, `r` runs its first generation still.
    let table = gw(&d, &["ls"]).ok();
    assert!(!table.contains("\nok "), "{table}");
    let line = table.lines().find(|l| l.starts_with("r ")).unwrap();
    assert!(
        line.contains(&format!(" {r} ")) && line.contains("running"),
        "{table}"
    );
}

#[test]
fn without_socket_options_the_default_state_dir_is_used() {
    let dir = std::env::temp_dir().join(format!("gw-xdg-{}", std::process::id()));
    let mut cmd = genward(&["ls"]);
    cmd.env("XDG_RUNTIME_DIR", &dir)
        .env_remove("GENWARD_STATE_DIR");
    let out = run_cmd(cmd, b"");
    // As root the default is /run/genward, where a daemon may legitimately be running.
    if rustix::process::geteuid().is_root() {
        if out.code == Some(0) {
            println!("SKIP without_socket_options_the_default_state_dir_is_used: a daemon runs at /run/genward");
            return;
        }
        assert!(
            out.stderr
                .contains("no daemon at /run/genward/genward.sock"),
            "{out:?}"
        );
    } else {
        let expected = format!(
            "no daemon at {}",
            dir.join("genward/genward.sock").display()
        );
        assert!(out.stderr.contains(&expected), "{out:?}");
    }
    assert_eq!(out.code, Some(1), "{out:?}");
}

/// Values refused before any daemon is asked: a number with a sign (`u64::from_str`
/// takes `+5`), an empty `--binary`, and a `--ready-fd` out of range in words; control
/// characters of a value are escaped in the message.
#[test]
fn malformed_values_are_usage_errors_said_plainly() {
    let refused = |args: &[&str]| {
        let mut cmd = util::cli::genward(&["--socket", "/nonexistent/genward.sock"]);
        cmd.args(args);
        let out = util::cli::run_cmd(cmd, b"");
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        out.stderr
    };
    for args in [
        &["kill", "x", "--if-gen", "+5"][..],
        &["logs", "x", "-n", "+3"],
        &["wait", "x", "--gen", "+1"],
    ] {
        let e = refused(args);
        assert!(e.contains("without a sign"), "{args:?}: {e}");
    }
    let e = refused(&["upgrade", "--binary", ""]);
    assert!(e.contains("--binary"), "{e}");
    let e = refused(&["run", "x", "--ready-fd", "2", "--", "true"]);
    assert!(
        e.contains("between 3 and 1023") && !e.contains("..="),
        "{e}"
    );
    let e = refused(&["run", "\u{1b}[2J", "--", "true"]);
    assert!(e.contains(r"\u{1b}[2J") && !e.contains('\u{1b}'), "{e}");
    let e = refused(&["logs", "x", "--since", "2026-02-30T00:00:00Z"]);
    assert!(e.contains("no such day"), "{e}");
}

/// A session's name may start with `-`: `run --name=-x -- CMD` starts it, and every
/// other command reaches it as `--name=-x` or after `--`.
#[test]
fn a_session_whose_name_starts_with_a_dash_is_reachable_by_every_command() {
    let d = Daemon::start("cli-dash-name", &[]);
    let gen = gw_ok(
        &d,
        &["run", "--name=-x", "--", "sh", "-c", "echo up; exec cat"],
    );
    let mut first = util::cli::Streaming::start(&d, &["logs", "-f", "--name=-x"]);
    first.until(|l| l == "up");
    // `-x` alone is an option to the parser: refused, saying how to name the session.
    let bare = gw(&d, &["stop", "-x"]);
    assert_eq!(bare.code, Some(2), "{bare:?}");
    assert!(bare.stderr.contains("`--name=-x`"), "{bare:?}");
    for form in [&["--name=-x"][..], &["--", "-x"]] {
        let ls = gw(&d, &[&["ls"][..], form].concat()).ok();
        assert!(
            ls.contains("-x") && ls.contains("running"),
            "{form:?}: {ls}"
        );
        assert_eq!(gw(&d, &[&["logs"][..], form].concat()).ok(), "up\n");
    }
    gw(&d, &["send", "--name=-x", "one\n"]).ok();
    gw(&d, &["send", "--", "-x", "two\n"]).ok();
    first.until(|l| l == "two");
    let mut follow = util::cli::Streaming::start(&d, &["logs", "-f", "--", "-x"]);
    follow.until(|l| l == "two");
    gw(&d, &["kill", "-s", "CONT", "--", "-x"]).ok();
    let next = gw_ok(&d, &["restart", "--name=-x"]);
    assert!(next.parse::<u64>().unwrap() > gen.parse::<u64>().unwrap());
    assert_eq!(follow.finish(), Some(0));
    assert_eq!(first.finish(), Some(0));
    gw(&d, &["send", "--name=-x", "--eof"]).ok();
    assert_eq!(gw(&d, &["wait", "--", "-x"]).code, Some(0));
    gw(&d, &["run", "--name=-x", "--", "cat"]).ok();
    gw(&d, &["stop", "--name=-x"]).ok();
    gw(&d, &["rm", "--", "-x"]).ok();
    assert!(!gw(&d, &["ls"]).ok().contains("-x"));
}

/// `genward` alone is a usage error like any other: status 2, and what it says (the
/// help, which lists the commands) on standard error, none of it on standard output.
#[test]
fn no_command_is_a_usage_error_on_standard_error() {
    for args in [&[][..], &["--socket", "/nonexistent/genward.sock"]] {
        let out = run_cmd(genward(args), b"");
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert_eq!(out.stdout, "", "{args:?}: {out:?}");
        assert!(out.stderr.contains("Commands:"), "{args:?}: {out:?}");
    }
    // Asked for, the help is the answer: standard output, status 0.
    let help = run_cmd(genward(&["--help"]), b"").ok();
    assert!(help.contains("Commands:"), "{help}");
}

/// An empty value of an option that takes a path (`PATH`, `DIR`, `FILE`), of every
/// command, is a usage error naming the option, as `--socket ""` is — never read as the
/// current directory, never a raw error from the system. Nothing is asked of a daemon.
#[test]
fn an_empty_path_is_a_usage_error_naming_the_option() {
    use genward::cli::commands::COMMANDS;
    let mut checked = Vec::new();
    for spec in COMMANDS {
        for o in spec.options {
            if !matches!(o.meta(), Some("PATH" | "DIR" | "FILE")) {
                continue;
            }
            let option = format!("--{}", o.long);
            for form in [
                vec![format!("{option}=")],
                vec![option.clone(), String::new()],
            ] {
                let mut args = vec![spec.name.to_string()];
                args.extend(
                    spec.positionals
                        .iter()
                        .filter(|p| p.required)
                        .map(|_| "x".into()),
                );
                args.extend(form);
                if spec.trailing.is_some_and(|t| t.required) {
                    args.extend(["--".into(), "true".into()]);
                }
                let words: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut cmd = genward(&["--socket", "/nonexistent/genward.sock"]);
                cmd.args(&words).env_remove("GENWARD_STATE_DIR");
                let out = run_cmd(cmd, b"");
                assert_eq!(out.code, Some(2), "{words:?}: {out:?}");
                let said = format!("bad value `` for `{option}`: needs ");
                assert!(out.stderr.contains(&said), "{words:?}: {out:?}");
            }
            checked.push(format!("{} {option}", spec.name));
        }
    }
    // The ones the probe found (`daemon --state-dir ""`: a raw error, status 1; `run
    // --cwd ""`: the current directory) are among them.
    for must in [
        "daemon --state-dir",
        "daemon --config",
        "run --cwd",
        "restart --cwd",
    ] {
        assert!(checked.iter().any(|c| c == must), "{must}: {checked:?}");
    }
    let out = run_cmd(genward(&["--socket", "", "ls"]), b"");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("`--socket`"), "{out:?}");
}

/// The variables genward reads are in `genward --help`, where the errors about them
/// (`GENWARD_TIMEOUT=abc`) point, and in the manual page.
#[test]
fn the_environment_is_in_the_help() {
    let help = run_cmd(genward(&["--help"]), b"").ok();
    let man = run_cmd(genward(&["man"]), b"").ok();
    for var in ["GENWARD_SOCKET", "GENWARD_TIMEOUT", "GENWARD_STATE_DIR"] {
        assert!(
            help.lines().any(|l| l.starts_with(&format!("  {var} "))),
            "{var}: {help}"
        );
        assert!(man.contains(&format!(".B {var}\n")), "{var}");
    }
    let mut cmd = genward(&["ls"]);
    cmd.env("GENWARD_TIMEOUT", "abc");
    let out = run_cmd(cmd, b"");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("see `genward --help`"), "{out:?}");
}

/// `--json` help says what cli-json.md says is printed: the command's own JSON lines,
/// never "the daemon's answer" (the protocol's raw reply, which no command prints).
#[test]
fn json_help_says_what_is_printed() {
    use genward::cli::commands::COMMANDS;
    for spec in COMMANDS.iter().filter(|s| s.option("json").is_some()) {
        let help = run_cmd(genward(&[spec.name, "--help"]), b"").ok();
        let line = help.lines().find(|l| l.contains("--json")).unwrap();
        assert!(!line.contains("answer"), "{}: {line}", spec.name);
        assert!(line.contains("docs/cli-json.md"), "{}: {line}", spec.name);
    }
    let ls = run_cmd(genward(&["ls", "--help"]), b"").ok();
    assert!(
        ls.contains("one JSON object per session, one per line"),
        "{ls}"
    );
}
