//! The control socket: bound inside the private state directory, mode 0600, and every peer
//! checked with `SO_PEERCRED` before a byte of its request is read.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use mio::net::{UnixListener, UnixStream};

use crate::proto::envelope::RequestId;
use crate::proto::error::{write_error_response, ErrorCode, ProtoError};
use crate::sys::unix_connect::connect_within;

/// Whether a Unix socket can be bound at `path` at all (short enough, no NUL byte) —
/// checked before the state directory is claimed, so that a path that can never work
/// fails the start having created nothing.
pub fn check_path(path: &Path) -> io::Result<()> {
    std::os::unix::net::SocketAddr::from_pathname(path).map(drop)
}

/// How long a socket file found at start is given to accept a connection before it is
/// taken for a live daemon's that accepts nothing.
const LIVE_CHECK: Duration = Duration::from_secs(1);

/// Binds the control socket at `path`: mode 0600, or 0666 when `shared` (other uids are
/// allowed: their peer credentials are checked on every connection).
///
/// A socket file left by a crashed daemon is replaced; one that still answers belongs to a
/// live daemon and is refused (the lease normally catches this first, but a `--socket`
/// outside the state directory is not covered by it).
pub fn bind(path: &Path, shared: bool) -> io::Result<UnixListener> {
    if path.exists() {
        // A listener whose queue is full (its daemon stopped) never lets a connect
        // through: that one is bounded, and is a live listener too.
        match connect_within(path, Some(LIVE_CHECK)) {
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("a daemon already listens at {}", path.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "a daemon already listens at {}, accepting nothing (stopped?)",
                        path.display()
                    ),
                ))
            }
            Err(_) => {}
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    let mode = if shared { 0o666 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// Binds the control socket and registers it with the loop.
pub fn open(
    path: &Path,
    shared: bool,
    registry: &mio::Registry,
) -> Result<UnixListener, super::config::StartError> {
    let mut listener = bind(path, shared)
        .map_err(|e| super::config::StartError(format!("socket {}: {e}", path.display())))?;
    let token = super::token::Source::Listener
        .token()
        .expect("fixed sources have tokens");
    registry
        .register(&mut listener, token, mio::Interest::READABLE)
        .map_err(|e| super::config::StartError(format!("register socket: {e}")))?;
    Ok(listener)
}

/// Tells a connection why it is refused, then lets it go.
///
/// Closing a Unix socket with unread input resets it, and the peer would lose the reason:
/// what it already sent is read and discarded first (bounded).
pub fn refuse(stream: &mut UnixStream, code: ErrorCode, why: String) {
    let mut line = Vec::new();
    write_error_response(&RequestId::Null, &ProtoError::new(code, why), &mut line);
    let _ = io::Write::write(stream, &line);
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match io::Read::read(stream, &mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

/// Socket send buffer asked for each client.
const CLIENT_SNDBUF: usize = 1 << 20;

/// The control socket's listening side: who gets in, and a clear answer for who does not.
#[derive(Debug)]
pub struct Listener {
    socket: UnixListener,
    policy: PeerPolicy,
    spare: SpareFd,
    refusals: RefusalLog,
    /// The last `admit` stopped at its budget.
    more: bool,
}

impl Listener {
    /// The listening socket (its number goes into an upgrade image).
    pub fn socket(&self) -> &UnixListener {
        &self.socket
    }

    /// Admits connections on `socket` per `policy`.
    pub fn new(socket: UnixListener, policy: PeerPolicy) -> Listener {
        Listener {
            socket,
            policy,
            spare: SpareFd::new(),
            refusals: RefusalLog::default(),
            more: false,
        }
    }

    /// Whether the last [`admit`](Self::admit) stopped at its budget, the queue perhaps
    /// not empty (the listener is edge-triggered: it must be serviced again); cleared.
    pub fn take_more(&mut self) -> bool {
        std::mem::take(&mut self.more)
    }

    /// The next waiting connection that may stay, with `connected` of at most `max`
    /// already in and descriptors for `room` more; the others are answered with why and
    /// closed. `None` once the queue is empty (or accepting fails), or once `budget`
    /// connections (admitted or refused) were taken off the queue: a peer that connects
    /// flat out — one refused at once, a uid not allowed, costs the loop no more than an
    /// admitted one — must not keep the loop from everything else. [`Listener::more`]
    /// then says the queue may still hold some.
    pub fn admit(
        &mut self,
        connected: usize,
        max: usize,
        room: usize,
        budget: &mut usize,
    ) -> Option<UnixStream> {
        loop {
            if *budget == 0 {
                self.more = true;
                return None;
            }
            let (mut stream, _) = match self.socket.accept() {
                Ok(s) => {
                    *budget -= 1;
                    s
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_out_of_descriptors(&e) => {
                    // The listener is edge-triggered: a connection left queued now would
                    // wait for the next one to arrive. Spend the spare descriptor to tell
                    // it why, and go on until the queue is empty.
                    match self.spare.refuse_one(&self.socket) {
                        Spent::Refused => continue,
                        Spent::QueueEmpty => return None,
                        Spent::NoSpare => {
                            log::error!("accept: {e}; no spare descriptor left");
                            return None;
                        }
                    }
                }
                Err(e) => {
                    log::error!("accept: {e}");
                    return None;
                }
            };
            if let Err(refused) = self.policy.check(&stream) {
                self.refusals.note(&refused.reason);
                refuse(&mut stream, ErrorCode::PermissionDenied, refused.reason);
                continue;
            }
            if room == 0 {
                self.refusals.note(&"descriptors kept for the state files");
                refuse(
                    &mut stream,
                    ErrorCode::Limit,
                    OUT_OF_DESCRIPTORS.to_string(),
                );
                continue;
            }
            if connected >= max {
                self.refusals
                    .note(&format_args!("{connected} clients connected"));
                refuse(
                    &mut stream,
                    ErrorCode::Limit,
                    format!("too many connections (limit {max})"),
                );
                continue;
            }
            // A deeper socket buffer moves output in fewer, larger writes and wake-ups
            // (best effort: the kernel caps it at net.core.wmem_max).
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, CLIENT_SNDBUF);
            return Some(stream);
        }
    }
}

/// Refused connections are logged at most once a second: a burst of clients must not
/// flood the daemon's log. The ones in between are counted, and said with the next line.
#[derive(Debug, Default)]
struct RefusalLog {
    quiet_until: Option<std::time::Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn note(&mut self, why: &dyn std::fmt::Display) {
        let now = std::time::Instant::now();
        if self.quiet_until.is_some_and(|t| now < t) {
            self.unlogged += 1;
            return;
        }
        match std::mem::take(&mut self.unlogged) {
            0 => log::warn!("refused a connection: {why}"),
            n => log::warn!(
                "refused a connection: {why} ({n} more refused since the last such line)"
            ),
        }
        self.quiet_until = Some(now + std::time::Duration::from_secs(1));
    }
}

/// Why a connection is turned away when descriptors run short.
const OUT_OF_DESCRIPTORS: &str = "the daemon is out of file descriptors; try again later";

/// Whether accepting failed for want of descriptors (ours or the system's).
fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// One descriptor held back, for when even the reserve that spawns may not take (see
/// `driver::descriptors`) is spent, so that a connection arriving while descriptors are
/// exhausted is accepted, told `limit`, and closed instead of left hanging.
#[derive(Debug)]
struct SpareFd(Option<std::fs::File>);

impl SpareFd {
    fn new() -> SpareFd {
        SpareFd(std::fs::File::open("/dev/null").ok())
    }

    /// Frees the spare, accepts one queued connection and refuses it, then takes the
    /// spare back.
    fn refuse_one(&mut self, listener: &UnixListener) -> Spent {
        if self.0.take().is_none() {
            *self = SpareFd::new();
            return Spent::NoSpare;
        }
        let spent = match listener.accept() {
            Ok((mut stream, _)) => {
                refuse(
                    &mut stream,
                    ErrorCode::Limit,
                    OUT_OF_DESCRIPTORS.to_string(),
                );
                Spent::Refused
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Spent::QueueEmpty,
            Err(_) => Spent::NoSpare,
        };
        *self = SpareFd::new();
        spent
    }
}

/// What spending the spare descriptor achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spent {
    Refused,
    QueueEmpty,
    NoSpare,
}

/// Who may talk to the daemon: its own uid, root, and any uid explicitly allowed.
#[derive(Debug, Clone)]
pub struct PeerPolicy {
    own_uid: u32,
    allowed: Vec<u32>,
}

impl PeerPolicy {
    /// Our effective uid plus `allowed`.
    pub fn new(allowed: Vec<u32>) -> Self {
        PeerPolicy {
            own_uid: rustix::process::geteuid().as_raw(),
            allowed,
        }
    }

    /// Whether a peer with `uid` may connect.
    pub fn permits(&self, uid: u32) -> bool {
        uid == 0 || uid == self.own_uid || self.allowed.contains(&uid)
    }

    /// Checks a connected peer's credentials; returns its uid and pid on success.
    pub fn check(&self, stream: &UnixStream) -> Result<(u32, i32), PeerRefused> {
        let cred = crate::sys::peer::peer_cred(stream).map_err(|e| PeerRefused {
            reason: format!("cannot read peer credentials: {e}"),
        })?;
        let uid = cred.uid;
        if self.permits(uid) {
            Ok((uid, cred.pid))
        } else {
            Err(PeerRefused {
                reason: format!(
                    "uid {uid} may not use this daemon (owner uid {}; start it with --allow-uid {uid} to permit)",
                    self.own_uid
                ),
            })
        }
    }
}

/// A refused connection, with the reason sent to the peer before closing.
#[derive(Debug)]
pub struct PeerRefused {
    /// Human-readable reason.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_admits_owner_root_and_listed_uids_only() {
        let own = rustix::process::geteuid().as_raw();
        let p = PeerPolicy::new(vec![4242]);
        assert!(p.permits(own));
        assert!(p.permits(0));
        assert!(p.permits(4242));
        let stranger = if own == 31337 { 31338 } else { 31337 };
        assert!(!p.permits(stranger));
    }

    #[test]
    fn binds_0600_and_refuses_a_live_socket() {
        let dir = std::env::temp_dir().join(format!("genward-listen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let first = bind(&path, false).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = bind(&path, false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        drop(first);
        // A stale socket file (no listener) is replaced.
        bind(&path, false).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
