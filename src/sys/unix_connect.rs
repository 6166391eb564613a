//! Connecting to a Unix stream socket within a time limit.
//!
//! A blocking connect(2) to a socket whose listener does not accept (a daemon stopped
//! with SIGSTOP, say) waits for room in the listener's backlog once that is full — for
//! ever. A non-blocking connect does not help there: Linux fails it at once with `EAGAIN`
//! (never `EINPROGRESS`) for a Unix socket whose backlog is full, so there is nothing to
//! poll for but to try again and again. What Linux does offer is the socket's send
//! timeout (`SO_SNDTIMEO`): a blocking connect of a Unix stream socket waits for room at
//! most that long (woken as soon as the listener accepts), then fails with `EAGAIN`. So
//! the limit is set on the socket before connecting, and the stream comes back blocking
//! with its send timeout still set to it.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::net::sockopt::{set_socket_timeout, Timeout};
use rustix::net::{connect, socket_with, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

/// Connects to the Unix stream socket at `path`, waiting for the listener to have room
/// at most `limit` (`None`: without limit). A limit that passes fails with
/// [`io::ErrorKind::TimedOut`]; the stream returned is blocking, its send timeout what
/// was left of `limit`.
pub fn connect_within(path: &Path, limit: Option<Duration>) -> io::Result<UnixStream> {
    let addr = SocketAddrUnix::new(path)?;
    let fd = socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            // A zero timeout is none to the kernel, and less than 1 µs rounds to zero.
            if left < Duration::from_micros(1) {
                return Err(timed_out());
            }
            set_socket_timeout(&fd, Timeout::Send, Some(left))?;
        }
        match connect(&fd, &addr) {
            Ok(()) => return Ok(UnixStream::from(fd)),
            // A signal while waiting: the socket is still unconnected; wait what is left.
            Err(Errno::INTR) => {}
            // The send timeout passed with the backlog still full.
            Err(Errno::AGAIN | Errno::INPROGRESS) if limit.is_some() => return Err(timed_out()),
            Err(e) => return Err(e.into()),
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the listener accepted no connection in time",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::scratch::ScratchDir;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;

    #[test]
    fn connects_and_fails_as_a_plain_connect_does() {
        let dir = ScratchDir::new("unix-connect");
        let path = dir.join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut s = connect_within(&path, Some(Duration::from_secs(5))).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        s.write_all(b"hi").unwrap();
        let mut got = [0; 2];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        assert!(s.write_timeout().unwrap().is_some());
        assert!(!is_nonblocking(&s));
        let absent = connect_within(&dir.join("absent.sock"), None).unwrap_err();
        assert_eq!(absent.kind(), io::ErrorKind::NotFound);
        let long = dir.join("x".repeat(200));
        assert!(connect_within(&long, None).is_err());
    }

    /// A listener that accepts nothing, its backlog full: the connect gives up.
    #[test]
    fn a_full_backlog_times_out() {
        use std::os::fd::AsRawFd;
        let dir = ScratchDir::new("unix-connect-full");
        let path = dir.join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        // SAFETY: listen(2) on the listener's own open socket.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 1) }, 0);
        let mut held = Vec::new();
        let e = loop {
            match connect_within(&path, Some(Duration::from_millis(20))) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 64, "the backlog never filled");
        };
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(!held.is_empty());
    }

    fn is_nonblocking(s: &UnixStream) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl(F_GETFL) on the stream's own open descriptor.
        let flags = unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFL) };
        flags & libc::O_NONBLOCK != 0
    }
}
