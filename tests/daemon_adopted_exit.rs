//! A process taken back after a crash ends like any other: with its own exit code where the
//! kernel keeps it for pidfds (Linux 6.15+), and the cause the daemon decides — `exited`
//! when it ended by itself, `stopped` when it was stopped — not `lost`. Its process group
//! is reached through its pidfd.
//!
//! The first daemon runs under a child subreaper ([`SUBREAPER`]) and only the daemon is
//! killed: its processes are then reparented to the subreaper, which reaps them when they
//! end — the reap is what makes the kernel publish their status.
//!
//! These are the durable-state path's (`--no-keeper`): with a keeper the processes keep
//! their I/O and the keeper outlives the first daemon (see `daemon_keeper.rs`).

mod util;

use std::os::fd::{AsFd, OwnedFd};
use std::process::Child;
use std::time::Instant;

use genward::testkit::wait;
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use serde_json::{json, Value};
use util::daemon::{
    cannot_take_back_exits, fifo, output_of, release, Client, Daemon, Msg, LAZY_SUBREAPER,
    PATIENCE, SUBREAPER,
};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().unwrap()
}

/// A daemon under the subreaper, and a client subscribed to everything.
fn daemon(tag: &str) -> (Daemon, Client) {
    let d = Daemon::start_wrapped(tag, &SUBREAPER, &["--no-keeper"], None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    (d, c)
}

/// Spawns `script` (under `sh -c`, with `args`) as `session`, kept across a restart;
/// its generation and pid.
fn spawn_kept(c: &mut Client, session: &str, script: &str, args: &[&str]) -> (u64, u32) {
    let mut argv = vec!["sh", "-c", script, "sh"];
    argv.extend_from_slice(args);
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": session,
        "on_recover": "keep", "argv": argv})));
    let seen = c.events_until(|m| m.is("spawned", gen));
    let pid = seen.last().unwrap().json()["pid"].as_u64().unwrap();
    (gen, pid as u32)
}

/// The pid a generation printed as `child=<pid>.`, and a pidfd for it (it runs: the pidfd
/// is that process's).
fn child_of(c: &mut Client, gen: u64) -> (u32, OwnedFd) {
    let mut text = Vec::new();
    let pid = |text: &[u8]| -> Option<u32> {
        let text = String::from_utf8_lossy(text);
        text.split("child=").nth(1)?.split_once('.')?.0.parse().ok()
    };
    c.events_until(|m| {
        text.extend_from_slice(&output_of(std::slice::from_ref(m), gen));
        pid(&text).is_some()
    });
    let pid = pid(&text).unwrap();
    let fd = pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()).unwrap();
    (pid, fd)
}

/// The restarted daemon has taken `gen` of `session` back, running.
fn assert_adopted(c: &mut Client, session: &str, gen: u64) {
    let got = c.ok(json!({"op": "get", "session": session}));
    assert_eq!(got["session"]["current"], json!(gen), "{got}");
    assert_eq!(got["session"]["state"], "running", "{got}");
}

/// The `exited` event of `gen`.
fn exited(c: &mut Client, gen: u64) -> Value {
    let seen = c.events_until(|m| m.is("exited", gen));
    match seen.last() {
        Some(Msg::Json(v)) => v.clone(),
        other => panic!("{other:?}"),
    }
}

/// Everything the first daemon left has ended and been reaped: the subreaper has no child
/// left and exits.
fn assert_nothing_left(mut subreaper: Child) {
    let status = wait::child_exit(&mut subreaper, PATIENCE);
    assert!(
        status.is_some(),
        "the subreaper still has processes to reap"
    );
}

/// Reads a line from the fifo named by `$1`, then exits 7.
const EXIT_7: &str = r#"read line < "$1"; exit 7"#;

#[test]
fn an_adopted_process_that_ends_by_itself_reports_its_own_code() {
    if cannot_take_back_exits() {
        return;
    }
    let (mut d, mut c) = daemon("adopted-code");
    let fifo = fifo(&d, "go");
    let (gen, _) = spawn_kept(&mut c, "job", EXIT_7, &[fifo.to_str().unwrap()]);
    drop(c);

    let subreaper = d.crash_daemon_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    assert_adopted(&mut c, "job", gen);
    release(&fifo);

    let end = exited(&mut c, gen);
    assert_eq!(end["code"], 7, "{end}");
    assert_eq!(end["signal"], Value::Null, "{end}");
    assert_eq!(end["cause"], "exited", "{end}");
    let list = c.ok(json!({"op": "list"}));
    let job = &list["sessions"][0];
    assert_eq!(job["last_end"]["code"], 7, "{list}");
    assert_nothing_left(subreaper);
}

#[test]
fn stopping_an_adopted_process_reports_stopped_and_takes_its_group_with_it() {
    if cannot_take_back_exits() {
        return;
    }
    let (mut d, mut c) = daemon("adopted-stop");
    let script = "sleep 1000 & echo child=$!.; wait";
    let (gen, _) = spawn_kept(&mut c, "svc", script, &[]);
    let (_, job) = child_of(&mut c, gen);
    drop(c);

    let subreaper = d.crash_daemon_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    assert_adopted(&mut c, "svc", gen);
    c.ok(json!({"op": "stop", "session": "svc", "if_gen": gen}));

    let end = exited(&mut c, gen);
    assert_eq!(end["cause"], "stopped", "{end}");
    assert_eq!(end["code"], 143, "{end}");
    assert_eq!(end["signal"], "SIGTERM", "{end}");
    // Its background job, in its process group, went with it.
    let deadline = Instant::now() + PATIENCE;
    assert!(wait::readable(job.as_fd(), deadline), "its job runs on");
    assert_nothing_left(subreaper);
}

#[test]
fn a_tree_signal_reaches_an_adopted_process_group_through_the_pidfd() {
    if cannot_take_back_exits() {
        return;
    }
    let (mut d, mut c) = daemon("adopted-tree");
    // The job carries no marker (`env -i`): only a signal to the group can reach it.
    let script = "env -i sleep 1000 & echo child=$!.; wait";
    let (gen, _) = spawn_kept(&mut c, "tree", script, &[]);
    let (_, job) = child_of(&mut c, gen);
    drop(c);

    let subreaper = d.crash_daemon_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    assert_adopted(&mut c, "tree", gen);
    c.ok(json!({"op": "signal", "session": "tree", "if_gen": gen,
        "signal": "TERM", "scope": "tree"}));

    let end = exited(&mut c, gen);
    assert_eq!(end["cause"], "signaled", "{end}");
    assert_eq!(end["code"], 143, "{end}");
    let deadline = Instant::now() + PATIENCE;
    assert!(wait::readable(job.as_fd(), deadline), "its job runs on");
    assert_nothing_left(subreaper);
}

/// Sends SIGUSR1 to a [`LAZY_SUBREAPER`] when dropped, so that it reaps everything and
/// exits even when the test fails before it says so.
struct Lazy(Option<Child>);

impl Lazy {
    /// Lets it reap, and hands it over to be waited for.
    fn reap_now(mut self) -> Child {
        let child = self.0.take().unwrap();
        // SAFETY: kill with the pid of our own, unreaped child.
        unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
        child
    }
}

impl Drop for Lazy {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            // SAFETY: kill with the pid of our own, unreaped child.
            unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
        }
    }
}

#[test]
fn a_status_published_after_the_exit_is_still_the_one_reported() {
    if cannot_take_back_exits() {
        return;
    }
    let mut d = Daemon::start_wrapped("adopted-late", &LAZY_SUBREAPER, &["--no-keeper"], None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let fifo = fifo(&d, "go");
    let (gen, pid) = spawn_kept(&mut c, "late", EXIT_7, &[fifo.to_str().unwrap()]);
    drop(c);

    let subreaper = Lazy(Some(d.crash_daemon_and_restart(&["--no-keeper"])));
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    assert_adopted(&mut c, "late", gen);
    release(&fifo);
    // It exited, and nobody reaped it: the kernel has no status for it yet.
    let deadline = Instant::now() + PATIENCE;
    while !genward::testkit::proc::stat(pid).is_some_and(|s| s.is_zombie()) {
        assert!(Instant::now() < deadline, "it did not exit");
        std::thread::yield_now();
    }
    // The daemon sees the exit but no status: not reported lost meanwhile.
    let got = c.ok(json!({"op": "get", "session": "late"}));
    assert_eq!(got["session"]["current"], json!(gen), "{got}");
    assert!(
        !c.backlog.iter().any(|m| m.is("exited", gen)),
        "reported before its status: {:?}",
        c.backlog
    );

    let subreaper = subreaper.reap_now();
    let end = exited(&mut c, gen);
    assert_eq!(end["code"], 7, "{end}");
    assert_eq!(end["cause"], "exited", "{end}");
    assert_nothing_left(subreaper);
}

/// Sends SIGCONT to a daemon stopped with SIGSTOP when dropped, so that a test failing
/// while it is stopped still lets it be stopped and reaped.
struct Stopped(i32);

impl Stopped {
    /// Stops the daemon `pid` (a child of this test) and returns once it is stopped: a
    /// SIGSTOP only queued lets the daemon see what happens meanwhile.
    fn new(pid: u32) -> Stopped {
        // SAFETY: kill with the pid of the daemon under test, which runs.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        // SAFETY: an all-zero `siginfo_t` is a valid value for waitid to fill in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for a state change of our own child; `info` is writable. WNOWAIT
        // leaves the stop to be reported again, as nothing else here waits for it.
        let r =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WSTOPPED | libc::WNOWAIT) };
        assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
        Stopped(pid as i32)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `new`.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// How many times the daemon has looked through `/proc` for processes nothing accounts
/// for: the number its last such log line gives (its debug log).
fn looks_through_proc(log: &str) -> u64 {
    log.lines()
        .filter_map(|l| {
            let (n, what) = l.split("look ").nth(1)?.split_once(' ')?;
            what.starts_with("through /proc").then(|| n.parse().ok())?
        })
        .max()
        .unwrap_or(0)
}

/// Many processes taken back that end together cost one look through `/proc` for what
/// they left, not one each (that is generations × host processes, with the loop answering
/// nobody): what each started is still found by its marker and killed.
#[test]
fn adopted_processes_ending_together_are_swept_in_one_look() {
    if cannot_take_back_exits() {
        return;
    }
    const N: usize = 12;
    // Contained in their sessions, not cgroups: once a leader taken back is gone, only
    // its marker leads to what it started.
    let args = ["--no-keeper", "--containment", "session"];
    let mut d = Daemon::start_wrapped("adopted-sweep-once", &SUBREAPER, &args, None);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "sleep 1000 & echo child=$!.; wait";
    let mut taken = Vec::new();
    for i in 0..N {
        let (gen, pid) = spawn_kept(&mut c, &format!("s{i}"), script, &[]);
        let (_, job) = child_of(&mut c, gen);
        taken.push((gen, pid, job));
    }
    drop(c);

    let subreaper = d.crash_daemon_and_restart_logged("genward=debug", &args);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    for (i, (gen, _, _)) in taken.iter().enumerate() {
        assert_adopted(&mut c, &format!("s{i}"), *gen);
    }
    let at_start = looks_through_proc(&d.log());
    assert_eq!(at_start, 1, "one look at start:\n{}", d.log());

    // Every leader ends while the daemon is stopped: it sees all the ends in one turn.
    let stopped = Stopped::new(d.pid);
    for (_, pid, _) in &taken {
        let fd = pidfd_open(Pid::from_raw(*pid as i32).unwrap(), PidfdFlags::empty()).unwrap();
        rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL).unwrap();
        let deadline = Instant::now() + PATIENCE;
        assert!(wait::readable(fd.as_fd(), deadline), "pid {pid} lives on");
    }
    drop(stopped);

    let mut ended = std::collections::HashSet::new();
    c.events_until(|m| {
        match m {
            Msg::Json(v) if v["event"] == "exited" => ended.insert(gen_of(v)),
            _ => false,
        };
        ended.len() == N
    });
    // Answered in a later turn than the ends were seen in: the turn's look is over.
    c.ok(json!({"op": "hello"}));
    // What each started, marked with its generation, is killed.
    for (gen, _, job) in &taken {
        let deadline = Instant::now() + PATIENCE;
        assert!(
            wait::readable(job.as_fd(), deadline),
            "gen {gen}'s job runs on"
        );
    }
    let looks = looks_through_proc(&d.log()) - at_start;
    assert_eq!(looks, 1, "{N} ends, one look:\n{}", d.log());
    assert_nothing_left(subreaper);
}
