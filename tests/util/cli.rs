//! Running the `genward` binary's client commands against a test daemon, each bounded by
//! [`PATIENCE`](super::daemon::PATIENCE): a command that does not finish in time is
//! killed and the test fails, instead of hanging.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Instant;

use super::daemon::{Daemon, PATIENCE};

/// What a finished command printed and returned.
#[derive(Debug)]
pub struct Out {
    /// The exit status (`None` when ended by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Standard output, byte-exact.
    pub raw: Vec<u8>,
}

impl Out {
    /// Asserts success and returns standard output.
    #[track_caller]
    pub fn ok(self) -> String {
        assert_eq!(self.code, Some(0), "command failed: {self:?}");
        self.stdout
    }
}

/// `genward ARGS...` as a command, not yet started, with no socket from the environment.
pub fn genward(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_genward"));
    cmd.args(args).env_remove("GENWARD_SOCKET");
    cmd
}

/// `genward --socket S ARGS...` as a command, not yet started.
pub fn command(d: &Daemon, args: &[&str]) -> Command {
    let mut cmd = genward(&["--socket"]);
    cmd.arg(&d.socket).args(args);
    cmd
}

/// Runs `cmd` to completion with `input` on its standard input.
pub fn run_cmd(mut cmd: Command, input: &[u8]) -> Out {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn genward");
    let mut stdin = child.stdin.take().unwrap();
    // Written from another thread: the command may print much before it reads all.
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = wait_bounded(child);
    writer.join().unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        raw: out.stdout,
    }
}

/// Waits for `child` and collects its output; kills it if it outlives [`PATIENCE`].
pub fn wait_bounded(child: Child) -> std::process::Output {
    let pid = child.id() as i32;
    let (done_tx, done_rx) = channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(PATIENCE).is_err() {
            // SAFETY: kill with the pid of our own child, not yet reaped (the main thread
            // is blocked in wait until this kill lands).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return true;
        }
        false
    });
    let out = child.wait_with_output().unwrap();
    let _ = done_tx.send(());
    assert!(
        !watchdog.join().unwrap(),
        "genward did not finish within {PATIENCE:?}: {out:?}"
    );
    out
}

/// `genward ARGS...` against `d`, with empty standard input.
pub fn gw(d: &Daemon, args: &[&str]) -> Out {
    run_cmd(command(d, args), b"")
}

/// `genward ARGS...` against `d`, which must succeed; its standard output, trimmed (for
/// `run`, the new generation's number).
#[track_caller]
pub fn gw_ok(d: &Daemon, args: &[&str]) -> String {
    gw(d, args).ok().trim().to_string()
}

/// Waits until generation `gen` of `session` has printed the line `line`: how a test
/// waits for a child to say it is ready (after setting a trap, say) before acting on it.
/// `logs -f` replays what came before it started, so a line printed earlier counts.
#[track_caller]
pub fn await_line(d: &Daemon, session: &str, gen: impl std::fmt::Display, line: &str) {
    let gen = gen.to_string();
    let mut follow = Streaming::start(d, &["logs", session, "-f", "--gen", &gen]);
    follow.until(|l| l == line);
}

/// `genward ARGS...` against `d`, feeding `input`.
pub fn gw_input(d: &Daemon, args: &[&str], input: &[u8]) -> Out {
    run_cmd(command(d, args), input)
}

/// A long-running `genward` command whose standard output is read line by line.
pub struct Streaming {
    child: Option<Child>,
    lines: Receiver<String>,
}

impl Streaming {
    /// Starts `genward ARGS...` against `d`.
    pub fn start(d: &Daemon, args: &[&str]) -> Streaming {
        Streaming::start_cmd(command(d, args))
    }

    /// Starts `cmd`, reading its standard output by lines; its standard error is what
    /// `cmd` says (inherited, unless set: piped, [`Streaming::finish_stderr`] reads it).
    pub fn start_cmd(mut cmd: Command) -> Streaming {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn genward");
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Streaming {
            child: Some(child),
            lines,
        }
    }

    /// Reads lines until one satisfies `pred`; returns every line read, the match last.
    #[track_caller]
    pub fn until(&mut self, mut pred: impl FnMut(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = pred(&line);
                    seen.push(line);
                    if hit {
                        return seen;
                    }
                }
                Err(e) => panic!("no matching line ({e}); saw {seen:?}"),
            }
        }
    }

    /// Waits for the command to end by itself; returns its exit status.
    pub fn finish(mut self) -> Option<i32> {
        wait_bounded(self.child.take().unwrap()).status.code()
    }

    /// Waits for the command, started with its standard error piped, to end by itself;
    /// returns its exit status and what it wrote on standard error.
    pub fn finish_stderr(mut self) -> (Option<i32>, String) {
        let out = wait_bounded(self.child.take().unwrap());
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stderr)
    }

    /// Sends `signal` to the command.
    pub fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: kill with the pid of our own unreaped child.
        unsafe { libc::kill(pid, signal) };
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A session whose process takes nothing until its gate opens, then copies exactly
/// `input.len()` bytes of its input to a file: for input larger than the daemon queues.
pub struct GatedSink {
    session: String,
    gate: std::path::PathBuf,
    out: std::path::PathBuf,
    /// What to feed it: every byte value, in a pattern that shows a hole or a reordering.
    pub input: Vec<u8>,
}

impl GatedSink {
    /// Starts session `session` of `d` taking `len` bytes.
    pub fn run(d: &Daemon, session: &str, len: usize) -> GatedSink {
        let gate = super::daemon::fifo(d, &format!("{session}.gate"));
        let out = d.dir.join(format!("{session}.out"));
        let script = format!(
            "read go < {}; head -c {len} > {}",
            gate.display(),
            out.display()
        );
        gw_ok(d, &["run", session, "--", "sh", "-c", &script]);
        GatedSink {
            session: session.to_string(),
            gate,
            out,
            input: (0..len).map(|i| (i * 7 % 251) as u8).collect(),
        }
    }

    /// Once the process's input queue is full (the feeder is being refused, or would
    /// be), opens the gate, then takes the feeder's result and checks that the process
    /// got the whole input, in order.
    pub fn open_when_full(self, d: &Daemon, feeder: std::thread::JoinHandle<Out>) -> Out {
        let mut c = d.client();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let get = serde_json::json!({"op": "get", "session": self.session});
            let s = c.ok(get);
            let queued = s["session"]["generations"][0]["pending_input"].as_u64();
            if queued.is_some_and(|q| q + 8192 > 1 << 20) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the input queue never filled: {s}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        super::daemon::release(&self.gate);
        let done = feeder.join().unwrap();
        let got = std::fs::read(&self.out).unwrap_or_default();
        assert_eq!(got.len(), self.input.len(), "{done:?}");
        assert!(
            got == self.input,
            "the bytes arrived changed or out of order"
        );
        done
    }
}
