//! What a state directory and the process table say about a daemon's generations, read
//! independently of the daemon's own code: the directory's id, its descriptor files, and
//! the processes carrying the directory's `GENWARD_GEN=<id>:<gen>` marker.

use std::path::{Path, PathBuf};

use genward::testkit::proc;
use serde_json::Value;

/// The second line of a state file (the first is its header), as JSON.
fn body(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(text.lines().nth(1)?).ok()
}

/// The id of the state directory `state` (its `id` file).
pub fn dir_id(state: &Path) -> String {
    let v = body(&state.join("id")).expect("the state directory's id file");
    v["id"].as_str().expect("an id").to_owned()
}

/// A descriptor file: one live generation as the daemon recorded it.
#[derive(Debug, Clone)]
pub struct DescriptorFile {
    pub path: PathBuf,
    pub session: String,
    pub gen: u64,
    /// The leader's pid, as the daemon sees it (in its PID namespace).
    pub pid: u32,
}

/// Every descriptor file in `state/gens` that can be read whole (one being replaced at
/// this moment may be skipped).
pub fn descriptors(state: &Path) -> Vec<DescriptorFile> {
    let Ok(entries) = std::fs::read_dir(state.join("gens")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|path| {
            let v = body(&path)?;
            Some(DescriptorFile {
                session: v["session"].as_str()?.to_owned(),
                gen: v["gen"].as_u64()?,
                pid: v["pid"].as_u64()? as u32,
                path,
            })
        })
        .collect()
}

/// A live (not zombie) process carrying a directory's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marked {
    /// As this process sees it.
    pub pid: u32,
    pub gen: u64,
    /// Whether it leads its own session, as a generation's leader does (its children
    /// stay in that session unless they leave it).
    pub leader: bool,
    /// Field 22 of its `stat`: with the pid, which process this is.
    pub starttime: u64,
}

/// The value of `pid`'s `GENWARD_GEN`, if it has one.
pub fn marker(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|&b| b == 0)
        .find_map(|e| e.strip_prefix(b"GENWARD_GEN="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Every live process marked as a generation of the directory with id `dir_id`.
pub fn marked(dir_id: &str) -> Vec<Marked> {
    proc::pids()
        .into_iter()
        .filter_map(|pid| {
            let value = marker(pid)?;
            let (id, gen) = value.split_once(':')?;
            if id != dir_id {
                return None;
            }
            let stat = proc::stat(pid)?;
            if stat.is_zombie() {
                return None;
            }
            Some(Marked {
                pid,
                gen: gen.parse().ok()?,
                leader: stat.session == pid,
                starttime: starttime(pid)?,
            })
        })
        .collect()
}

/// The pid of the first process marked for `dir_id` that `pick` accepts, once there is one
/// (within [`PATIENCE`](super::daemon::PATIENCE)): a process started by what the daemon
/// started announces itself by nothing but appearing, so `/proc` is looked at again.
#[track_caller]
pub fn await_marked(dir_id: &str, what: &str, pick: impl Fn(&Marked) -> bool) -> u32 {
    let deadline = std::time::Instant::now() + super::daemon::PATIENCE;
    loop {
        if let Some(p) = marked(dir_id).into_iter().find(|p| pick(p)) {
            return p.pid;
        }
        assert!(std::time::Instant::now() < deadline, "{what} never ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Field 22 of `/proc/PID/stat` (start time in clock ticks after boot).
pub fn starttime(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 3 (state) is the first after the last ')'.
    text.get(text.rfind(')')? + 2..)?
        .split(' ')
        .nth(19)?
        .parse()
        .ok()
}

/// Clock ticks since boot, as `starttime` counts them.
pub fn boottime_ticks() -> u64 {
    // SAFETY: clock_gettime writes into the timespec we pass; sysconf takes no pointers.
    let (ts, hz) = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        assert_eq!(libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts), 0);
        (ts, libc::sysconf(libc::_SC_CLK_TCK) as u64)
    };
    ts.tv_sec as u64 * hz + ts.tv_nsec as u64 * hz / 1_000_000_000
}

/// Waits until the clock is a tick past `starttime`, so that a process started now cannot
/// share a start time with one started then: a start time has a resolution of one tick,
/// and real pid reuse comes later than that (a wrap of the pid space). This waits on the
/// clock, not on another process, so it sleeps.
pub fn wait_past_tick(starttime: u64) {
    while boottime_ticks() <= starttime + 1 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Kills every live process marked as a generation of the directory with id `dir_id`,
/// each pinned by a pidfd and checked again first: what a test cleans up when the daemon
/// left something behind, or when the test failed half-way.
pub fn kill_marked(dir_id: &str) {
    for p in marked(dir_id) {
        kill_marked_pid(dir_id, p.pid, p.gen);
    }
}

/// Calls [`kill_marked`] when dropped (declare it after the daemon, so that it runs once
/// the daemon has stopped what it would).
pub struct KillMarkedOnDrop(pub String);

impl Drop for KillMarkedOnDrop {
    fn drop(&mut self) {
        kill_marked(&self.0);
    }
}

/// Kills process `pid` if it is (pinned by a pidfd) still marked as generation `gen` of
/// the directory with id `dir_id`.
pub fn kill_marked_pid(dir_id: &str, pid: u32, gen: u64) {
    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
    let Ok(fd) = pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()) else {
        return;
    };
    if marker(pid).as_deref() == Some(&format!("{dir_id}:{gen}")) {
        let _ = pidfd_send_signal(&fd, Signal::KILL);
    }
}
