//! Starting a keeper process: the one way a daemon makes one, whether it waits for it
//! (its own start, [`Launch::wait_ready`]) or not (a replacement for a keeper lost while
//! the loop runs, [`Launch::try_ready`] when the link is readable).
//!
//! The keeper detaches at once: the process started here forks, its first process exits
//! and must be reaped by us ([`Launch::reap_first`], never waiting), while the second
//! listens on its socket, records itself, and says `Ready` on the link.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::net::sockopt;

use super::keeper_link::KeeperLink;
use crate::keeper::wire::{Kind, Message, MESSAGE_BYTES};
use crate::keeper::{KeeperArgs, LINK_FD};
use crate::sys::fdpass::{recv_with_fds, send_with_fds, seqpacket_pair, Received};

/// How long a keeper may take to say it is ready before it is given up.
pub const READY_PATIENCE: Duration = Duration::from_secs(10);

/// A keeper started and not ready yet: our end of its link, and its first (detaching)
/// process until that is reaped.
#[derive(Debug)]
pub struct Launch {
    link: OwnedFd,
    first: Option<Child>,
}

/// Starts `genward __keeper` for `state_dir` with the other end of a fresh link as its
/// fd [`LINK_FD`]. Returns once it is executed (`fork` and `exec` only; nothing here
/// waits for it to be ready).
pub fn launch(state_dir: &Path, hold: Duration) -> io::Result<Launch> {
    let (ours, theirs) = seqpacket_pair()?;
    let args = KeeperArgs {
        hold,
        state_dir: state_dir.to_owned(),
    };
    let theirs_raw = theirs.as_raw_fd();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove(crate::sys::tree::GEN_MARKER)
        .current_dir("/");
    for var in crate::driver::children::starts::DAEMON_ONLY_VARS {
        cmd.env_remove(var);
    }
    // SAFETY: between fork and exec the closure calls only `dup2`, `fcntl` and
    // `close_range`, all async-signal-safe, on descriptors that are open in the child.
    unsafe {
        cmd.pre_exec(move || {
            // Nothing else the daemon inherited (a readiness pipe, a service manager's
            // sockets) may be held open by the keeper: all of it is closed at the exec.
            // Best effort: before Linux 5.11 `CLOSE_RANGE_CLOEXEC` does not exist.
            libc::syscall(
                libc::SYS_close_range,
                LINK_FD as libc::c_uint + 1,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            );
            if theirs_raw == LINK_FD {
                let flags = libc::fcntl(LINK_FD, libc::F_GETFD);
                if flags < 0 || libc::fcntl(LINK_FD, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(theirs_raw, LINK_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let first = cmd.spawn()?;
    // Ours to reap, not the orphan sweep's: its status tells whether it detached.
    crate::sys::started::started(first.id() as i32);
    drop(theirs);
    Ok(Launch {
        link: ours,
        first: Some(first),
    })
}

impl Launch {
    /// The daemon's start: waits for the first process, then (at most
    /// [`READY_PATIENCE`]) for `Ready`. Returns the link and the keeper's pid.
    pub fn wait_ready(mut self) -> io::Result<(KeeperLink, u64)> {
        if let Some(mut first) = self.first.take() {
            let status = first.wait()?;
            crate::sys::reaped::note(first.id() as i32);
            if !status.success() {
                return Err(io::Error::other(format!("it exited at once ({status})")));
            }
        }
        sockopt::set_socket_timeout(&self.link, sockopt::Timeout::Recv, Some(READY_PATIENCE))?;
        let pid = match self.read_ready(false)? {
            Some(pid) => pid,
            None => return Err(io::Error::other("it was not ready in time")),
        };
        sockopt::set_socket_timeout(&self.link, sockopt::Timeout::Recv, None)?;
        Ok((KeeperLink::from_fd(self.link)?, pid))
    }

    /// Our end of the link, for a loop to be told when `Ready` (or its end) arrived.
    pub fn link_fd(&self) -> BorrowedFd<'_> {
        self.link.as_fd()
    }

    /// Reaps the first process if it has exited (never waits): `Err` if it failed, which
    /// means no keeper detached.
    pub fn reap_first(&mut self) -> io::Result<()> {
        let Some(first) = &mut self.first else {
            return Ok(());
        };
        let status = match first.try_wait() {
            Ok(None) => return Ok(()),
            Ok(Some(status)) => status,
            // Not ours to wait for any more: nothing to tell from it.
            Err(_) => {
                crate::sys::reaped::note(first.id() as i32);
                self.first = None;
                return Ok(());
            }
        };
        crate::sys::reaped::note(first.id() as i32);
        self.first = None;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("it exited at once ({status})")))
        }
    }

    /// `Ready` without waiting: the keeper's pid once it came, `None` while it has not.
    pub fn try_ready(&mut self) -> io::Result<Option<u64>> {
        self.read_ready(true)
    }

    fn read_ready(&self, nonblocking: bool) -> io::Result<Option<u64>> {
        let mut buf = [0u8; MESSAGE_BYTES + 1];
        match recv_with_fds(&self.link, &mut buf, nonblocking)? {
            Received::Message(n, fds) => match Message::decode(&buf[..n], fds.len()) {
                Ok(Message {
                    kind: Kind::Ready,
                    gen,
                    ..
                }) => Ok(Some(gen)),
                _ => Err(io::Error::other("it did not say it was ready")),
            },
            Received::Eof => Err(io::Error::other("it exited before it was ready")),
            Received::WouldBlock => Ok(None),
        }
    }

    /// The link of a keeper that said `Ready`, and its first process if that is still
    /// to be reaped (it exits at once; the caller reaps it later, without waiting).
    pub fn into_link(self) -> io::Result<(KeeperLink, Option<Child>)> {
        Ok((KeeperLink::from_fd(self.link)?, self.first))
    }

    /// Lets go of a keeper not wanted any more (not ready in time, or the daemon shutting
    /// down or upgrading): it is told `Bye` — taken once it reads its link, as any keeper
    /// takes it: it closes everything, removes its files and exits — and the link closes.
    /// Never waits; returns the first process if it is still to be reaped.
    pub fn abandon(self) -> Option<Child> {
        let bye = Message::plain(Kind::Bye, 0).encode();
        // An empty link has room for one record; a keeper already gone needs no `Bye`.
        let _ = send_with_fds(&self.link, &bye, &[], true);
        self.first
    }
}

/// Reaps `first` (a keeper's first process) if it has exited; whether it is done with
/// (reaped, or not ours to wait for). Never waits.
pub fn reap_detached(first: &mut Child) -> bool {
    match first.try_wait() {
        Ok(None) => false,
        // Reaped now, or not ours to wait for any more: it left our children either way.
        Ok(Some(_)) | Err(_) => {
            crate::sys::reaped::note(first.id() as i32);
            true
        }
    }
}
