//! Parser behaviour on the edge cases people actually type.

use super::*;

const RUN: CommandSpec = CommandSpec {
    positionals: &[PosSpec::required("NAME", "session")],
    options: &[
        OptSpec::flag("pty", "pty"),
        OptSpec::value("cwd", "DIR", "dir"),
        OptSpec::repeated("env", "K=V", "env").short('e'),
        OptSpec::flag("replace", "r"),
        OptSpec::flag("overlap", "o"),
        OptSpec::flag("reject", "j"),
        OptSpec::value("grace", "DURATION", "grace"),
        OptSpec::flag("follow", "f").short('f'),
        OptSpec::value("signal", "SIGNAL", "sig").short('s'),
    ],
    exclusive: &[&["replace", "overlap", "reject"]],
    trailing: Some(TrailingSpec {
        name: "CMD",
        required: true,
        help: "command",
    }),
    examples: &["run web -- bash"],
    ..CommandSpec::new("run", "start")
};

const SEND: CommandSpec = CommandSpec {
    positionals: &[
        PosSpec::required("NAME", "session"),
        PosSpec::optional("TEXT", "text"),
    ],
    options: &[OptSpec::flag("stdin", "in"), OptSpec::flag("eof", "eof")],
    exclusive: &[&["TEXT", "stdin", "eof"]],
    examples: &["send web hi"],
    ..CommandSpec::new("send", "send")
};

fn words(s: &[&str]) -> Vec<String> {
    s.iter().map(|w| w.to_string()).collect()
}

fn ok<'s>(spec: &'s CommandSpec, args: &[&str]) -> Matches<'s> {
    match parse(spec, &words(args)) {
        Ok(Outcome::Args(m)) => m,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn fails(spec: &CommandSpec, args: &[&str]) -> ArgError {
    match parse(spec, &words(args)) {
        Err(e) => e,
        other => panic!("{args:?} should fail: {other:?}"),
    }
}

#[test]
fn run_with_every_value_form() {
    let m = ok(
        &RUN,
        &[
            "web",
            "--pty",
            "--cwd",
            "/srv",
            "--grace=5s",
            "-s",
            "TERM",
            "--",
            "bash",
            "-l",
        ],
    );
    assert_eq!(m.positional("NAME"), Some("web"));
    assert!(m.flag("pty"));
    assert!(!m.flag("replace"));
    assert_eq!(m.value("cwd"), Some("/srv"));
    assert_eq!(m.value("grace"), Some("5s"));
    assert_eq!(m.value("signal"), Some("TERM"));
    assert_eq!(m.trailing(), Some(&words(&["bash", "-l"])[..]));
    assert_eq!(
        ok(&RUN, &["web", "-sKILL", "--", "x"]).value("signal"),
        Some("KILL")
    );
}

#[test]
fn trailing_is_verbatim_including_dashes_and_help() {
    let m = ok(
        &RUN,
        &["web", "--", "sh", "-c", "--pty", "--", "--help", "-h", "="],
    );
    assert_eq!(
        m.trailing(),
        Some(&words(&["sh", "-c", "--pty", "--", "--help", "-h", "="])[..])
    );
    assert!(!m.flag("pty"));
}

#[test]
fn dashdash_first() {
    let e = fails(&RUN, &["--", "bash"]);
    assert_eq!(e.kind, ArgErrorKind::MissingPositional { name: "NAME" });
    // Without a trailing spec, `--` just ends options.
    let m = ok(&SEND, &["--", "web", "--eof"]);
    assert_eq!(m.positionals(), &words(&["web", "--eof"])[..]);
    assert!(!m.flag("eof"));
}

#[test]
fn dashdash_inside_values() {
    let m = ok(&RUN, &["web", "--cwd=--", "--env=A--B", "-e--", "--", "x"]);
    assert_eq!(m.value("cwd"), Some("--"));
    assert_eq!(m.values("env"), vec!["A--B", "--"]);
    let e = fails(&RUN, &["web", "--cwd", "--", "x"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::MissingValue {
            option: "--cwd".into(),
            meta: "DIR",
            next: None
        }
    );
}

#[test]
fn equals_with_empty_value_is_an_empty_value() {
    let m = ok(&RUN, &["web", "--grace=", "--env=", "--", "x"]);
    assert_eq!(m.value("grace"), Some(""));
    assert_eq!(m.values("env"), vec![""]);
    // But a path (`DIR`, `FILE`, `PATH`) is never empty: that is the option's error,
    // in either form, rather than the current directory or a raw error later.
    for args in [
        &["web", "--cwd=", "--", "x"][..],
        &["web", "--cwd", "", "--", "x"],
    ] {
        assert_eq!(
            fails(&RUN, args).to_string(),
            "genward run: bad value `` for `--cwd`: needs the path of a directory; see `genward run --help`"
        );
    }
    // Only the first `=` splits.
    assert_eq!(
        ok(&RUN, &["web", "--env=K=V=W", "--", "x"]).values("env"),
        vec!["K=V=W"]
    );
}

#[test]
fn repeated_options_keep_order_and_single_ones_refuse_twice() {
    let m = ok(
        &RUN,
        &[
            "web",
            "--env",
            "A=1",
            "-e",
            "B=2",
            "--env=C=3",
            "-eD=4",
            "--",
            "x",
        ],
    );
    assert_eq!(m.values("env"), vec!["A=1", "B=2", "C=3", "D=4"]);
    assert!(m.values("cwd").is_empty());
    let e = fails(&RUN, &["web", "--grace", "1s", "--grace=2s", "--", "x"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::Repeated {
            option: "--grace".into()
        }
    );
    assert!(ok(&RUN, &["web", "--pty", "--pty", "--", "x"]).flag("pty"));
}

#[test]
fn options_may_follow_positionals() {
    let m = ok(&RUN, &["--pty", "web", "--grace", "1s", "--", "x"]);
    assert_eq!(
        (m.positional("NAME"), m.value("grace")),
        (Some("web"), Some("1s"))
    );
    let m = ok(&SEND, &["web", "hello", "--"]);
    assert_eq!(m.positional("TEXT"), Some("hello"));
}

#[test]
fn lone_dash_is_a_positional_and_a_value() {
    let m = ok(&SEND, &["web", "-"]);
    assert_eq!(m.positional("TEXT"), Some("-"));
    assert_eq!(
        ok(&RUN, &["web", "--cwd", "-", "--", "x"]).value("cwd"),
        Some("-")
    );
}

#[test]
fn unicode_everywhere() {
    let m = ok(
        &RUN,
        &["café", "--env", "NAMÉ=日本", "--", "écho", "ünïcode"],
    );
    assert_eq!(m.positional("NAME"), Some("café"));
    assert_eq!(m.values("env"), vec!["NAMÉ=日本"]);
    let e = fails(&RUN, &["web", "--énv=1", "--", "x"]);
    assert!(matches!(e.kind, ArgErrorKind::UnknownOption { ref option, .. } if option == "--énv"));
    let e = fails(&RUN, &["web", "-é", "--", "x"]);
    assert!(matches!(e.kind, ArgErrorKind::UnknownOption { ref option, .. } if option == "-é"));
    // A value attached to a short option may start with a multi-byte character.
    assert_eq!(
        ok(&RUN, &["web", "-s日本", "--", "x"]).value("signal"),
        Some("日本")
    );
}

#[test]
fn unknown_option_names_command_and_help() {
    let e = fails(&RUN, &["web", "--gracee", "5s", "--", "x"]);
    assert_eq!(
        e.to_string(),
        "genward run: unknown option `--gracee` (did you mean `--grace`?); see `genward run --help`"
    );
    let e = fails(&RUN, &["web", "--zzz", "--", "x"]);
    assert_eq!(
        e.to_string(),
        "genward run: unknown option `--zzz`; see `genward run --help`"
    );
    let e = fails(&RUN, &["web", "-9", "--", "x"]);
    assert!(
        e.to_string()
            .contains("unknown option `-9` (did you mean `-s 9`?)"),
        "{e}"
    );
    let e = fails(&RUN, &["web", "-TERM", "--", "x"]);
    assert!(e.to_string().contains("(did you mean `-s TERM`?)"), "{e}");
    let e = fails(&SEND, &["web", "-9"]);
    assert!(
        matches!(
            e.kind,
            ArgErrorKind::UnknownOption {
                suggestion: None,
                ..
            }
        ),
        "{e}"
    );
    let e = fails(&RUN, &["web", "-grace", "1s", "--", "x"]);
    assert!(
        e.to_string()
            .contains("unknown option `-g` (did you mean `--grace`?)"),
        "{e}"
    );
}

#[test]
fn missing_value_explains_dash_values() {
    let e = fails(&RUN, &["web", "--grace"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::MissingValue {
            option: "--grace".into(),
            meta: "DURATION",
            next: None
        }
    );
    let e = fails(&RUN, &["web", "--grace", "-5s", "--", "x"]);
    assert!(e.to_string().contains("write `--grace=-5s`"), "{e}");
    let e = fails(&RUN, &["web", "-s", "--pty", "--", "x"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::MissingValue {
            option: "-s".into(),
            meta: "SIGNAL",
            next: Some("--pty".into())
        }
    );
}

#[test]
fn flag_with_value_is_refused() {
    let e = fails(&RUN, &["web", "--pty=1", "--", "x"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::FlagWithValue {
            option: "--pty".into()
        }
    );
    assert!(
        e.to_string()
            .contains("`--pty` is a flag and takes no value"),
        "{e}"
    );
    assert_eq!(
        fails(&RUN, &["web", "--pty=", "--", "x"]).kind,
        ArgErrorKind::FlagWithValue {
            option: "--pty".into()
        }
    );
}

#[test]
fn short_clusters() {
    let m = ok(&RUN, &["web", "-fsINT", "--", "x"]);
    assert!(m.flag("follow"));
    assert_eq!(m.value("signal"), Some("INT"));
    let m = ok(&RUN, &["web", "-fs", "HUP", "--", "x"]);
    assert_eq!(m.value("signal"), Some("HUP"));
    let e = fails(&RUN, &["web", "-fx", "--", "x"]);
    assert!(matches!(e.kind, ArgErrorKind::UnknownOption { ref option, .. } if option == "-x"));
}

#[test]
fn positional_errors() {
    let e = fails(&RUN, &["web", "python", "app.py"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::UnexpectedArgument {
            arg: "python".into(),
            trailing: Some("CMD")
        }
    );
    assert!(e.to_string().contains("put the CMD after `--`"), "{e}");
    let e = fails(&SEND, &["web", "a", "b"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::UnexpectedArgument {
            arg: "b".into(),
            trailing: None
        }
    );
    assert_eq!(
        fails(&SEND, &[]).kind,
        ArgErrorKind::MissingPositional { name: "NAME" }
    );
    assert_eq!(
        fails(&RUN, &["web"]).kind,
        ArgErrorKind::MissingTrailing { name: "CMD" }
    );
    assert_eq!(
        fails(&RUN, &["web", "--"]).kind,
        ArgErrorKind::MissingTrailing { name: "CMD" }
    );
}

#[test]
fn exclusive_groups_of_options_and_positionals() {
    let e = fails(&RUN, &["web", "--reject", "--replace", "--", "x"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::Exclusive {
            first: "--replace".into(),
            second: "--reject".into()
        }
    );
    assert!(e.to_string().contains("cannot be used together"), "{e}");
    assert!(ok(&RUN, &["web", "--overlap", "--", "x"]).flag("overlap"));
    let e = fails(&SEND, &["web", "hi", "--eof"]);
    assert_eq!(
        e.kind,
        ArgErrorKind::Exclusive {
            first: "TEXT".into(),
            second: "--eof".into()
        }
    );
    assert!(ok(&SEND, &["web", "--stdin"]).flag("stdin"));
    // The real `logs`: one generation's output has nothing after it to follow.
    let e = fails(
        &crate::cli::commands::LOGS,
        &["web", "--gen", "4", "--follow-restarts"],
    );
    assert!(matches!(e.kind, ArgErrorKind::Exclusive { .. }), "{e}");
}

#[test]
fn help_wins_before_dashdash_only() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["web", "--bogus", "--help"],
        &["--pty=1", "-h", "--", "x"],
    ] {
        assert!(
            matches!(parse(&RUN, &words(args)), Ok(Outcome::Help(_))),
            "{args:?}"
        );
    }
    assert_eq!(
        fails(&RUN, &["--help=1"]).kind,
        ArgErrorKind::FlagWithValue {
            option: "--help".into()
        }
    );
    let m = ok(&RUN, &["web", "--", "--help"]);
    assert_eq!(m.trailing(), Some(&words(&["--help"])[..]));
    // A value that happens to be `-h` is still refused, so it never hides help.
    let help = command_help(&RUN);
    assert!(
        help.starts_with("genward run: start\n\nUsage: genward run [OPTIONS] NAME -- CMD...\n"),
        "{help}"
    );
    assert!(
        help.contains("  -e, --env K=V") && help.contains("(repeatable)"),
        "{help}"
    );
    assert!(
        help.contains("At most one of: --replace, --overlap, --reject"),
        "{help}"
    );
    assert!(
        help.contains("Example:\n  genward run web -- bash\n"),
        "{help}"
    );
    assert!(help.lines().all(|l| !l.ends_with(' ')), "{help}");
    assert!(command_help(&SEND).contains("Usage: genward send [OPTIONS] NAME [TEXT]\n"));
}

#[test]
fn value_with_names_option_and_value() {
    let m = ok(&RUN, &["web", "--grace", "5x", "--", "x"]);
    let e = m
        .value_with("grace", crate::proto::duration::parse_duration)
        .unwrap_err();
    assert_eq!(e.command, "genward run");
    assert!(
        e.to_string()
            .starts_with("genward run: bad value `5x` for `--grace`: unknown unit `x`"),
        "{e}"
    );
    let m = ok(&RUN, &["web", "--grace", "1m", "--", "x"]);
    assert_eq!(
        m.value_with("grace", crate::proto::duration::parse_duration),
        Ok(Some(std::time::Duration::from_secs(60)))
    );
    assert_eq!(m.value_with("cwd", |s| s.parse::<u8>()), Ok(None));
}

#[test]
fn non_utf8_arguments_are_refused_with_their_position() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let args = vec![OsString::from("run"), OsString::from_vec(vec![b'a', 0xff])];
    let e = args_to_strings(args).unwrap_err();
    assert!(
        matches!(e.kind, ArgErrorKind::NotUnicode { position: 2, .. }),
        "{e:?}"
    );
    assert_eq!(
        args_to_strings(vec![OsString::from("ls")]),
        Ok(words(&["ls"]))
    );
}

#[test]
fn global_options_before_the_command() {
    let g = parse_global(&words(&["--socket", "/tmp/s", "run", "web", "--help"])).unwrap();
    assert_eq!(g.socket.as_deref(), Some("/tmp/s"));
    assert_eq!(g.command.as_deref(), Some("run"));
    assert_eq!(g.rest, words(&["web", "--help"]));
    assert!(!g.help);
    let g = parse_global(&words(&["--socket=/s", "-V"])).unwrap();
    assert!(g.version && g.command.is_none() && g.socket.as_deref() == Some("/s"));
    assert!(parse_global(&words(&["--help"])).unwrap().help);
    assert_eq!(parse_global(&[]).unwrap(), Global::default());
    let g = parse_global(&words(&["--", "--weird"])).unwrap();
    assert_eq!(g.command.as_deref(), Some("--weird"));
}

#[test]
fn socket_and_version_after_the_command() {
    let g = parse_global(&words(&["ls", "--socket", "/s", "web"])).unwrap();
    assert_eq!(g.socket.as_deref(), Some("/s"));
    assert_eq!(g.command.as_deref(), Some("ls"));
    assert_eq!(g.rest, words(&["web"]));
    let g = parse_global(&words(&["stop", "web", "--socket=/s", "--grace", "1s"])).unwrap();
    assert_eq!(g.socket.as_deref(), Some("/s"));
    assert_eq!(g.rest, words(&["web", "--grace", "1s"]));
    let g = parse_global(&words(&["ls", "--version"])).unwrap();
    assert!(g.version && g.rest.is_empty());
    // After `--` everything is the command's, verbatim.
    let g = parse_global(&words(&["run", "x", "--", "cat", "--socket", "/s"])).unwrap();
    assert_eq!(g.socket, None);
    assert_eq!(g.rest, words(&["x", "--", "cat", "--socket", "/s"]));
    // Once only, wherever it is given; and it needs its value.
    assert!(matches!(
        parse_global(&words(&["--socket", "/a", "ls", "--socket", "/b"]))
            .unwrap_err()
            .kind,
        ArgErrorKind::Repeated { .. }
    ));
    assert!(matches!(
        parse_global(&words(&["ls", "--socket"])).unwrap_err().kind,
        ArgErrorKind::MissingValue { .. }
    ));
    assert!(matches!(
        parse_global(&words(&["ls", "--socket", "--json"]))
            .unwrap_err()
            .kind,
        ArgErrorKind::MissingValue { .. }
    ));
    assert!(matches!(
        parse_global(&words(&["ls", "--socket="])).unwrap_err().kind,
        ArgErrorKind::InvalidValue { .. }
    ));
}

#[test]
fn no_command_has_an_option_named_like_a_global_one() {
    for spec in crate::cli::commands::COMMANDS {
        for name in GLOBAL_AFTER_COMMAND {
            assert!(spec.option(name).is_none(), "{}: --{name}", spec.name);
        }
    }
}

#[test]
fn global_errors() {
    let e = parse_global(&words(&["--sockt", "/s", "ls"])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "genward: unknown option `--sockt` (did you mean `--socket`?); see `genward --help`"
    );
    assert!(matches!(
        parse_global(&words(&["--socket"])).unwrap_err().kind,
        ArgErrorKind::MissingValue { .. }
    ));
    assert!(matches!(
        parse_global(&words(&["--socket", "--help"]))
            .unwrap_err()
            .kind,
        ArgErrorKind::MissingValue { .. }
    ));
    assert!(matches!(
        parse_global(&words(&["--socket="])).unwrap_err().kind,
        ArgErrorKind::InvalidValue { .. }
    ));
    let e = find_command(&[RUN, SEND], "rnu").unwrap_err();
    assert_eq!(
        e.to_string(),
        "genward: unknown command `rnu` (did you mean `run`?); see `genward --help`"
    );
    assert_eq!(find_command(&[RUN, SEND], "send").unwrap().name, "send");
}

#[test]
fn spec_check_catches_mistakes() {
    RUN.check().unwrap();
    SEND.check().unwrap();
    const HELP_CLASH: CommandSpec = CommandSpec {
        options: &[OptSpec::flag("help", "")],
        ..RUN
    };
    assert!(HELP_CLASH.check().is_err());
    let bad = CommandSpec {
        exclusive: &[&["nope"]],
        ..RUN
    };
    assert!(bad.check().is_err());
    const OPTIONAL_FIRST: CommandSpec = CommandSpec {
        positionals: &[PosSpec::optional("A", ""), PosSpec::required("B", "")],
        ..RUN
    };
    assert!(OPTIONAL_FIRST.check().is_err());
    let bad = CommandSpec {
        examples: &[],
        ..RUN
    };
    assert!(bad.check().is_err());
}

/// Every sequence of up to four words from a set chosen to hit each branch: the parser
/// never panics, and every outcome is consistent with the words given.
#[test]
fn small_argument_lists_exhaustively() {
    let tokens = [
        "web", "--", "-", "--pty", "--pty=1", "--grace", "--grace=", "-s", "-sX", "-fs", "-é",
        "--env", "=", "-h", "x y", "",
    ];
    let mut lists: Vec<Vec<String>> = vec![Vec::new()];
    let mut start = 0;
    for _ in 0..4 {
        let end = lists.len();
        for i in start..end {
            for t in tokens {
                let mut next = lists[i].clone();
                next.push(t.to_string());
                lists.push(next);
            }
        }
        start = end;
    }
    let mut accepted = 0;
    for args in &lists {
        let dashdash = args.iter().position(|a| a == "--");
        let before = &args[..dashdash.unwrap_or(args.len())];
        match parse(&RUN, args) {
            Ok(Outcome::Help(_)) => assert!(before.iter().any(|a| a == "-h"), "{args:?}"),
            Ok(Outcome::Args(m)) => {
                accepted += 1;
                let after = &args[dashdash.expect("CMD requires `--`") + 1..];
                assert_eq!(m.trailing(), Some(after), "{args:?}");
                assert!(
                    !after.is_empty() && m.positional("NAME").is_some(),
                    "{args:?}"
                );
                assert_eq!(m.positionals().len(), 1, "{args:?}");
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.starts_with("genward run: ") && msg.ends_with("see `genward run --help`"),
                    "{msg}"
                );
            }
        }
    }
    assert!(accepted > 100, "only {accepted} accepted");
}

#[test]
fn global_socket_given_once_and_non_empty() {
    let e = parse_global(&words(&["--socket", "", "ls"])).unwrap_err();
    assert!(matches!(e.kind, ArgErrorKind::InvalidValue { .. }), "{e}");
    let e = parse_global(&words(&["--socket=/a", "--socket", "/b", "ls"])).unwrap_err();
    assert_eq!(
        e.kind,
        ArgErrorKind::Repeated {
            option: "--socket".into()
        }
    );
    let e = parse_global(&words(&["--pty", "run"])).unwrap_err();
    assert!(matches!(e.kind, ArgErrorKind::UnknownOption { ref option, .. } if option == "--pty"));
    let e = parse_global(&words(&["--socket", "--help"])).unwrap_err();
    assert!(e.to_string().contains("write `--socket=--help`"), "{e}");
}
