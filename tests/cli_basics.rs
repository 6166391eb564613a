//! What every command shares: `--help` with an example, `--version`, the socket from
//! `--socket` or `GENWARD_SOCKET`, and errors that say what to do.

mod util;

use util::cli::{genward, gw, run_cmd};
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
