//! `genward attach` driven through a real terminal (tmux): an interactive shell answers,
//! the window size reaches it, detaching leaves it running, re-attaching replays recent
//! output, a replacement is announced and followed, and the terminal is sane after every
//! way out (detach, the child's exit, the daemon's loss, a signal).

mod util;

use genward::testkit::proc;
use util::cli::{gw, gw_ok};
use util::daemon::Daemon;
use util::tmux::Tmux;

/// The outer shell prints `rc=<status of the last command> sane=2` when the terminal is
/// back in canonical mode with echo (both flags present, neither negated).
const CHECK: &str = "echo rc=$? sane=$(stty -a | tr ' ;' '\\n\\n' | grep -cx -e icanon -e echo)";

fn has_line(screen: &str, line: &str) -> bool {
    screen.lines().any(|l| l.trim_end() == line)
}

fn attach_cmd(d: &Daemon, extra: &str) -> String {
    format!(
        "{} --socket {} attach sh {extra}",
        env!("CARGO_BIN_EXE_genward"),
        d.socket.display()
    )
}

fn start_shell(d: &Daemon, prompt: &str) -> String {
    let ps1 = format!("PS1={prompt}");
    gw_ok(
        d,
        &[
            "run", "sh", "--pty", "--grace", "100ms", "--env", &ps1, "--", "sh", "-i",
        ],
    )
}

#[test]
fn attach_detach_reattach_and_exit() {
    let Some(t) = Tmux::start("attach_detach_reattach_and_exit", 90, 20) else {
        return;
    };
    let d = Daemon::start("cli-attach", &[]);
    let gen = start_shell(&d, "gw$ ");

    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the session's prompt", |s| s.contains("gw$"));
    t.type_line("echo ans$((40+2))");
    t.await_screen("the shell's answer", |s| has_line(s, "ans42"));

    // The PTY was created 24x80; attaching gave it this terminal's size.
    t.type_line("stty size");
    t.await_screen("the attached size", |s| has_line(s, "20 90"));
    t.resize(100, 30);
    t.type_line("stty size");
    t.await_screen("the new size", |s| has_line(s, "30 100"));

    t.key("C-\\");
    t.await_screen("the detach notice", |s| {
        s.contains(&format!("[genward: detached from sh gen {gen}"))
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after detach", |s| {
        has_line(s, "rc=0 sane=2")
    });

    // Still running, same generation.
    let table = gw(&d, &["ls"]).ok();
    let row = table.lines().find(|l| l.starts_with("sh ")).unwrap();
    assert!(
        row.contains(&format!(" {gen} ")) && row.contains("running"),
        "{table}"
    );

    // Re-attach (with another detach key): recent output is replayed on a clear screen —
    // cleared, so the detach notice is gone (the answer from before could still be seen).
    let replayed = |s: &str| !s.contains("[genward: detached") && has_line(s, "ans42");
    t.type_line(&format!("clear; {}", attach_cmd(&d, "--detach-key C-a")));
    t.await_screen("the replayed answer", replayed);
    t.key("C-a");
    t.await_screen("the second detach", |s| {
        s.matches("[genward: detached").count() == 1
    });
    t.type_line(&format!("clear; {}", attach_cmd(&d, "")));
    t.await_screen("the replayed answer again", replayed);

    // The child's exit ends the attachment with its status.
    t.type_line("exit 7");
    t.await_screen("the exit notice", |s| {
        s.contains(&format!("[genward: sh gen {gen}: exit 7]"))
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after the exit", |s| {
        has_line(s, "rc=7 sane=2")
    });
}

#[test]
fn attach_follows_a_replacement_and_survives_losing_the_daemon() {
    let Some(t) = Tmux::start("attach_follows_a_replacement", 80, 24) else {
        return;
    };
    let mut d = Daemon::start("cli-attach-replace", &[]);
    let old = start_shell(&d, "old$ ");
    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the old prompt", |s| s.contains("old$"));

    let new = start_shell(&d, "new$ ");
    t.await_screen("the replacement notice and the new prompt", |s| {
        s.contains(&format!("[genward: gen {old} replaced by gen {new}]")) && s.contains("new$")
    });
    t.type_line("echo ok$((1+1))");
    t.await_screen("the new shell's answer", |s| has_line(s, "ok2"));

    // The daemon disappears: the attachment ends, the terminal is restored.
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    t.await_screen("the lost-daemon message", |s| {
        s.contains("genward: lost the daemon")
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after losing the daemon", |s| {
        has_line(s, "rc=1 sane=2")
    });
}

#[test]
fn a_signal_ends_the_attachment_with_a_sane_terminal() {
    let Some(t) = Tmux::start("a_signal_ends_the_attachment", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-signal", &[]);
    start_shell(&d, "gw$ ");
    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the session's prompt", |s| s.contains("gw$"));

    // The attach process is the outer shell's only child.
    let shell = t.pane_pid();
    let attach = *proc::children(shell as u32)
        .first()
        .expect("the attach process") as i32;
    // SAFETY: kill with the pid of a running descendant of this test.
    unsafe { libc::kill(attach, libc::SIGTERM) };
    // Keys typed before it has let go of the terminal would be read by it, so wait for
    // its last word first.
    t.await_screen("the signal notice", |s| {
        s.contains("[genward: SIGTERM: detached from sh gen")
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after SIGTERM", |s| {
        has_line(s, "rc=143 sane=2")
    });
    // The session is untouched.
    assert!(gw(&d, &["ls"]).ok().contains("running"));
}

#[test]
fn the_detach_key_pressed_twice_is_sent_through() {
    let Some(t) = Tmux::start("the_detach_key_pressed_twice", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-double", &[]);
    let gen = start_shell(&d, "gw$ ");
    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the session's prompt", |s| s.contains("gw$"));
    t.type_line("stty -isig; cat -v");
    t.await_screen("cat running", |s| s.contains("cat -v"));

    // Twice in a row: the session gets one Ctrl-\ (shown by cat as ^\), we stay attached.
    t.keys(&["C-\\", "C-\\"]);
    t.key("Enter");
    t.await_screen("the key at cat", |s| has_line(s, "^\\"));
    t.key("C-d");
    t.type_line("echo still$((1+1))");
    // Typed while cat may still be ending: the terminal then echoes the line before the
    // shell's prompt, and the answer comes right after that prompt, on its line.
    let screen = t.await_screen("the shell's answer", |s| {
        s.lines()
            .any(|l| l.trim_end().ends_with("still2") && !l.contains("echo"))
    });
    assert!(!screen.contains("[genward: detached"), "{screen}");

    // Once: detached.
    t.key("C-\\");
    t.await_screen("the detach notice", |s| {
        s.contains(&format!("[genward: detached from sh gen {gen}"))
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after detach", |s| {
        has_line(s, "rc=0 sane=2")
    });
}

/// A terminal does not type into a session without one: it would be put raw for a
/// program reading lines from a pipe (Enter sent as `\r`, nothing echoed). `attach` says
/// so and what to use instead, and leaves the terminal as it was; `--read-only` watches
/// it, each line of its output starting a line.
#[test]
fn a_terminal_does_not_type_into_a_session_without_one() {
    let Some(t) = Tmux::start("a_terminal_does_not_type", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-pipes-tty", &[]);
    gw_ok(
        &d,
        &[
            "run",
            "sh",
            "--",
            "sh",
            "-c",
            "echo one; echo two; exec sleep 1000",
        ],
    );
    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the refusal", |s| s.contains("runs without a terminal"));
    t.type_line(CHECK);
    t.await_screen("a sane terminal after the refusal", |s| {
        has_line(s, "rc=1 sane=2")
    });
    t.type_line("clear");
    t.type_line(&attach_cmd(&d, "--read-only"));
    t.await_screen("its lines, each from the start of a line", |s| {
        has_line(s, "one") && has_line(s, "two")
    });
    t.key("C-\\");
    t.await_screen("the detach notice", |s| s.contains("detached from sh gen"));
    t.type_line(CHECK);
    t.await_screen("a sane terminal after watching", |s| {
        has_line(s, "rc=0 sane=2")
    });
}

/// A paste larger than the process's input queue (1 MiB) into a program not reading yet
/// waits instead of being refused: the program gets every byte, in order, once it reads.
#[test]
fn a_paste_larger_than_the_input_queue_arrives_whole() {
    let Some(t) = Tmux::start("a_paste_larger_than_the_input_queue", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-paste", &[]);
    const LEN: usize = 2_500_000;
    // Printable text only (a paste goes through tmux as keys), no newline.
    let text: Vec<u8> = (0..LEN)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789"[(i * 7 + i / 37) % 36])
        .collect();
    let input = d.dir.join("paste.txt");
    std::fs::write(&input, &text).unwrap();
    let output = d.dir.join("pasted.txt");
    // It reads nothing for a while, so that the paste fills its input queue.
    let script = format!(
        "stty raw -echo; echo waiting-for-paste; sleep 4; head -c {LEN} > {}; echo got-it-all",
        output.display()
    );
    gw_ok(&d, &["run", "sh", "--pty", "--", "sh", "-c", &script]);
    t.type_line(&attach_cmd(&d, ""));
    // Shown by `attach` (replayed or live): what is typed from now on reaches the session.
    t.await_screen("attached", |s| s.contains("waiting-for-paste"));
    t.paste_file(&input);
    let screen = t.await_screen("the program's end", |s| s.contains("[genward: sh gen"));
    assert!(!screen.contains("input not sent"), "{screen}");
    let got = std::fs::read(&output).unwrap();
    assert_eq!(got.len(), LEN, "{screen}");
    assert!(
        got == text,
        "the pasted bytes arrived altered (a hole or a reordering)"
    );
}

/// A terminal attached to a PTY session whose replacement runs on pipes stops typing into
/// it (raw keystrokes, Enter as `\r`, are no input for a program reading a pipe): `attach`
/// lets go as it refuses such a session at its start, exits 1, and leaves the terminal
/// sane. Nothing typed reaches the program on pipes.
#[test]
fn a_replacement_on_pipes_ends_a_terminals_attachment() {
    let Some(t) = Tmux::start("a_replacement_on_pipes", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-to-pipes", &[]);
    let old = start_shell(&d, "old$ ");
    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the old prompt", |s| s.contains("old$"));

    let got = d.dir.join("got.txt");
    let script = format!("echo on-pipes; cat > {}", got.display());
    let new = gw_ok(&d, &["run", "sh", "--", "sh", "-c", &script]);
    t.await_screen("the replacement and the refusal", |s| {
        s.contains(&format!("[genward: gen {old} replaced by gen {new}]"))
            && s.contains(&format!("genward: sh gen {new}: runs without a terminal"))
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after letting go", |s| {
        has_line(s, "rc=1 sane=2")
    });
    // Its input ended, the program on pipes shows what it was given: nothing.
    gw_ok(&d, &["send", "sh", "--eof", "--if-gen", &new]);
    assert_eq!(gw(&d, &["wait", "sh", "--gen", &new]).code, Some(0));
    assert_eq!(std::fs::read(&got).unwrap(), b"");
}

/// `attach` stopped from outside (`kill -TSTP`) hands the terminal back to the shell in
/// its own settings, and continued (`fg`) takes it again raw: the detach key works, and
/// detaching leaves the terminal sane.
#[test]
fn a_stop_hands_the_terminal_back_and_fg_takes_it_again() {
    let Some(t) = Tmux::start("a_stop_hands_the_terminal_back", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-stop", &[]);
    let gen = start_shell(&d, "gw$ ");
    t.type_line(&attach_cmd(&d, ""));
    t.await_screen("the session's prompt", |s| s.contains("gw$"));
    t.await_canonical(false);

    let shell = t.pane_pid();
    let attach = *proc::children(shell as u32)
        .first()
        .expect("the attach process") as i32;
    // SAFETY: kill with the pid of a running descendant of this test.
    unsafe { libc::kill(attach, libc::SIGTSTP) };
    t.await_screen("the outer shell's job notice", |s| s.contains("Stopped"));
    t.await_canonical(true);
    t.type_line("echo back$((1+1))");
    t.await_screen("the outer shell's answer", |s| has_line(s, "back2"));

    t.type_line("fg");
    t.await_canonical(false);
    t.type_line("echo ans$((40+2))");
    t.await_screen("the session's answer", |s| has_line(s, "ans42"));
    t.key("C-\\");
    t.await_screen("the detach notice", |s| {
        s.contains(&format!("[genward: detached from sh gen {gen}"))
    });
    t.type_line(CHECK);
    t.await_screen("a sane terminal after detach", |s| {
        has_line(s, "rc=0 sane=2")
    });
}
