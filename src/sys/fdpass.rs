//! Descriptors passed over a Unix socket (`SCM_RIGHTS`), a few per message.
//!
//! Used between the daemon and its keeper over a `SOCK_SEQPACKET` pair: each message is
//! one record whose descriptors travel with it, so no framing is needed and descriptors
//! can never be attributed to the wrong record (on a stream socket the kernel may join
//! the bytes of two sends in one receive).
//!
//! What arrives is close-on-exec from the first instant (`MSG_CMSG_CLOEXEC`): another
//! thread's `exec` could never leak it, and no `fcntl` is needed. A message whose control
//! data was cut (`MSG_CTRUNC`: more descriptors than room, or the receiver at its
//! descriptor limit) or whose bytes were cut (`MSG_TRUNC`) is refused, and the descriptors
//! that did arrive are closed: a partial record is never taken for a whole one.
//!
//! # Portability
//! `MSG_CMSG_CLOEXEC` and `SOCK_SEQPACKET` on `AF_UNIX` are Linux's (and the BSDs'); the
//! keeper is a Linux feature.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    recvmsg, sendmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage,
    RecvFlags, ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags,
    SocketType,
};

/// Most descriptors one message carries: a generation's pidfd, stdin, stdout and stderr
/// (or pidfd and PTY master) fit with room to spare; the receive buffer is sized for this.
pub const MAX_FDS: usize = 8;

/// What one receive brought.
#[derive(Debug)]
pub enum Received {
    /// A whole message of this many bytes, and its descriptors (close-on-exec).
    Message(usize, Vec<OwnedFd>),
    /// The peer closed its end.
    Eof,
    /// Nothing to read now (non-blocking receive).
    WouldBlock,
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`—A connected pair of record
/// sockets, both close-on-exec.
///
/// # References
///  - [Linux `unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// `sendmsg(fd, {bytes, SCM_RIGHTS fds}, MSG_NOSIGNAL | flags)`—Sends one message with
/// up to [`MAX_FDS`] descriptors. The kernel gives the receiver its own duplicates; ours
/// stay open. A dead peer is `EPIPE`, never `SIGPIPE`.
///
/// With `nonblocking`, a full socket answers `ErrorKind::WouldBlock`.
///
/// # References
///  - [Linux `unix(7)`, `sendmsg(2)`](https://man7.org/linux/man-pages/man2/sendmsg.2.html)
pub fn send_with_fds<Fd: AsFd>(
    socket: Fd,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
    nonblocking: bool,
) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} descriptors in one message (most {MAX_FDS})", fds.len()),
        ));
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("control buffer too small"));
    }
    let mut flags = SendFlags::NOSIGNAL;
    if nonblocking {
        flags |= SendFlags::DONTWAIT;
    }
    loop {
        match sendmsg(socket.as_fd(), &[IoSlice::new(bytes)], &mut control, flags) {
            Ok(n) if n == bytes.len() => return Ok(()),
            // A record socket sends all of a message or none of it.
            Ok(n) => {
                return Err(io::Error::other(format!(
                    "sent {n} of {} bytes",
                    bytes.len()
                )))
            }
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `recvmsg(fd, buf, MSG_CMSG_CLOEXEC | flags)`—Receives one message and its
/// descriptors. A message longer than `buf`, or with more descriptors than
/// [`MAX_FDS`] (`MSG_TRUNC`, `MSG_CTRUNC`), is an `InvalidData` error, and whatever
/// descriptors came with it are closed.
///
/// # References
///  - [Linux `unix(7)`, `recvmsg(2)`](https://man7.org/linux/man-pages/man2/recvmsg.2.html)
pub fn recv_with_fds<Fd: AsFd>(
    socket: Fd,
    buf: &mut [u8],
    nonblocking: bool,
) -> io::Result<Received> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut flags = RecvFlags::CMSG_CLOEXEC;
    if nonblocking {
        flags |= RecvFlags::DONTWAIT;
    }
    let msg = loop {
        match recvmsg(
            socket.as_fd(),
            &mut [IoSliceMut::new(buf)],
            &mut control,
            flags,
        ) {
            Ok(m) => break m,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(Received::WouldBlock),
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    if msg
        .flags
        .intersects(ReturnFlags::CTRUNC | ReturnFlags::TRUNC)
    {
        let arrived = fds.len();
        drop(fds);
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "message cut short ({:?}); {arrived} descriptor(s) that arrived closed",
                msg.flags
            ),
        ));
    }
    if msg.bytes == 0 && fds.is_empty() {
        return Ok(Received::Eof);
    }
    Ok(Received::Message(msg.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn pipe() -> (std::fs::File, std::fs::File) {
        let (r, w) = rustix::pipe::pipe().unwrap();
        (r.into(), w.into())
    }

    #[test]
    fn descriptors_travel_with_their_message_and_arrive_close_on_exec() {
        let (a, b) = seqpacket_pair().unwrap();
        let (r, mut w) = pipe();
        send_with_fds(&a, b"one", &[r.as_fd()], false).unwrap();
        send_with_fds(&a, b"two", &[], false).unwrap();
        let mut buf = [0u8; 16];
        let Received::Message(n, mut fds) = recv_with_fds(&b, &mut buf, false).unwrap() else {
            panic!("no message")
        };
        assert_eq!((&buf[..n], fds.len()), (&b"one"[..], 1));
        let fd = fds.pop().unwrap();
        let fl = rustix::io::fcntl_getfd(&fd).unwrap();
        assert!(fl.contains(rustix::io::FdFlags::CLOEXEC));
        w.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        std::fs::File::from(fd).read_exact(&mut got).unwrap();
        assert_eq!(&got, b"x");
        let Received::Message(n, fds) = recv_with_fds(&b, &mut buf, false).unwrap() else {
            panic!("no second message")
        };
        assert_eq!((&buf[..n], fds.len()), (&b"two"[..], 0));
        assert!(matches!(
            recv_with_fds(&b, &mut buf, true).unwrap(),
            Received::WouldBlock
        ));
        drop(a);
        assert!(matches!(
            recv_with_fds(&b, &mut buf, false).unwrap(),
            Received::Eof
        ));
    }

    #[test]
    fn an_oversized_message_is_refused_and_its_descriptors_closed() {
        let (a, b) = seqpacket_pair().unwrap();
        let (r, _w) = pipe();
        send_with_fds(&a, &[7u8; 64], &[r.as_fd()], false).unwrap();
        let mut small = [0u8; 8];
        let e = recv_with_fds(&b, &mut small, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // The next message is unaffected.
        send_with_fds(&a, b"ok", &[], false).unwrap();
        assert!(matches!(
            recv_with_fds(&b, &mut small, false).unwrap(),
            Received::Message(2, _)
        ));
    }

    #[test]
    fn too_many_descriptors_are_refused_before_sending() {
        let (a, _b) = seqpacket_pair().unwrap();
        let (r, _w) = pipe();
        let many = vec![r.as_fd(); MAX_FDS + 1];
        assert!(send_with_fds(&a, b"x", &many, false).is_err());
    }
}
