//! Process trees: a generation's whole session found by walking our own subtree (never the
//! whole host), signalled one verified process at a time, and watched until it is empty.
//!
//! # Scope: the session
//! Every child we spawn is a session leader (`setsid`), so "the generation's processes"
//! are the processes whose session id is the leader's pid. A job-control shell puts each
//! job in a process group of its own, but every job stays in the shell's session; only
//! `setsid` leaves it. While the leader is our unreaped child (alive or a zombie) no other
//! process can hold its pid, so no other session can have that id: a process whose session
//! id is the leader's pid *is* one of the generation's processes. After the reap that
//! stops being true, and nothing here signals by session any more.
//!
//! # Where the members are: our subtree
//! A process only ever joins a session by being forked from one of its members, so every
//! member descends from the leader. When a parent dies its children are reparented to the
//! nearest *child subreaper* among their ancestors (or to init). With the daemon a
//! subreaper (or PID 1), every member of every session we spawned therefore stays in the
//! daemon's own subtree: the leader's remaining descendants, plus the daemon's direct
//! children (orphans reparented to it) and theirs. [`session_members`] walks that subtree
//! from the daemon, [`descendants`] any subtree: the cost grows with the number of
//! processes we supervise, never with the number of processes on the host.
//! Without a subreaper, orphans go to init and leave our subtree: [`Reach::Host`] then
//! scans all of `/proc` by session id (the old cost, but only when a session can still
//! hold members, and on a backed-off timer: see [`SessionWatch`]).
//!
//! A walk reads `/proc/<pid>/task/<tid>/children` (the direct children of one thread,
//! `CONFIG_PROC_CHILDREN`, Linux 3.5+) and `/proc/<pid>/stat` of each process: two small
//! reads per process. Where the `children` file does not exist, a walk falls back to one
//! scan of all of `/proc`, linking processes by their parent pid ([`Walk::by_scan`] says
//! so). A walk is a snapshot of a moving system: processes that exit while it runs are
//! skipped; the kernel documents the `children` file as exact only for frozen tasks (a
//! child reparented while the walk runs can be missed in both places), so the walk re-reads
//! its root's children at the end (where orphans arrive), and emptiness is only ever
//! concluded from two consecutive walks ([`SessionWatch`]). A walk visits at most
//! [`MAX_WALK`] processes and says when it stopped short ([`Walk::truncated`]).
//!
//! # Signalling without reaching a stranger
//! [`signal_members`] signals each member through a pidfd, which refers to one process
//! forever: `pidfd_open(pid)`, then `/proc/<pid>/stat` is read again and must still show
//! the member's session (and process group, for a group) and start time, then
//! `pidfd_send_signal`. If the process the pidfd refers to exited before the re-read, the
//! signal fails with `ESRCH` whatever the re-read showed; if it was still running, the
//! re-read was its own. The leader is never among the members: it is signalled through its
//! own handle ([`Process::signal`]).
//!
//! # Escapees
//! A process that called `setsid` (a daemonizing double fork, `setsid cmd &` in a shell)
//! has left the session and is not signalled with it. Walks report such processes as
//! [`Escapee`]s: a process of our subtree whose session belongs to no generation we track
//! (and is not the daemon's own). Where it came from is known from its ancestors while they
//! live ([`Escapee::from_sid`]) and from the [`GEN_MARKER`] variable in its environment
//! ([`Escapee::marker`]), which survives the double fork.
//!
//! # Use
//! `others`, wherever asked for, is the pids of the *other* session leaders we spawned and
//! have not reaped: walks skip them and their subtrees (see [`session_members`]).
//! - **Spawn**: set [`GEN_MARKER`]`=<gen>` in the child's environment.
//! - **Signal scopes**: `leader` is [`Process::signal`]; `foreground` is
//!   [`signal_foreground`] (with the PTY master); `tree` is [`signal_tree`].
//! - **Stop, and a leader's exit**: one [`SessionWatch`] per generation
//!   ([`SessionWatch::new`]). Each signal of the sequence goes to the leader through
//!   [`Process::signal`] (while it runs) and is marked for the rest
//!   ([`SessionWatch::mark`]); at the end of the loop's turn one [`Survey`] of our subtree
//!   serves every session that wants a walk ([`SessionWatch::wants_walk`],
//!   [`SessionWatch::observe`]): it sends the marked signals and watches the members. A
//!   reap waits for that survey (the zombie leader pins the session the signal is for).
//!   [`SessionWatch::signal`] and [`SessionWatch::poll`] do the same for one session alone.
//! - **Waiting for the session to empty**: register [`SessionWatch::fd`] (once it has
//!   one) for readable interest, and look again when it is readable or
//!   [`SessionWatch::deadline`] has passed (the loop's timeout includes it). Empty after
//!   the leader exited means the generation's processes are gone: deregister, drop the
//!   watch, reap the leader.
//! - **Escapees**: [`EscapeeLedger::new_in`] after each survey; an escapee
//!   came from this generation if its [`Escapee::from_sid`] is the leader's pid or its
//!   [`Escapee::marker`] is this generation; from another one if its marker says so.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::Signal;
use rustix::process::{getpid, kill_process, pidfd_open, pidfd_send_signal, Pid, PidfdFlags};

use crate::sys::process::{pidfd_exited, Process, SignalError};

mod listing;
mod pid_set;
mod survey;
mod watch;

use listing::Listing;
pub use listing::OwnChildren;
pub use pid_set::{pid_set, PidSet};

pub use survey::{EscapeeLedger, Survey};
pub use watch::{
    Observed, SessionWatch, WatchState, FIRST_RESCAN, MAX_FREEZE_WALKS, MAX_RESCAN, MAX_WATCHED,
};

/// Most processes one walk visits (and keeps); a walk that reaches it stops and says so.
pub const MAX_WALK: usize = 1 << 16;

/// The environment variable the driver is to set in every child to its generation number;
/// it is inherited by everything the child starts, including a double-forked daemon, and is
/// how an [`Escapee`] whose ancestors are gone is traced back ([`read_marker`]).
pub const GEN_MARKER: &str = "GENWARD_GEN";

/// Longest `/proc/<pid>/stat` line read (a real one is under 400 bytes).
const STAT_MAX: usize = 1024;

/// Most of `/proc/<pid>/environ` read when looking for [`GEN_MARKER`].
const ENVIRON_MAX: usize = 256 * 1024;

/// Bytes of a `children` file per listed pid, at most (7 digits and a space).
const CHILD_BYTES: usize = 8;

/// One process as `/proc/<pid>/stat` showed it when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    /// Its pid.
    pub pid: i32,
    /// Its parent's pid (field 4).
    pub ppid: i32,
    /// Its process group (field 5).
    pub pgid: i32,
    /// Its session (field 6).
    pub sid: i32,
    /// The foreground process group of its controlling terminal; `-1` without one
    /// (field 8).
    pub tpgid: i32,
    /// The state letter: `R`, `S`, `D`, `T`, `Z`, ... (field 3).
    pub state: u8,
    /// Its number of threads (field 20).
    pub threads: u32,
    /// When it started, in clock ticks since boot (field 22): with the pid, what tells it
    /// apart from a later process on the same pid.
    pub starttime: u64,
}

impl Member {
    /// Whether it has exited and waits to be reaped (a zombie): it holds nothing, has no
    /// children, and a signal does nothing to it. A process whose main thread exited while
    /// other threads run also shows `Z`, but it is alive: it is not counted as exited.
    pub fn is_exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X') && self.threads <= 1
    }

    /// Whether it is a session leader (its session id is its own pid).
    pub fn is_session_leader(&self) -> bool {
        self.sid == self.pid
    }
}

/// Parses a `/proc/<pid>/stat` line for `pid`. The fields are read after the last `)`, so a
/// command name with spaces or parentheses cannot shift them.
pub fn parse_stat(pid: i32, stat: &[u8]) -> Option<Member> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut f = rest.split_ascii_whitespace();
    let state = *f.next()?.as_bytes().first()?; // 3
    let ppid = f.next()?.parse().ok()?; // 4
    let pgid = f.next()?.parse().ok()?; // 5
    let sid = f.next()?.parse().ok()?; // 6
    let _tty = f.next()?; // 7
    let tpgid = f.next()?.parse().ok()?; // 8
    let threads = f.nth(11)?.parse().ok()?; // 9..=19 skipped, 20
    let _itrealvalue = f.next()?; // 21
    let starttime = f.next()?.parse().ok()?; // 22
    Some(Member {
        pid,
        ppid,
        pgid,
        sid,
        tpgid,
        state,
        threads,
        starttime,
    })
}

/// Why a `/proc` file could not be read.
#[derive(Debug)]
enum Fail {
    /// The process is gone.
    Gone,
    /// Anything else.
    Other(io::Error),
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Fail {
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) => Fail::Gone,
            _ => Fail::Other(e),
        }
    }
}

/// Reads at most `limit` bytes of `path` into `buf` (cleared first). `Ok(true)` if the
/// whole file fit.
fn read_into(path: &str, buf: &mut Vec<u8>, limit: usize) -> Result<bool, Fail> {
    buf.clear();
    let file = fs::File::open(path)?;
    let read = file.take(limit as u64 + 1).read_to_end(buf)?;
    if read > limit {
        buf.truncate(limit);
        return Ok(false);
    }
    Ok(true)
}

/// Scratch space reused across the reads of one walk.
#[derive(Default)]
struct Scratch {
    path: String,
    buf: Vec<u8>,
}

impl Scratch {
    fn member(&mut self, pid: i32) -> Result<Member, Fail> {
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/stat");
        read_into(&self.path, &mut self.buf, STAT_MAX)?;
        if self.buf.is_empty() {
            return Err(Fail::Gone); // reaped between the open and the read
        }
        parse_stat(pid, &self.buf).ok_or_else(|| {
            Fail::Other(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("/proc/{pid}/stat: malformed"),
            ))
        })
    }

    /// Appends the children of `pid` (of every thread if it has several) to `out`, at most
    /// `room` of them; `Ok(false)` if some did not fit.
    fn children(
        &mut self,
        pid: i32,
        threads: u32,
        out: &mut Vec<i32>,
        room: usize,
    ) -> Result<bool, Fail> {
        if threads <= 1 {
            return self.thread_children(pid, pid, out, room);
        }
        // Each thread has its own list: a child is listed under the thread that forked it.
        let mut complete = true;
        for entry in fs::read_dir(format!("/proc/{pid}/task"))? {
            let Some(tid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let room = room.saturating_sub(out.len());
            match self.thread_children(pid, tid, out, room) {
                Ok(all) => complete &= all,
                Err(Fail::Gone) => {} // the thread exited
                Err(e) => return Err(e),
            }
        }
        Ok(complete)
    }

    fn thread_children(
        &mut self,
        pid: i32,
        tid: i32,
        out: &mut Vec<i32>,
        room: usize,
    ) -> Result<bool, Fail> {
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/task/{tid}/children");
        let limit = room.saturating_mul(CHILD_BYTES).max(CHILD_BYTES);
        let mut complete = read_into(&self.path, &mut self.buf, limit)?;
        let text = std::str::from_utf8(&self.buf).unwrap_or("");
        let mut words = text.split_ascii_whitespace().peekable();
        let mut taken = 0;
        while let Some(word) = words.next() {
            if !complete && words.peek().is_none() {
                break; // possibly cut in the middle of a pid
            }
            if taken == room {
                complete = false;
                break;
            }
            if let Ok(child) = word.parse() {
                out.push(child);
                taken += 1;
            }
        }
        Ok(complete)
    }
}

/// Whether this kernel has `/proc/<pid>/task/<tid>/children` (`CONFIG_PROC_CHILDREN`),
/// decided once.
pub fn children_files_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let me = getpid().as_raw_pid();
        fs::metadata(format!("/proc/{me}/task/{me}/children")).is_ok()
    })
}

/// `pid` as `/proc/<pid>/stat` shows it now, or `None` if no process has that pid.
pub fn read_member(pid: i32) -> io::Result<Option<Member>> {
    match Scratch::default().member(pid) {
        Ok(m) => Ok(Some(m)),
        Err(Fail::Gone) => Ok(None),
        Err(Fail::Other(e)) => Err(e),
    }
}

/// The direct children of `pid` (of all its threads), zombies included. Where the kernel
/// has no `children` files, found by scanning all of `/proc` for processes whose parent is
/// `pid`. Empty if `pid` does not exist.
pub fn children(pid: i32) -> io::Result<Vec<i32>> {
    if !children_files_supported() {
        let all = scan_all(MAX_WALK)?;
        return Ok(all
            .members
            .iter()
            .filter(|m| m.ppid == pid)
            .map(|m| m.pid)
            .collect());
    }
    let mut scratch = Scratch::default();
    let threads = match scratch.member(pid) {
        Ok(m) => m.threads,
        Err(Fail::Gone) => return Ok(Vec::new()),
        Err(Fail::Other(e)) => return Err(e),
    };
    let mut out = Vec::new();
    match scratch.children(pid, threads, &mut out, MAX_WALK) {
        Ok(_) | Err(Fail::Gone) => Ok(out),
        Err(Fail::Other(e)) => Err(e),
    }
}

/// What a walk found.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// Every process visited, the root excluded, zombies included, parents before their
    /// children (for a [`session_walk`], not the other sessions it was told to skip).
    pub members: Vec<Member>,
    /// The walk stopped at [`MAX_WALK`] processes: others may have been missed.
    pub truncated: bool,
    /// Processes whose `stat` or `children` could not be read for a reason other than
    /// their exit: their subtrees were not walked.
    pub unreadable: usize,
    /// Found by a scan of all of `/proc` (no `children` files, or [`Reach::Host`]).
    pub by_scan: bool,
}

impl Walk {
    /// Whether nothing was missed for lack of room or of permission: only a complete walk
    /// can show that a session is empty.
    pub fn is_complete(&self) -> bool {
        !self.truncated && self.unreadable == 0
    }

    /// The processes of session `sid` that have not exited, its leader left out.
    pub fn session(&self, sid: i32) -> impl Iterator<Item = &Member> + '_ {
        self.members
            .iter()
            .filter(move |m| m.sid == sid && m.pid != sid && !m.is_exited())
    }

    /// The processes of process group `pgid` within session `sid` that have not exited,
    /// the session leader left out.
    pub fn group(&self, sid: i32, pgid: i32) -> impl Iterator<Item = &Member> + '_ {
        self.session(sid).filter(move |m| m.pgid == pgid)
    }

    /// Live processes of the walk whose session is neither one of `tracked` (the session
    /// ids, i.e. leader pids, of the generations we track and have not reaped, including
    /// those still starting) nor the daemon's own. See [`Escapee`].
    ///
    /// Reads `/proc/<pid>/environ` of each (for [`Escapee::marker`]); there are usually
    /// none.
    pub fn escapees(&self, tracked: &[i32]) -> Vec<Escapee> {
        self.escapees_where(&pid_set(tracked.iter().copied()), |_| true)
    }

    /// [`Walk::escapees`] among the processes `consider` accepts (the others' environments
    /// are not read).
    pub fn escapees_where(
        &self,
        tracked: &PidSet,
        consider: impl Fn(&Member) -> bool,
    ) -> Vec<Escapee> {
        let own = own_session();
        let found: Vec<&Member> = self
            .members
            .iter()
            .filter(|m| !m.is_exited() && m.sid != own && !tracked.contains(&m.sid))
            .filter(|m| consider(m))
            .collect();
        if found.is_empty() {
            // The usual case: no map of the walk by pid to build.
            return Vec::new();
        }
        let by_pid: HashMap<i32, &Member> = self.members.iter().map(|m| (m.pid, m)).collect();
        found
            .into_iter()
            .map(|m| {
                // Up the parent chain, as far as the walk saw it, to a tracked session.
                let mut from_sid = None;
                let mut at = m;
                for _ in 0..self.members.len() {
                    let Some(parent) = by_pid.get(&at.ppid) else {
                        break;
                    };
                    if tracked.contains(&parent.sid) {
                        from_sid = Some(parent.sid);
                        break;
                    }
                    at = parent;
                }
                Escapee {
                    member: *m,
                    from_sid,
                    marker: read_marker(m.pid),
                }
            })
            .collect()
    }
}

/// A live process of our subtree that left the session it was started in (`setsid`) and is
/// in none we track: it is not signalled with any generation, and is reported instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escapee {
    /// The process.
    pub member: Member,
    /// The tracked session its nearest tracked ancestor is in (its parent's, for
    /// `setsid cmd &` in a shell), while that ancestor lives. `None` once the chain is
    /// broken, e.g. for a double-forked daemon whose intermediate parent exited.
    pub from_sid: Option<i32>,
    /// The value of [`GEN_MARKER`] in its environment, if readable and a number.
    pub marker: Option<u64>,
}

/// The generation in `GENWARD_GEN=[<dir id>:]<gen>` in `/proc/<pid>/environ`
/// ([`GEN_MARKER`]): the environment the process was executed with (a later `setenv` is
/// not seen), inherited from the generation that started it unless someone cleared it.
/// `None` if absent, not a number, or unreadable (reading another user's environment
/// needs the same rights as tracing it).
pub fn read_marker(pid: i32) -> Option<u64> {
    let value = read_marker_value(pid)?;
    value.rsplit(':').next()?.parse().ok()
}

/// The whole value of [`GEN_MARKER`] in `/proc/<pid>/environ`, if present and text.
///
/// A process in the middle of `execve` shows no environment, an empty one, or a part of
/// its old one (its old memory is being torn down) for a few microseconds, longer if it
/// is descheduled then. So a read is taken only when it is whole (it ends with the last
/// variable's NUL, or fills the limit) and a second read gives the same bytes; otherwise
/// both are tried again for up to [`EXEC_PATIENCE`] — only while the process may be in a
/// system call at all (see `may_be_in_exec`). A marked process is thus not
/// passed over, or misread, for being caught mid-exec.
pub fn read_marker_value(pid: i32) -> Option<String> {
    let environ = format!("/proc/{pid}/environ");
    let (mut buf, mut again) = (Vec::new(), Vec::new());
    let mut deadline = None;
    loop {
        let first = read_into(&environ, &mut buf, ENVIRON_MAX);
        let whole = match first {
            Ok(within_limit) => !within_limit || buf.last() == Some(&0),
            Err(_) => false,
        };
        if whole && read_into(&environ, &mut again, ENVIRON_MAX).is_ok() && again == buf {
            break;
        }
        let until = *deadline.get_or_insert_with(|| Instant::now() + EXEC_PATIENCE);
        if Instant::now() >= until || !may_be_in_exec(pid) {
            first.ok()?;
            break;
        }
        std::thread::yield_now();
    }
    let prefix = format!("{GEN_MARKER}=");
    buf.split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .and_then(|v| Some(std::str::from_utf8(v).ok()?.to_owned()))
}

/// How long [`read_marker_value`] reads an empty environment again.
const EXEC_PATIENCE: Duration = Duration::from_millis(100);

/// `PF_KTHREAD` in `/proc/<pid>/stat`'s flags (field 9).
const PF_KTHREAD: u64 = 0x0020_0000;

/// `PF_EXITING` in the same flags: the process is on its way out (`do_exit`).
const PF_EXITING: u64 = 0x0000_0004;

/// Whether `pid` may be in the middle of `execve`: see [`may_be_in_exec_stat`].
fn may_be_in_exec(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| may_be_in_exec_stat(&stat))
}

/// Whether the process whose `/proc/<pid>/stat` is `stat` may be in the middle of
/// `execve`: running or in uninterruptible sleep (as a process in a system call is; one
/// sleeping or stopped is not in `execve`), not a kernel thread, and not a single-threaded
/// process on its way out. Processes that really have an empty environment are nearly all
/// idle, so they are not read again.
///
/// An exiting process has let go of its memory (its environment reads empty) and shows
/// running until it is a zombie, longer on a busy machine: were it taken as maybe in
/// `execve`, each process ending while `/proc` is looked through — as the sessions a
/// crashed daemon's successor stops all do at once — would be read again for up to
/// [`EXEC_PATIENCE`]. Only one with other threads may be: `execve` from another thread
/// ends the leader, whose pid the program then takes over.
fn may_be_in_exec_stat(stat: &str) -> bool {
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let mut fields = after.split_ascii_whitespace();
    let busy = matches!(fields.next(), Some("R" | "D"));
    // Fields after the state: ppid, pgrp, session, tty_nr, tpgid, then flags (9).
    let flags: u64 = fields
        .nth(5)
        .and_then(|f| f.parse().ok())
        .unwrap_or(PF_KTHREAD);
    // Then minflt to nice (10 to 19), then num_threads (20).
    let threads: u64 = fields.nth(10).and_then(|f| f.parse().ok()).unwrap_or(2);
    let ending = flags & PF_EXITING != 0 && threads <= 1;
    busy && flags & PF_KTHREAD == 0 && !ending
}

/// Every process below `root`, found through the `children` files (or, without them, one
/// scan of all of `/proc`), at most [`MAX_WALK`].
pub fn descendants(root: i32) -> io::Result<Walk> {
    descendants_capped(root, MAX_WALK)
}

/// [`descendants`] that stops after `cap` processes, with [`Walk::truncated`] set.
pub fn descendants_capped(root: i32, cap: usize) -> io::Result<Walk> {
    walk(root, cap, &HashSet::new())
}

/// Walks below `root`, skipping the processes in `skip` (not read, not listed, not
/// descended into).
fn walk(root: i32, cap: usize, skip: &HashSet<i32>) -> io::Result<Walk> {
    walk_on(root, cap, &|pid| skip.contains(&pid), &mut None)
}

/// [`walk`] that skips the pids `skip` accepts, and reads on from `listing` of the root's
/// children, when it is one and the root has not reaped since it was read (see
/// [`Listing`]), and leaves the root's list in it as read at the end.
fn walk_on(
    root: i32,
    cap: usize,
    skip: &dyn Fn(i32) -> bool,
    listing: &mut Option<Listing>,
) -> io::Result<Walk> {
    if !children_files_supported() {
        return walk_by_scan(root, cap, skip);
    }
    let mut w = Walk::default();
    let mut scratch = Scratch::default();
    let root_threads = match scratch.member(root) {
        Ok(m) => m.threads,
        Err(Fail::Gone) => return Ok(w),
        Err(Fail::Other(e)) => return Err(e),
    };
    let mut seen = PidSet::default();
    let mut queue: VecDeque<i32> = VecDeque::new();
    let mut found = Vec::new();
    // The root is read first and again at the end, until it shows no child we have not
    // seen: a process reparented to it while we walked (its parent exited) was in neither
    // place when we looked, and it arrives at the root, or at a subreaper on the way.
    // One thread: its list is read on from where the last read ended.
    let listing = match listing {
        Some(l) if root_threads == 1 && l.is_of(root, root) => Some(l),
        _ if root_threads == 1 => Some(listing.insert(Listing::new(root, root))),
        _ => None,
    };
    let mut listing = listing;
    let mut first = true;
    loop {
        found.clear();
        let room = cap.saturating_sub(w.members.len());
        let listed = match listing.as_deref_mut() {
            // At the first read, what it listed before too: the walk starts from them all.
            Some(l) if std::mem::take(&mut first) => l.read_all(&mut found, room),
            Some(l) => l.read_new(&mut found, room),
            None => scratch.children(root, root_threads, &mut found, room),
        };
        match listed {
            Ok(all) => w.truncated |= !all,
            Err(Fail::Gone) => return Ok(w),
            Err(Fail::Other(e)) => return Err(e),
        }
        let before = queue.len();
        // Skipped ones are never queued nor remembered: with thousands of leaders under the
        // root, the set of those seen stays as small as what is walked.
        queue.extend(
            found
                .iter()
                .copied()
                .filter(|&p| !skip(p) && !seen.contains(&p)),
        );
        if queue.len() == before {
            break;
        }
        while let Some(pid) = queue.pop_front() {
            if !seen.insert(pid) || pid == root || skip(pid) {
                continue;
            }
            if w.members.len() >= cap {
                w.truncated = true;
                queue.clear();
                break;
            }
            let m = match scratch.member(pid) {
                Ok(m) => m,
                Err(Fail::Gone) => continue,
                Err(Fail::Other(_)) => {
                    w.unreadable += 1;
                    continue;
                }
            };
            w.members.push(m);
            if m.is_exited() {
                continue;
            }
            found.clear();
            let room = cap.saturating_sub(w.members.len() + queue.len());
            match scratch.children(pid, m.threads, &mut found, room) {
                Ok(all) => w.truncated |= !all,
                Err(Fail::Gone) => {}
                Err(Fail::Other(_)) => w.unreadable += 1,
            }
            queue.extend(found.iter().copied());
        }
        if w.truncated {
            break;
        }
    }
    Ok(w)
}

/// Every process in `/proc`, at most `cap`.
fn scan_all(cap: usize) -> io::Result<Walk> {
    let mut w = Walk {
        by_scan: true,
        ..Walk::default()
    };
    let mut scratch = Scratch::default();
    for entry in fs::read_dir("/proc")? {
        let Some(pid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if w.members.len() >= cap {
            w.truncated = true;
            break;
        }
        match scratch.member(pid) {
            Ok(m) => w.members.push(m),
            Err(Fail::Gone) => {}
            Err(Fail::Other(_)) => w.unreadable += 1,
        }
    }
    Ok(w)
}

/// [`walk`] without `children` files: one scan of all of `/proc`, linked by parent pid.
fn walk_by_scan(root: i32, cap: usize, skip: &dyn Fn(i32) -> bool) -> io::Result<Walk> {
    let all = scan_all(crate::sys::procscan::MAX_SCAN)?;
    let mut kids: HashMap<i32, Vec<&Member>> = HashMap::new();
    for m in &all.members {
        kids.entry(m.ppid).or_default().push(m);
    }
    let mut w = Walk {
        by_scan: true,
        truncated: all.truncated,
        unreadable: all.unreadable,
        ..Walk::default()
    };
    let mut queue: VecDeque<i32> = VecDeque::from([root]);
    let mut seen = HashSet::from([root]);
    while let Some(pid) = queue.pop_front() {
        for m in kids.get(&pid).into_iter().flatten() {
            if !seen.insert(m.pid) || skip(m.pid) {
                continue;
            }
            if w.members.len() >= cap {
                w.truncated = true;
                return Ok(w);
            }
            w.members.push(**m);
            if !m.is_exited() {
                queue.push_back(m.pid);
            }
        }
    }
    Ok(w)
}

/// Where the members of a session can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Below this process: true when orphans are reparented to us (a subreaper, or PID 1).
    Subtree,
    /// Anywhere on the host: orphans go to init, so a member whose parent died has left
    /// our subtree, and only a scan of all of `/proc` finds it.
    Host,
}

impl Reach {
    /// Where the members of `leader`'s session can be: [`Reach::Subtree`] if the leader is
    /// our child and orphans are reparented to us; [`Reach::Host`] otherwise (an adopted
    /// leader, after a restart, is not below us at all).
    pub fn of(leader: &Process) -> Reach {
        if leader.is_child() && crate::sys::orphans::adopts_orphans() {
            Reach::Subtree
        } else {
            Reach::Host
        }
    }
}

/// The processes to look at for session `sid`: with [`Reach::Subtree`] a walk of our own
/// subtree that does not descend into `others` (see [`session_members`]); with
/// [`Reach::Host`] a scan of all of `/proc`. The walk lists more than the session: filter
/// it with [`Walk::session`].
pub fn session_walk(reach: Reach, sid: i32, others: &[i32]) -> io::Result<Walk> {
    match reach {
        Reach::Host => scan_all(crate::sys::procscan::MAX_SCAN),
        Reach::Subtree => {
            // Another generation's leader: none of its descendants can be in `sid`'s
            // session. Every one of them was forked inside its session (the leader called
            // `setsid` before it could fork) or left it with `setsid`; neither joins
            // another session. Skipped without even reading it: with hundreds of sessions,
            // reading each leader's `stat` at every walk would cost more than the rest.
            let skip: HashSet<i32> = others.iter().copied().filter(|&p| p != sid).collect();
            walk(getpid().as_raw_pid(), MAX_WALK, &skip)
        }
    }
}

/// The live members of session `sid` other than its leader, found in our own subtree (see
/// the [module docs](self): complete only when orphans are reparented to us).
///
/// `others` are the pids of the other session leaders we spawned and have not reaped: the
/// walk skips them and their subtrees, so its cost is that of `sid`'s own processes, the
/// orphans reparented to us, and one read of our own `children` list. Only pids of
/// *unreaped* leaders may be passed (an unreaped child's pid cannot name another process;
/// a reaped one's can, and that process and its descendants would be hidden from the
/// walk). An empty `others` is always correct, only slower: every other session is then
/// walked too.
pub fn session_members(sid: i32, others: &[i32]) -> io::Result<(Vec<Member>, Walk)> {
    let walk = session_walk(Reach::Subtree, sid, others)?;
    Ok((walk.session(sid).copied().collect(), walk))
}

/// What [`signal_members`] did, one count per member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalCounts {
    /// Verified and signalled.
    pub signalled: usize,
    /// Exited since the walk (or its pid now names another process): nothing to signal.
    pub gone: usize,
    /// Not signalled although it may be running: it left the session (or group) since the
    /// walk, the kernel refused (`EPERM`), or it could not be verified (no descriptor left
    /// for its pidfd, unreadable `stat`).
    pub refused: usize,
}

impl std::ops::AddAssign for SignalCounts {
    fn add_assign(&mut self, o: SignalCounts) {
        self.signalled += o.signalled;
        self.gone += o.gone;
        self.refused += o.refused;
    }
}

/// Which members a signal is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// Every member of the leader's session.
    Session,
    /// The members of this process group of the leader's session (e.g. the terminal's
    /// foreground group).
    Group(i32),
}

impl Within {
    fn admits(self, sid: i32, m: &Member) -> bool {
        m.sid == sid
            && match self {
                Within::Session => true,
                Within::Group(pgid) => m.pgid == pgid,
            }
    }
}

/// The leader's session id can only be trusted while it is pinned: the leader is our
/// unreaped child, or (adopted) is alive and held by a pidfd.
fn check_pinned(leader: &Process) -> Result<(), SignalError> {
    if leader.is_reaped() {
        return Err(SignalError::Reaped);
    }
    if !leader.is_child() && leader.pidfd().is_none() {
        return Err(SignalError::GroupNotPinned);
    }
    Ok(())
}

/// For an adopted leader: alive now means alive (so pinning its session id) during the
/// reads before.
fn check_still_pinned(leader: &Process) -> Result<(), SignalError> {
    if leader.is_child() {
        return Ok(());
    }
    match leader.pidfd() {
        Some(fd) => match pidfd_exited(fd) {
            Ok(false) => Ok(()),
            Ok(true) => Err(SignalError::Exited),
            Err(e) => Err(SignalError::Os(e)),
        },
        None => Err(SignalError::GroupNotPinned),
    }
}

/// How re-reading a member before signalling it went.
enum Check {
    /// Still the member, still in scope: the pidfd (if any) to signal it through, and
    /// whether it is stopped (job control).
    Verified(Option<OwnedFd>, bool),
    Gone,
    Refused,
}

/// Opens a pidfd for `m`, then re-reads its `stat`: it must be the same process (start
/// time), alive, and still within `within` of session `sid`.
fn verify(m: &Member, sid: i32, within: Within) -> Check {
    let Some(pid) = Pid::from_raw(m.pid) else {
        return Check::Refused;
    };
    let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => Some(fd),
        Err(Errno::SRCH) => return Check::Gone,
        // No pidfds here: the re-read below, then `kill`, as for a leader in fallback
        // mode. A member that is our own zombie child keeps its pid until we reap it.
        Err(Errno::NOSYS) => None,
        // EMFILE and friends: nothing to verify through.
        Err(_) => return Check::Refused,
    };
    match read_member(m.pid) {
        Ok(Some(now)) if now.starttime != m.starttime || now.is_exited() => Check::Gone,
        Ok(Some(now)) if within.admits(sid, &now) => Check::Verified(pidfd, now.state == b'T'),
        Ok(Some(_)) => Check::Refused, // left the session or group
        Ok(None) => Check::Gone,
        Err(_) => Check::Refused,
    }
}

/// Signals each of `members` that is still, when looked at again, a live member of the
/// `leader`'s session (and of the group, for [`Within::Group`]), through a pidfd opened
/// before the look: never a process that took a member's pid, never one that left.
/// The leader itself is skipped (signal it with [`Process::signal`]), and so are members
/// outside `within` (counted as refused).
///
/// Refuses to signal anyone ([`SignalError::Reaped`]) once the leader is reaped, and for an
/// adopted leader once it has exited: its session id may then be someone else's.
pub fn signal_members(
    leader: &Process,
    members: &[Member],
    within: Within,
    sig: Signal,
) -> Result<SignalCounts, SignalError> {
    let mut counts = SignalCounts::default();
    signal_each(leader, members, within, sig, false, &mut counts, |_, _| {})?;
    Ok(counts)
}

/// [`signal_members`], handing each verified member's pidfd to `keep` after the signal.
/// With `wake`, a member stopped by job control is sent SIGCONT after `sig` so that it can
/// act on it (as systemd does after its stop signal), unless `sig` itself kills, stops or
/// continues.
fn signal_each(
    leader: &Process,
    members: &[Member],
    within: Within,
    sig: Signal,
    wake: bool,
    counts: &mut SignalCounts,
    mut keep: impl FnMut(&Member, OwnedFd),
) -> Result<(), SignalError> {
    check_pinned(leader)?;
    let sid = leader.pid();
    let mut verified = Vec::new();
    for m in members {
        if m.pid == sid {
            continue;
        }
        if !within.admits(sid, m) {
            counts.refused += 1;
            continue;
        }
        match verify(m, sid, within) {
            Check::Verified(fd, stopped) => verified.push((m, fd, stopped)),
            Check::Gone => counts.gone += 1,
            Check::Refused => counts.refused += 1,
        }
    }
    check_still_pinned(leader)?;
    let wake = wake && wakes_stopped(sig);
    for (m, fd, stopped) in verified {
        let send = |sig| match &fd {
            Some(fd) => pidfd_send_signal(fd, sig),
            None => match Pid::from_raw(m.pid) {
                Some(pid) => kill_process(pid, sig),
                None => Err(Errno::SRCH),
            },
        };
        match send(sig) {
            Ok(()) if wake && stopped => {
                counts.signalled += 1;
                let _ = send(Signal::CONT);
            }
            Ok(()) => counts.signalled += 1,
            Err(Errno::SRCH) => counts.gone += 1,
            Err(_) => counts.refused += 1,
        }
        if let Some(fd) = fd {
            keep(m, fd);
        }
    }
    Ok(())
}

/// Whether a signal to a tree is followed by SIGCONT to each of its processes found
/// stopped by job control or `kill -STOP` (as systemd does after its stop signal), so that
/// it acts on it now rather than keep it pending until the SIGKILL: every signal but those
/// that kill, continue or stop by themselves.
pub fn wakes_stopped(sig: Signal) -> bool {
    !matches!(
        sig,
        Signal::KILL | Signal::CONT | Signal::STOP | Signal::TSTP | Signal::TTIN | Signal::TTOU
    )
}

/// After `sig` reached a tree's leader (our unreaped child, so its pid is its own): a
/// leader found stopped is sent SIGCONT through its own handle, as the tree's other
/// members are ([`wakes_stopped`]). Nothing for an adopted leader, whose pid a `/proc` read
/// cannot pin, nor for one that exited.
pub fn wake_leader(leader: &Process, sig: Signal) {
    if !wakes_stopped(sig) || !leader.is_child() || leader.is_reaped() {
        return;
    }
    if matches!(read_member(leader.pid()), Ok(Some(m)) if m.state == b'T') {
        let _ = leader.signal(Signal::CONT);
    }
}

/// Signals the leader through its own handle, counting the outcome.
fn signal_leader(leader: &Process, sig: Signal, counts: &mut SignalCounts) {
    match leader.signal(sig) {
        Ok(()) => counts.signalled += 1,
        Err(SignalError::Exited) | Err(SignalError::Reaped) | Err(SignalError::Mismatch) => {
            counts.gone += 1
        }
        Err(_) => counts.refused += 1,
    }
}

/// The `tree` scope: the leader (through its own handle) and every live member of its
/// session, each verified ([`signal_members`]). Members are found with
/// [`Reach::of`]; `others` as for [`session_members`].
pub fn signal_tree(
    leader: &Process,
    others: &[i32],
    sig: Signal,
) -> Result<SignalCounts, SignalError> {
    check_pinned(leader)?;
    let sid = leader.pid();
    let walk = session_walk(Reach::of(leader), sid, others).map_err(SignalError::Os)?;
    let members: Vec<Member> = walk.session(sid).copied().collect();
    let mut counts = signal_members(leader, &members, Within::Session, sig)?;
    signal_leader(leader, sig, &mut counts);
    Ok(counts)
}

/// `getsid(0)`—the daemon's own session id as `/proc` shows it: 0 when the session's
/// leader is outside our PID namespace (a container entered with `docker exec`, or
/// `unshare --pid --fork`), as it is in `stat` for every process of that session.
///
/// Not `rustix::process::getsid`, which assumes a positive id.
///
/// # References
///  - [Linux `getsid(2)`](https://man7.org/linux/man-pages/man2/getsid.2.html)
fn own_session() -> i32 {
    // SAFETY: getsid(0) takes no pointers and only reads the caller's own session id.
    let sid = unsafe { libc::getsid(0) };
    sid.max(0)
}

/// `ioctl(master, TIOCGPGRP)`—The foreground process group of the terminal whose master
/// we hold, or `None` if it has none (e.g. once its session leader exited).
///
/// # References
///  - [Linux `ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/ioctl_tty.2.html)
pub fn foreground_group(master: BorrowedFd<'_>) -> io::Result<Option<i32>> {
    match rustix::termios::tcgetpgrp(master) {
        Ok(pgid) => Ok(Some(pgid.as_raw_pid())),
        // rustix's answer when the kernel says 0: no foreground group.
        Err(Errno::OPNOTSUPP) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The `foreground` scope: the members of the terminal's foreground process group, each
/// verified to be in it and in the leader's session ([`Within::Group`]), and the leader
/// too when its own group is the foreground one. Never `kill(-pgid)`: the group's leader
/// may be gone, and nothing else pins a group id.
///
/// No foreground group (or one outside the session): nothing is signalled.
pub fn signal_foreground(
    leader: &Process,
    master: BorrowedFd<'_>,
    others: &[i32],
    sig: Signal,
) -> Result<SignalCounts, SignalError> {
    check_pinned(leader)?;
    let sid = leader.pid();
    let Some(pgid) = foreground_group(master).map_err(SignalError::Os)? else {
        return Ok(SignalCounts::default());
    };
    let walk = session_walk(Reach::of(leader), sid, others).map_err(SignalError::Os)?;
    let members: Vec<Member> = walk.group(sid, pgid).copied().collect();
    let mut counts = signal_members(leader, &members, Within::Group(pgid), sig)?;
    if pgid == sid {
        signal_leader(leader, sig, &mut counts);
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"4242 (we ird) name)) S 1 4242 4242 34816 4300 4194560 \
        1200 0 3 0 10 5 0 0 20 0 3 0 987654 1000 200 18446744073709551615 \
        1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        let m = parse_stat(4242, STAT).unwrap();
        assert_eq!(
            m,
            Member {
                pid: 4242,
                ppid: 1,
                pgid: 4242,
                sid: 4242,
                tpgid: 4300,
                state: b'S',
                threads: 3,
                starttime: 987654,
            }
        );
        assert!(m.is_session_leader());
        assert!(!m.is_exited());
        assert!(parse_stat(1, b"1 (x) S 0 1").is_none());
        assert!(parse_stat(1, b"no parenthesis").is_none());
    }

    /// A stat line in `state` with `flags` and `threads`.
    fn stat_line(state: char, flags: u64, threads: u32) -> String {
        format!(
            "4242 (sh) {state} 1 4242 4242 0 -1 {flags} 100 0 0 0 0 0 0 0 20 0 {threads} 0 987654 \
             1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
        )
    }

    /// Only a process that may be in `execve` has its environment read again: never one
    /// ending with no other thread (it reads empty until it is a zombie), so a look
    /// through `/proc` while many sessions end costs one read per process.
    #[test]
    fn an_ending_single_threaded_process_is_not_taken_as_in_execve() {
        assert!(may_be_in_exec_stat(&stat_line('R', 0x40_0000, 1)));
        assert!(may_be_in_exec_stat(&stat_line('D', 0x40_0000, 1)));
        assert!(!may_be_in_exec_stat(&stat_line('S', 0x40_0000, 1)));
        // On its way out (PF_EXITING), alone: not in execve.
        assert!(!may_be_in_exec_stat(&stat_line('R', 0x40_0004, 1)));
        assert!(!may_be_in_exec_stat(&stat_line('D', 0x40_0004, 1)));
        // A leader ending while another thread runs execve: maybe.
        assert!(may_be_in_exec_stat(&stat_line('R', 0x40_0004, 2)));
        // A kernel thread never.
        assert!(!may_be_in_exec_stat(&stat_line('R', 0x20_0040, 1)));
        assert!(!may_be_in_exec_stat("4242 (cut short"));
    }

    #[test]
    fn a_zombie_main_thread_with_live_threads_is_not_exited() {
        let mut m = parse_stat(4242, STAT).unwrap();
        m.state = b'Z';
        assert!(!m.is_exited(), "three threads still run");
        m.threads = 1;
        assert!(m.is_exited());
    }

    #[test]
    fn this_process_is_walked_and_its_own_children_are_found() {
        let me = getpid().as_raw_pid();
        let m = read_member(me).unwrap().unwrap();
        assert_eq!(m.pid, me);
        assert!(!m.is_exited());
        assert!(read_member(i32::MAX).unwrap().is_none());
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(children(me).unwrap().contains(&pid));
        let walk = descendants(me).unwrap();
        assert!(walk.is_complete());
        assert!(walk.members.iter().any(|m| m.pid == pid && m.ppid == me));
        let capped = descendants_capped(me, 0).unwrap();
        assert!(capped.members.is_empty() && capped.truncated);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(descendants(i32::MAX).unwrap().members.is_empty());
    }

    #[test]
    fn the_fallback_scan_finds_the_same_subtree_as_the_children_files() {
        use std::io::BufRead;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 1000 & sleep 1000 & echo up; exec sleep 1000"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = child.id() as i32;
        let pids = |w: Walk| {
            let mut v: Vec<(i32, i32)> = w.members.iter().map(|m| (m.pid, m.ppid)).collect();
            v.sort_unstable();
            v
        };
        let by_files = descendants(pid).unwrap();
        let by_scan = walk_by_scan(pid, MAX_WALK, &|_| false).unwrap();
        assert!(!by_files.by_scan && by_scan.by_scan);
        assert_eq!(by_files.members.len(), 2);
        assert_eq!(pids(by_files), pids(by_scan));
        let skipped = walk_by_scan(getpid().as_raw_pid(), MAX_WALK, &|p| p == pid);
        assert!(skipped
            .unwrap()
            .members
            .iter()
            .all(|m| m.ppid != pid && m.pid != pid));
        for m in descendants(pid).unwrap().members {
            let _ = kill_process(Pid::from_raw(m.pid).unwrap(), Signal::KILL);
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_marker_is_read_from_the_environment() {
        use std::io::Read;
        // A process's environment reads as empty while it is still inside execve (the
        // parent of a vfork-style spawn resumes before the new image's stack is set up),
        // so each shell says when it runs.
        let start = |marker: &str| {
            let mut child = std::process::Command::new("sh")
                .args(["-c", "echo ready; read _"])
                .env(GEN_MARKER, marker)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut ready = [0u8; 6];
            child
                .stdout
                .as_mut()
                .unwrap()
                .read_exact(&mut ready)
                .unwrap();
            child
        };
        let mut child = start("1234");
        let mut other = start("x1");
        assert_eq!(read_marker(child.id() as i32), Some(1234));
        assert_eq!(read_marker(other.id() as i32), None);
        for c in [&mut child, &mut other] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}
