//! `genward completions bash|zsh|fish` load in their shells and complete commands,
//! options and values; `genward man` renders as a manual page. A shell or `man` that is
//! not installed is a visible SKIP (`.ci/run` installs them).

mod util;

use std::path::Path;
use std::process::Command;

use util::cli::{genward, gw_ok, run_cmd, wait_bounded};
use util::daemon::Daemon;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `shell -c script` with the built `genward` first in `PATH`.
fn shell(shell: &str, args: &[&str], script: &str) -> (String, String, bool) {
    let bin = Path::new(env!("CARGO_BIN_EXE_genward")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Bounded: a completion that hangs fails the test instead of hanging it.
    let child = Command::new(shell)
        .args(args)
        .arg("-c")
        .arg(script)
        .env("PATH", path)
        .env_remove("GENWARD_SOCKET")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{shell}: {e}"));
    let out = wait_bounded(child);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn bash_completion_loads_and_completes() {
    let (out, err, ok) = shell(
        "bash",
        &[],
        "source <(genward completions bash); complete -p genward",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "complete -F _genward genward\n", "{err}");
    // What Tab would offer, word by word.
    let complete = |words: &str| {
        let script = format!(
            "source <(genward completions bash); COMP_WORDS=({words}); \
             COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _genward; echo \"${{COMPREPLY[*]}}\""
        );
        let (out, err, ok) = shell("bash", &[], &script);
        assert!(ok, "{words}: {err}");
        out.trim().to_string()
    };
    assert_eq!(complete("genward l"), "ls logs");
    assert_eq!(complete("genward comp"), "completions");
    assert_eq!(complete("genward completions ''"), "bash zsh fish");
    assert_eq!(complete("genward ls --j"), "--json");
    assert_eq!(complete("genward ls web --so"), "--socket");
    assert_eq!(complete("genward --socket /x st"), "stop");
    assert!(complete("genward run x --").contains("--pty"));
    assert_eq!(complete("genward kill x --sc"), "--scope");
    // Options with a fixed set of values complete those values, not file names.
    assert_eq!(complete("genward kill x -s K"), "KILL");
    assert_eq!(complete("genward kill x --signal TE"), "TERM");
    assert_eq!(
        complete("genward kill x --scope ''"),
        "leader foreground tree"
    );
    assert_eq!(
        complete("genward run x --restart ''"),
        "never on-failure always"
    );
    assert_eq!(
        complete("genward attach x --redraw ''"),
        "winch ctrl-l none"
    );
    assert_eq!(complete("genward daemon --reaper ''"), "auto fallback");
    assert_eq!(complete("genward daemon --containment c"), "cgroup");
    // After `--`, `run` completes the command to run, then file names.
    assert_eq!(complete("genward run x -- genwar"), "genward");
    let dir = genward::testkit::scratch::ScratchDir::new("cli-comp-files");
    std::fs::write(dir.path().join("serve.conf"), "").unwrap();
    let conf = dir.path().join("serv");
    let want = dir.path().join("serve.conf").display().to_string();
    assert_eq!(
        complete(&format!("genward run x -- cat {}", conf.display())),
        want
    );
    assert_eq!(
        complete(&format!("genward run x -- {}", conf.display())),
        want
    );
}

#[test]
fn zsh_completion_loads() {
    if !have("zsh") {
        eprintln!("SKIP zsh_completion_loads: zsh not installed");
        return;
    }
    let (out, err, ok) = shell(
        "zsh",
        &["-f"],
        "autoload -U compinit && compinit -u -D && source <(genward completions zsh) \
         && print -r -- $_comps[genward] && whence -w _genward",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "_genward\n_genward: function\n", "{err}");
    assert!(err.is_empty(), "{err}");
    // Fixed values are offered as such, not as file names.
    let script =
        String::from_utf8(genward(&["completions", "zsh"]).output().unwrap().stdout).unwrap();
    for spec in ["'--scope=[", "'--restart=[", "'--reaper=[", "'--redraw=["] {
        let line = script
            .lines()
            .find(|l| l.contains(spec))
            .unwrap_or_default();
        assert!(
            line.contains(":(") && !line.contains("_files"),
            "{spec}: {line}"
        );
    }
}

#[test]
fn fish_completion_loads_and_completes() {
    if !have("fish") {
        eprintln!("SKIP fish_completion_loads_and_completes: fish not installed");
        return;
    }
    let (out, err, ok) = shell(
        "fish",
        &["--no-config"],
        "genward completions fish | source; complete -C 'genward l'; complete -C 'genward ls --j'; \
         echo ==; complete -C 'genward kill x --scope '; echo ==; complete -C 'genward run x --restart '",
    );
    assert!(ok, "{err}");
    let words_of = |part: &str| -> Vec<String> {
        part.lines()
            .filter_map(|l| l.split('\t').next())
            .map(String::from)
            .collect()
    };
    let parts: Vec<&str> = out.split("==\n").collect();
    let words = words_of(parts[0]);
    assert!(
        words.iter().any(|w| w == "ls") && words.iter().any(|w| w == "logs"),
        "{out}"
    );
    assert!(words.iter().any(|w| w == "--json"), "{out}");
    assert_eq!(
        words_of(parts[1]),
        ["foreground", "leader", "tree"],
        "{out}"
    );
    assert_eq!(
        words_of(parts[2]),
        ["always", "never", "on-failure"],
        "{out}"
    );
    assert!(err.is_empty(), "{err}");
}

#[test]
fn man_page_renders() {
    let page = run_cmd(genward(&["man"]), b"").ok();
    assert!(page.contains(".TH GENWARD 1"), "{page}");
    assert!(page.contains(".SH SYNOPSIS\n"), "{page}");
    let help = run_cmd(genward(&["--help"]), b"").ok();
    // Every command the help lists has its own subsection.
    let commands: Vec<&str> = help
        .split("\nCommands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.len() > 10, "{help}");
    for c in &commands {
        assert!(page.contains(&format!(".SS {c}\n")), "{c}");
    }
    if !have("man") {
        eprintln!("SKIP man_page_renders (rendering): man not installed; roff structure checked");
        return;
    }
    let dir = std::env::temp_dir().join(format!("gw-man-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("genward.1");
    std::fs::write(&file, &page).unwrap();
    let out = Command::new("man")
        .arg("-l")
        .arg(&file)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "80")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // Without a terminal, man marks bold and underline by overstriking: drop the marks.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&out.stdout).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(text.contains("GENWARD(1)"), "{text}");
    assert!(text.contains("--socket"), "{text}");
    for c in &commands {
        assert!(text.contains(&format!("genward {c}")), "{c} in\n{text}");
    }
}

/// Session names come from the daemon the command line names (`--socket` before or after
/// the command, `--socket=PATH` too), and a daemon that never answers does not hang the
/// shell: the completion gives up, offering nothing.
#[test]
fn session_names_come_from_the_daemon_the_command_line_names() {
    let d = Daemon::start("cli-complete-socket", &[]);
    gw_ok(&d, &["run", "web", "--", "sleep", "600"]);
    let sock = d.socket.to_str().unwrap().to_owned();
    // A socket that accepts connections (into its queue) and never answers.
    let dir = genward::testkit::scratch::ScratchDir::new("cli-complete-mute");
    let mute = dir.join("mute.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&mute).unwrap();
    let mute = mute.to_str().unwrap().to_owned();

    let bash = |words: &str| {
        let script = format!(
            "source <(genward completions bash); COMP_WORDS=({words}); \
             COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _genward; echo \"${{COMPREPLY[*]}}\""
        );
        let (out, err, ok) = shell("bash", &[], &script);
        assert!(ok, "{words}: {err}");
        out.trim().to_string()
    };
    assert_eq!(bash(&format!("genward --socket {sock} attach ''")), "web");
    assert_eq!(bash(&format!("genward attach --socket {sock} w")), "web");
    // `=` breaks words in bash: `--socket=PATH` arrives as three.
    assert_eq!(bash(&format!("genward --socket = {sock} stop ''")), "web");
    assert_eq!(bash(&format!("genward --socket {mute} attach ''")), "");

    if have("fish") {
        let fish = |line: &str| {
            let script = format!("genward completions fish | source; complete -C '{line}'");
            let (out, err, ok) = shell("fish", &["--no-config"], &script);
            assert!(ok, "{line}: {err}");
            out
        };
        assert!(fish(&format!("genward --socket {sock} attach ")).contains("web"));
        assert!(fish(&format!("genward attach --socket={sock} ")).contains("web"));
        assert!(fish(&format!("GENWARD_SOCKET={sock} genward attach ")).contains("web"));
        assert!(!fish(&format!("genward --socket {mute} attach ")).contains("web"));
    } else {
        eprintln!("SKIP session_names_come_from_the_daemon_the_command_line_names (fish): fish not installed");
    }
    if have("zsh") {
        // The completer's own function, with `_arguments`' findings and `compadd` stood in.
        let zsh = |socket_after: &str, socket_before: &str| {
            let script = format!(
                "autoload -U compinit && compinit -u -D && source <(genward completions zsh); \
                 compadd() {{ print -rl -- ${{(P)2}} }}; typeset -A opt_args; \
                 opt_args=({socket_after}); _genward_socket={socket_before}; _genward_sessions"
            );
            let (out, err, ok) = shell("zsh", &["-f"], &script);
            assert!(ok, "{err}");
            out.trim().to_string()
        };
        assert_eq!(zsh(&format!("--socket {sock}"), "''"), "web");
        assert_eq!(zsh("", &sock), "web");
        assert_eq!(zsh(&format!("--socket {mute}"), "''"), "");
    } else {
        eprintln!("SKIP session_names_come_from_the_daemon_the_command_line_names (zsh): zsh not installed");
    }
}
