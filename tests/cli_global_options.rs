//! Global options after the subcommand: `genward ls --socket PATH` reaches the same daemon
//! as `genward --socket PATH ls`, and `--` still ends them.

mod util;

use util::cli::{genward, gw_ok, run_cmd};
use util::daemon::Daemon;

#[test]
fn socket_after_the_command() {
    let d = Daemon::start("cli-socket-after", &[]);
    let socket = d.socket.to_str().unwrap();
    let gen = gw_ok(&d, &["run", "web", "--", "sleep", "600"]);

    let table = run_cmd(genward(&["ls", "--socket", socket]), b"").ok();
    assert!(table.lines().any(|l| l.starts_with("web ")), "{table}");
    let one = run_cmd(genward(&["ls", "web", &format!("--socket={socket}")]), b"").ok();
    assert!(one.contains(&format!("current     gen {gen}\n")), "{one}");
    // Between a command's own options, and winning over the environment.
    let mut cmd = genward(&["ls", "--json", "--socket", socket, "web"]);
    cmd.env("GENWARD_SOCKET", d.dir.join("elsewhere.sock"));
    assert!(run_cmd(cmd, b"").ok().contains("\"name\":\"web\""));
    // `--version` too.
    let version = run_cmd(genward(&["ls", "--version"]), b"").ok();
    assert_eq!(version, format!("genward {}\n", env!("CARGO_PKG_VERSION")));

    // Given twice, before and after: a usage error.
    let out = run_cmd(
        genward(&["--socket", socket, "ls", "--socket", socket]),
        b"",
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--socket"), "{out:?}");
    // After `--`, it is the program's argument: `echo` prints it.
    let gen = gw_ok(
        &d,
        &[
            "run",
            "echo",
            "--",
            "sh",
            "-c",
            "echo \"$@\"; exec sleep 600",
            "sh",
            "--socket",
            "x",
        ],
    );
    util::cli::await_line(&d, "echo", gen, "--socket x");

    run_cmd(genward(&["stop", "web", "--socket", socket]), b"").ok();
    run_cmd(genward(&["stop", "echo", "--socket", socket]), b"").ok();
}
