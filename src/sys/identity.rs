//! Process identity tokens: telling a process apart from a later one on the same pid.
//!
//! A token is versioned text, stored next to a pid:
//! - `linux1:<boot_id>:<pidfs inode or 0>:<starttime>` — the boot id, the pidfd's inode
//!   where pidfs gives each process its own, and field 22 of `/proc/<pid>/stat` (clock
//!   ticks since boot);
//! - `ps1:<lstart>` — `ps -o lstart= -p <pid>` run with `TZ=UTC LC_ALL=C`, for systems
//!   without `/proc`.
//!
//! [`compare`] is tri-state: signal only on [`Verdict::Match`], forget only on
//! [`Verdict::Mismatch`], and keep (unsignalled) on [`Verdict::Unverifiable`].
//!
//! # Resolution
//! `starttime` counts clock ticks (usually 10 ms) and `lstart` seconds: two processes that
//! reuse one pid within one tick (or second) share the start component. The pidfs inode
//! (Linux 6.9+) is unique per process and closes that gap wherever a pidfd exists. Tokens
//! carry no pid: they identify a process together with the pid they are stored with.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rustix::fs::{fstat, fstatfs};
use rustix::io::Errno;
use rustix::process::{pidfd_open, Pid, PidfdFlags};

use crate::sys::process::{Process, ReaperMode};

/// `PIDFS_MAGIC` from `<linux/magic.h>`: pidfds live on pidfs (Linux 6.9+), where every
/// process has its own inode number.
const PIDFS_MAGIC: u64 = 0x5049_4446;

/// Longest token accepted by [`parse`]: tokens come from files on disk.
pub const MAX_TOKEN_LEN: usize = 256;

/// The outcome of comparing a recorded token with what the system shows now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Same process: it may be signalled.
    Match,
    /// A different process holds the pid, or none does: the record may be forgotten.
    Mismatch,
    /// Cannot tell (a side is missing, unreadable, or the formats differ): keep the record
    /// and never signal it.
    Unverifiable,
}

/// What reading the identity of a pid produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The token of the process on that pid now.
    Token(String),
    /// No process has that pid.
    Gone,
    /// The identity could not be read (no `/proc`, no `ps`, permission, bad output).
    Unreadable(String),
}

/// A parsed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// `linux1:<boot_id>:<inode>:<starttime>`.
    Linux {
        /// `/proc/sys/kernel/random/boot_id`.
        boot_id: String,
        /// The pidfs inode of the process, or 0 when none was available.
        inode: u64,
        /// Field 22 of `/proc/<pid>/stat`.
        starttime: u64,
    },
    /// `ps1:<lstart>`.
    Ps {
        /// `ps -o lstart=` output, trimmed, taken in UTC and the C locale.
        lstart: String,
    },
}

impl Token {
    /// The token's text form, the one stored on disk.
    pub fn to_text(&self) -> String {
        match self {
            Token::Linux {
                boot_id,
                inode,
                starttime,
            } => format!("linux1:{boot_id}:{inode}:{starttime}"),
            Token::Ps { lstart } => format!("ps1:{lstart}"),
        }
    }
}

/// Parses a token; `None` for anything that is not a well-formed `linux1:` or `ps1:` token.
pub fn parse(text: &str) -> Option<Token> {
    if text.len() > MAX_TOKEN_LEN || text.chars().any(|c| c.is_control()) {
        return None;
    }
    if let Some(rest) = text.strip_prefix("linux1:") {
        let mut parts = rest.split(':');
        let (boot_id, inode, starttime) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some()
            || boot_id.is_empty()
            || !boot_id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        {
            return None;
        }
        return Some(Token::Linux {
            boot_id: boot_id.to_owned(),
            inode: parse_decimal(inode)?,
            starttime: parse_decimal(starttime)?,
        });
    }
    if let Some(lstart) = text.strip_prefix("ps1:") {
        if lstart.is_empty() || lstart.trim() != lstart {
            return None;
        }
        return Some(Token::Ps {
            lstart: lstart.to_owned(),
        });
    }
    None
}

fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Tri-state comparison of a recorded token with an observation.
///
/// - `Unverifiable` when the record is missing or malformed, the observation unreadable or
///   malformed, or the two are of different formats;
/// - `Mismatch` when the pid is gone, or the same format carries a different value (for
///   `linux1`, inodes are compared only when both are non-zero);
/// - `Match` otherwise.
pub fn compare(recorded: Option<&str>, observed: &Observed) -> Verdict {
    let Some(recorded) = recorded.and_then(parse) else {
        return Verdict::Unverifiable;
    };
    let observed = match observed {
        Observed::Gone => return Verdict::Mismatch,
        Observed::Unreadable(_) => return Verdict::Unverifiable,
        Observed::Token(text) => match parse(text) {
            Some(token) => token,
            None => return Verdict::Unverifiable,
        },
    };
    match (&recorded, &observed) {
        (
            Token::Linux {
                boot_id: b1,
                inode: i1,
                starttime: s1,
            },
            Token::Linux {
                boot_id: b2,
                inode: i2,
                starttime: s2,
            },
        ) => {
            let inodes_differ = *i1 != 0 && *i2 != 0 && i1 != i2;
            if b1 != b2 || s1 != s2 || inodes_differ {
                Verdict::Mismatch
            } else {
                Verdict::Match
            }
        }
        (Token::Ps { lstart: a }, Token::Ps { lstart: b }) => {
            if a == b {
                Verdict::Match
            } else {
                Verdict::Mismatch
            }
        }
        _ => Verdict::Unverifiable,
    }
}

/// The inode of this process's PID namespace (`/proc/self/ns/pid`): a pid names the
/// same process for two processes only when they share it.
pub fn pid_namespace() -> io::Result<u64> {
    Ok(rustix::fs::stat("/proc/self/ns/pid")?.st_ino)
}

/// The boot id, read once: `/proc/sys/kernel/random/boot_id`.
pub fn boot_id() -> io::Result<String> {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    if let Some(id) = BOOT_ID.get() {
        return Ok(id.clone());
    }
    let text = fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    let id = text.trim().to_owned();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "malformed boot_id",
        ));
    }
    Ok(BOOT_ID.get_or_init(|| id).clone())
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat` line, parsed after the last `)` so a
/// command name containing spaces or parentheses cannot shift the fields.
pub fn parse_stat_starttime(stat: &str) -> Option<u64> {
    stat_field(stat, 22)
}

/// Field `n` (1-based, `n >= 3`) of a `/proc/<pid>/stat` line.
pub(crate) fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first one after the command name.
    let field = after.split_ascii_whitespace().nth(n.checked_sub(3)?)?;
    parse_decimal(field)
}

/// The pidfs inode of a pidfd, or 0 when pidfds are not on pidfs (before Linux 6.9 they
/// share one anonymous inode, which identifies nothing).
pub fn pidfd_inode(pidfd: BorrowedFd<'_>) -> u64 {
    match fstatfs(pidfd) {
        Ok(fs) if fs.f_type as u64 == PIDFS_MAGIC => fstat(pidfd).map(|st| st.st_ino).unwrap_or(0),
        _ => 0,
    }
}

/// Reads a small `/proc` file in one or two `read`s (a `stat` line is well under 1 KiB,
/// and `read_to_string`'s size probing costs several system calls per spawn). Lossy: a
/// command name may be any bytes, and only the ASCII fields after it are parsed.
///
/// Opened and read with plain `open` and `read`: the standard library's `read_to_end`
/// first asks the file's size and position (`statx`, `lseek`), which `/proc` cannot tell.
pub(crate) fn read_proc_file(path: &str) -> io::Result<String> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match rustix::io::read(&fd, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
}

/// Reads the `linux1:` token of `pid`; with `pidfd` (which must refer to the process on
/// `pid`), its pidfs inode is included.
pub fn linux_token(pid: i32, pidfd: Option<BorrowedFd<'_>>) -> Observed {
    match read_stat(pid) {
        Ok(stat) => linux_token_of(pid, &stat, pidfd),
        Err(observed) => observed,
    }
}

/// `/proc/<pid>/stat`, or what its absence says: [`Observed::Gone`] or
/// [`Observed::Unreadable`].
fn read_stat(pid: i32) -> Result<String, Observed> {
    match read_proc_file(&format!("/proc/{pid}/stat")) {
        Ok(stat) => Ok(stat),
        Err(e)
            if e.raw_os_error() == Some(libc::ENOENT) || e.raw_os_error() == Some(libc::ESRCH) =>
        {
            Err(Observed::Gone)
        }
        Err(e) => Err(Observed::Unreadable(format!("/proc/{pid}/stat: {e}"))),
    }
}

/// The `linux1:` token of `pid` from its `stat` line.
fn linux_token_of(pid: i32, stat: &str, pidfd: Option<BorrowedFd<'_>>) -> Observed {
    let boot_id = match boot_id() {
        Ok(id) => id,
        Err(e) => return Observed::Unreadable(format!("boot_id: {e}")),
    };
    let Some(starttime) = parse_stat_starttime(stat) else {
        return Observed::Unreadable(format!("/proc/{pid}/stat: no starttime field"));
    };
    let inode = pidfd.map(pidfd_inode).unwrap_or(0);
    Observed::Token(
        Token::Linux {
            boot_id,
            inode,
            starttime,
        }
        .to_text(),
    )
}

/// Reads the `ps1:` token of `pid` by running `ps -o lstart= -p <pid>` with `TZ=UTC` and
/// `LC_ALL=C` (and nothing else from our environment but `PATH`), so the text does not
/// depend on the caller's timezone or locale.
///
/// Blocks until `ps` exits; meant for adoption and for systems without `/proc`.
pub fn ps_token(pid: i32) -> Observed {
    if pid <= 0 {
        return Observed::Unreadable(format!("invalid pid {pid}"));
    }
    let mut cmd = Command::new("ps");
    cmd.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(default_path),
        )
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .args(["-o", "lstart=", "-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => return Observed::Unreadable(format!("ps: {e}")),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let lstart = text.trim();
    if lstart.is_empty() {
        // procps and BSD ps exit 1 with no output at all for a pid that does not exist.
        // A `ps` that complains instead (busybox does not know `-o lstart`) says nothing
        // about the pid: that is unreadable, never "gone" (a live process would be
        // forgotten).
        return if out.status.code() == Some(1) && out.stderr.trim_ascii().is_empty() {
            Observed::Gone
        } else {
            Observed::Unreadable(format!("ps: {}", out.status))
        };
    }
    let token = format!(
        "ps1:{}",
        lstart
            .split_ascii_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    );
    match parse(&token) {
        Some(_) => Observed::Token(token),
        None => Observed::Unreadable(format!("ps: unexpected output {lstart:?}")),
    }
}

fn default_path() -> OsString {
    OsString::from("/usr/local/bin:/usr/bin:/bin")
}

/// The token for `pid` in this system's native format (`linux1:` where `/proc` exists).
pub fn observe(pid: i32, pidfd: Option<BorrowedFd<'_>>) -> Observed {
    if cfg!(target_os = "linux") {
        linux_token(pid, pidfd)
    } else {
        ps_token(pid)
    }
}

/// Reads the identity of `pid` in the format of `recorded` (so a `ps1:` record is checked
/// with `ps` even on Linux) and compares.
pub fn verify(pid: i32, recorded: Option<&str>, pidfd: Option<BorrowedFd<'_>>) -> Verdict {
    if pid <= 0 {
        return Verdict::Unverifiable;
    }
    let observed = match recorded.and_then(parse) {
        None => return Verdict::Unverifiable,
        Some(Token::Ps { .. }) => ps_token(pid),
        Some(Token::Linux { .. }) => linux_token(pid, pidfd),
    };
    compare(recorded, &observed)
}

/// Whether a `stat` line is a process that has exited: a zombie (`Z`) or one being
/// removed (`X`). It runs no more; only its parent's reap is missing.
fn stat_exited(stat: &str) -> bool {
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_ascii_whitespace().next());
    matches!(state, Some("Z" | "X" | "x"))
}

/// Like [`verify`] without a pidfd, for a process that is not our child, asking whether
/// the recorded process still *runs*: also [`Verdict::Mismatch`] when it is still there
/// but has exited (a zombie its real parent has not reaped yet: nothing of it runs, and
/// it can only go). `linux1:` tokens are read from one `/proc/<pid>/stat`, so the state
/// and the identity are of the same process; for a `ps1:` token this is [`verify`].
pub fn verify_running(pid: i32, recorded: Option<&str>) -> Verdict {
    if pid <= 0 {
        return Verdict::Unverifiable;
    }
    if !matches!(recorded.and_then(parse), Some(Token::Linux { .. })) {
        return verify(pid, recorded, None);
    }
    let stat = match read_stat(pid) {
        Ok(stat) => stat,
        Err(observed) => return compare(recorded, &observed),
    };
    match compare(recorded, &linux_token_of(pid, &stat, None)) {
        Verdict::Match if stat_exited(&stat) => Verdict::Mismatch,
        verdict => verdict,
    }
}

/// The result of [`adopt`].
#[derive(Debug)]
pub enum Adoption {
    /// The recorded process, held by a handle (with a pidfd when the system has them).
    Adopted(Process),
    /// Another process, or none, has the pid: the record may be forgotten.
    Mismatch,
    /// Cannot tell: keep the record, signal nothing.
    Unverifiable(String),
}

/// Takes charge of a process through a pidfd that was opened while it was a previous
/// daemon's child, and kept since (a keeper held it): such a pidfd cannot have been
/// redirected to a recycled pid. While it runs, its token is still compared with the
/// recorded one (through the pidfd), so a descriptor that names another pid than the
/// pidfd's process is `mismatch`; once it has exited, its pid may be anyone's and its
/// token unreadable, and the pidfd alone is the proof: it is adopted, and its exit status
/// comes from the pidfd.
pub fn adopt_kept(pidfd: OwnedFd, pid: i32, recorded: &str) -> Adoption {
    let Some(raw) = Pid::from_raw(pid).filter(|_| pid > 0) else {
        return Adoption::Unverifiable(format!("invalid pid {pid}"));
    };
    if parse(recorded).is_none() {
        return Adoption::Unverifiable("no identity token recorded".to_owned());
    }
    match crate::sys::process::pidfd_exited(pidfd.as_fd()) {
        Ok(true) => {
            return Adoption::Adopted(Process::adopted(raw, Some(pidfd), recorded.to_owned()))
        }
        Ok(false) => {}
        Err(e) => return Adoption::Unverifiable(format!("poll pidfd: {e}")),
    }
    match verify(pid, Some(recorded), Some(pidfd.as_fd())) {
        Verdict::Match => {
            Adoption::Adopted(Process::adopted(raw, Some(pidfd), recorded.to_owned()))
        }
        // It may have exited between the two looks: then the pidfd is the proof again.
        _ if crate::sys::process::pidfd_exited(pidfd.as_fd()).unwrap_or(false) => {
            Adoption::Adopted(Process::adopted(raw, Some(pidfd), recorded.to_owned()))
        }
        Verdict::Mismatch => Adoption::Mismatch,
        Verdict::Unverifiable => Adoption::Unverifiable("identity could not be read".to_owned()),
    }
}

/// Takes charge of a process that is not our child (after a restart) if and only if it is
/// the recorded one. Without a well-formed `recorded` token nothing can be verified: the
/// answer is [`Adoption::Unverifiable`] while some process has `pid` (even a zombie), and
/// [`Adoption::Mismatch`] once none has.
///
/// With pidfds the pidfd is opened *first*, then the token is read and compared, and the
/// pidfd is checked to still refer to a running process: if everything matches, the pidfd
/// refers to the recorded process and can never be redirected to a recycled pid.
/// `pidfd_open` answering `EINVAL` (a transient kernel race, systemd#36982) is retried and
/// then treated as unverifiable; `ESRCH` means the pid is free (mismatch).
///
/// In [`ReaperMode::Fallback`], or where pidfds do not exist, the token is compared without
/// a pidfd and the handle re-verifies it before every signal.
pub fn adopt(pid: i32, recorded: &str, mode: ReaperMode) -> Adoption {
    if pid <= 0 {
        return Adoption::Unverifiable(format!("invalid pid {pid}"));
    }
    let Some(raw) = Pid::from_raw(pid) else {
        return Adoption::Unverifiable(format!("invalid pid {pid}"));
    };
    if parse(recorded).is_none() {
        // Nothing to compare with. But a free pid says the recorded process is gone,
        // whatever it was: nothing of it can be signalled, and its record may go.
        if rustix::process::test_kill_process(raw) == Err(Errno::SRCH) {
            return Adoption::Mismatch;
        }
        let why = if recorded.is_empty() {
            "no identity token recorded"
        } else {
            "malformed identity token"
        };
        return Adoption::Unverifiable(why.to_owned());
    }
    let pidfd = if mode == ReaperMode::Fallback {
        None
    } else {
        let mut attempts = 0;
        loop {
            match pidfd_open(raw, PidfdFlags::empty()) {
                Ok(fd) => break Some(fd),
                Err(Errno::SRCH) => return Adoption::Mismatch,
                Err(Errno::INVAL) if attempts < 3 => attempts += 1,
                Err(Errno::INVAL) => {
                    return Adoption::Unverifiable("pidfd_open: EINVAL".to_owned());
                }
                Err(Errno::NOSYS) => break None,
                Err(e) => return Adoption::Unverifiable(format!("pidfd_open: {e}")),
            }
        }
    };
    match verify(pid, Some(recorded), pidfd.as_ref().map(|fd| fd.as_fd())) {
        Verdict::Match => {}
        Verdict::Mismatch => return Adoption::Mismatch,
        Verdict::Unverifiable => {
            return Adoption::Unverifiable("identity could not be read".to_owned())
        }
    }
    if let Some(fd) = &pidfd {
        // The token was read from whatever held the pid at that moment. If the process
        // behind the pidfd is still running now, it held the pid then, so the token was its.
        match crate::sys::process::pidfd_exited(fd.as_fd()) {
            Ok(false) => {}
            Ok(true) => return Adoption::Mismatch,
            Err(e) => return Adoption::Unverifiable(format!("poll pidfd: {e}")),
        }
    }
    Adoption::Adopted(Process::adopted(raw, pidfd, recorded.to_owned()))
}
