//! The daemon's end of its keeper's link: one socket, and the messages that could not be
//! sent yet.
//!
//! Sends never block the loop: a message the socket cannot take now is queued (with its
//! own duplicates of the descriptors, so a generation released meanwhile changes nothing)
//! and sent when the socket is writable. Any failure is the caller's to log, after which
//! it carries on without a keeper; nothing here retries.
//!
//! The link can be given up as a raw descriptor and taken back ([`into_fd`],
//! [`from_fd`]), so that a daemon re-executing itself keeps its keeper.
//!
//! [`into_fd`]: KeeperLink::into_fd
//! [`from_fd`]: KeeperLink::from_fd

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::token::Source;
use crate::keeper::wire::{Kind, Message, Roles, MESSAGE_BYTES};
use crate::sys::fdpass::{recv_with_fds, send_with_fds, Received};

/// Most messages waiting for the socket: a keeper that reads nothing for this long is
/// given up rather than queued for without bound.
const MAX_QUEUED: usize = 16_384;

/// How long a clean shutdown waits for the keeper to close everything and exit.
const BYE_PATIENCE: Duration = Duration::from_secs(5);

/// A message waiting for room on the socket.
#[derive(Debug)]
struct Queued {
    bytes: [u8; MESSAGE_BYTES],
    fds: Vec<OwnedFd>,
}

/// The link to the keeper.
#[derive(Debug)]
pub struct KeeperLink {
    fd: OwnedFd,
    queue: VecDeque<Queued>,
    registered: bool,
    /// The latest `Drop` not yet sent: the next drop for the same generation joins it
    /// (a generation's streams end and it is forgotten in a row: one message instead of
    /// three); any other message, and the end of the loop's turn, sends it first.
    pending_drop: Option<(u64, Roles)>,
}

impl KeeperLink {
    /// A link over `fd` (a connected `SOCK_SEQPACKET` socket), made non-blocking.
    pub fn from_fd(fd: OwnedFd) -> io::Result<KeeperLink> {
        crate::sys::fd::set_nonblocking(&fd)?;
        Ok(KeeperLink {
            fd,
            queue: VecDeque::new(),
            registered: false,
            pending_drop: None,
        })
    }

    /// Gives up the link's descriptor (deregistered first), after sending what is queued
    /// (blocking, at most `patience` per message): for a daemon about to re-execute itself.
    pub fn into_fd(mut self, registry: &Registry) -> io::Result<OwnedFd> {
        self.flush()?;
        self.deregister(registry);
        let _ = rustix::net::sockopt::set_socket_timeout(
            &self.fd,
            rustix::net::sockopt::Timeout::Send,
            Some(BYE_PATIENCE),
        );
        while let Some(q) = self.queue.pop_front() {
            let fds: Vec<BorrowedFd<'_>> = q.fds.iter().map(AsFd::as_fd).collect();
            send_with_fds(&self.fd, &q.bytes, &fds, false)?;
        }
        Ok(self.fd)
    }

    /// Watches the link: writable (room for what is queued), or closed (the keeper died).
    pub fn register(&mut self, registry: &Registry) -> io::Result<()> {
        let Some(token) = Source::Keeper.token() else {
            return Ok(());
        };
        let raw = self.fd.as_raw_fd();
        registry.register(
            &mut SourceFd(&raw),
            token,
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.registered = true;
        Ok(())
    }

    /// Stops watching the link.
    pub fn deregister(&mut self, registry: &Registry) {
        if std::mem::take(&mut self.registered) {
            let _ = registry.deregister(&mut SourceFd(&self.fd.as_raw_fd()));
        }
    }

    /// Asks the keeper to hold `fds`, in `roles`' order, for `gen`.
    pub fn hold(&mut self, gen: u64, roles: Roles, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.flush()?;
        let m = Message {
            kind: Kind::Hold,
            roles,
            gen,
        };
        self.send(m.encode(), fds)
    }

    /// Asks the keeper to close its copies of `gen`'s descriptors in `roles`: sent with
    /// the next other message or at the end of the turn ([`KeeperLink::flush`]), joined
    /// with the drops for `gen` asked meanwhile. Until then the keeper holds copies of
    /// descriptors already closed here, as it does while any message is on its way: the
    /// next daemon would find those streams at their end.
    pub fn drop_roles(&mut self, gen: u64, roles: Roles) -> io::Result<()> {
        if roles.is_empty() {
            return Ok(());
        }
        match &mut self.pending_drop {
            Some((g, pending)) if *g == gen => {
                // Both are sets of roles, and so is their union.
                *pending = Roles::from_bits(pending.bits() | roles.bits()).unwrap_or(Roles::ALL);
                Ok(())
            }
            _ => {
                self.flush()?;
                self.pending_drop = Some((gen, roles));
                Ok(())
            }
        }
    }

    /// Sends the drop held back, if any: at the end of every turn of the loop.
    pub fn flush(&mut self) -> io::Result<()> {
        let Some((gen, roles)) = self.pending_drop.take() else {
            return Ok(());
        };
        let m = Message {
            kind: Kind::Drop,
            roles,
            gen,
        };
        self.send(m.encode(), &[])
    }

    /// Asks the keeper to forget `gen`.
    pub fn forget(&mut self, gen: u64) -> io::Result<()> {
        self.drop_roles(gen, Roles::ALL)
    }

    fn send(&mut self, bytes: [u8; MESSAGE_BYTES], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        if self.queue.is_empty() {
            match send_with_fds(&self.fd, &bytes, fds, true) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if self.queue.len() >= MAX_QUEUED {
            return Err(io::Error::other("the keeper has not read for too long"));
        }
        let fds = fds
            .iter()
            .map(|fd| fd.try_clone_to_owned())
            .collect::<io::Result<Vec<_>>>()?;
        self.queue.push_back(Queued { bytes, fds });
        Ok(())
    }

    /// The link is ready: sends what is queued as far as the socket takes, and tells
    /// whether the keeper is still there (`Err` once it closed its end).
    pub fn ready(&mut self) -> io::Result<()> {
        let mut buf = [0u8; MESSAGE_BYTES];
        match recv_with_fds(&self.fd, &mut buf, true) {
            Ok(Received::Eof) => return Err(io::Error::other("the keeper closed the link")),
            // The keeper says nothing unasked: anything read is dropped (its descriptors
            // closed).
            Ok(Received::Message(..) | Received::WouldBlock) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {}
            Err(e) => return Err(e),
        }
        while let Some(q) = self.queue.front() {
            let fds: Vec<BorrowedFd<'_>> = q.fds.iter().map(AsFd::as_fd).collect();
            match send_with_fds(&self.fd, &q.bytes, &fds, true) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
            self.queue.pop_front();
        }
        if self.queue.is_empty() && self.queue.capacity() > 64 {
            self.queue.shrink_to_fit();
        }
        Ok(())
    }

    /// A clean shutdown: tells the keeper to close everything and exit, and waits (a
    /// little) until it did, so that it is gone when the daemon is.
    pub fn bye(mut self, registry: &Registry) {
        self.deregister(registry);
        // What is queued no longer matters: everything is closed.
        self.queue.clear();
        let bye = Message::plain(Kind::Bye, 0).encode();
        let _ = crate::sys::fd::set_blocking(&self.fd);
        let _ = rustix::net::sockopt::set_socket_timeout(
            &self.fd,
            rustix::net::sockopt::Timeout::Recv,
            Some(BYE_PATIENCE),
        );
        let _ = rustix::net::sockopt::set_socket_timeout(
            &self.fd,
            rustix::net::sockopt::Timeout::Send,
            Some(BYE_PATIENCE),
        );
        if send_with_fds(&self.fd, &bye, &[], false).is_err() {
            return;
        }
        let mut buf = [0u8; MESSAGE_BYTES];
        // The keeper answers by closing its end once its files are gone.
        while let Ok(Received::Message(..)) = recv_with_fds(&self.fd, &mut buf, false) {}
    }
}
