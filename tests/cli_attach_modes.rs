//! `genward attach` gives the terminal back in the modes it found it in: detaching from a
//! full-screen program, the session ending, or a signal to `attach` switches off the
//! alternate screen, application cursor keys and keypad, mouse reporting, a hidden cursor
//! and a scroll region that the session's output switched on. Checked through tmux's own
//! view of its pane (`#{alternate_on}`, `#{keypad_cursor_flag}`, ...).

mod util;

use genward::testkit::proc;
use util::cli::{await_line, gw, gw_ok};
use util::daemon::Daemon;
use util::tmux::Tmux;

/// Every tracked mode tmux can report, with its default value.
const DEFAULTS: &str = "alt=0 ckm=0 kp=0 cursor=1 mouse=0 region=0";
const MODES: &str = "alt=#{alternate_on} ckm=#{keypad_cursor_flag} kp=#{keypad_flag} \
                     cursor=#{cursor_flag} mouse=#{mouse_any_flag} region=#{scroll_region_upper}";

fn attach_cmd(d: &Daemon, session: &str) -> String {
    format!(
        "{} --socket {} attach {session}",
        env!("CARGO_BIN_EXE_genward"),
        d.socket.display()
    )
}

fn has_line(screen: &str, line: &str) -> bool {
    screen.lines().any(|l| l.trim_end() == line)
}

fn available(test: &str, program: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("SKIP {test}: {program} not installed");
    }
    found
}

#[test]
fn detaching_from_less_leaves_its_modes() {
    let test = "detaching_from_less_leaves_its_modes";
    if !available(test, "less") {
        return;
    }
    let Some(t) = Tmux::start(test, 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-less", &[]);
    let file = d.dir.path().join("long.txt");
    let text: String = (1..=500).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    gw_ok(
        &d,
        &[
            "run",
            "pager",
            "--pty",
            "--grace",
            "100ms",
            "--env",
            "TERM=screen",
            "--env",
            "LESS=",
            "--",
            "less",
            file,
        ],
    );

    assert_eq!(t.display(MODES), DEFAULTS);
    t.type_line(&attach_cmd(&d, "pager"));
    t.await_screen("the file in less", |s| has_line(s, "line 3"));
    // less switched them on (through the replay or live), and they reached the terminal.
    t.await_display(
        "#{alternate_on} #{keypad_cursor_flag} #{keypad_flag}",
        "1 1 1",
    );

    t.key("C-\\");
    t.await_screen("the detach notice", |s| {
        s.contains("[genward: detached from pager gen")
    });
    assert_eq!(t.display(MODES), DEFAULTS);
    // Back on the shell's own screen, which less's pages never touched.
    let screen = t.screen();
    assert!(!has_line(&screen, "line 3"), "{screen}");
    assert!(gw(&d, &["ls"]).ok().contains("running"));

    // Attached again: less is made to redraw, and its page is on the screen again.
    t.type_line("clear");
    t.type_line(&attach_cmd(&d, "pager"));
    t.await_screen("less's page again", |s| has_line(s, "line 3"));
    t.await_display("#{alternate_on}", "1");
    t.key("C-\\");
    t.await_screen("detached again", |s| {
        s.contains("[genward: detached from pager gen")
    });
    assert_eq!(t.display(MODES), DEFAULTS);
}

#[test]
fn detaching_from_vim_leaves_its_modes_and_reattaching_redraws_it() {
    let test = "detaching_from_vim_leaves_its_modes_and_reattaching_redraws_it";
    if !available(test, "vim") {
        return;
    }
    let Some(t) = Tmux::start(test, 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-vim", &[]);
    let file = d.dir.path().join("notes.txt");
    std::fs::write(&file, "first line of the file\n").unwrap();
    gw_ok(
        &d,
        &[
            "run",
            "ed",
            "--pty",
            "--grace",
            "100ms",
            "--env",
            "TERM=screen",
            "--",
            "vim",
            "-u",
            "NONE",
            "-N",
            file.to_str().unwrap(),
        ],
    );
    t.type_line(&attach_cmd(&d, "ed"));
    t.await_screen("the file in vim", |s| has_line(s, "first line of the file"));
    t.await_display("#{alternate_on}", "1");
    t.key("C-\\");
    t.await_screen("the detach notice", |s| {
        s.contains("[genward: detached from ed gen")
    });
    assert_eq!(t.display("#{alternate_on}"), "0");
    t.type_line("clear");
    t.await_screen("a clear shell screen", |s| {
        !s.contains("first line of the file")
    });
    t.type_line(&attach_cmd(&d, "ed"));
    t.await_screen("vim redrawn", |s| has_line(s, "first line of the file"));
    t.key("C-\\");
    t.await_screen("detached again", |s| {
        s.contains("[genward: detached from ed gen")
    });
    assert_eq!(t.display("#{alternate_on}"), "0");
}

/// A session that switches every tracked mode on, says so, and exits 3 on a line of input.
fn start_modal(d: &Daemon) -> String {
    let script = r#"printf '\033[?1049h\033[?1h\033=\033[?1000;1006h\033[?2004h\033[?25l\033[3;10r\n'; echo modes-on; read x; exit 3"#;
    let gen = gw_ok(
        d,
        &[
            "run", "modal", "--pty", "--grace", "100ms", "--", "sh", "-c", script,
        ],
    );
    await_line(d, "modal", &gen, "modes-on");
    gen
}

#[test]
fn a_signal_and_the_session_ending_leave_its_modes() {
    let Some(t) = Tmux::start("a_signal_and_the_session_ending", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-modes", &[]);
    let gen = start_modal(&d);
    let on = "alt=1 ckm=1 kp=1 cursor=0 mouse=1 region=2";

    // A signal to `attach`.
    t.type_line(&attach_cmd(&d, "modal"));
    t.await_screen("the session's output", |s| has_line(s, "modes-on"));
    t.await_display(MODES, on);
    let shell = t.pane_pid();
    let attach = *proc::children(shell as u32)
        .first()
        .expect("the attach process") as i32;
    // SAFETY: kill with the pid of a running descendant of this test.
    unsafe { libc::kill(attach, libc::SIGTERM) };
    t.await_screen("the signal notice", |s| {
        s.contains("[genward: SIGTERM: detached from modal gen")
    });
    assert_eq!(t.display(MODES), DEFAULTS);

    // Attached again: the replay switches them on again; the session's end switches them
    // off.
    t.type_line(&attach_cmd(&d, "modal"));
    t.await_display(MODES, on);
    t.await_screen("the session's output again", |s| has_line(s, "modes-on"));
    t.type_line("");
    t.await_screen("the exit notice", |s| {
        s.contains(&format!("[genward: modal gen {gen}: exit 3]"))
    });
    assert_eq!(t.display(MODES), DEFAULTS);
}

/// On attach a full-screen program is made to redraw: by default SIGWINCH reaches the
/// terminal's foreground group even when the size did not change; `--redraw ctrl-l`
/// types Ctrl-L instead.
#[test]
fn attaching_makes_the_program_redraw() {
    let Some(t) = Tmux::start("attaching_makes_the_program_redraw", 80, 24) else {
        return;
    };
    let d = Daemon::start("cli-attach-redraw", &[]);
    // The PTY is made 24x80, the tmux pane's size: attaching changes no size.
    let gen = gw_ok(
        &d,
        &[
            "run",
            "w",
            "--pty",
            "--grace",
            "100ms",
            "--",
            "sh",
            "-c",
            "trap 'echo redrawn' WINCH; echo up; while :; do sleep 0.05; done",
        ],
    );
    await_line(&d, "w", &gen, "up");
    t.type_line(&attach_cmd(&d, "w"));
    t.await_screen("the redraw signal", |s| has_line(s, "redrawn"));
    t.key("C-\\");
    t.await_screen("detached", |s| s.contains("[genward: detached"));

    let gen = gw_ok(
        &d,
        &["run", "c", "--pty", "--grace", "100ms", "--", "cat", "-v"],
    );
    let _ = gen;
    t.type_line(&format!("{} --redraw ctrl-l", attach_cmd(&d, "c")));
    t.await_screen("Ctrl-L typed into the session", |s| s.contains("^L"));
}

/// `--read-only` watches: keys typed do not reach the session, its size is left alone,
/// and the detach key still detaches.
#[test]
fn a_read_only_attachment_only_watches() {
    let Some(t) = Tmux::start("a_read_only_attachment_only_watches", 100, 30) else {
        return;
    };
    let d = Daemon::start("cli-attach-read-only", &[]);
    let gen = gw_ok(
        &d,
        &[
            "run", "r", "--pty", "--grace", "100ms", "--env", "PS1=ro$ ", "--", "sh", "-i",
        ],
    );
    t.type_line(&format!("{} --read-only", attach_cmd(&d, "r")));
    t.await_screen("the session's prompt", |s| s.contains("ro$"));
    t.type_line("echo typed-$((6*7))");
    // Another client's input does reach it, and shows: everything before it was handled.
    gw(&d, &["send", "r", "stty size\n"]).ok();
    t.await_screen("the session's own size", |s| has_line(s, "24 80"));
    assert!(!t.screen().contains("typed-42"), "{}", t.screen());
    t.key("C-\\");
    t.await_screen("detached", |s| {
        s.contains(&format!("[genward: detached from r gen {gen}"))
    });
}
