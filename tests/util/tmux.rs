//! A private tmux server with one pane running a shell, for driving `genward attach`
//! through a real terminal: keys in with `send-keys`, the screen out with `capture-pane`.

use std::process::{Command, Output};
use std::time::Duration;

/// One tmux server (its own socket name) with one window.
pub struct Tmux {
    name: String,
}

/// Whether tmux can be run here.
pub fn available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Tmux {
    /// Starts a detached session `cols`×`rows` running `sh` with prompt `outer$ `, or
    /// `None` (after printing the skip line) when tmux is not installed.
    pub fn start(test: &str, cols: u16, rows: u16) -> Option<Tmux> {
        if !available() {
            println!("SKIP {test}: tmux not installed");
            return None;
        }
        let tmux = Tmux {
            name: format!("gw-{test}-{}", std::process::id()),
        };
        let out = tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            "env PS1='outer$ ' sh",
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux.await_screen("the outer prompt", |s| s.contains("outer$"));
        Some(tmux)
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.name, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux")
    }

    /// Types `text` literally, then Enter.
    pub fn type_line(&self, text: &str) {
        assert!(self.run(&["send-keys", "-l", text]).status.success());
        self.key("Enter");
    }

    /// Presses one key, in tmux's notation (`C-\`, `Enter`).
    pub fn key(&self, key: &str) {
        assert!(self.run(&["send-keys", key]).status.success());
    }

    /// Presses keys in one tmux command, so they reach the pane back to back.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    /// Pastes the contents of file `path` into the pane, as a terminal's paste does:
    /// all of it written to the pane at once.
    pub fn paste_file(&self, path: &std::path::Path) {
        let path = path.to_str().expect("a UTF-8 path");
        assert!(self
            .run(&["load-buffer", "-b", "paste", path])
            .status
            .success());
        assert!(self
            .run(&["paste-buffer", "-d", "-b", "paste"])
            .status
            .success());
    }

    /// The visible screen.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p"]).stdout).into_owned()
    }

    /// Resizes the window (the attached client gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) {
        let out = self.run(&[
            "resize-window",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
        assert!(out.status.success(), "tmux resize-window: {out:?}");
    }

    /// The pid of the pane's shell.
    pub fn pane_pid(&self) -> i32 {
        let out = self.run(&["display-message", "-p", "#{pane_pid}"]);
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// Waits until the screen satisfies `pred`; returns that screen.
    ///
    /// A terminal's screen offers no event to wait on, so this polls `capture-pane`:
    /// a bounded number of tries (at most about 20 s in all) with a short pause between
    /// them. It is used only for screen content; everything else in these tests awaits
    /// events.
    #[track_caller]
    pub fn await_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        const TRIES: u32 = 800;
        const PAUSE: Duration = Duration::from_millis(25);
        let mut screen = String::new();
        for _ in 0..TRIES {
            screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            std::thread::sleep(PAUSE);
        }
        panic!("screen never showed {what}; last screen:\n{screen}");
    }
}

impl Tmux {
    /// A tmux format expanded for the pane (`#{alternate_on}`): the state of the pane's
    /// terminal as tmux sees it.
    pub fn display(&self, format: &str) -> String {
        let out = self.run(&["display-message", "-p", format]);
        assert!(out.status.success(), "tmux display-message: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    }

    /// Waits until `format` expands to `want`, polling as [`Tmux::await_screen`] does (a
    /// terminal's modes offer no event to wait on either).
    #[track_caller]
    pub fn await_display(&self, format: &str, want: &str) {
        const TRIES: u32 = 800;
        const PAUSE: Duration = Duration::from_millis(25);
        let mut got = String::new();
        for _ in 0..TRIES {
            got = self.display(format);
            if got == want {
                return;
            }
            std::thread::sleep(PAUSE);
        }
        panic!(
            "{format} never became {want}; last {got}; screen:\n{}",
            self.screen()
        );
    }
}

impl Tmux {
    /// Whether the pane's terminal reads lines (canonical mode): as a shell wants it, not
    /// raw as `attach` makes it.
    pub fn pane_canonical(&self) -> bool {
        use rustix::fs::{Mode, OFlags};
        let tty = self.display("#{pane_tty}");
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::open(tty.as_str(), flags, Mode::empty()).expect("open the pane's tty");
        let t = rustix::termios::tcgetattr(&fd).expect("tcgetattr on the pane's tty");
        t.local_modes.contains(rustix::termios::LocalModes::ICANON)
    }

    /// Waits until the pane's terminal is canonical (`true`) or raw (`false`), polling as
    /// [`Tmux::await_screen`] does (a terminal's settings offer no event to wait on).
    #[track_caller]
    pub fn await_canonical(&self, want: bool) {
        const TRIES: u32 = 800;
        const PAUSE: Duration = Duration::from_millis(25);
        for _ in 0..TRIES {
            if self.pane_canonical() == want {
                return;
            }
            std::thread::sleep(PAUSE);
        }
        panic!(
            "the pane's terminal never became {}; screen:\n{}",
            if want { "canonical" } else { "raw" },
            self.screen()
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
