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
use crate::store::image::{ImageError, Reader, Writer};

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
    /// 0 auto, 1 cgroup, 2 session.
    pub containment: u8,
    /// The program the daemon was started as: the default of the next upgrade.
    pub program: PathBuf,
    /// How long a keeper holds on after a crash (milliseconds); `None` without a keeper.
    pub keeper_hold_ms: Option<u64>,
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

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        let c = &self.config;
        w.bytes(c.state_dir.as_os_str().as_encoded_bytes());
        w.bytes(c.socket.as_os_str().as_encoded_bytes());
        w.count(c.allow_uids.len());
        for uid in &c.allow_uids {
            w.u32(*uid);
        }
        w.u8(c.reaper).bool(c.subreaper).u64(c.max_clients);
        w.u64(c.outbox_bytes).u64(c.max_line).u8(c.containment);
        w.bytes(c.program.as_os_str().as_encoded_bytes());
        w.opt_u64(c.keeper_hold_ms);
        w.u64(self.clock_start_ns)
            .u64(self.epoch_unix_ms)
            .i32(self.lease);
        match &self.cgroup_root {
            None => w.u8(0),
            Some(name) => w.u8(1).str(name),
        };
        w.opt_fd(self.keeper);
        w.count(self.children.len());
        for ch in &self.children {
            write_child(&mut w, ch);
        }
        write_clients(&mut w, &self.clients);
        w.count(self.unverified.len());
        for k in &self.unverified {
            w.u64(k.gen).str(&k.session).u32(k.pid).str(&k.token);
        }
        w.count(self.exec_only.len());
        for fd in &self.exec_only {
            w.i32(*fd);
        }
        match &self.requester {
            None => {
                w.u8(0);
            }
            Some(r) => {
                w.u8(1).u64(r.client);
                write_rid(&mut w, &r.rid);
                w.str(&r.previous_version).u64(r.paused_at_ns);
            }
        }
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<DriverImage, ImageError> {
        let mut r = Reader::new(bytes);
        let state_dir = path(&mut r)?;
        let socket = path(&mut r)?;
        let n = r.count(4)?;
        let mut allow_uids = Vec::with_capacity(n);
        for _ in 0..n {
            allow_uids.push(r.u32()?);
        }
        let config = ConfigImage {
            state_dir,
            socket,
            allow_uids,
            reaper: small(r.u8()?, 1, "reaper")?,
            subreaper: r.bool()?,
            max_clients: r.u64()?,
            outbox_bytes: r.u64()?,
            max_line: r.u64()?,
            containment: small(r.u8()?, 2, "containment")?,
            program: path(&mut r)?,
            keeper_hold_ms: r.opt_u64()?,
        };
        let clock_start_ns = r.u64()?;
        let epoch_unix_ms = r.u64()?;
        let lease = fd(&mut r)?;
        let cgroup_root = match r.u8()? {
            0 => None,
            1 => Some(r.str()?.to_owned()),
            t => return Err(ImageError(format!("{t} is not a cgroup tag"))),
        };
        let keeper = r.opt_fd()?;
        let n = r.count(8)?;
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            children.push(read_child(&mut r)?);
        }
        let clients = read_clients(&mut r)?;
        let n = r.count(8)?;
        let mut unverified = Vec::with_capacity(n);
        for _ in 0..n {
            unverified.push(KeptImage {
                gen: r.u64()?,
                session: r.str()?.to_owned(),
                pid: r.u32()?,
                token: r.str()?.to_owned(),
            });
        }
        let n = r.count(4)?;
        let mut exec_only = Vec::with_capacity(n);
        for _ in 0..n {
            exec_only.push(fd(&mut r)?);
        }
        let requester = match r.u8()? {
            0 => None,
            1 => Some(RequesterImage {
                client: r.u64()?,
                rid: read_rid(&mut r)?,
                previous_version: r.str()?.to_owned(),
                paused_at_ns: r.u64()?,
            }),
            t => return Err(ImageError(format!("{t} is not a requester tag"))),
        };
        r.end("the driver's state")?;
        Ok(DriverImage {
            config,
            clock_start_ns,
            epoch_unix_ms,
            lease,
            cgroup_root,
            keeper,
            children,
            clients,
            unverified,
            requester,
            exec_only,
        })
    }
}

fn small(v: u8, max: u8, what: &str) -> Result<u8, ImageError> {
    if v > max {
        return Err(ImageError(format!("{v} is not a {what} mode")));
    }
    Ok(v)
}

fn path(r: &mut Reader<'_>) -> Result<PathBuf, ImageError> {
    use std::os::unix::ffi::OsStrExt;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?)))
}

fn fd(r: &mut Reader<'_>) -> Result<RawFd, ImageError> {
    r.opt_fd()?
        .ok_or_else(|| ImageError("a required descriptor is missing".into()))
}

fn write_rid(w: &mut Writer, rid: &RequestId) {
    match rid {
        RequestId::Null => {
            w.u8(0);
        }
        RequestId::U64(n) => {
            w.u8(1).u64(*n);
        }
        RequestId::Str(s) => {
            w.u8(2).str(s);
        }
    }
}

fn read_rid(r: &mut Reader<'_>) -> Result<RequestId, ImageError> {
    match r.u8()? {
        0 => Ok(RequestId::Null),
        1 => Ok(RequestId::U64(r.u64()?)),
        2 => Ok(RequestId::Str(r.str()?.to_owned())),
        t => Err(ImageError(format!("{t} is not a request id tag"))),
    }
}

fn write_child(w: &mut Writer, c: &ChildImage) {
    w.u64(c.gen).i32(c.pid).opt_fd(c.pidfd);
    match &c.token {
        None => w.u8(0),
        Some(t) => w.u8(1).str(t),
    };
    w.bool(c.is_child);
    for o in c.outputs {
        w.opt_fd(o);
    }
    w.opt_fd(c.stdin).opt_fd(c.hung_up_pty).bytes(&c.input);
    w.bool(c.close_input_when_written);
    match &c.cgroup {
        None => w.u8(0),
        Some((p, name)) => w.u8(1).bytes(p.as_os_str().as_encoded_bytes()).str(name),
    };
    w.bool(c.awaits_status);
}

fn read_child(r: &mut Reader<'_>) -> Result<ChildImage, ImageError> {
    let gen = r.u64()?;
    let pid = r.i32()?;
    if pid <= 0 {
        return Err(ImageError(format!("gen {gen}: {pid} is not a pid")));
    }
    let pidfd = r.opt_fd()?;
    let token = match r.u8()? {
        0 => None,
        1 => Some(r.str()?.to_owned()),
        t => return Err(ImageError(format!("{t} is not a token tag"))),
    };
    let is_child = r.bool()?;
    let outputs = [r.opt_fd()?, r.opt_fd()?, r.opt_fd()?];
    let stdin = r.opt_fd()?;
    let hung_up_pty = r.opt_fd()?;
    let input = r.bytes()?.to_vec();
    let close_input_when_written = r.bool()?;
    let cgroup = match r.u8()? {
        0 => None,
        1 => Some((path(r)?, r.str()?.to_owned())),
        t => return Err(ImageError(format!("{t} is not a cgroup tag"))),
    };
    Ok(ChildImage {
        gen,
        pid,
        pidfd,
        token,
        is_child,
        outputs,
        stdin,
        hung_up_pty,
        input,
        close_input_when_written,
        cgroup,
        awaits_status: r.bool()?,
    })
}

fn write_clients(w: &mut Writer, c: &ClientsImage) {
    w.i32(c.listener).u64(c.next_id).u64(c.next_request);
    w.count(c.clients.len());
    for cl in &c.clients {
        w.u64(cl.id).i32(cl.fd).bytes(&cl.partial).bool(cl.skipping);
        w.count(cl.pending.len());
        for l in &cl.pending {
            match l {
                LineImage::Line(b) => w.u8(0).bytes(b),
                LineImage::TooLong(limit) => w.u8(1).u64(*limit),
            };
        }
        w.count(cl.outbox.len());
        for piece in &cl.outbox {
            match piece {
                OutboxPiece::Bytes(b) => w.u8(0).bytes(b),
                OutboxPiece::Record { session, seq, skip } => {
                    w.u8(1).str(session).u64(*seq).u64(*skip)
                }
            };
        }
        w.bool(cl.paused).bool(cl.eof).u64(cl.waiting);
        w.count(cl.deferred.len());
        for d in &cl.deferred {
            w.str(&d.session).u64(d.seq).bytes(&d.line);
        }
        w.count(cl.cursors.len());
        for cur in &cl.cursors {
            w.str(&cur.session)
                .u64(cur.seq)
                .u64(cur.pos)
                .bool(cur.behind);
        }
        match &cl.all {
            None => w.u8(0),
            Some(replay) => w.u8(1).str(replay),
        };
    }
    w.count(c.waits.len());
    for wait in &c.waits {
        w.u64(wait.gen).u64(wait.client);
        write_rid(w, &wait.rid);
    }
    w.count(c.replies.len());
    for (request, client, rid) in &c.replies {
        w.u64(*request).u64(*client);
        write_rid(w, rid);
    }
}

fn read_clients(r: &mut Reader<'_>) -> Result<ClientsImage, ImageError> {
    let listener = fd(r)?;
    let next_id = r.u64()?;
    let next_request = r.u64()?;
    let n = r.count(8)?;
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.u64()?;
        let fd = fd(r)?;
        let partial = r.bytes()?.to_vec();
        let skipping = r.bool()?;
        let n = r.count(1)?;
        let mut pending = Vec::with_capacity(n);
        for _ in 0..n {
            pending.push(match r.u8()? {
                0 => LineImage::Line(r.bytes()?.to_vec()),
                1 => LineImage::TooLong(r.u64()?),
                t => return Err(ImageError(format!("{t} is not a line tag"))),
            });
        }
        let n = r.count(9)?;
        let mut outbox = Vec::with_capacity(n);
        for _ in 0..n {
            outbox.push(match r.u8()? {
                0 => OutboxPiece::Bytes(r.bytes()?.to_vec()),
                1 => OutboxPiece::Record {
                    session: r.str()?.to_owned(),
                    seq: r.u64()?,
                    skip: r.u64()?,
                },
                t => return Err(ImageError(format!("{t} is not an outbox tag"))),
            });
        }
        let paused = r.bool()?;
        let eof = r.bool()?;
        let waiting = r.u64()?;
        let n = r.count(8)?;
        let mut deferred = Vec::with_capacity(n);
        for _ in 0..n {
            deferred.push(DeferredImage {
                session: r.str()?.to_owned(),
                seq: r.u64()?,
                line: r.bytes()?.to_vec(),
            });
        }
        let n = r.count(8)?;
        let mut cursors = Vec::with_capacity(n);
        for _ in 0..n {
            cursors.push(CursorImage {
                session: r.str()?.to_owned(),
                seq: r.u64()?,
                pos: r.u64()?,
                behind: r.bool()?,
            });
        }
        let all = match r.u8()? {
            0 => None,
            1 => Some(r.str()?.to_owned()),
            t => return Err(ImageError(format!("{t} is not a subscription tag"))),
        };
        clients.push(ClientImage {
            id,
            fd,
            partial,
            skipping,
            pending,
            outbox,
            paused,
            eof,
            waiting,
            deferred,
            cursors,
            all,
        });
    }
    let n = r.count(9)?;
    let mut waits = Vec::with_capacity(n);
    for _ in 0..n {
        waits.push(WaitImage {
            gen: r.u64()?,
            client: r.u64()?,
            rid: read_rid(r)?,
        });
    }
    let n = r.count(9)?;
    let mut replies = Vec::with_capacity(n);
    for _ in 0..n {
        replies.push((r.u64()?, r.u64()?, read_rid(r)?));
    }
    Ok(ClientsImage {
        listener,
        next_id,
        next_request,
        clients,
        waits,
        replies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DriverImage {
        DriverImage {
            config: ConfigImage {
                state_dir: "/run/x".into(),
                socket: "/run/x/sock".into(),
                allow_uids: vec![1000],
                reaper: 1,
                subreaper: true,
                max_clients: 10,
                outbox_bytes: 4096,
                max_line: 1024,
                containment: 2,
                program: "/usr/bin/genward".into(),
                keeper_hold_ms: Some(600_000),
            },
            clock_start_ns: 5,
            epoch_unix_ms: 6,
            lease: 3,
            cgroup_root: Some("genward-x-1".into()),
            keeper: Some(13),
            children: vec![ChildImage {
                gen: 7,
                pid: 100,
                pidfd: Some(4),
                token: Some("linux1:x".into()),
                is_child: true,
                outputs: [Some(5), None, Some(6)],
                stdin: None,
                hung_up_pty: Some(7),
                input: b"ls\n".to_vec(),
                close_input_when_written: true,
                cgroup: Some(("/sys/fs/cgroup/g".into(), "/g".into())),
                awaits_status: false,
            }],
            clients: ClientsImage {
                listener: 8,
                next_id: 3,
                next_request: 9,
                clients: vec![ClientImage {
                    id: 2,
                    fd: 9,
                    partial: b"{\"op\"".to_vec(),
                    skipping: false,
                    pending: vec![LineImage::Line(b"{}".to_vec()), LineImage::TooLong(10)],
                    outbox: vec![
                        OutboxPiece::Bytes(vec![0, 1, 255]),
                        OutboxPiece::Record {
                            session: "a".into(),
                            seq: 2,
                            skip: 1,
                        },
                    ],
                    paused: true,
                    eof: false,
                    waiting: 1,
                    deferred: vec![DeferredImage {
                        session: "a".into(),
                        seq: 4,
                        line: b"x".to_vec(),
                    }],
                    cursors: vec![CursorImage {
                        session: "a".into(),
                        seq: 3,
                        pos: 10,
                        behind: true,
                    }],
                    all: Some("tail:5".into()),
                }],
                waits: vec![WaitImage {
                    gen: 7,
                    client: 2,
                    rid: RequestId::Str("w".into()),
                }],
                replies: vec![(8, 2, RequestId::U64(1))],
            },
            unverified: vec![KeptImage {
                gen: 1,
                session: "b".into(),
                pid: 5,
                token: String::new(),
            }],
            requester: Some(RequesterImage {
                client: 2,
                rid: RequestId::Null,
                previous_version: "0.1.0".into(),
                paused_at_ns: 11,
            }),
            exec_only: vec![12],
        }
    }

    #[test]
    fn round_trip() {
        let image = sample();
        assert_eq!(DriverImage::decode(&image.encode()).unwrap(), image);
    }

    #[test]
    fn truncations_and_corruptions_are_refused_without_panic() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(DriverImage::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut b = bytes.clone();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng as usize) % b.len();
            b[i] = (rng >> 32) as u8;
            let _ = DriverImage::decode(&b);
        }
    }

    #[test]
    fn duplicate_and_closed_descriptors_are_refused() {
        let mut image = sample();
        image.lease = 9;
        assert!(image.check_descriptors().unwrap_err().0.contains("twice"));
        let mut image = sample();
        for c in &mut image.children {
            c.outputs = [None; 3];
            c.hung_up_pty = None;
            c.pidfd = None;
        }
        image.lease = 1 << 20;
        image.clients.listener = (1 << 20) + 1;
        image.clients.clients[0].fd = (1 << 20) + 2;
        assert!(image
            .check_descriptors()
            .unwrap_err()
            .0
            .contains("not open"));
    }

    #[test]
    fn instants_survive_the_monotonic_round_trip() {
        let at = Instant::now() + Duration::from_millis(1500);
        let back = mono::from_ns(mono::to_ns(at));
        let diff = if back > at { back - at } else { at - back };
        assert!(diff < Duration::from_millis(100), "{diff:?}");
    }
}
