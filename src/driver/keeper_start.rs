//! Finding the state directory's keeper at start-up (and taking back what it holds), or
//! starting a fresh one.
//!
//! A keeper is trusted only when all of these hold: its record in the state directory is
//! well-formed; the process on the other end of its socket is of our uid and has the
//! record's pid (`SO_PEERCRED`); that pid's identity token matches the record's. Anything
//! less and the record and socket are removed (the daemon holds the directory's lease, so
//! they are its to remove) and a fresh keeper is started.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use rustix::net::{
    connect, socket_with, sockopt, AddressFamily, SocketAddrUnix, SocketFlags, SocketType,
};

use super::keeper_launch::launch;
use super::keeper_link::KeeperLink;
use crate::keeper::wire::{slots, Kind, Message, Role, Slots, MESSAGE_BYTES};
use crate::store::dir::Dir;
use crate::store::keeper_file::{read_keeper, KeeperFileError, KEEPER_FILE, KEEPER_SOCKET};
use crate::sys::fdpass::{recv_with_fds, send_with_fds, Received};
use crate::sys::identity::{compare, observe, Verdict};
use crate::sys::peer::peer_cred;

/// How long a keeper may take to hand everything over before the daemon carries on
/// without it.
const PATIENCE: Duration = Duration::from_secs(10);

/// Most generations taken back from a keeper (its own table's bound).
const MAX_TAKEN: u64 = crate::keeper::MAX_HELD as u64;

/// One generation's descriptors as a keeper handed them over.
#[derive(Debug, Default)]
pub struct KeptIo {
    slots: Slots,
}

impl KeptIo {
    /// Takes the descriptor of `role`, if it came.
    pub fn take(&mut self, role: Role) -> Option<OwnedFd> {
        self.slots[role.index()].take()
    }

    /// Whether the descriptor of `role` came (and was not taken yet).
    pub fn has(&self, role: Role) -> bool {
        self.slots[role.index()].is_some()
    }
}

/// What a keeper handed over, by generation.
pub type Kept = HashMap<u64, KeptIo>;

/// The state directory's keeper — found, verified and emptied of what it holds, or
/// started fresh — or `None` (logged) when neither works.
pub fn find_or_start(state_dir: &Path, hold: Duration) -> (Option<KeeperLink>, Kept) {
    let dir = match Dir::open(state_dir) {
        Ok(d) => d,
        Err(e) => {
            log::warn!("keeper: {e}; running without one");
            return (None, Kept::new());
        }
    };
    match find(&dir, state_dir) {
        Ok(Some((link, kept))) => return (Some(link), kept),
        Ok(None) => {}
        Err(e) => {
            log::warn!("keeper: {e}; starting a fresh one");
            remove_keeper_files(state_dir);
        }
    }
    match start(state_dir, hold) {
        Ok((link, pid)) => {
            log::info!(
                "keeper started, pid {pid}, holding for {}s without a daemon",
                hold.as_secs()
            );
            (Some(link), Kept::new())
        }
        Err(e) => {
            log::warn!("keeper could not be started ({e}); until one is, a crash of this daemon loses the sessions' I/O");
            (None, Kept::new())
        }
    }
}

/// The keeper recorded in `dir`, verified, and what it held; `None` if there is no record.
fn find(dir: &Dir, state_dir: &Path) -> io::Result<Option<(KeeperLink, Kept)>> {
    let record = match read_keeper(dir) {
        Ok(r) => r,
        Err(KeeperFileError::Missing) => return Ok(None),
        Err(KeeperFileError::Bad(why)) => {
            return Err(io::Error::other(format!("its record: {why}")))
        }
    };
    let fd = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let addr = SocketAddrUnix::new(state_dir.join(KEEPER_SOCKET))?;
    connect(&fd, &addr)
        .map_err(|e| io::Error::other(format!("pid {}: its socket: {e}", record.pid)))?;
    let cred = peer_cred(&fd)?;
    let uid = rustix::process::geteuid().as_raw();
    if cred.uid != uid || cred.pid <= 0 || cred.pid as u32 != record.pid {
        return Err(io::Error::other(format!(
            "its socket is served by pid {} uid {}, not the recorded pid {} of uid {uid}: not trusted",
            cred.pid, cred.uid, record.pid
        )));
    }
    let observed = observe(record.pid as i32, None);
    if compare(Some(&record.identity), &observed) != Verdict::Match {
        return Err(io::Error::other(format!(
            "pid {} is not the recorded keeper: not trusted",
            record.pid
        )));
    }
    let kept = take_everything(&fd)?;
    log::info!(
        "keeper pid {} found: it held the descriptors of {} generation(s)",
        record.pid,
        kept.len()
    );
    Ok(Some((KeeperLink::from_fd(fd)?, kept)))
}

/// Asks a keeper for everything it holds and receives it, `End` last.
fn take_everything(fd: &OwnedFd) -> io::Result<Kept> {
    sockopt::set_socket_timeout(fd, sockopt::Timeout::Recv, Some(PATIENCE))?;
    sockopt::set_socket_timeout(fd, sockopt::Timeout::Send, Some(PATIENCE))?;
    send_with_fds(fd, &Message::plain(Kind::Take, 0).encode(), &[], false)?;
    let mut kept = Kept::new();
    let mut buf = [0u8; MESSAGE_BYTES + 1];
    loop {
        let (n, fds) = match recv_with_fds(fd, &mut buf, false)? {
            Received::Message(n, fds) => (n, fds),
            Received::Eof => return Err(io::Error::other("it closed the link while handing over")),
            Received::WouldBlock => return Err(io::Error::other("it did not hand over in time")),
        };
        let m = Message::decode(&buf[..n], fds.len())
            .map_err(|why| io::Error::other(format!("it sent a bad message: {why}")))?;
        match m.kind {
            Kind::Hold if (kept.len() as u64) < MAX_TAKEN => {
                let io = kept.entry(m.gen).or_default();
                for (i, fd) in slots(m.roles, fds).into_iter().enumerate() {
                    if fd.is_some() {
                        io.slots[i] = fd;
                    }
                }
            }
            Kind::End if m.gen == kept.len() as u64 => return Ok(kept),
            _ => return Err(io::Error::other("it sent something out of turn")),
        }
    }
}

/// Starts a keeper for `state_dir` and waits until it is listening and recorded (see
/// [`launch`]).
fn start(state_dir: &Path, hold: Duration) -> io::Result<(KeeperLink, u64)> {
    launch(state_dir, hold)?.wait_ready()
}

/// Removes the state directory's keeper record, then its socket: those of a keeper whose
/// link was lost, or that could not be trusted. The daemon holds the directory's lease,
/// so they are its to remove. The record goes first: a keeper that is still alive removes
/// the files on its way out only while the record names it, so it never takes a
/// successor's socket with it. A keeper still alive sees its socket go (its watch of the
/// directory) and exits at once, closing its copies; and no next daemon takes for the
/// keeper one that missed what was sent to it.
pub fn remove_keeper_files(state_dir: &Path) {
    if let Ok(dir) = Dir::open(state_dir) {
        let _ = dir.unlink(KEEPER_FILE);
        let _ = dir.unlink(KEEPER_SOCKET);
    }
}
