//! A PID namespace kept alive by a small init of its own, so that daemons can run in it,
//! be killed and be started again without taking the namespace with them (killing a
//! namespace's PID 1 kills everything in it), and so that bystanders can be put on chosen
//! pids through `/proc/sys/kernel/ns_last_pid`.
//!
//! The init is a python3 loop (CI installs python3): it reaps every orphan of the
//! namespace, and on request writes `ns_last_pid` and forks a bystander, a `sleep` that
//! leads a session of its own (as a generation's leader does), so that a group or session
//! signal aimed at a recycled pid would reach it too. Daemons enter the namespace with
//! `nsenter --pid --mount` (the mount namespace for its `/proc`), so they are never its
//! PID 1.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use genward::testkit::proc;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

use super::daemon::PATIENCE;
use super::sys::readable;

/// The namespace's init. Each request is one line, `<pid> <tag> <marker or ->`: it makes
/// the next pid handed out `<pid>` (as far as nothing else forks in between), forks a
/// bystander with `GW_BYSTANDER=<tag>` (and `GENWARD_GEN=<marker>`) in its environment,
/// waits until it has executed `sleep` (its close-on-exec pipe closes), and answers with the
/// pid it got.
const INIT: &str = r#"
import os, signal, sys

def reap(*_):
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return

signal.signal(signal.SIGCHLD, reap)
print("ready", flush=True)
for line in sys.stdin:
    want, tag, marker = line.split()
    r, w = os.pipe()
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(int(want) - 1))
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GW_BYSTANDER": tag}
            if marker != "-":
                env["GENWARD_GEN"] = marker
            os.execvpe("sleep", ["sleep", "1000000"], env)
        finally:
            os._exit(127)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    print(pid, flush=True)
"#;

/// `unshare` as a container runtime runs a container's PID 1: a new PID namespace with
/// its own `/proc`, everything in it killed when `unshare` dies.
const UNSHARE: [&str; 5] = [
    "unshare",
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child=KILL",
];

/// A command that runs what the caller adds (program and arguments) as PID 1 of a new
/// PID namespace, killed with everything in it if the test dies — or why that cannot be
/// done here (the caller reports a skip).
pub fn in_new_pid_namespace() -> Result<Command, String> {
    if !rustix::process::geteuid().is_root() {
        return Err("needs root for a PID namespace".into());
    }
    let works = Command::new(UNSHARE[0])
        .args(&UNSHARE[1..])
        .arg("true")
        .stderr(Stdio::null())
        .status();
    if !works.is_ok_and(|s| s.success()) {
        return Err("unshare --pid --fork --mount-proc does not work here".into());
    }
    let mut cmd = Command::new(UNSHARE[0]);
    cmd.args(&UNSHARE[1..]);
    // SAFETY: prctl is async-signal-safe and takes no pointers here.
    unsafe {
        // If the test dies, unshare dies, and with it (--kill-child) the namespace.
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    Ok(cmd)
}

/// A PID namespace with an init of its own; everything in it is killed when it is dropped.
pub struct PidNamespace {
    unshare: Child,
    /// The init's pid, as this process sees it.
    init: u32,
    to_init: ChildStdin,
    from_init: BufReader<ChildStdout>,
    placed: u32,
}

impl PidNamespace {
    /// A new namespace, or why none can be made here (the caller reports a skip).
    pub fn new() -> Result<PidNamespace, String> {
        let mut cmd = in_new_pid_namespace()?;
        cmd.args(["python3", "-c", INIT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut unshare = cmd
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        let to_init = unshare.stdin.take().expect("piped stdin");
        let mut from_init = BufReader::new(unshare.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        let _ = from_init.read_line(&mut line);
        if line.trim() != "ready" {
            let out = unshare.wait_with_output().expect("unshare's output");
            return Err(format!(
                "no PID namespace with a python3 init: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let init = *proc::children(unshare.id())
            .first()
            .expect("unshare's child, the namespace's init");
        Ok(PidNamespace {
            unshare,
            init,
            to_init,
            from_init,
            placed: 0,
        })
    }

    /// The wrapper that runs a program in the namespace (not as its PID 1).
    pub fn wrapper(&self) -> Vec<String> {
        [
            "nsenter",
            "--target",
            &self.init.to_string(),
            "--pid",
            "--mount",
            "--",
        ]
        .map(String::from)
        .to_vec()
    }

    /// Pid in the namespace → pid as this process sees it, for every process in it: one
    /// pass over `/proc`.
    pub fn pids(&self) -> HashMap<u32, u32> {
        let Ok(ns) = std::fs::read_link(format!("/proc/{}/ns/pid", self.init)) else {
            return HashMap::new();
        };
        proc::pids()
            .into_iter()
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|n| n == ns))
            .filter_map(|pid| Some((innermost_pid(pid)?, pid)))
            .collect()
    }

    /// Puts a bystander on pid `ns_pid` of the namespace (which must be free), carrying
    /// `marker` as its `GENWARD_GEN` if given. `Err` with the pid it got instead when
    /// something else in the namespace forked in between (that bystander is killed again).
    pub fn bystander(&mut self, ns_pid: u32, marker: Option<&str>) -> Result<Bystander, u32> {
        self.placed += 1;
        let tag = format!("{}-{}", std::process::id(), self.placed);
        writeln!(self.to_init, "{ns_pid} {tag} {}", marker.unwrap_or("-")).expect("ask the init");
        let mut line = String::new();
        self.from_init
            .read_line(&mut line)
            .expect("the init's answer");
        let got: u32 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the init answered {line:?}"));
        let outer = *self
            .pids()
            .get(&got)
            .unwrap_or_else(|| panic!("bystander {got} not found in the namespace"));
        let pidfd = pidfd_open(Pid::from_raw(outer as i32).unwrap(), PidfdFlags::empty())
            .expect("pidfd_open a fresh bystander");
        // The pidfd pins the process: if it carries the tag, it is the one just made.
        let environ = std::fs::read(format!("/proc/{outer}/environ")).unwrap_or_default();
        let want = format!("GW_BYSTANDER={tag}");
        assert!(
            environ.split(|&b| b == 0).any(|e| e == want.as_bytes()),
            "pid {outer} is not the bystander {tag}"
        );
        let bystander = Bystander {
            ns_pid: got,
            pid: outer,
            pidfd,
        };
        if got == ns_pid {
            Ok(bystander)
        } else {
            bystander.kill();
            Err(got)
        }
    }
}

impl Drop for PidNamespace {
    fn drop(&mut self) {
        // SIGKILL to unshare kills its child (--kill-child), the init, and with it the
        // whole namespace.
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// A process put on a chosen pid, that nothing may signal.
pub struct Bystander {
    /// Its pid in the namespace (what a daemon in it sees and records).
    pub ns_pid: u32,
    /// Its pid as this process sees it.
    pub pid: u32,
    pidfd: OwnedFd,
}

impl Bystander {
    /// Whether it still runs, unstopped: `sleep` ends on any signal a supervisor sends
    /// (TERM, KILL, HUP, INT, ...), and shows `T` if stopped.
    pub fn untouched(&self) -> bool {
        !readable(self.pidfd.as_fd(), Instant::now())
            && proc::stat(self.pid).is_some_and(|s| s.state != "T" && !s.is_zombie())
    }

    /// Kills it (the test is done with it) and waits for its end.
    pub fn kill(self) {
        let _ = pidfd_send_signal(&self.pidfd, Signal::KILL);
        assert!(
            readable(self.pidfd.as_fd(), Instant::now() + PATIENCE),
            "bystander {} survived SIGKILL",
            self.pid
        );
    }
}

/// `pid`'s pid in the innermost PID namespace it belongs to (the last of `NSpid`).
pub fn innermost_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}
