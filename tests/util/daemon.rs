//! A real `genward daemon` on a private temporary state directory, and a minimal client
//! that speaks the wire protocol independently of the library's own codec (serde_json for
//! the JSON lines, hand-written frame reading for output payloads).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use genward::testkit::scratch::ScratchDir;
use genward::testkit::{proc, wait};
use serde_json::{json, Value};

/// How long any single awaited event may take before the test fails (a bound, not a sleep).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A wrapper for [`Daemon::start_wrapped`] that outlives the daemon and reaps what it
/// leaves: a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`) that runs the daemon and
/// reaps every child it gets (`waitpid(-1)`) until it has none. After the daemon is killed
/// ([`Daemon::crash_daemon_and_restart`]) its processes are reparented to it, and it reaps
/// them when they end, as init would: what a kernel needs to publish their exit status.
/// Needs `python3` (CI installs it).
pub const SUBREAPER: [&str; 3] = ["python3", "-c", SUBREAPER_PY];

/// [`SUBREAPER`], but one that reaps only the daemon until it gets SIGUSR1: processes
/// the daemon left stay unreaped zombies when they end until the test says so.
pub const LAZY_SUBREAPER: [&str; 4] = ["python3", "-c", SUBREAPER_PY, "--reap-on-usr1"];

const SUBREAPER_PY: &str = r#"
import ctypes, os, signal, sys
lazy = sys.argv[1:2] == ["--reap-on-usr1"]
argv = sys.argv[2:] if lazy else sys.argv[1:]
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("PR_SET_CHILD_SUBREAPER: " + os.strerror(ctypes.get_errno()))
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
daemon = os.fork()
if daemon == 0:
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR1])
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
try:
    os.close(3)  # the readiness pipe is the daemon's to write
except OSError:
    pass
if lazy:
    os.waitpid(daemon, 0)
    signal.sigwait([signal.SIGUSR1])
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
"#;

/// A daemon under test.
pub struct Daemon {
    pub child: Child,
    /// A private directory for this daemon (its state directory is `state` in it) and
    /// anything else the test needs; removed after the daemon is gone.
    pub dir: ScratchDir,
    pub socket: PathBuf,
    /// The daemon's own pid: `child`'s, or, behind a wrapper, the wrapper's child's.
    pub pid: u32,
}

impl Daemon {
    /// Starts a daemon with `extra` arguments and waits for its readiness notification.
    pub fn start(tag: &str, extra: &[&str]) -> Daemon {
        Daemon::start_with(tag, extra, None)
    }

    /// Like [`Daemon::start`], with the daemon's soft descriptor limit set to `nofile`.
    pub fn start_with(tag: &str, extra: &[&str], nofile: Option<u64>) -> Daemon {
        Daemon::start_wrapped(tag, &[], extra, nofile)
    }

    /// Like [`Daemon::start`], with what the daemon logs (standard error) going to the
    /// file [`Daemon::log`] reads.
    pub fn start_logged(tag: &str, extra: &[&str]) -> Daemon {
        let dir = ScratchDir::new(tag);
        let socket = dir.join("state").join("genward.sock");
        let log = dir.join("daemon.log");
        let (child, pid) = launch_env(&dir, &[], extra, None, &[], Some(&log));
        Daemon {
            child,
            dir,
            socket,
            pid,
        }
    }

    /// What a daemon started with [`Daemon::start_logged`] has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// Like [`Daemon::start`], with the daemon's environment extended with `env`.
    pub fn start_env(tag: &str, extra: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Daemon {
        let dir = ScratchDir::new(tag);
        let socket = dir.join("state").join("genward.sock");
        let (child, pid) = launch_env(&dir, &[], extra, None, env, None);
        Daemon {
            child,
            dir,
            socket,
            pid,
        }
    }

    /// Like [`Daemon::start_with`], with the daemon run through `wrapper` (e.g.
    /// `unshare --pid --fork --mount-proc`, to make it PID 1 of a new namespace).
    pub fn start_wrapped(
        tag: &str,
        wrapper: &[&str],
        extra: &[&str],
        nofile: Option<u64>,
    ) -> Daemon {
        let dir = ScratchDir::new(tag);
        let socket = dir.join("state").join("genward.sock");
        let (child, pid) = launch(&dir, wrapper, extra, nofile);
        Daemon {
            child,
            dir,
            socket,
            pid,
        }
    }

    /// Kills the daemon outright (SIGKILL: no cleanup, as in a crash) and starts a new one
    /// on the same state directory with `extra` arguments.
    pub fn crash_and_restart(&mut self, extra: &[&str]) {
        // SAFETY: kill with the pid of our own, unreaped child.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        let _ = self.child.wait();
        let (child, pid) = launch(&self.dir, &[], extra, None);
        self.child = child;
        self.pid = pid;
    }

    /// Kills the daemon outright (SIGKILL: no cleanup, as in a crash) and reaps it, or the
    /// wrapper it runs in; [`Daemon::restart_wrapped`] starts the next one.
    pub fn kill(&mut self) {
        // SAFETY: kill with the pid of our own, unreaped child (or of the wrapper's child,
        // which stays unreaped while the wrapper waits for it).
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    /// Starts a daemon again on the same state directory once the previous one is gone
    /// (see [`Daemon::kill`]), through `wrapper` and with `extra` arguments.
    pub fn restart_wrapped(&mut self, wrapper: &[&str], extra: &[&str]) {
        let (child, pid) = launch(&self.dir, wrapper, extra, None);
        self.child = child;
        self.pid = pid;
    }

    /// A connected client.
    pub fn client(&self) -> Client {
        Client::connect(&self.socket)
    }

    /// Waits (at most [`PATIENCE`]) for the daemon to exit; returns its exit code.
    #[track_caller]
    pub fn exit_code(&mut self) -> Option<i32> {
        wait::child_exit(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("the daemon did not exit within {PATIENCE:?}"))
            .code()
    }

    /// Sends SIGTERM and waits for the daemon to exit; returns its exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        // SAFETY: kill with a valid pid of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.exit_code()
    }

    /// Kills only the daemon (SIGKILL, as in a crash), not the wrapper it was started in
    /// with [`Daemon::start_wrapped`] — one that outlives it, such as [`SUBREAPER`] — waits
    /// until it is gone, and starts a new daemon, unwrapped, on the same state directory
    /// with `extra` arguments. Returns the wrapper, for the test to wait for.
    pub fn crash_daemon_and_restart(&mut self, extra: &[&str]) -> Child {
        self.crash_daemon_edit_and_restart(|_| {}, &[], extra)
    }

    /// Like [`Daemon::crash_daemon_and_restart`], with `edit` run on the state directory
    /// while no daemon runs, and the new daemon's environment extended with `env`.
    pub fn crash_daemon_edit_and_restart(
        &mut self,
        edit: impl FnOnce(&Path),
        env: &[(&str, &std::ffi::OsStr)],
        extra: &[&str],
    ) -> Child {
        self.crash_daemon_restart_into(edit, env, extra, None)
    }

    /// [`Daemon::crash_daemon_edit_and_restart`], with the new daemon's standard error
    /// going to `log` if given.
    fn crash_daemon_restart_into(
        &mut self,
        edit: impl FnOnce(&Path),
        env: &[(&str, &std::ffi::OsStr)],
        extra: &[&str],
        log: Option<&Path>,
    ) -> Child {
        use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
        let pid = Pid::from_raw(self.pid as i32).expect("a positive pid");
        // The daemon runs (it answered this test), so the pidfd is the daemon's.
        let pidfd = pidfd_open(pid, PidfdFlags::empty()).expect("a pidfd for the daemon");
        pidfd_send_signal(&pidfd, Signal::KILL).expect("kill the daemon");
        let deadline = Instant::now() + PATIENCE;
        assert!(
            wait::readable(pidfd.as_fd(), deadline),
            "the daemon did not die"
        );
        edit(&self.dir.join("state"));
        let (child, pid) = launch_env(&self.dir, &[], extra, None, env, log);
        self.pid = pid;
        std::mem::replace(&mut self.child, child)
    }

    /// Like [`Daemon::crash_daemon_edit_and_restart`], with what the new daemon logs at
    /// `level` (`RUST_LOG`) going to the file [`Daemon::log`] reads.
    pub fn crash_daemon_edit_and_restart_logged(
        &mut self,
        edit: impl FnOnce(&Path),
        level: &str,
        extra: &[&str],
    ) -> Child {
        let log = self.dir.join("daemon.log");
        let env = [("RUST_LOG", std::ffi::OsStr::new(level))];
        self.crash_daemon_restart_into(edit, &env, extra, Some(&log))
    }

    /// Like [`Daemon::crash_daemon_and_restart`], with what the new daemon logs at `level`
    /// (`RUST_LOG`) going to the file [`Daemon::log`] reads.
    pub fn crash_daemon_and_restart_logged(&mut self, level: &str, extra: &[&str]) -> Child {
        let log = self.dir.join("daemon.log");
        let env = [("RUST_LOG", std::ffi::OsStr::new(level))];
        self.crash_daemon_restart_into(|_| {}, &env, extra, Some(&log))
    }
}

impl Drop for Daemon {
    /// A test that fails mid-way still leaves no processes behind: the daemon is asked to
    /// stop everything (SIGTERM, then a second SIGTERM = kill at once), and only killed
    /// outright if it does not exit within [`PATIENCE`].
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = self.pid as i32;
            // SAFETY: kill with a valid pid of our own, unreaped child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            // Standard signals coalesce, so the second SIGTERM (kill at once) is sent only
            // when the first has not ended the daemon after a while.
            if wait::child_exit(&mut self.child, Duration::from_millis(500)).is_none() {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                if wait::child_exit(&mut self.child, PATIENCE).is_none() {
                    // SAFETY: as above.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    let _ = self.child.wait();
                }
            }
        }
    }
}

/// Starts a daemon on `dir/state` and waits for its readiness notification; returns the
/// process started and the daemon's own pid.
fn launch(dir: &ScratchDir, wrapper: &[&str], extra: &[&str], nofile: Option<u64>) -> (Child, u32) {
    launch_env(dir, wrapper, extra, nofile, &[], None)
}

/// [`launch`], with the daemon's environment extended with `env`.
fn launch_env(
    dir: &ScratchDir,
    wrapper: &[&str],
    extra: &[&str],
    nofile: Option<u64>,
    env: &[(&str, &std::ffi::OsStr)],
    log: Option<&Path>,
) -> (Child, u32) {
    let state = dir.join("state");
    let (ready_r, ready_w) = pipe();
    let ready_w_raw = ready_w.as_raw_fd();
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(daemon_binary());
            c
        }
        None => Command::new(daemon_binary()),
    };
    cmd.arg("daemon")
        .arg("--state-dir")
        .arg(&state)
        .arg("--ready-fd")
        .arg("3")
        .args(extra)
        // Benchmarks compare builds and settings side by side (e.g. a containment).
        .args(
            std::env::var("GENWARD_DAEMON_ARGS")
                .unwrap_or_default()
                .split_whitespace(),
        )
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    if let Some(log) = log {
        cmd.stderr(std::fs::File::create(log).expect("the daemon's log file"));
    }
    // SAFETY: the closure makes only async-signal-safe calls; `ready_w_raw` is open in the
    // child.
    unsafe {
        cmd.pre_exec(move || {
            place_at(ready_w_raw, 3)?;
            if let Some(soft) = nofile {
                let mut lim: libc::rlimit = std::mem::zeroed();
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                lim.rlim_cur = soft;
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn genward daemon");
    drop(ready_w);
    let mut ready = std::fs::File::from(ready_r);
    let mut line = [0u8; 1];
    let n = ready.read(&mut line).expect("read readiness");
    assert_eq!(n, 1, "daemon exited before becoming ready");
    let pid = if wrapper.is_empty() {
        child.id()
    } else {
        // The wrapper (e.g. unshare --fork) has exactly one child: the daemon.
        *proc::children(child.id())
            .first()
            .expect("the wrapper's child")
    };
    (child, pid)
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 returned two new fds that we now own.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// One message from the daemon.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A response or a non-output event.
    Json(Value),
    /// An output event with its raw payload.
    Output(Value, Vec<u8>),
}

/// A protocol client.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// Messages read while waiting for something else.
    pub backlog: std::collections::VecDeque<Msg>,
}

impl Client {
    /// Waits until `session` lists no generation: its last one is gone (reported, its
    /// tree emptied — a cgroup's emptiness is seen a turn or more after the end — and
    /// released). Nothing announces that, so `get` is asked again until it is so.
    #[track_caller]
    pub fn released(&mut self, session: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let got = self.ok(json!({"op": "get", "session": session}));
            if got["session"]["generations"]
                .as_array()
                .is_none_or(Vec::is_empty)
            {
                return;
            }
            assert!(Instant::now() < deadline, "still listed: {got}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The pid generation `gen` was spawned with (in the daemon's PID namespace), read
    /// from its `spawned` event; this connection must be subscribed to its session.
    pub fn spawned_pid(&mut self, gen: u64) -> u32 {
        let seen = self.events_until(|m| m.is("spawned", gen) || m.is("spawn_failed", gen));
        match seen.last() {
            Some(Msg::Json(v)) if v["event"] == "spawned" => v["pid"].as_u64().unwrap() as u32,
            other => panic!("gen {gen} did not start: {other:?}"),
        }
    }

    pub fn connect(path: &Path) -> Client {
        let stream = UnixStream::connect(path).expect("connect to daemon");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            next_id: 1,
            backlog: Default::default(),
        }
    }

    /// The raw socket (for clients that read frames themselves).
    pub fn stream(&self) -> &UnixStream {
        self.reader.get_ref()
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Reads the next message, waiting at most [`PATIENCE`].
    pub fn read_msg(&mut self) -> Msg {
        let mut line = Vec::new();
        let n = self
            .reader
            .read_until(b'\n', &mut line)
            .expect("read from daemon");
        assert!(n > 0, "daemon closed the connection");
        let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!(
                "bad line from daemon: {e}: {:?}",
                String::from_utf8_lossy(&line)
            )
        });
        if v["event"] == "output" {
            let len = v["len"].as_u64().expect("output len") as usize;
            let mut data = vec![0; len + 1];
            self.reader
                .read_exact(&mut data)
                .expect("read output payload");
            assert_eq!(data.pop(), Some(b'\n'), "payload not followed by newline");
            return Msg::Output(v, data);
        }
        Msg::Json(v)
    }

    /// The next message (from the backlog first, like [`Client::next_event`]), or `None`
    /// once the daemon has closed the connection (a message cut short by its death
    /// included): what is left to read after a crash.
    pub fn read_msg_or_eof(&mut self) -> Option<Msg> {
        if let Some(m) = self.backlog.pop_front() {
            return Some(m);
        }
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(n) if n > 0 && line.ends_with(b"\n") => {}
            _ => return None,
        }
        let v: Value = serde_json::from_slice(&line).ok()?;
        if v["event"] == "output" {
            let len = v["len"].as_u64()? as usize;
            let mut data = vec![0; len + 1];
            self.reader.read_exact(&mut data).ok()?;
            data.pop();
            return Some(Msg::Output(v, data));
        }
        Some(Msg::Json(v))
    }

    /// Sends a request (an `id` is added) and returns its response; events that arrive
    /// first are kept in `backlog`.
    pub fn request(&mut self, mut req: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        req["id"] = json!(id);
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
        loop {
            match self.read_msg() {
                Msg::Json(v) if v.get("event").is_none() && v["id"] == json!(id) => return v,
                other => self.backlog.push_back(other),
            }
        }
    }

    /// Sends `reqs` (an `id` is added to each) in batches, each batch's answers read
    /// before the next is sent, and returns the answers in order; events are skipped. A
    /// batch keeps the socket busy without letting a burst of starts pile up more children
    /// (and descriptors) than a test machine allows.
    pub fn pipelined(&mut self, reqs: &[Value]) -> Vec<Value> {
        const BATCH: usize = 250;
        let mut answers = Vec::with_capacity(reqs.len());
        for (b, batch) in reqs.chunks(BATCH).enumerate() {
            let mut bytes = Vec::new();
            for (i, req) in batch.iter().enumerate() {
                let mut req = req.clone();
                req["id"] = json!(format!("p{b}.{i}"));
                serde_json::to_writer(&mut bytes, &req).unwrap();
                bytes.push(b'\n');
            }
            self.send_raw(&bytes);
            let mut got = vec![Value::Null; batch.len()];
            let mut left = batch.len();
            while left > 0 {
                let Msg::Json(v) = self.read_msg() else {
                    continue;
                };
                let Some(id) = v["id"].as_str().map(str::to_owned) else {
                    continue;
                };
                let Some((rb, i)) = id.strip_prefix('p').and_then(|x| x.split_once('.')) else {
                    continue;
                };
                if rb.parse::<usize>() == Ok(b) {
                    got[i.parse::<usize>().unwrap()] = v;
                    left -= 1;
                }
            }
            answers.extend(got);
        }
        answers
    }

    /// Like [`Client::request`] but asserts success.
    pub fn ok(&mut self, req: Value) -> Value {
        let r = self.request(req.clone());
        assert_eq!(r["ok"], json!(true), "request {req} failed: {r}");
        r
    }

    /// Like [`Client::request`] but asserts failure with `code`.
    pub fn err(&mut self, req: Value, code: &str) -> Value {
        let r = self.request(req.clone());
        assert_eq!(r["ok"], json!(false), "request {req} should fail: {r}");
        assert_eq!(r["error"]["code"], json!(code), "request {req}: {r}");
        r
    }

    /// The next event (from the backlog first).
    pub fn next_event(&mut self) -> Msg {
        if let Some(m) = self.backlog.pop_front() {
            return m;
        }
        self.read_msg()
    }

    /// Reads events until every one of `gens` has ended (`exited`), in whatever order
    /// they end: waiting for each in turn with [`events_until`](Self::events_until)
    /// would read past, and lose, an end that came before the one awaited.
    pub fn await_exits(&mut self, gens: &[u64]) -> Vec<Msg> {
        let mut left: Vec<u64> = gens.to_vec();
        self.events_until(|m| {
            left.retain(|&g| !m.is("exited", g));
            left.is_empty()
        })
    }

    /// Reads events until `pred` matches one; returns every event read, the match last.
    pub fn events_until(&mut self, mut pred: impl FnMut(&Msg) -> bool) -> Vec<Msg> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        loop {
            assert!(Instant::now() < deadline, "gave up waiting; saw {seen:?}");
            let m = self.next_event();
            let hit = pred(&m);
            seen.push(m);
            if hit {
                return seen;
            }
        }
    }
}

impl Client {
    /// Reads events until the output of generation `gen` read by this call, put together,
    /// contains `needle` (output may arrive in pieces of any size); returns every event
    /// read. This is how a test waits for a child to say it is ready before acting on it.
    #[track_caller]
    pub fn output_until(&mut self, gen: u64, needle: &str) -> Vec<Msg> {
        let mut text = Vec::new();
        self.events_until(|m| {
            text.extend_from_slice(&output_of(std::slice::from_ref(m), gen));
            String::from_utf8_lossy(&text).contains(needle)
        })
    }

    /// Like [`Client::events_until`], but first looks in `seen` (events already read) and
    /// appends what it reads to `seen`.
    pub fn seen_or_until(&mut self, seen: &mut Vec<Msg>, pred: impl FnMut(&Msg) -> bool) {
        let mut pred = pred;
        if seen.iter().any(&mut pred) {
            return;
        }
        let more = self.events_until(pred);
        seen.extend(more);
    }
}

impl Msg {
    /// The JSON part.
    pub fn json(&self) -> &Value {
        match self {
            Msg::Json(v) | Msg::Output(v, _) => v,
        }
    }
    /// Whether this is event `name` about generation `gen`.
    pub fn is(&self, name: &str, gen: u64) -> bool {
        self.json()["event"] == name && self.json()["gen"] == json!(gen)
    }
}

/// Concatenated output payloads of generation `gen` among `msgs`.
pub fn output_of(msgs: &[Msg], gen: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        if let Msg::Output(v, data) = m {
            if v["gen"] == json!(gen) {
                out.extend_from_slice(data);
            }
        }
    }
    out
}

/// The daemon under test: this build's, or `GENWARD_BIN` (benchmarks compare an earlier
/// build side by side with this one that way).
pub fn daemon_binary() -> std::ffi::OsString {
    std::env::var_os("GENWARD_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_genward").into())
}

/// Says why a test is skipped, on both outputs (visible however the tests are run).
pub fn skip_because(why: &str) -> bool {
    println!("SKIP: {why}");
    eprintln!("SKIP: {why}");
    true
}

/// Whether the daemon `c` talks to contains generations in cgroups; if not, says that
/// `test` is skipped for it.
pub fn without_cgroups(c: &mut Client, test: &str) -> bool {
    c.ok(serde_json::json!({"op": "hello"}))["containment"] != "cgroup"
        && skip_because(&format!("{test}: no cgroup containment here"))
}

/// Whether tests of processes taken back after a crash cannot run here (said out loud):
/// they need `python3` for the subreaper, and a kernel that keeps exit statuses for
/// pidfds (PIDFD_INFO_EXIT).
pub fn cannot_take_back_exits() -> bool {
    use genward::sys::pidfd_ext::{exit_info, ExitInfo};
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    let python = Command::new("python3")
        .args(["-c", ""])
        .stdin(Stdio::null())
        .status();
    if !python.is_ok_and(|s| s.success()) {
        return skip_because("no python3 for the subreaper");
    }
    let mut child = Command::new("true").spawn().expect("run true");
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).expect("pidfd_open");
    child.wait().unwrap();
    match exit_info(pidfd.as_fd()) {
        Ok(ExitInfo::Exited(_)) => false,
        other => skip_because(&format!(
            "no exit status kept for pidfds on this kernel (PIDFD_INFO_EXIT, 6.15+): {other:?}"
        )),
    }
}

/// A fifo in the daemon's directory.
pub fn fifo(d: &Daemon, name: &str) -> PathBuf {
    make_fifo(d.dir.join(name))
}

/// Makes a FIFO at `fifo` (readable and writable by its owner).
pub fn make_fifo(fifo: PathBuf) -> PathBuf {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    fifo
}

/// Writes a line into `fifo` for the process that reads it; its open of the fifo may still
/// be on its way.
pub fn release(fifo: &Path) {
    let deadline = Instant::now() + PATIENCE;
    use std::os::unix::fs::OpenOptionsExt;
    let mut writer = loop {
        let open = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo);
        match open {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(Instant::now() < deadline, "nobody opened the fifo");
                std::thread::yield_now();
            }
            Err(e) => panic!("open the fifo: {e}"),
        }
    };
    std::io::Write::write_all(&mut writer, b"go\n").unwrap();
}

/// Makes `fd` the child's descriptor `target`, open across `exec`; for a `pre_exec`
/// closure (only async-signal-safe calls).
///
/// `dup2(fd, target)` alone is not enough: when `fd` already is `target` it does nothing,
/// so the close-on-exec flag the descriptor was created with stays set and `exec` closes
/// it — the program then finds `target` closed, or taken by the first descriptor it opens.
///
/// # Safety
/// Call only between `fork` and `exec`, with `fd` open in the child.
pub unsafe fn place_at(fd: std::os::fd::RawFd, target: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: plain descriptor calls on numbers the caller vouches for.
    let r = unsafe {
        if fd == target {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, target)
        }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
