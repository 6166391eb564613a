//! Our own pseudo-terminals: a master we keep and a peer the child gets as its terminal.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{open, Mode, OFlags};
use rustix::io::Errno;
use rustix::pty::{grantpt, ioctl_tiocgptpeer, openpt, ptsname, unlockpt, OpenptFlags};
use rustix::termios::{tcsetwinsize, Winsize};

/// A freshly opened PTY: both ends close-on-exec, the master still blocking.
#[derive(Debug)]
pub struct PtyPair {
    /// The side we read the child's output from and write its input to.
    pub master: OwnedFd,
    /// The side that becomes the child's controlling terminal and stdio.
    pub peer: OwnedFd,
}

/// `posix_openpt`, `grantpt`, `unlockpt`, then the peer through `TIOCGPTPEER` (falling back
/// to `ptsname` + `open`), with the window size set before anyone reads it.
///
/// `TIOCGPTPEER` opens the peer relative to the master, so it cannot be raced by a path
/// lookup in a different devpts mount; kernels before 4.13 lack it.
///
/// # References
///  - [Linux `posix_openpt(3)`](https://man7.org/linux/man-pages/man3/posix_openpt.3.html)
///  - [Linux `ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/ioctl_tty.2.html)
pub fn open_pty(rows: u16, cols: u16) -> io::Result<PtyPair> {
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = openpt(flags)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    resize(rustix::fd::AsFd::as_fd(&master), rows, cols)?;
    let peer = match ioctl_tiocgptpeer(&master, flags) {
        Ok(peer) => peer,
        Err(Errno::NOTTY) | Err(Errno::INVAL) | Err(Errno::NOSYS) => peer_by_name(&master)?,
        Err(e) => return Err(e.into()),
    };
    Ok(PtyPair { master, peer })
}

/// The pre-4.13 way to the peer: `ptsname` + `open`.
fn peer_by_name(master: &OwnedFd) -> io::Result<OwnedFd> {
    let name = ptsname(master, Vec::new())?;
    Ok(open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// `ioctl(master, TIOCSWINSZ, {rows, cols})`—Sets the window size; the kernel sends
/// `SIGWINCH` to the terminal's foreground process group when it changes.
///
/// # References
///  - [Linux `ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/ioctl_tty.2.html)
pub fn resize(master: BorrowedFd<'_>, rows: u16, cols: u16) -> io::Result<()> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    tcsetwinsize(master, size)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;
    use rustix::termios::tcgetwinsize;

    fn round_trip(master: &OwnedFd, peer: &OwnedFd) {
        rustix::io::write(peer, b"x\n").unwrap();
        let mut buf = [0u8; 8];
        let n = rustix::io::read(master, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"x\r\n");
    }

    #[test]
    fn both_ways_to_the_peer_reach_the_same_terminal() {
        let pair = open_pty(12, 34).unwrap();
        let size = tcgetwinsize(pair.peer.as_fd()).unwrap();
        assert_eq!((size.ws_row, size.ws_col), (12, 34));
        round_trip(&pair.master, &pair.peer);
        let by_name = peer_by_name(&pair.master).unwrap();
        round_trip(&pair.master, &by_name);
        resize(pair.master.as_fd(), 50, 60).unwrap();
        let size = tcgetwinsize(by_name.as_fd()).unwrap();
        assert_eq!((size.ws_row, size.ws_col), (50, 60));
    }
}
