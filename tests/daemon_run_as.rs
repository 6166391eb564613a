//! Whom a session's process runs as, with real processes: `user`, `group`, `groups`,
//! `umask`, `env_file` and `rlimits`, as the child itself reports them (`id`, `umask`,
//! `ulimit`). Changing identity needs a daemon running as root: those tests say SKIP
//! otherwise; the environment file, the limits and the refusals are tested either way.

mod util;

use std::path::Path;

use serde_json::{json, Value};
use util::daemon::{output_of, skip_because, Client, Daemon};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The user tests run children as: `nobody`, whose ids every Linux has.
fn nobody() -> Option<(u32, u32)> {
    let out = std::process::Command::new("id")
        .args(["-u", "nobody"])
        .output()
        .ok()?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    let out = std::process::Command::new("id")
        .args(["-g", "nobody"])
        .output()
        .ok()?;
    let gid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((uid, gid))
}

/// Spawns `spawn` (a request without `op`), then returns everything its generation
/// wrote, once it exited, and its end event.
fn run(c: &mut Client, mut spawn: Value) -> (String, Value) {
    spawn["op"] = json!("spawn");
    let gen = c.ok(spawn)["gen"].as_u64().unwrap();
    let seen = c.events_until(|m| m.is("exited", gen) || m.is("spawn_failed", gen));
    let end = seen.last().unwrap().json().clone();
    let text = String::from_utf8_lossy(&output_of(&seen, gen)).into_owned();
    (text, end)
}

fn daemon(tag: &str) -> (Daemon, Client) {
    let d = Daemon::start(tag, &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    (d, c)
}

const REPORT: &str =
    r#"echo "u=$(id -u) g=$(id -g) G=$(id -G) m=$(umask) n=$(ulimit -n) c=$(ulimit -c)""#;

#[test]
fn a_root_daemon_runs_the_process_as_the_user_with_its_groups_umask_and_limits() {
    if !is_root() && skip_because("changing a child's user needs a daemon running as root") {
        return;
    }
    let Some((uid, gid)) = nobody() else {
        skip_because("no user `nobody` here");
        return;
    };
    let (d, mut c) = daemon("runas-user");
    // The user's primary group and its groups from the group database by default.
    let (text, end) = run(
        &mut c,
        json!({"session": "who", "argv": ["sh", "-c", REPORT], "cwd": "/", "user": "nobody",
            "umask": "027",
            "rlimits": {"nofile": 777, "core": {"soft": 0, "hard": "infinity"}}}),
    );
    assert_eq!(end["event"], "exited", "{end}");
    assert_eq!(
        text.trim(),
        format!("u={uid} g={gid} G={gid} m=0027 n=777 c=0"),
        "{end}"
    );
    // The spec reads back as it was given, for `get` and a restart with changes.
    let got = c.ok(json!({"op": "get", "session": "who"}));
    let spec = &got["session"]["spec"];
    assert_eq!(spec["user"], "nobody", "{got}");
    assert_eq!(spec["umask"], "027", "{got}");
    assert_eq!(
        spec["rlimits"],
        json!({"core": {"soft": 0, "hard": "infinity"}, "nofile": 777}),
        "{got}"
    );
    // The user's own variables, as a login would set them; the spec's win.
    let (text, _) = run(
        &mut c,
        json!({"session": "vars", "cwd": "/", "user": "nobody", "env": {"HOME": "/tmp"},
            "argv": ["sh", "-c", r#"printf '%s|%s|%s' "$USER" "$LOGNAME" "$HOME""#]}),
    );
    assert_eq!(text, "nobody|nobody|/tmp");
    // Ids that name no entry, and explicit groups: exactly those.
    let (text, end) = run(
        &mut c,
        json!({"session": "ids", "argv": ["sh", "-c", REPORT], "cwd": "/", "user": uid,
            "group": 4242, "groups": [4243, 4244]}),
    );
    assert_eq!(end["event"], "exited", "{end}");
    assert!(
        text.starts_with(&format!("u={uid} g=4242 G=4242 4243 4244 ")),
        "{text}"
    );
    // A bare uid has no primary group to default to: known once its entry was looked up.
    let (_, end) = run(
        &mut c,
        json!({"session": "bare", "argv": ["true"], "user": 4245}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    let why = end["error"]["message"].as_str().unwrap();
    assert!(why.contains("uid 4245") && why.contains("`group`"), "{end}");
    drop(d);
}

/// Names are looked up at the start, by a helper process (never in the daemon's loop): an
/// unknown one is the generation's `spawn_failed`, naming the field and the name.
#[test]
fn unknown_users_and_groups_fail_the_start_naming_the_field() {
    let (_d, mut c) = daemon("runas-unknown");
    for (members, field) in [
        (json!({"user": "no-such-user-genward"}), "user"),
        (json!({"group": "no-such-group-genward"}), "group"),
        (json!({"groups": [0, "no-such-group-genward"]}), "groups[1]"),
    ] {
        let mut req = json!({"session": "x", "argv": ["true"]});
        for (k, v) in members.as_object().unwrap() {
            req[k] = v.clone();
        }
        let (_, end) = run(&mut c, req);
        assert_eq!(end["event"], "spawn_failed", "{end}");
        assert_eq!(end["error"]["kind"], "other", "{end}");
        let why = end["error"]["message"].as_str().unwrap();
        assert!(
            why.starts_with(&format!("{field}: no ")) && why.contains("`no-such-"),
            "{end}"
        );
    }
    if is_root() {
        skip_because("permission_denied for another user needs a daemon not running as root");
        return;
    }
    // A number the daemon cannot become is refused at once; a name, once looked up.
    let e = c.err(
        json!({"op": "spawn", "session": "x", "argv": ["true"], "user": 0}),
        "permission_denied",
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("not root"),
        "{e}"
    );
    let (_, end) = run(
        &mut c,
        json!({"session": "x", "argv": ["true"], "user": "root"}),
    );
    assert_eq!(end["error"]["kind"], "permission_denied", "{end}");
    assert!(
        end["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not root"),
        "{end}"
    );
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_env_file_is_read_at_spawn_and_the_spec_env_wins() {
    let (d, mut c) = daemon("runas-envfile");
    let file = d.dir.join("app.env");
    write(
        &file,
        "# settings\n\nA=from file\n  B=$HOME 'quoted'\nC=file\r\n",
    );
    let (text, end) = run(
        &mut c,
        json!({"session": "env", "argv": ["sh", "-c", r#"printf '%s|%s|%s' "$A" "$B" "$C""#],
            "env_file": file, "env": {"C": "spec"}}),
    );
    assert_eq!(end["event"], "exited", "{end}");
    // Literal values (no expansion, no quote removal), the spec's C over the file's.
    assert_eq!(text, "from file|$HOME 'quoted'|spec");
    // Read at each start: a changed file changes the next generation.
    write(&file, "A=changed\n");
    let (text, _) = run(
        &mut c,
        json!({"session": "env", "argv": ["sh", "-c", r#"printf '%s' "$A""#],
            "env_file": file}),
    );
    assert_eq!(text, "changed");
}

#[test]
fn a_bad_env_file_fails_the_spawn_naming_file_and_line() {
    let (d, mut c) = daemon("runas-badenv");
    let file = d.dir.join("bad.env");
    write(&file, "A=1\nexport B\n");
    let (_, end) = run(
        &mut c,
        json!({"session": "bad", "argv": ["true"], "env_file": file}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    let why = end["error"]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("{}:2", file.display())) && why.contains("KEY=VALUE"),
        "{end}"
    );
    let missing = d.dir.join("missing.env");
    let (_, end) = run(
        &mut c,
        json!({"session": "bad", "argv": ["true"], "env_file": missing}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    let why = end["error"]["message"].as_str().unwrap();
    assert!(why.contains("missing.env"), "{end}");
    // Relative paths mean nothing to a daemon: refused when requested.
    c.err(
        json!({"op": "spawn", "session": "bad", "argv": ["true"], "env_file": "app.env"}),
        "bad_request",
    );
}

#[test]
fn an_env_file_that_cannot_be_opened_reports_its_own_errno() {
    let (d, mut c) = daemon("runas-enverrno");
    let missing = d.dir.join("missing.env");
    let (_, end) = run(
        &mut c,
        json!({"session": "gone", "argv": ["true"], "env_file": missing}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    assert_eq!(end["error"]["kind"], "other", "{end}");
    assert_eq!(end["error"]["errno"], libc::ENOENT, "{end}");
    // A directory where the file should be: the read's own error, not "invalid".
    let (_, end) = run(
        &mut c,
        json!({"session": "gone", "argv": ["true"], "env_file": d.dir.to_str().unwrap()}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    assert_eq!(end["error"]["errno"], libc::EISDIR, "{end}");
    // A malformed file has no OS error behind it: EINVAL, as before.
    let bad = d.dir.join("bad.env");
    write(&bad, "not a pair\n");
    let (_, end) = run(
        &mut c,
        json!({"session": "gone", "argv": ["true"], "env_file": bad}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    assert_eq!(end["error"]["errno"], libc::EINVAL, "{end}");
}

#[test]
fn rlimits_are_seen_by_the_child_and_a_refused_one_names_the_step() {
    let (_d, mut c) = daemon("runas-rlimits");
    // Lowering is allowed to anyone.
    let (text, end) = run(
        &mut c,
        json!({"session": "lim", "argv": ["sh", "-c", "echo $(ulimit -Sn) $(ulimit -Hn) $(ulimit -Sc)"],
            "rlimits": {"nofile": {"soft": 64, "hard": 128}, "core": 0}}),
    );
    assert_eq!(end["event"], "exited", "{end}");
    assert_eq!(text.trim(), "64 128 0");
    // More descriptors than the kernel allows anyone: the child's setrlimit fails, and
    // the failure comes back through the start's status, naming the step and the limit
    // (the one refused, not the one before it).
    let (_, end) = run(
        &mut c,
        json!({"session": "lim", "argv": ["true"],
            "rlimits": {"core": 0, "nofile": 1u64 << 40}}),
    );
    assert_eq!(end["event"], "spawn_failed", "{end}");
    let why = end["error"]["message"].as_str().unwrap();
    assert!(why.contains("setrlimit nofile: "), "{end}");
    // The kernel's own errno (EPERM: above `fs.nr_open`), and no "may not use the program
    // or the directory" kind: a refused limit is an error of its own.
    assert_eq!(end["error"]["errno"], libc::EPERM, "{end}");
    assert_eq!(end["error"]["kind"], "other", "{end}");
}

/// `genward run` and `restart` with the options: `restart` changes only what it names, and
/// the environment file is the one this shell means.
#[test]
fn the_cli_sets_them_and_restart_changes_only_what_it_names() {
    use util::cli::{command, run_cmd};
    let (d, _) = daemon("runas-cli");
    write(&d.dir.join("app.env"), "A=from-file\n");
    let gw = |args: &[&str]| {
        let mut cmd = command(&d, args);
        cmd.current_dir(&*d.dir);
        run_cmd(cmd, b"")
    };
    let script = r#"echo "n=$(ulimit -n) c=$(ulimit -c) m=$(umask) A=$A""#;
    let gen = gw(&[
        "run",
        "s",
        "--rlimit",
        "nofile=100",
        "--umask",
        "077",
        "--daemon-env-file",
        "app.env",
        "--",
        "sh",
        "-c",
        script,
    ])
    .ok();
    let gen = gen.trim();
    assert_eq!(gw(&["wait", "s", "--gen", gen]).code, Some(0));
    assert_eq!(
        gw(&["logs", "s", "--gen", gen]).ok(),
        format!("n=100 c={} m=0077 A=from-file\n", core_limit_here())
    );
    let gen = gw(&["restart", "s", "--rlimit", "core=0"]).ok();
    let gen = gen.trim();
    assert_eq!(gw(&["wait", "s", "--gen", gen]).code, Some(0));
    assert_eq!(
        gw(&["logs", "s", "--gen", gen]).ok(),
        "n=100 c=0 m=0077 A=from-file\n"
    );
}

/// This process's soft core limit as `ulimit -c` prints it, which a child inherits.
fn core_limit_here() -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -c"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A probe command runs as its generation does — the user, and the environment file's
/// variables, that the start's lookup found — in the daemon that started it and in the
/// program an upgrade put in its place (which looked nothing up).
#[test]
fn a_probe_command_runs_as_its_generation_across_an_upgrade() {
    if !is_root() && skip_because("changing a child's user needs a daemon running as root") {
        return;
    }
    let Some((uid, _)) = nobody() else {
        skip_because("no user `nobody` here");
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start("probe-identity", &[]);
    // Where `nobody` can look: the flag that holds readiness back until after the upgrade.
    let open = d.dir.join("open");
    std::fs::create_dir(&open).unwrap();
    for dir in [d.dir.as_ref(), open.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let flag = open.join("up");
    let env_file = d.dir.join("probe.env");
    std::fs::write(&env_file, "PROBE_VAR=from-file\n").unwrap();
    let check = format!(
        "test \"$(id -u)\" = {uid} && test \"$PROBE_VAR\" = from-file && test -e {}",
        flag.display()
    );
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let r = c.ok(
        json!({"op": "spawn", "session": "probed", "argv": ["sleep", "100"],
        "cwd": "/", "user": "nobody", "env_file": env_file,
        "ready": {"command": ["sh", "-c", check], "interval": "20ms", "timeout": "60s"}}),
    );
    let gen = r["gen"].as_u64().unwrap();
    c.events_until(|m| m.is("spawned", gen));
    let mut u = d.client();
    let answer = u.request(json!({"op": "upgrade"}));
    assert_eq!(answer["ok"], true, "{answer}");
    std::fs::write(&flag, b"").unwrap();
    let seen = c.events_until(|m| m.is("ready", gen) || m.is("ready_failed", gen));
    assert!(seen.last().unwrap().is("ready", gen), "{seen:?}");
}

/// A PTY session run as a user gets a terminal it may open by name, as after a login: a
/// program that reopens `$(tty)` (GPG_TTY, screen, script) works. The daemon's terminal
/// used to stay the daemon's (root's, mode 0600 or 0620): the user could use the
/// descriptors it was given but not open its own terminal.
#[test]
fn a_user_pty_session_owns_its_terminal() {
    if !is_root() && skip_because("changing a child's user needs a daemon running as root") {
        return;
    }
    let Some((uid, _)) = nobody() else {
        skip_because("no user `nobody` here");
        return;
    };
    let (d, mut c) = daemon("runas-pty");
    let (text, end) = run(
        &mut c,
        json!({"session": "tty", "pty": true, "cwd": "/", "user": "nobody",
            "argv": ["sh", "-c", r#"t=$(tty); echo "owner=$(stat -c %u "$t")"; (exec 3<>"$t" && echo reopened) 2>/dev/null"#]}),
    );
    assert_eq!(end["event"], "exited", "{end}");
    assert!(text.contains(&format!("owner={uid}")), "{text:?}");
    assert!(text.contains("reopened"), "{text:?}");
    drop(d);
}
