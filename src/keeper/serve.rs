//! The keeper's life: detach, listen, record itself, then hold and hand over until it has
//! no purpose left (see the [module docs](super)).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{
    accept_with, bind, listen, socket_with, sockopt, AddressFamily, SocketAddrUnix, SocketFlags,
    SocketType,
};

use super::held::Held;
use super::wire::{Kind, Message, MESSAGE_BYTES};
use super::KeeperArgs;
use crate::store::dir::Dir;
use crate::store::keeper_file::{
    encode_keeper, read_keeper, KeeperRecord, KEEPER_FILE, KEEPER_SOCKET,
};
use crate::store::lease::{decode_holder, LEASE_FILE};
use crate::sys::fdpass::{recv_with_fds, send_with_fds, Received};
use crate::sys::peer::peer_cred;

/// How long a send to a daemon may block (a hand-over to a daemon that stopped reading):
/// it is then taken for dead like one whose link closed.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Messages read from the link per wake-up before the listener is looked at.
const READS_PER_TURN: usize = 256;

/// Why the loop ends.
enum End {
    /// `Bye`: the daemon shut down cleanly.
    Bye,
    /// No daemon came within the hold time.
    Expired,
    /// Its socket, or the state directory, was removed or renamed: no daemon can find it.
    Unreachable,
}

/// Runs a keeper on `link` (see the [module docs](super)).
pub fn serve(link: OwnedFd, args: &KeeperArgs) -> io::Result<()> {
    detach()?;
    let _ = rustix::process::chdir("/");
    crate::sys::rlimit::raise_nofile_limit();
    let dir = Dir::open(&args.state_dir).map_err(io::Error::from)?;
    let me = std::process::id();
    let identity = match crate::sys::identity::observe(me as i32, None) {
        crate::sys::identity::Observed::Token(t) => t,
        _ => return Err(io::Error::other("cannot read its own identity token")),
    };
    let record = KeeperRecord {
        pid: me,
        identity,
        since_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    };
    // Recorded first, then its socket put in place of any other's: a keeper still alive
    // whose socket this replaces sees it go and exits — and finds the record naming
    // this one, so it leaves this one's files alone.
    dir.write_atomic(KEEPER_FILE, &encode_keeper(&record))?;
    drop(dir);
    let listening = listen_at(&args.state_dir.join(KEEPER_SOCKET)).and_then(|listener| {
        // After its own socket is in place: only someone else's removal of it counts.
        watch_dir(&args.state_dir).map(|watch| (listener, watch))
    });
    let (listener, watch) = match listening {
        Ok(l) => l,
        Err(e) => {
            remove_own_files(&args.state_dir, me);
            return Err(e);
        }
    };
    let ready = Message::plain(Kind::Ready, me.into()).encode();
    if let Err(e) = send_with_fds(&link, &ready, &[], false) {
        // The daemon let go of this keeper before it was ready (it gave up waiting, or it
        // is shutting down or upgrading): nobody will ever use it.
        remove_own_files(&args.state_dir, me);
        return Err(e);
    }
    let mut keeper = Keeper {
        link: Some(link),
        pending: None,
        listener,
        held: Held::default(),
        alone_since: None,
        hold: args.hold,
        state_dir: &args.state_dir,
        watch,
    };
    let end = keeper.run();
    keeper.held.clear();
    remove_own_files(&args.state_dir, me);
    match end {
        End::Bye | End::Expired | End::Unreachable => Ok(()),
    }
}

/// Removes the keeper's socket and record — only while the record still names this
/// keeper (`me`): a successor's are never removed.
fn remove_own_files(state_dir: &Path, me: u32) {
    if let Ok(dir) = Dir::open(state_dir) {
        if read_keeper(&dir).is_ok_and(|r| r.pid == me) {
            let _ = dir.unlink(KEEPER_SOCKET);
            let _ = dir.unlink(KEEPER_FILE);
        }
    }
}

/// An inotify watch of the state directory: its socket removed or renamed (by a daemon
/// that could not trust it, or with the whole directory), or the directory itself moved
/// or removed — then no daemon can ever find this keeper, and it ends at once instead of
/// at the end of its hold. (The directory's own removal is announced late while the bound
/// socket pins it: the socket's removal comes first.)
fn watch_dir(path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::inotify::{self, WatchFlags};
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
    let flags = WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW;
    inotify::add_watch(&fd, path, flags)?;
    Ok(fd)
}

/// Whether the events waiting on `watch` say the keeper can no longer be found.
fn unreachable(watch: &OwnedFd) -> bool {
    use rustix::fs::inotify::{ReadFlags, Reader};
    use std::mem::MaybeUninit;
    let mut buf = [MaybeUninit::<u8>::uninit(); 1024];
    let mut reader = Reader::new(watch, &mut buf);
    loop {
        let event = match reader.next() {
            Ok(e) => e,
            Err(Errno::INTR) => continue,
            // Read dry (or the queue overflowed, which is then looked at again).
            Err(_) => return false,
        };
        let flags = event.events();
        if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED) {
            return true;
        }
        let ours = event
            .file_name()
            .is_some_and(|n| n.to_bytes() == KEEPER_SOCKET.as_bytes());
        if ours && flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            return true;
        }
    }
}

/// Leaves the daemon's process group and session: the parent exits at once (the daemon
/// waits for it), the child becomes the leader of a new session without a terminal.
fn detach() -> io::Result<()> {
    // SAFETY: the keeper is single-threaded here (nothing has started a thread), so the
    // child may run any code after the fork.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        // SAFETY: `_exit` ends the parent at once, without running anything of ours twice.
        pid if pid > 0 => unsafe { libc::_exit(0) },
        _ => rustix::process::setsid().map(drop).map_err(io::Error::from),
    }
}

/// A listening record socket at `path`, replacing a stale one.
fn listen_at(path: &Path) -> io::Result<OwnedFd> {
    let fd = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    bind(&fd, &SocketAddrUnix::new(path)?)?;
    // The directory is private already; the socket is too, like every file in it.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    listen(&fd, 8)?;
    Ok(fd)
}

struct Keeper<'a> {
    /// The daemon served; `None` while waiting for the next one.
    link: Option<OwnedFd>,
    /// A daemon that connected while the link still looked open (the old daemon's exit
    /// not yet seen): it becomes the link once the old one closes.
    pending: Option<OwnedFd>,
    listener: OwnedFd,
    held: Held,
    /// Since when no daemon is served.
    alone_since: Option<Instant>,
    hold: Duration,
    state_dir: &'a Path,
    /// Readable once the state directory is removed or renamed.
    watch: OwnedFd,
}

impl Keeper<'_> {
    fn run(&mut self) -> End {
        loop {
            if let Some(since) = self.alone_since {
                if since.elapsed() >= self.hold {
                    return End::Expired;
                }
            }
            let timeout = self.alone_since.map(|s| {
                let left = self.hold.saturating_sub(s.elapsed());
                Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: i64::from(left.subsec_nanos()),
                }
            });
            let (link_ready, pending_hup, listener_ready, dir_gone) = {
                let mut fds = vec![
                    PollFd::new(&self.listener, PollFlags::IN),
                    PollFd::new(&self.watch, PollFlags::IN),
                ];
                if let Some(l) = &self.link {
                    fds.push(PollFd::new(l, PollFlags::IN));
                }
                if let Some(p) = &self.pending {
                    // Only its hang-up: its first message is read once it is the link.
                    fds.push(PollFd::new(p, PollFlags::empty()));
                }
                match poll(&mut fds, timeout.as_ref()) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(_) => return End::Expired,
                }
                let listener_ready = !fds[0].revents().is_empty();
                let dir_gone = !fds[1].revents().is_empty() && unreachable(&self.watch);
                let mut rest = fds[2..].iter().map(|f| !f.revents().is_empty());
                let link_ready = self.link.is_some() && rest.next().unwrap_or(false);
                let pending_hup = self.pending.is_some() && rest.next().unwrap_or(false);
                (link_ready, pending_hup, listener_ready, dir_gone)
            };
            if dir_gone {
                return End::Unreachable;
            }
            if link_ready {
                if let Some(end) = self.serve_link() {
                    return end;
                }
            }
            if pending_hup {
                self.pending = None;
            }
            if listener_ready {
                self.accept();
            }
        }
    }

    /// Reads the daemon's messages (a bounded number per turn); `Some` once the keeper
    /// is done.
    fn serve_link(&mut self) -> Option<End> {
        let mut buf = [0u8; MESSAGE_BYTES + 1];
        for _ in 0..READS_PER_TURN {
            let link = self.link.as_ref()?;
            match recv_with_fds(link, &mut buf, true) {
                Ok(Received::Message(n, fds)) => match Message::decode(&buf[..n], fds.len()) {
                    Ok(m) => {
                        if let Some(end) = self.apply(m, fds) {
                            return Some(end);
                        }
                    }
                    // Refused: its descriptors are closed as `fds` goes.
                    Err(_) => drop(fds),
                },
                Ok(Received::WouldBlock) => return None,
                // A cut message was refused and what came with it closed.
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {}
                Ok(Received::Eof) | Err(_) => {
                    self.lost_link();
                    return None;
                }
            }
        }
        None
    }

    fn apply(&mut self, m: Message, fds: Vec<OwnedFd>) -> Option<End> {
        match m.kind {
            Kind::Hold => {
                self.held.hold(m.gen, m.roles, fds);
            }
            Kind::Drop => self.held.drop_roles(m.gen, m.roles),
            Kind::Bye => return Some(End::Bye),
            Kind::Take => self.hand_over(),
            // Only the keeper says these.
            Kind::End | Kind::Ready => {}
        }
        None
    }

    /// Sends everything held to the daemon, then `End`; the keeper keeps its copies and
    /// serves this daemon from now on.
    fn hand_over(&mut self) {
        let Some(link) = &self.link else { return };
        let mut sent = 0u64;
        let mut ok = true;
        for (gen, roles, fds) in self.held.each() {
            let m = Message {
                kind: Kind::Hold,
                roles,
                gen,
            };
            ok = send_with_fds(link, &m.encode(), &fds, false).is_ok();
            if !ok {
                break;
            }
            sent += 1;
        }
        let end = Message::plain(Kind::End, sent).encode();
        if !ok || send_with_fds(link, &end, &[], false).is_err() {
            self.lost_link();
        }
    }

    /// The daemon is gone (or its link broke): a daemon that already connected takes its
    /// place, else the keeper waits for one, holding everything.
    fn lost_link(&mut self) {
        self.link = self.pending.take();
        if self.link.is_none() {
            self.alone_since = Some(Instant::now());
        }
    }

    /// Takes a connection to the socket: only from the process holding the state
    /// directory's lease, of our uid. Anything else is closed at once.
    fn accept(&mut self) {
        loop {
            let conn = match accept_with(&self.listener, SocketFlags::CLOEXEC) {
                Ok(c) => c,
                Err(Errno::INTR) => continue,
                Err(_) => return,
            };
            if !self.is_our_daemon(&conn) {
                continue;
            }
            let _ = sockopt::set_socket_timeout(&conn, sockopt::Timeout::Send, Some(SEND_TIMEOUT));
            if self.link.is_none() {
                self.link = Some(conn);
                self.alone_since = None;
            } else {
                self.pending = Some(conn);
            }
        }
    }

    fn is_our_daemon(&self, conn: &OwnedFd) -> bool {
        let Ok(cred) = peer_cred(conn.as_fd()) else {
            return false;
        };
        if cred.uid != rustix::process::geteuid().as_raw() || cred.pid <= 0 {
            return false;
        }
        let Ok(dir) = Dir::open(self.state_dir) else {
            return false;
        };
        let mut buf = Vec::new();
        if dir.read_strict(LEASE_FILE, 1024, &mut buf).is_err() {
            return false;
        }
        decode_holder(&buf).is_ok_and(|h| h.pid == cred.pid as u32)
    }
}
