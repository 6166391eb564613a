//! `genward run` gives the child this command's environment (or the daemon's, or an
//! empty one, edited by `--env`, `--env-file` and `--unset-env`), and waits until the
//! program started: a program that cannot start fails `run` with the shell's status and
//! the daemon's reason; `--no-wait` prints the generation at once, as before.

mod util;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use genward::testkit::scratch::ScratchDir;
use util::cli::{command, gw, run_cmd};
use util::daemon::Daemon;

/// Runs `cmd` (a `genward run`), which must succeed; waits for the generation's end and
/// returns what it printed.
#[track_caller]
fn output_of(d: &Daemon, session: &str, cmd: Command) -> String {
    let out = run_cmd(cmd, b"");
    assert_eq!(out.code, Some(0), "{out:?}");
    let gen = out.stdout.trim().to_string();
    assert_eq!(gw(d, &["wait", session, "--gen", &gen]).code, Some(0));
    gw(d, &["logs", session, "--gen", &gen]).ok()
}

/// `genward run NAME ARGS... -- sh -c 'echo "[$A] [$B]"'`.
fn echo_ab(d: &Daemon, session: &str, args: &[&str]) -> Command {
    let mut words = vec!["run", session];
    words.extend_from_slice(args);
    words.extend_from_slice(&["--", "sh", "-c", r#"echo "[$A] [$B]""#]);
    command(d, &words)
}

#[test]
fn a_program_on_the_callers_path_runs() {
    let d = Daemon::start("cli-env-path", &[]);
    let dir = ScratchDir::new("cli-env-path");
    let tool = dir.path().join("genward-test-tool");
    std::fs::write(&tool, "#!/bin/sh\necho tool ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = command(&d, &["run", "vt", "--", "genward-test-tool"]);
    cmd.env("PATH", &path);
    assert_eq!(output_of(&d, "vt", cmd), "tool ran\n");

    // Not on the daemon's PATH: with its environment the program is not found.
    let mut cmd = command(
        &d,
        &["run", "vt", "--daemon-env", "--", "genward-test-tool"],
    );
    cmd.env("PATH", &path);
    let out = run_cmd(cmd, b"");
    assert_eq!(out.code, Some(127), "{out:?}");
}

#[test]
fn a_program_that_cannot_start_fails_run_with_the_shells_status() {
    let d = Daemon::start("cli-env-fail", &[]);
    let out = gw(&d, &["run", "m", "--", "genward-no-such-program"]);
    assert_eq!(out.code, Some(127), "{out:?}");
    assert!(out.stderr.contains("genward-no-such-program"), "{out:?}");
    assert!(out.stderr.contains("not_found"), "{out:?}");

    let dir = ScratchDir::new("cli-env-fail");
    let plain = dir.path().join("plain-file");
    std::fs::write(&plain, "#!/bin/sh\necho no\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = gw(&d, &["run", "n", "--", plain.to_str().unwrap()]);
    assert_eq!(out.code, Some(126), "{out:?}");
    assert!(out.stderr.contains("plain-file"), "{out:?}");

    let missing = dir.path().join("no-such-dir");
    let out = gw(
        &d,
        &["run", "c", "--cwd", missing.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(out.code, Some(127), "{out:?}");
    assert!(out.stderr.contains("no-such-dir"), "{out:?}");

    // --no-wait: the generation at once, success, as before.
    let out = gw(
        &d,
        &["run", "m", "--no-wait", "--", "genward-no-such-program"],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let gen = out.stdout.trim();
    assert!(gen.parse::<u64>().is_ok(), "{out:?}");
    assert_eq!(gw(&d, &["wait", "m", "--gen", gen]).code, Some(127));
}

#[test]
fn env_options_are_seen_by_the_child() {
    let d = Daemon::start("cli-env-opts", &[]);
    let dir = ScratchDir::new("cli-env-opts");

    // The caller's environment by default.
    let mut cmd = echo_ab(&d, "e", &[]);
    cmd.env("A", "from-caller").env_remove("B");
    assert_eq!(output_of(&d, "e", cmd), "[from-caller] []\n");

    // --env overrides; --unset-env removes.
    let mut cmd = echo_ab(&d, "e", &["--env", "A=set", "--unset-env", "B"]);
    cmd.env("A", "from-caller").env("B", "from-caller");
    assert_eq!(output_of(&d, "e", cmd), "[set] []\n");

    // --env-file: comments and blank lines skipped; --env wins over it.
    let file = dir.path().join("vars.env");
    std::fs::write(&file, "# comment\n\nA=from file\nB=b=1\n").unwrap();
    let file = file.to_str().unwrap();
    let cmd = echo_ab(&d, "e", &["--env-file", file]);
    assert_eq!(output_of(&d, "e", cmd), "[from file] [b=1]\n");
    let cmd = echo_ab(&d, "e", &["--env-file", file, "--env", "B=flag"]);
    assert_eq!(output_of(&d, "e", cmd), "[from file] [flag]\n");

    // --clear-env: nothing but what is set (sh still runs: argv[0] has a path).
    let mut cmd = command(
        &d,
        &[
            "run",
            "e",
            "--clear-env",
            "--env",
            "B=only",
            "--",
            "/bin/sh",
            "-c",
            "env | sort",
        ],
    );
    cmd.env("A", "from-caller");
    let out = output_of(&d, "e", cmd);
    assert!(
        out.contains("B=only\n") && !out.contains("A=from-caller"),
        "{out}"
    );
    assert!(!out.contains("HOME="), "{out}");

    // --daemon-env: the daemon's environment (its RUST_LOG), not the caller's.
    let daemons = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    let mut cmd = command(
        &d,
        &[
            "run",
            "e",
            "--daemon-env",
            "--",
            "sh",
            "-c",
            r#"echo "[$RUST_LOG] [$A]""#,
        ],
    );
    cmd.env("RUST_LOG", "from-caller").env("A", "from-caller");
    assert_eq!(output_of(&d, "e", cmd), format!("[{daemons}] []\n"));

    // A bad env file is named with its line, and nothing is started.
    let bad = dir.path().join("bad.env");
    std::fs::write(&bad, "A=1\n# fine\nnot a variable\n").unwrap();
    let out = gw(
        &d,
        &[
            "run",
            "bad",
            "--env-file",
            bad.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("bad.env:3"), "{out:?}");
    assert_eq!(gw(&d, &["logs", "bad"]).code, Some(1));
}

/// `restart` with changes: the session's spec changed as `run` would make it (the
/// environment from this command's, then `--env`; the directory from `--cwd`), started as
/// a replacement; without changes, the same spec again.
#[test]
fn restart_with_changes_edits_the_spec_as_run_would() {
    let d = Daemon::start("cli-restart-changes", &[]);
    let mut first = command(
        &d,
        &[
            "run",
            "s",
            "--env",
            "A=one",
            "--",
            "sh",
            "-c",
            r#"echo "[$A] [$B] $(pwd)""#,
        ],
    );
    first.env("B", "from-caller");
    let out = output_of(&d, "s", first);
    assert!(out.starts_with("[one] [from-caller] "), "{out}");

    let mut changed = command(&d, &["restart", "s", "--env", "A=two", "--cwd", "/"]);
    changed.env_remove("B");
    let out = run_cmd(changed, b"");
    assert_eq!(out.code, Some(0), "{out:?}");
    let gen = out.stdout.trim().to_string();
    assert_eq!(gw(&d, &["wait", "s", "--gen", &gen]).code, Some(0));
    assert_eq!(gw(&d, &["logs", "s", "--gen", &gen]).ok(), "[two] [] /\n");

    // No changes: the same (changed) spec again.
    let again = gw(&d, &["restart", "s"]).ok().trim().to_string();
    assert_eq!(gw(&d, &["wait", "s", "--gen", &again]).code, Some(0));
    assert_eq!(gw(&d, &["logs", "s", "--gen", &again]).ok(), "[two] [] /\n");

    let stale = gw(&d, &["restart", "s", "--if-gen", "1", "--env", "A=x"]);
    assert_eq!(stale.code, Some(1), "{stale:?}");
    assert!(stale.stderr.contains("nothing was done"), "{stale:?}");
}

/// A variable the protocol cannot carry (not UTF-8) is still left out, but `run` names it
/// on standard error, once, escaped; not when the caller's environment is not used, nor
/// when `--unset-env` removes it anyway.
#[test]
fn a_variable_that_is_not_utf8_is_named_when_left_out() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let d = Daemon::start("cli-env-utf8", &[]);
    let with_bad_vars = |args: &[&str]| {
        let mut cmd = echo_ab(&d, "u8", args);
        cmd.env("A", OsStr::from_bytes(b"\xff"))
            .env(OsStr::from_bytes(b"B\xfe\x1b"), "1")
            .env("B", "kept");
        cmd
    };
    let out = run_cmd(with_bad_vars(&[]), b"");
    assert_eq!(out.code, Some(0), "{out:?}");
    let warnings: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "{out:?}");
    assert_eq!(
        warnings.iter().filter(|w| w.contains("`A`")).count(),
        1,
        "{out:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r"`B\xfe\u{1b}`") && w.contains("not valid UTF-8")),
        "{out:?}"
    );
    let gen = out.stdout.trim().to_string();
    assert_eq!(gw(&d, &["wait", "u8", "--gen", &gen]).code, Some(0));
    assert_eq!(gw(&d, &["logs", "u8", "--gen", &gen]).ok(), "[] [kept]\n");

    for args in [&["--clear-env"][..], &["--daemon-env"]] {
        let out = run_cmd(with_bad_vars(args), b"");
        assert_eq!(out.code, Some(0), "{out:?}");
        assert_eq!(out.stderr, "", "{args:?}");
    }
    let out = run_cmd(with_bad_vars(&["--unset-env", "A"]), b"");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !out.stderr.contains("`A`") && out.stderr.contains("`B"),
        "{out:?}"
    );
}
