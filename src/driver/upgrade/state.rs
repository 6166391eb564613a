//! The driver's part of an upgrade image, as plain data: what each owner (children,
//! clients, the unverified, the clock, the configuration) hands to the next program.
//!
//! Exporting fills these from the live owners; importing first decodes and checks them
//! whole — every descriptor number named once, and open — and only then builds live
//! owners from them, which cannot fail. So a new program that cannot resume has touched
//! nothing, and the previous program can be run again on the same image and descriptors.
//!
//! Descriptors travel as their numbers: they stay open across `execve` (close-on-exec is
//! cleared on exactly these), and the image says which owner each belongs to. Instants
//! travel as `CLOCK_MONOTONIC` nanoseconds, the clock `Instant` reads, which the next
//! program shares.

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::proto::envelope::RequestId;
use crate::store::image::ImageError;

/// An `Instant` as `CLOCK_MONOTONIC` nanoseconds, and back: the same clock in the next
/// program.
pub mod mono {
    use super::*;

    fn now_ns() -> u64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec to write; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64)
    }

    /// `at` on the monotonic clock.
    pub fn to_ns(at: Instant) -> u64 {
        let (now, ns) = (Instant::now(), now_ns());
        if at >= now {
            ns.saturating_add((at - now).as_nanos() as u64)
        } else {
            ns.saturating_sub((now - at).as_nanos() as u64)
        }
    }

    /// The `Instant` of monotonic time `ns`.
    pub fn from_ns(ns: u64) -> Instant {
        let (now, now_ns) = (Instant::now(), now_ns());
        if ns >= now_ns {
            now + Duration::from_nanos(ns - now_ns)
        } else {
            now.checked_sub(Duration::from_nanos(now_ns - ns))
                .unwrap_or(now)
        }
    }
}

/// The daemon's configuration: the next program runs with the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigImage {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    pub allow_uids: Vec<u32>,
    /// 0 auto, 1 fallback.
    pub reaper: u8,
    pub subreaper: bool,
    pub max_clients: u64,
    pub outbox_bytes: u64,
    pub max_line: u64,
    /// The core's table limits: the imported core is checked against them.
    pub max_sessions: u64,
    pub max_running: u64,
    /// 0 auto, 1 cgroup, 2 session.
    pub containment: u8,
    /// The program the daemon was started as: the default of the next upgrade.
    pub program: PathBuf,
    /// How long a keeper holds on after a crash (milliseconds); `None` without a keeper.
    pub keeper_hold_ms: Option<u64>,
    /// `--output-to-stdout`.
    pub output_to_stdout: bool,
    /// The configuration's path, reloaded from by the next program.
    pub config: Option<PathBuf>,
}

/// One generation's process and descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildImage {
    pub gen: u64,
    pub pid: i32,
    pub pidfd: Option<RawFd>,
    pub token: Option<String>,
    pub is_child: bool,
    /// stdout, stderr, PTY master (by `Stream::index`).
    pub outputs: [Option<RawFd>; 3],
    pub stdin: Option<RawFd>,
    pub hung_up_pty: Option<RawFd>,
    /// Input accepted and not yet written.
    pub input: Vec<u8>,
    pub close_input_when_written: bool,
    /// Its cgroup's directory and the name `/proc/PID/cgroup` gives it; reopened.
    pub cgroup: Option<(PathBuf, String)>,
    /// An adopted process waiting for its status, or looked at on a timer: looked at
    /// again at once.
    pub awaits_status: bool,
}

/// One request line read and not handled yet: its bytes, or the limit it exceeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineImage {
    Line(Vec<u8>),
    TooLong(u64),
}

/// A piece of a connection's queue: bytes of its own, or (most of what a subscriber has
/// queued) a record of a session's log, which the next program reads back from the
/// output journal — so a frame queued for a thousand subscribers is in the image once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxPiece {
    Bytes(Vec<u8>),
    /// Record `seq` of `session`'s log, its first `skip` bytes already written.
    Record {
        session: String,
        seq: u64,
        skip: u64,
    },
}

/// A session followed, and how far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorImage {
    pub session: String,
    pub seq: u64,
    pub pos: u64,
    /// Its queue filled before it caught up.
    pub behind: bool,
    /// A lossless subscription: its `demote_after` in milliseconds (how long it has held
    /// the output back is not kept: the next program starts that count afresh).
    pub lossless_ms: Option<u64>,
}

/// A `wait` answer held until the exit record it follows is queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredImage {
    pub session: String,
    pub seq: u64,
    pub line: Vec<u8>,
}

/// One connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientImage {
    pub id: u64,
    pub fd: RawFd,
    /// Bytes of a request line received without its newline yet, and whether the rest of
    /// a too long line is being skipped.
    pub partial: Vec<u8>,
    pub skipping: bool,
    pub pending: Vec<LineImage>,
    /// Everything queued and not yet written, in order.
    pub outbox: Vec<OutboxPiece>,
    pub paused: bool,
    pub eof: bool,
    pub waiting: u64,
    pub deferred: Vec<DeferredImage>,
    pub cursors: Vec<CursorImage>,
    /// Follows every session: how it starts on sessions that exist when it subscribed,
    /// as `Replay` is spelled on the wire (`now`, `start`, `tail:N`, `pos:N`, `gen:N`).
    pub all: Option<String>,
    /// Follows every session losslessly: its `demote_after` in milliseconds.
    pub all_lossless_ms: Option<u64>,
}

/// A `wait` registered for a live generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitImage {
    pub gen: u64,
    pub client: u64,
    pub rid: RequestId,
}

/// Every connection, and what is owed to them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientsImage {
    pub listener: RawFd,
    pub next_id: u64,
    pub next_request: u64,
    pub clients: Vec<ClientImage>,
    pub waits: Vec<WaitImage>,
    /// Core request → (connection, its id): commands the core has not answered.
    pub replies: Vec<(u64, u64, RequestId)>,
}

/// A generation taken back whose identity is checked again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptImage {
    pub gen: u64,
    pub session: String,
    pub pid: u32,
    pub token: String,
}

/// Who asked for the upgrade, to be answered by the program that runs after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequesterImage {
    pub client: u64,
    pub rid: RequestId,
    /// The version that wrote the image.
    pub previous_version: String,
    /// When the loop stopped serving (monotonic ns): the pause is measured from here.
    pub paused_at_ns: u64,
}

/// The driver's whole part of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverImage {
    pub config: ConfigImage,
    /// The core clock's zero (monotonic ns) and the Unix time it stood for.
    pub clock_start_ns: u64,
    pub epoch_unix_ms: u64,
    pub lease: RawFd,
    /// The name of the cgroup subtree generations get cgroups in, if the daemon has one.
    pub cgroup_root: Option<String>,
    /// The link to the keeper holding the children's descriptors across a crash.
    pub keeper: Option<RawFd>,
    pub children: Vec<ChildImage>,
    pub clients: ClientsImage,
    pub unverified: Vec<KeptImage>,
    pub requester: Option<RequesterImage>,
    /// Descriptors kept open only for the exec itself (a script's interpreter reads the
    /// program through `/proc/self/fd/N`): closed by the program that resumes.
    pub exec_only: Vec<RawFd>,
    /// Whom probe commands run as, per generation whose start took a lookup (the lookup
    /// answer's encoding).
    pub probe_identities: Vec<(u64, Vec<u8>)>,
    /// Sessions whose file could not be written: the program that resumes tries again,
    /// or a crash after the upgrade would undo what their clients were told.
    pub unsaved: Vec<String>,
}

impl DriverImage {
    /// Every descriptor the image names, each once.
    pub fn descriptors(&self) -> Vec<RawFd> {
        let mut fds = vec![self.lease, self.clients.listener];
        fds.extend(self.keeper);
        for c in &self.children {
            fds.extend(c.pidfd);
            fds.extend(c.outputs.iter().flatten());
            fds.extend(c.stdin);
            fds.extend(c.hung_up_pty);
        }
        fds.extend(self.clients.clients.iter().map(|c| c.fd));
        fds
    }

    /// Refuses an image that names a descriptor twice or one that is not open, before
    /// anything takes ownership of any of them.
    pub fn check_descriptors(&self) -> Result<(), ImageError> {
        let fds = self.descriptors();
        let mut seen = HashSet::new();
        if let Some(fd) = fds.iter().find(|fd| !seen.insert(**fd)) {
            return Err(ImageError(format!("descriptor {fd} is named twice")));
        }
        for fd in fds {
            // SAFETY: F_GETFD on any number only reads its flags; EBADF if not open.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(ImageError(format!("descriptor {fd} is not open")));
            }
        }
        Ok(())
    }
}

mod codec;
#[cfg(test)]
mod tests;
