//! cgroup-v2 containment: a cgroup per generation, entered before the program runs, killed
//! with `cgroup.kill`, watched for emptiness through `cgroup.events`.
//!
//! Process groups and sessions can be escaped (`setsid`, a double fork); a cgroup cannot be
//! left without the privilege to write another cgroup's `cgroup.procs`. Where the daemon
//! may create cgroups (root, or a subtree delegated to it, e.g. systemd's `Delegate=yes`),
//! every generation runs in a cgroup of its own; elsewhere the daemon falls back to session
//! containment (see [`CgroupRoot::setup`]).
//!
//! # Layout
//!
//! ```text
//! <mount>/<own>/                  the daemon's cgroup when it started ("own")
//! <mount>/<own>/<name>/           the daemon's subtree (CgroupRoot), e.g. genward-<id>-<pid>
//! <mount>/<own>/<name>/daemon/    the daemon itself, with Placement::MoveSelf
//! <mount>/<own>/<name>/gen-<N>/   one per generation (GenCgroup), made for generation N
//!                                 (the driver may reuse it once emptied: `reusable`)
//! ```
//!
//! `<mount>` is wherever the cgroup-v2 hierarchy is mounted (`/sys/fs/cgroup` on a unified
//! host, often `/sys/fs/cgroup/unified` on a hybrid one; found in `/proc/self/mountinfo`),
//! `<own>` comes from the `0::` line of `/proc/self/cgroup`. The subtree is named by the
//! caller and must be unique among the processes sharing `<own>` (the daemon uses its pid).
//!
//! cgroup v2 lets a cgroup that holds processes have no controllers enabled for its
//! children (the "no internal processes" rule; the root cgroup is exempt). So for limits
//! the daemon first moves itself into the leaf `<name>/daemon` ([`Placement::MoveSelf`]),
//! which leaves `<name>` without processes: the controllers it is offered (memory, pids,
//! cpu) are enabled in its `cgroup.subtree_control` and so reach every `gen-<N>`. Whether
//! `<name>` is offered them depends on `<own>`'s `cgroup.subtree_control`, which the daemon
//! tries to extend once it has left `<own>` (that works when nothing else runs in `<own>`,
//! as in a delegated systemd service, or when `<own>` is the root). A missing controller is
//! no error until a limit asks for it ([`LimitError::ControllerUnavailable`]).
//!
//! # What the driver does
//!
//! - **At start**, once: `CgroupRoot::setup(&format!("genward-{dir id}-{pid}"),
//!   Placement::MoveSelf)`. `Ok(root)`: containment is `cgroup` for every generation;
//!   `Err(why)` ([`Unavailable`], with a reason for the log and for `hello`): containment
//!   is `session`, and nothing here is used. [`CgroupRoot::controllers`] and
//!   [`CgroupRoot::entry`] say what `hello` can report.
//! - **Per spawn** of generation `N`: [`CgroupRoot::check_limits`] (before anything is
//!   created, so a request asking for an unavailable controller is refused with a clear
//!   error), `let cg = root.create_generation(N)?`, [`GenCgroup::set_limits`] if the spawn
//!   asks for limits, register [`GenCgroup::events_fd`] with mio under
//!   **`Interest::PRIORITY`** (`EPOLLPRI`), then
//!   [`crate::sys::spawn::start_in`]`(&req, Some(&cg.open_dir()?))`. The child is in the cgroup
//!   before it runs a single instruction of the program (see the spawn module). The
//!   kernel reports a change of `cgroup.events` as `POLLPRI | POLLERR` (the file is
//!   always readable, so `READABLE` would report nothing useful); mio then shows the event
//!   with `is_priority()`, `is_readable()` *and* `is_error()` all true: for this token
//!   `is_error()` is not a failure, just the change.
//!   `create_generation` failing with `ENOENT` means the subtree itself was removed
//!   behind the daemon's back: [`CgroupRoot::restore`] makes it again, then retry once.
//! - **On events readiness** of that token: call [`GenCgroup::is_populated`] (it re-reads
//!   the file, which also re-arms the notification — always do it, or no further change is
//!   reported); `false` is the generation's `GroupEmpty`. Spurious wake-ups (`populated 1`
//!   when the child entered, `frozen` changes) read `true` and are ignored.
//! - **On stop**: the graceful signal goes to every process in the cgroup with
//!   [`GenCgroup::signal`] (escaped ones included); the final blow is [`GenCgroup::kill`]
//!   (`cgroup.kill`: `SIGKILL` to everything in the cgroup and below, atomically with
//!   respect to forks).
//! - **Order at the end**: kill → wait for `populated 0` (events readiness) → reap the
//!   leader (its exit status is ours through the pidfd as before) → deregister the events
//!   fd → [`GenCgroup::remove`]. A zombie does not count as populated, and the cgroup can
//!   be removed while the leader is still an unreaped zombie, so the reap and the removal
//!   need not wait for each other. `remove` never blocks; it fails with `EBUSY` while
//!   anything is still inside, and then the next `populated 0` is the moment to retry.
//!   Dropping a `GenCgroup` makes one best-effort `remove` too. Instead of removing it,
//!   the driver may keep it for a later generation without limits when
//!   [`GenCgroup::reusable`] says it is as a new one would be (empty, nothing below, no
//!   limit ever set), registering its events fd again under that generation.
//! - **A spawn that failed** (its child reported a failed step and exits): the cgroup
//!   empties as soon as that child has exited; remove it then (on `populated 0`, or at
//!   once if [`GenCgroup::is_populated`] already says `false`).
//!
//! - **Subtrees left by earlier processes** (a daemon killed before it removed its own):
//!   [`CgroupRoot::siblings`] finds them beside ours by a name the caller recognises,
//!   [`prune_subtree`] removes what of one holds no process, and the subtree once empty.
//!
//! # Hosts without cgroup v2 or without permission
//!
//! [`CgroupRoot::setup`] returns [`Unavailable`] when there is no cgroup-v2 mount, when we
//! are in no v2 cgroup, when our cgroup cannot be found under the mount (another cgroup
//! namespace), when creating the subtree is not permitted (not root, no delegation,
//! read-only), or when the kernel lacks `cgroup.kill` (before Linux 5.14). The decision is
//! made once at start; the daemon then contains generations by session, as before.
//!
//! # References
//!  - [cgroups(7)](https://man7.org/linux/man-pages/man7/cgroups.7.html)
//!  - [Control Group v2](https://docs.kernel.org/admin-guide/cgroup-v2.html)
//!  - [clone3(2)](https://man7.org/linux/man-pages/man2/clone.2.html) (`CLONE_INTO_CGROUP`)

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{openat, Mode, OFlags, CWD};
use rustix::io::Errno;
use rustix::process::{getpid, pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

use crate::sys::spawn::{cgroup_entry, CgroupEntry};
use crate::sys::tree::{read_member, wakes_stopped};

/// The name of the daemon's own leaf inside its subtree ([`Placement::MoveSelf`]).
pub const DAEMON_LEAF: &str = "daemon";

/// A directory descriptor of a cgroup-v2 cgroup (`O_PATH | O_DIRECTORY`), cheap to clone:
/// what a spawn needs to start its child inside the cgroup (`CLONE_INTO_CGROUP`, or the
/// child's own write to `cgroup.procs`).
#[derive(Clone, Debug)]
pub struct CgroupDir(Arc<OwnedFd>);

impl CgroupDir {
    /// Opens the cgroup directory at `path`.
    pub fn open(path: &Path) -> io::Result<CgroupDir> {
        let fd = openat(
            CWD,
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(CgroupDir(Arc::new(fd)))
    }
}

impl AsFd for CgroupDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Whether [`CgroupRoot::setup`] moves the calling process into a leaf of the new subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The daemon: move into `<subtree>/daemon`, so that controllers can be enabled for
    /// the generations (and try to enable them in the cgroup we left, too).
    MoveSelf,
    /// Stay where we are, and never write our own cgroup's files: for tests and tools
    /// that must not disturb the cgroup they run in. Limits then work only for the
    /// controllers our cgroup already offers its children.
    StayPut,
}

/// A controller that limits can need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// `memory` (`memory.max`).
    Memory,
    /// `pids` (`pids.max`).
    Pids,
    /// `cpu` (`cpu.max`).
    Cpu,
}

impl Controller {
    /// Every controller, in the order they are enabled and listed.
    pub const ALL: [Controller; 3] = [Controller::Memory, Controller::Pids, Controller::Cpu];

    /// Its name in `cgroup.controllers`.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }

    /// The limit file it provides that [`Limits`] writes.
    pub fn limit_file(self) -> &'static str {
        match self {
            Controller::Memory => "memory.max",
            Controller::Pids => "pids.max",
            Controller::Cpu => "cpu.max",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`Controller`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Controllers(u8);

impl Controllers {
    /// No controller.
    pub const NONE: Controllers = Controllers(0);

    /// Whether `c` is in the set.
    pub fn contains(self, c: Controller) -> bool {
        self.0 & c.bit() != 0
    }

    fn insert(&mut self, c: Controller) {
        self.0 |= c.bit();
    }

    /// The known controllers named in a `cgroup.controllers` or `cgroup.subtree_control`
    /// text (others, like `io` or `hugetlb`, are ignored).
    pub fn parse(text: &str) -> Controllers {
        let mut set = Controllers::NONE;
        for word in text.split_ascii_whitespace() {
            if let Some(c) = Controller::ALL.into_iter().find(|c| c.name() == word) {
                set.insert(c);
            }
        }
        set
    }

    /// The controllers in the set.
    pub fn iter(self) -> impl Iterator<Item = Controller> {
        Controller::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl fmt::Display for Controllers {
    /// `memory pids cpu`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        for (i, c) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(c.name())?;
        }
        Ok(())
    }
}

/// Per-generation limits, each optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// `memory.max`, in bytes.
    pub memory_max: Option<u64>,
    /// `pids.max`: processes and threads at once (the leader included).
    pub pids_max: Option<u64>,
    /// `cpu.max`.
    pub cpu_max: Option<CpuMax>,
}

impl Limits {
    /// Whether no limit is asked for.
    pub fn is_empty(&self) -> bool {
        self.memory_max.is_none() && self.pids_max.is_none() && self.cpu_max.is_none()
    }

    /// The controllers these limits need.
    pub fn controllers(&self) -> Controllers {
        let mut set = Controllers::NONE;
        if self.memory_max.is_some() {
            set.insert(Controller::Memory);
        }
        if self.pids_max.is_some() {
            set.insert(Controller::Pids);
        }
        if self.cpu_max.is_some() {
            set.insert(Controller::Cpu);
        }
        set
    }
}

/// `cpu.max`: at most `quota_us` of CPU time in every `period_us` (both microseconds; the
/// kernel accepts periods of 1 ms to 1 s and quotas of at least 1 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMax {
    /// CPU time allowed per period.
    pub quota_us: u64,
    /// The period.
    pub period_us: u64,
}

/// Why limits could not be set.
#[derive(Debug)]
pub enum LimitError {
    /// The controller a limit needs is not enabled for genward's cgroups (on a hybrid host
    /// the v2 hierarchy usually has none; elsewhere the cgroup we started in may not offer
    /// it to its children).
    ControllerUnavailable {
        /// The missing controller.
        controller: Controller,
        /// What is enabled for the generations.
        enabled: Controllers,
    },
    /// The kernel refused a value (`EINVAL`: e.g. a `cpu.max` period out of range) or the
    /// write failed otherwise.
    Write {
        /// The file written.
        file: &'static str,
        /// The error.
        error: io::Error,
    },
}

impl LimitError {
    /// The errno a client is given for it: the failed write's own; `EOPNOTSUPP` for a
    /// controller that is not there, where no system call failed (the limit is not
    /// supported here).
    pub fn errno(&self) -> i32 {
        match self {
            LimitError::ControllerUnavailable { .. } => libc::EOPNOTSUPP,
            LimitError::Write { error, .. } => error.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::ControllerUnavailable {
                controller,
                enabled,
            } => write!(
                f,
                "cannot set {}: the cgroup v2 {} controller is not available to genward's \
                 cgroups on this host (enabled: {enabled})",
                controller.limit_file(),
                controller.name()
            ),
            LimitError::Write { file, error } => write!(f, "cannot set {file}: {error}"),
        }
    }
}

impl std::error::Error for LimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LimitError::Write { error, .. } => Some(error),
            LimitError::ControllerUnavailable { .. } => None,
        }
    }
}

/// Why cgroup containment is not available here; the daemon then contains generations by
/// session.
#[derive(Debug)]
pub enum Unavailable {
    /// No `cgroup2` file system in `/proc/self/mountinfo`.
    NoMount,
    /// `/proc/self/cgroup` has no `0::` line: we are in no cgroup-v2 cgroup.
    NotInHierarchy,
    /// Our cgroup is not below any cgroup-v2 mount we can see (another cgroup namespace,
    /// or our cgroup was removed).
    OutsideMount {
        /// Our cgroup as `/proc/self/cgroup` names it.
        own: String,
    },
    /// Creating the subtree, or moving into it, was refused: not root and no delegation,
    /// or a read-only mount.
    NotPermitted {
        /// What was refused.
        path: PathBuf,
        /// `EACCES`, `EPERM` or `EROFS`.
        error: io::Error,
    },
    /// The kernel has no `cgroup.kill` (before Linux 5.14).
    NoKill {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The subtree's name is unusable (empty, `.`, `..`, or with a `/`).
    BadName(String),
    /// Anything else.
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        error: io::Error,
    },
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NoMount => f.write_str("no cgroup v2 file system is mounted"),
            Unavailable::NotInHierarchy => {
                f.write_str("this process is in no cgroup v2 cgroup (/proc/self/cgroup)")
            }
            Unavailable::OutsideMount { own } => write!(
                f,
                "our cgroup {own:?} is not below any visible cgroup v2 mount"
            ),
            Unavailable::NotPermitted { path, error } => {
                write!(f, "not permitted to create or enter {path:?}: {error}")
            }
            Unavailable::NoKill { path } => write!(
                f,
                "the kernel has no cgroup.kill (Linux 5.14 or later needed; none in {path:?})"
            ),
            Unavailable::BadName(name) => write!(f, "unusable cgroup name {name:?}"),
            Unavailable::Io { what, path, error } => write!(f, "{what} {path:?}: {error}"),
        }
    }
}

impl std::error::Error for Unavailable {}

impl Unavailable {
    fn of(what: &'static str, path: &Path, error: io::Error) -> Unavailable {
        match error.raw_os_error() {
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => Unavailable::NotPermitted {
                path: path.to_owned(),
                error,
            },
            _ => Unavailable::Io {
                what,
                path: path.to_owned(),
                error,
            },
        }
    }
}

/// Where the cgroup-v2 hierarchy is and where we are in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The mount point of the cgroup-v2 file system.
    pub mount: PathBuf,
    /// Our cgroup as `/proc/self/cgroup` names it (`/` for the root).
    pub own: String,
    /// Our cgroup's directory.
    pub dir: PathBuf,
}

impl Location {
    /// Finds the cgroup-v2 mount and our own cgroup.
    pub fn find() -> Result<Location, Unavailable> {
        let mountinfo =
            fs::read_to_string("/proc/self/mountinfo").map_err(|e| Unavailable::Io {
                what: "reading",
                path: "/proc/self/mountinfo".into(),
                error: e,
            })?;
        let cgroup = fs::read_to_string("/proc/self/cgroup").map_err(|e| Unavailable::Io {
            what: "reading",
            path: "/proc/self/cgroup".into(),
            error: e,
        })?;
        let own = own_cgroup(&cgroup).ok_or(Unavailable::NotInHierarchy)?;
        let mounts = cgroup2_mounts(&mountinfo);
        if mounts.is_empty() {
            return Err(Unavailable::NoMount);
        }
        mounts
            .into_iter()
            .find_map(|(root, mount)| {
                let dir = dir_below(&mount, &root, &own)?;
                dir.is_dir().then(|| Location {
                    mount,
                    own: own.clone(),
                    dir,
                })
            })
            .ok_or(Unavailable::OutsideMount { own })
    }
}

/// The `0::<path>` line of a `/proc/<pid>/cgroup` text: the v2 cgroup.
pub fn own_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = |d: u8| (b'0'..=b'7').contains(&d);
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..=i + 3].iter().all(|&d| octal(d)) {
            let value = b[i + 1..=i + 3]
                .iter()
                .fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// Every `cgroup2` mount in a `/proc/self/mountinfo` text, as (root within the file system,
/// mount point), in order.
pub fn cgroup2_mounts(mountinfo: &str) -> Vec<(PathBuf, PathBuf)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fstype = after.split(' ').next()?;
            if fstype != "cgroup2" {
                return None;
            }
            let mut fields = before.split(' ');
            let root = fields.nth(3)?;
            let mount = fields.next()?;
            Some((unescape(root), unescape(mount)))
        })
        .collect()
}

/// The directory of cgroup `own` under a mount of the hierarchy's `root` at `mount`, if
/// `own` is below `root`.
fn dir_below(mount: &Path, root: &Path, own: &str) -> Option<PathBuf> {
    let rest = Path::new(own).strip_prefix(root).ok()?;
    Some(if rest.as_os_str().is_empty() {
        mount.to_owned()
    } else {
        mount.join(rest)
    })
}

/// Reads a small control file.
fn read(path: &Path) -> io::Result<String> {
    fs::read_to_string(path)
}

/// Writes a control file in one `write` (each write to a cgroup file is one command).
fn write(path: &Path, value: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new().write(true).open(path)?;
    let n = file.write(value.as_bytes())?;
    if n != value.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
    }
    Ok(())
}

/// Opens the control file `file` of the cgroup at `dir` (close-on-exec added).
fn open_in(dir: &Path, file: &str, flags: OFlags) -> io::Result<OwnedFd> {
    Ok(openat(
        CWD,
        dir.join(file),
        flags | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Makes a cgroup directory.
fn mkdir(path: &Path) -> io::Result<()> {
    fs::create_dir(path)
}

/// Removes the cgroup at `path` and every cgroup below it, deepest first, as many as can
/// go; the first error otherwise (`EBUSY` for one that still holds a process). Never
/// blocks.
fn remove_tree(path: &Path) -> io::Result<()> {
    // Most often nothing was made below it: one `rmdir`, no listing.
    match fs::remove_dir(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ENOTEMPTY)) => {}
        Err(e) => return Err(e),
    }
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut first = Ok(());
    for entry in entries {
        let result = entry.and_then(|entry| {
            if entry.file_type()?.is_dir() {
                remove_tree(&entry.path())
            } else {
                Ok(())
            }
        });
        first = first.and(result);
    }
    first?;
    match fs::remove_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// `populated` of the cgroup at `path`, read from its `cgroup.events`; `None` when it
/// cannot be read (gone, or not a cgroup).
fn populated_at(path: &Path) -> Option<bool> {
    read(&path.join("cgroup.events"))
        .ok()
        .and_then(|t| parse_populated(&t))
}

/// Removes what is left of a subtree that an earlier process made (see
/// [`CgroupRoot::siblings`]) as far as no process is in it: each child cgroup whose name
/// `leaf` accepts and whose `cgroup.events` says `populated 0` (with any cgroup made
/// below it), then the subtree itself once it holds no process and no child cgroup.
/// Returns whether the subtree is gone (`true` also when it was already).
///
/// A cgroup with a process in it is never removed (the kernel would refuse it too), nor a
/// child cgroup `leaf` does not accept: what the caller does not know as its own stays,
/// and so does the subtree. Never blocks.
pub fn prune_subtree(path: &Path, leaf: impl Fn(&str) -> bool) -> io::Result<bool> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    let mut left = false;
    for entry in entries {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let child = entry.path();
        let known = entry.file_name().to_str().is_some_and(&leaf);
        if !known || populated_at(&child) != Some(false) {
            left = true;
            continue;
        }
        if let Err(e) = remove_tree(&child) {
            log::debug!("cgroup: cannot remove {child:?}: {e}");
            left = true;
        }
    }
    if left || populated_at(path) != Some(false) {
        return Ok(false);
    }
    match fs::remove_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        // Something entered or was made meanwhile: it stays.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ENOTEMPTY)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The extended attribute on a daemon's subtree naming the process that made it (see
/// [`CgroupRoot::mark_owner`]): cgroupfs keeps `user.` attributes (Linux 5.7 and later)
/// for whoever may write the cgroup, delegated users included.
const OWNER_ATTR: &str = "user.genward.owner";

/// Longest owner text [`owner_of`] reads back; a longer one is no owner of ours.
const MAX_OWNER_LEN: usize = 512;

/// The owner text the subtree at `path` carries ([`CgroupRoot::mark_owner`]); `None`
/// when it has none (made before owners were marked, or by something else), it is too
/// long, not UTF-8, or cannot be read.
pub fn owner_of(path: &Path) -> Option<String> {
    let mut buf = [0u8; MAX_OWNER_LEN];
    let len = rustix::fs::getxattr(path, OWNER_ATTR, &mut buf[..]).ok()?;
    String::from_utf8(buf[..len].to_vec()).ok()
}

/// Puts the owner text on the subtree at `path` (see [`CgroupRoot::mark_owner`]).
fn set_owner(path: &Path, owner: &str) -> io::Result<()> {
    rustix::fs::setxattr(
        path,
        OWNER_ATTR,
        owner.as_bytes(),
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(io::Error::from)
}

/// The daemon's cgroup subtree: where generations' cgroups are made. See the
/// [module docs](self).
#[derive(Debug)]
pub struct CgroupRoot {
    location: Location,
    /// `<own>/<name>`.
    path: PathBuf,
    /// `path` as `/proc/<pid>/cgroup` names it.
    name_in_hierarchy: String,
    /// Enabled in `path`'s `cgroup.subtree_control`: what every generation has.
    controllers: Controllers,
    /// Whether we moved into `<path>/daemon`.
    moved_self: bool,
    /// The owner text put on `path` ([`CgroupRoot::mark_owner`]), put again on a subtree
    /// [`restored`](CgroupRoot::restore).
    owner: Option<String>,
}

impl CgroupRoot {
    /// Creates the subtree `<own>/<name>` (see the [module docs](self)), moves this process
    /// into `<own>/<name>/daemon` if asked, and enables the memory, pids and cpu
    /// controllers for the generations where they are offered. An existing subtree of that
    /// name with nothing running in it (left by an earlier process with our pid) is
    /// removed first.
    ///
    /// `Err` is the decision to contain generations by session instead; its `Display` is
    /// the reason to log. Nothing is left behind on `Err` (the move is the last step that
    /// can fail).
    pub fn setup(name: &str, placement: Placement) -> Result<CgroupRoot, Unavailable> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(Unavailable::BadName(name.to_owned()));
        }
        let location = Location::find()?;
        let path = location.dir.join(name);
        if let Err(e) = mkdir(&path) {
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(Unavailable::of("creating", &path, e));
            }
            remove_tree(&path).map_err(|e| Unavailable::of("removing stale", &path, e))?;
            mkdir(&path).map_err(|e| Unavailable::of("creating", &path, e))?;
        }
        let name_in_hierarchy = join_cgroup(&location.own, name);
        let mut root = CgroupRoot {
            location,
            path,
            name_in_hierarchy,
            controllers: Controllers::NONE,
            moved_self: false,
            owner: None,
        };
        // From here on, dropping `root` removes what was made (best effort).
        if !root.path.join("cgroup.kill").exists() {
            return Err(Unavailable::NoKill {
                path: root.path.clone(),
            });
        }
        if placement == Placement::MoveSelf {
            let leaf = root.path.join(DAEMON_LEAF);
            mkdir(&leaf).map_err(|e| Unavailable::of("creating", &leaf, e))?;
            let procs = leaf.join("cgroup.procs");
            write(&procs, &getpid().as_raw_nonzero().to_string())
                .map_err(|e| Unavailable::of("moving into", &procs, e))?;
            root.moved_self = true;
            // Ask the cgroup we left to offer its controllers to our subtree. This fails
            // (EBUSY) while other processes remain in it, unless it is the root: then
            // generations get what it already offers.
            enable(&root.location.dir);
        }
        root.controllers = enable(&root.path);
        Ok(root)
    }

    /// The subtree `name` this process made before it re-executed itself (same pid, same
    /// name), opened again as it is: nothing is removed or created, and the generations'
    /// cgroups in it are untouched. Its controllers are those it offers now.
    pub fn reopen(name: &str) -> Result<CgroupRoot, Unavailable> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(Unavailable::BadName(name.to_owned()));
        }
        let location = Location::find()?;
        let path = location.dir.join(name);
        if !path.join("cgroup.kill").exists() {
            return Err(Unavailable::NoKill { path });
        }
        let controllers = read(&path.join("cgroup.subtree_control"))
            .map(|t| Controllers::parse(&t))
            .unwrap_or_default();
        let name_in_hierarchy = join_cgroup(&location.own, name);
        let owner = owner_of(&path);
        Ok(CgroupRoot {
            location,
            path,
            name_in_hierarchy,
            controllers,
            moved_self: false,
            owner,
        })
    }

    /// Records `owner` on the subtree, for [`owner_of`]: what lets a later daemon, of any
    /// state directory, tell a subtree whose maker is gone (and so is garbage once empty)
    /// from one of a daemon still running.
    pub fn mark_owner(&mut self, owner: &str) -> io::Result<()> {
        set_owner(&self.path, owner)?;
        self.owner = Some(owner.to_owned());
        Ok(())
    }

    /// Makes the subtree again if it is gone (a privileged hand removed it while no
    /// generation ran in it: nothing else can, as the kernel refuses to remove a cgroup
    /// with a cgroup below it), as [`setup`](Self::setup) made it: the directory, the
    /// controllers it is offered enabled for the generations (what they have is read
    /// anew: the cgroup above may offer other ones now), and the owner mark it carried.
    /// Without it, no generation could get a cgroup again.
    ///
    /// `Ok(false)` when the subtree is there (nothing is done); `Ok(true)` when it was
    /// made again. A subtree this process had moved into ([`Placement::MoveSelf`]) cannot
    /// be removed while it runs, so the `daemon` leaf is never made again here.
    pub fn restore(&mut self) -> io::Result<bool> {
        match mkdir(&self.path) {
            Ok(()) => {}
            // Made meanwhile (by whoever removed it, say): used as it is.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        self.controllers = enable(&self.path);
        if let Some(owner) = &self.owner {
            if let Err(e) = set_owner(&self.path, owner) {
                log::info!("cgroup: subtree {:?} made again unmarked: {e}", self.path);
            }
        }
        Ok(true)
    }

    /// The cgroups beside this subtree (in `<own>`, where it was made) whose names `pick`
    /// accepts, this subtree excluded: e.g. the subtrees earlier daemons made and left.
    pub fn siblings(&self, pick: impl Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.location.dir)? {
            let entry = entry?;
            let path = entry.path();
            if path == self.path || !entry.file_type()?.is_dir() {
                continue;
            }
            if entry.file_name().to_str().is_some_and(&pick) {
                found.push(path);
            }
        }
        found.sort();
        Ok(found)
    }

    /// The name it was made with (its last path component).
    pub fn name(&self) -> Option<&str> {
        self.path.file_name().and_then(|n| n.to_str())
    }

    /// The subtree's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the hierarchy is mounted and where we started.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The controllers every generation's cgroup has (what limits can use).
    pub fn controllers(&self) -> Controllers {
        self.controllers
    }

    /// Whether this process moved into `<subtree>/daemon`.
    pub fn moved_self(&self) -> bool {
        self.moved_self
    }

    /// How spawned children enter their cgroup on this kernel.
    pub fn entry(&self) -> CgroupEntry {
        cgroup_entry()
    }

    /// `Ok` if every controller `limits` needs is enabled for the generations; otherwise
    /// the first missing one, named.
    pub fn check_limits(&self, limits: &Limits) -> Result<(), LimitError> {
        check(limits, self.controllers)
    }

    /// Creates the cgroup of generation `gen` (`<subtree>/gen-<gen>`), opens its directory
    /// (for the spawn) and its `cgroup.events` (for the event loop). An empty leftover of
    /// the same name is replaced; one with processes in it is an error (`EBUSY`). With
    /// the subtree itself gone the error is `ENOENT` (see [`restore`](Self::restore)).
    pub fn create_generation(&self, gen: u64) -> io::Result<GenCgroup> {
        let name = format!("gen-{gen}");
        let path = self.path.join(&name);
        if let Err(e) = mkdir(&path) {
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
            remove_tree(&path)?;
            mkdir(&path)?;
        }
        // A child cgroup has what its parent enables for its subtree: known, not read.
        let name_in_hierarchy = join_cgroup(&self.name_in_hierarchy, &name);
        GenCgroup::open(path, name_in_hierarchy, Some(self.controllers)).inspect_err(|_| {
            let _ = fs::remove_dir(self.path.join(&name));
        })
    }
}

impl Drop for CgroupRoot {
    /// Removes the subtree if nothing is left in it (never while this process is in its
    /// leaf, which the kernel refuses). Best effort; never blocks.
    fn drop(&mut self) {
        let _ = remove_tree(&self.path);
    }
}

/// `parent/name` in the hierarchy's namespace (`/` is the root).
fn join_cgroup(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Enables, in `dir`'s `cgroup.subtree_control`, each controller of [`Controller::ALL`]
/// that `dir` is offered, one at a time (one refusal does not stop the others); returns
/// what is enabled afterwards.
fn enable(dir: &Path) -> Controllers {
    let offered = read(&dir.join("cgroup.controllers"))
        .map(|t| Controllers::parse(&t))
        .unwrap_or_default();
    let control = dir.join("cgroup.subtree_control");
    let before = read(&control)
        .map(|t| Controllers::parse(&t))
        .unwrap_or_default();
    for c in offered.iter().filter(|c| !before.contains(*c)) {
        if let Err(e) = write(&control, &format!("+{}", c.name())) {
            log::debug!("cgroup: cannot enable {} in {control:?}: {e}", c.name());
        }
    }
    read(&control)
        .map(|t| Controllers::parse(&t))
        .unwrap_or_default()
}

fn check(limits: &Limits, enabled: Controllers) -> Result<(), LimitError> {
    match limits.controllers().iter().find(|c| !enabled.contains(*c)) {
        Some(controller) => Err(LimitError::ControllerUnavailable {
            controller,
            enabled,
        }),
        None => Ok(()),
    }
}

/// The outcome of [`GenCgroup::signal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Signalled {
    /// Processes signalled.
    pub sent: usize,
    /// Processes that had exited, or left the cgroup, before the signal reached them.
    pub gone: usize,
}

/// One generation's cgroup. See the [module docs](self) for how the driver uses it.
///
/// Dropping it makes one best-effort [`GenCgroup::remove`] (which fails harmlessly while
/// processes remain); it never kills anything.
#[derive(Debug)]
pub struct GenCgroup {
    path: PathBuf,
    /// `path` as `/proc/<pid>/cgroup` names it.
    name_in_hierarchy: String,
    /// `cgroup.events`: the one descriptor a generation's cgroup holds (its directory is
    /// opened only for the spawn, see [`GenCgroup::open_dir`]), so that a running
    /// generation costs as few descriptors as possible.
    events: OwnedFd,
    controllers: Controllers,
    /// Whether [`GenCgroup::set_limits`] wrote any limit: such a cgroup is never reused.
    limited: std::cell::Cell<bool>,
    /// `cgroup.kill` was written to it: the kernel may go on killing what enters it (a
    /// process started into it later died of `SIGKILL` at once), so it is never reused.
    killed: std::cell::Cell<bool>,
    removed: bool,
}

impl GenCgroup {
    /// A generation's cgroup opened again by a daemon that re-executed itself: the same
    /// directory, its `cgroup.events` opened afresh (a populated change is then read on
    /// the first look).
    ///
    /// Whether limits were set on it is not known here: it is never reused.
    pub fn reopen(path: PathBuf, name_in_hierarchy: String) -> io::Result<GenCgroup> {
        let cg = GenCgroup::open(path, name_in_hierarchy, None)?;
        cg.limited.set(true);
        Ok(cg)
    }

    /// Opens the cgroup at `path`; its `controllers` are read unless given.
    fn open(
        path: PathBuf,
        name_in_hierarchy: String,
        controllers: Option<Controllers>,
    ) -> io::Result<GenCgroup> {
        // Opened now, before any process is in the cgroup, so that every change of
        // `populated` from here on is reported on it.
        let events = open_in(&path, "cgroup.events", OFlags::RDONLY | OFlags::NONBLOCK)?;
        let controllers = controllers.unwrap_or_else(|| {
            read(&path.join("cgroup.controllers"))
                .map(|t| Controllers::parse(&t))
                .unwrap_or_default()
        });
        Ok(GenCgroup {
            path,
            name_in_hierarchy,
            events,
            controllers,
            limited: std::cell::Cell::new(false),
            killed: std::cell::Cell::new(false),
            removed: false,
        })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup as `/proc/<pid>/cgroup` names it (`0::<this>`).
    pub fn name_in_hierarchy(&self) -> &str {
        &self.name_in_hierarchy
    }

    /// Opens the directory to spawn into ([`crate::sys::spawn::start_in`]): held only
    /// for the start, not for the generation's life.
    pub fn open_dir(&self) -> io::Result<CgroupDir> {
        CgroupDir::open(&self.path)
    }

    /// The controllers this cgroup has.
    pub fn controllers(&self) -> Controllers {
        self.controllers
    }

    /// `cgroup.events`, to register with the event loop for **priority** readiness (mio
    /// `Interest::PRIORITY`, i.e. `EPOLLPRI`; `poll` reports a change as `POLLPRI |
    /// POLLERR`, which mio shows as priority, readable and error at once). It is reported once per change of the file's contents (`populated`,
    /// `frozen`); [`GenCgroup::is_populated`] must be called after each report, which
    /// re-reads the file and so re-arms the notification. Non-blocking; owned by this
    /// handle, so deregister it before dropping the handle.
    pub fn events_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// Whether any process is in the cgroup or below it (`populated` of `cgroup.events`).
    /// Zombies do not count: a generation whose leader is an unreaped zombie and whose
    /// other processes are gone reads `false`. Reading also acknowledges the pending
    /// notification on [`GenCgroup::events_fd`].
    pub fn is_populated(&self) -> io::Result<bool> {
        populated_of(&self.events)
    }

    /// [`is_populated`](Self::is_populated) through a descriptor of its own: the one
    /// registered with the event loop keeps its pending notification.
    fn populated_now(&self) -> io::Result<bool> {
        populated_of(&open_in(&self.path, "cgroup.events", OFlags::RDONLY)?)
    }

    /// `SIGKILL` to every process in the cgroup and below, escaped or not, through
    /// `cgroup.kill` (atomic with respect to forks: nothing forked meanwhile survives).
    /// Returns at once; emptiness arrives on [`GenCgroup::events_fd`].
    pub fn kill(&self) -> io::Result<()> {
        self.killed.set(true);
        self.write_file("cgroup.kill", "1")
    }

    /// Sends `signal` to every process in the cgroup and below, one at a time through a
    /// pidfd each, after checking that the pid is still in this cgroup (so a pid reused by
    /// a stranger is never signalled). Processes forked while this runs may be missed: use
    /// it for graceful signals and [`GenCgroup::kill`] for the final one.
    ///
    /// A process found stopped (job control's Ctrl-Z, `kill -STOP`) is sent SIGCONT through
    /// the same pidfd right after `signal`, unless `signal` itself kills, stops or
    /// continues ([`wakes_stopped`]): a SIGTERM would otherwise wait in it, its handler
    /// never run and the output it holds open never closed, until the SIGKILL — as a
    /// session's members are woken under session containment.
    ///
    /// An emptied cgroup (the usual case when a leader's exit is followed by the group's
    /// signal) is told from one read of `cgroup.events` and nothing is listed.
    pub fn signal(&self, signal: Signal) -> io::Result<Signalled> {
        let mut out = Signalled::default();
        let wake = wakes_stopped(signal);
        if !self.populated_now()? {
            // No live process is inside or below, and none can enter but by a fork from
            // inside: there is no one to signal.
            return Ok(out);
        }
        for pid in self.pids()? {
            let Some(raw) = Pid::from_raw(pid) else {
                continue;
            };
            let pidfd = match pidfd_open(raw, PidfdFlags::empty()) {
                Ok(fd) => fd,
                Err(Errno::SRCH) => {
                    out.gone += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // The pidfd pins nothing, but while it refers to a live process that process
            // has the pid, so what `/proc/<pid>/cgroup` said before the pidfd was found
            // alive was about it.
            // A read refused for want of descriptors or memory says nothing of the
            // process: the signal fails as a shortage, and is tried again whole.
            let inside = match fs::read_to_string(format!("/proc/{pid}/cgroup")) {
                Ok(text) => {
                    own_cgroup(&text).is_some_and(|c| is_within(&c, &self.name_in_hierarchy))
                }
                Err(e) if crate::sys::spare_fd::is_shortage(&e) => return Err(e),
                Err(_) => false,
            };
            // Read while the pidfd is held too, so it is about the same process.
            let stopped =
                wake && inside && matches!(read_member(pid), Ok(Some(m)) if m.state == b'T');
            if !inside || pidfd_gone(&pidfd) {
                out.gone += 1;
                continue;
            }
            match pidfd_send_signal(&pidfd, signal) {
                Ok(()) => out.sent += 1,
                Err(Errno::SRCH) => out.gone += 1,
                Err(e) => return Err(e.into()),
            }
            if stopped {
                // It may have ended of the signal meanwhile: nothing left to wake.
                let _ = pidfd_send_signal(&pidfd, Signal::CONT);
            }
        }
        Ok(out)
    }

    /// The pids in the cgroup and below (`cgroup.procs` of each), for reporting: a
    /// snapshot, which may name processes that have exited since.
    pub fn pids(&self) -> io::Result<Vec<i32>> {
        let mut pids = Vec::new();
        collect_pids(&self.path, &mut pids)?;
        Ok(pids)
    }

    /// Sets `limits` (checked first, so nothing is written when a controller is missing).
    /// Meant before the spawn; lowering a limit later is allowed too.
    pub fn set_limits(&self, limits: &Limits) -> Result<(), LimitError> {
        check(limits, self.controllers)?;
        if !limits.is_empty() {
            self.limited.set(true);
        }
        let put = |file: &'static str, value: String| {
            self.write_file(file, &value)
                .map_err(|error| LimitError::Write { file, error })
        };
        if let Some(bytes) = limits.memory_max {
            put("memory.max", bytes.to_string())?;
        }
        if let Some(n) = limits.pids_max {
            put("pids.max", n.to_string())?;
        }
        if let Some(cpu) = limits.cpu_max {
            put("cpu.max", format!("{} {}", cpu.quota_us, cpu.period_us))?;
        }
        Ok(())
    }

    /// Whether this cgroup, once its generation is over, may hold another generation
    /// exactly as a new one would: no limit was ever set on it, it was never killed
    /// through `cgroup.kill`, no process is inside
    /// (`populated 0`; none can enter but by a fork from inside) and no cgroup was made
    /// below it (`nr_descendants 0` in `cgroup.stat`). Anything else, an error included,
    /// is `false`: such a cgroup is removed, never reused. Reads `cgroup.events` through
    /// [`GenCgroup::events_fd`], so deregister that from the event loop first (and
    /// register it again for the next generation).
    pub fn reusable(&self) -> bool {
        if self.limited.get() || self.killed.get() || self.removed {
            return false;
        }
        if !matches!(self.is_populated(), Ok(false)) {
            return false;
        }
        let stat = open_in(&self.path, "cgroup.stat", OFlags::RDONLY);
        let mut buf = [0u8; 512];
        let n = match stat.map(|fd| rustix::io::read(&fd, &mut buf)) {
            Ok(Ok(n)) => n,
            _ => return false,
        };
        parse_descendants(&String::from_utf8_lossy(&buf[..n])) == Some(0)
    }

    /// Removes the cgroup (and any cgroup a program made below it). Fails with `EBUSY`
    /// while a process is still inside: retry when [`GenCgroup::events_fd`] next reports
    /// `populated 0`. Never blocks. Removing twice is a no-op.
    pub fn remove(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        remove_tree(&self.path)?;
        self.removed = true;
        Ok(())
    }

    fn write_file(&self, file: &str, value: &str) -> io::Result<()> {
        let fd = open_in(&self.path, file, OFlags::WRONLY)?;
        let n = rustix::io::write(&fd, value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        Ok(())
    }
}

impl Drop for GenCgroup {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// `populated` of the `cgroup.events` open as `events` (read from its start).
fn populated_of(events: &OwnedFd) -> io::Result<bool> {
    let mut buf = [0u8; 256];
    let n = loop {
        match rustix::io::pread(events, &mut buf, 0) {
            Ok(n) => break n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    parse_populated(&String::from_utf8_lossy(&buf[..n])).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "cgroup.events has no populated line",
        )
    })
}

/// Whether cgroup `c` is `base` or below it.
fn is_within(c: &str, base: &str) -> bool {
    c == base
        || c.strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/') || base.ends_with('/'))
}

/// Whether a pidfd's process has exited.
fn pidfd_gone(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    !matches!(poll(&mut fds, Some(&zero)), Ok(0))
}

fn collect_pids(dir: &Path, pids: &mut Vec<i32>) -> io::Result<()> {
    let text = match read(&dir.join("cgroup.procs")) {
        Ok(text) => text,
        // Removed meanwhile: nothing in it.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            collect_pids(&entry.path(), pids)?;
        }
    }
    Ok(())
}

/// `populated` of a `cgroup.events` text.
pub fn parse_populated(text: &str) -> Option<bool> {
    text.lines()
        .find_map(|l| l.strip_prefix("populated "))
        .and_then(|v| match v.trim() {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
}

/// `nr_descendants` of a `cgroup.stat` (live cgroups below; dying ones are counted apart
/// and go by themselves).
pub fn parse_descendants(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("nr_descendants "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cgroup2_mounts_unified_and_hybrid() {
        let hybrid = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            cgroup2_mounts(hybrid),
            vec![("/".into(), "/sys/fs/cgroup/unified".into())]
        );
        let unified = "\
25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
99 25 0:23 /a\\040b /mnt/with\\040space rw - cgroup2 none rw
";
        assert_eq!(
            cgroup2_mounts(unified),
            vec![
                ("/".into(), "/sys/fs/cgroup".into()),
                ("/a b".into(), "/mnt/with space".into())
            ]
        );
        assert!(cgroup2_mounts("1 2 0:3 / /proc rw - proc proc rw\n").is_empty());
    }

    #[test]
    fn own_cgroup_is_the_v2_line() {
        let text = "9:name=systemd:/\n4:memory:/x\n0::/user.slice/session-1.scope\n";
        assert_eq!(
            own_cgroup(text).as_deref(),
            Some("/user.slice/session-1.scope")
        );
        assert_eq!(own_cgroup("0::/\n").as_deref(), Some("/"));
        assert_eq!(own_cgroup("4:memory:/x\n"), None);
    }

    #[test]
    fn own_directory_below_the_mount_root() {
        let m = Path::new("/sys/fs/cgroup");
        assert_eq!(dir_below(m, Path::new("/"), "/"), Some(m.to_owned()));
        assert_eq!(dir_below(m, Path::new("/"), "/a/b"), Some(m.join("a/b")));
        assert_eq!(dir_below(m, Path::new("/a"), "/a/b"), Some(m.join("b")));
        assert_eq!(dir_below(m, Path::new("/a"), "/ab"), None);
        assert_eq!(dir_below(m, Path::new("/c"), "/a/b"), None);
    }

    #[test]
    fn controllers_parse_and_display() {
        let c = Controllers::parse("cpuset cpu io memory hugetlb pids rdma misc\n");
        assert_eq!(c.to_string(), "memory pids cpu");
        assert_eq!(Controllers::parse("hugetlb\n").to_string(), "none");
        let limits = Limits {
            pids_max: Some(5),
            ..Limits::default()
        };
        assert!(check(&limits, c).is_ok());
        let err = check(&limits, Controllers::parse("memory")).unwrap_err();
        assert!(matches!(
            err,
            LimitError::ControllerUnavailable {
                controller: Controller::Pids,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "cannot set pids.max: the cgroup v2 pids controller is not available to \
             genward's cgroups on this host (enabled: memory)"
        );
        assert!(check(&Limits::default(), Controllers::NONE).is_ok());
    }

    #[test]
    fn populated_and_nesting() {
        assert_eq!(parse_populated("populated 1\nfrozen 0\n"), Some(true));
        assert_eq!(parse_populated("populated 0\nfrozen 0\n"), Some(false));
        assert_eq!(parse_populated("frozen 0\n"), None);
        assert!(is_within("/a/gen-1", "/a/gen-1"));
        assert!(is_within("/a/gen-1/sub", "/a/gen-1"));
        assert!(!is_within("/a/gen-10", "/a/gen-1"));
        assert!(is_within("/x", "/"));
        assert_eq!(join_cgroup("/", "g"), "/g");
        assert_eq!(join_cgroup("/a", "g"), "/a/g");
    }
}
