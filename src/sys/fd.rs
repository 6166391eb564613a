//! Non-blocking reads and writes on pipes and PTY masters, with the outcomes the event loop
//! needs spelled out instead of hidden in error kinds.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
use rustix::io::Errno;

/// What a non-blocking read produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// `n > 0` bytes were read into the front of the buffer.
    Data(usize),
    /// Nothing to read now; wait for readiness.
    WouldBlock,
    /// The other side is gone: end of file on a pipe, or `EIO` on a PTY master (Linux
    /// reports a closed peer that way).
    Eof,
}

/// What a non-blocking write produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// `n` bytes (possibly fewer than offered) were written.
    Written(usize),
    /// The buffer is full; wait for writability.
    WouldBlock,
    /// Nobody reads any more (`EPIPE`, or `EIO` on a PTY master whose peer is closed).
    Closed,
}

/// `read(fd, buf)` on a non-blocking fd, retrying `EINTR`.
///
/// A return of 0 and `EIO` both become [`ReadOutcome::Eof`]: `EIO` is how a PTY master
/// reports that every peer descriptor is closed, and a pipe never returns it. An empty
/// `buf` yields `Data(0)` without touching the fd's state.
///
/// # References
///  - [Linux `read(2)`](https://man7.org/linux/man-pages/man2/read.2.html)
pub fn read_nonblocking(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<ReadOutcome> {
    if buf.is_empty() {
        return Ok(ReadOutcome::Data(0));
    }
    loop {
        return match rustix::io::read(fd, &mut *buf) {
            Ok(0) => Ok(ReadOutcome::Eof),
            Ok(n) => Ok(ReadOutcome::Data(n)),
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => Ok(ReadOutcome::WouldBlock),
            Err(Errno::IO) => Ok(ReadOutcome::Eof),
            Err(e) => Err(e.into()),
        };
    }
}

/// `ioctl(fd, FIONREAD)`: bytes that a read of `fd` would return at once.
///
/// For a terminal (a PTY master) this is what its line discipline holds, and asking never
/// waits — unlike a read or a poll that finds the line discipline empty, which first waits
/// for the kernel worker that moves the terminal's pending bytes into it (`flush_work`),
/// however busy the system's workers are with other terminals.
///
/// # References
///  - [Linux `ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/ioctl_tty.2.html)
pub fn queued_bytes(fd: BorrowedFd<'_>) -> io::Result<usize> {
    Ok(rustix::io::ioctl_fionread(fd)? as usize)
}

/// `write(fd, buf)` on a non-blocking fd, retrying `EINTR`.
///
/// `EPIPE` (the process ignores `SIGPIPE`, as Rust programs do) and `EIO` (a PTY master
/// with no peer) become [`WriteOutcome::Closed`].
///
/// # References
///  - [Linux `write(2)`](https://man7.org/linux/man-pages/man2/write.2.html)
pub fn write_nonblocking(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<WriteOutcome> {
    loop {
        return match rustix::io::write(fd, buf) {
            Ok(n) => Ok(WriteOutcome::Written(n)),
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => Ok(WriteOutcome::WouldBlock),
            Err(Errno::PIPE) | Err(Errno::IO) => Ok(WriteOutcome::Closed),
            Err(e) => Err(e.into()),
        };
    }
}

/// `fcntl(fd, F_SETFL, flags | O_NONBLOCK)`—Makes the open file description non-blocking.
///
/// # References
///  - [Linux `fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn set_nonblocking<Fd: AsFd>(fd: Fd) -> io::Result<()> {
    let fd = fd.as_fd();
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

/// `fcntl(fd, F_SETFL, flags & !O_NONBLOCK)`—Makes the open file description blocking
/// again (for a last exchange bounded by a socket timeout).
///
/// # References
///  - [Linux `fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn set_blocking<Fd: AsFd>(fd: Fd) -> io::Result<()> {
    let fd = fd.as_fd();
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags & !OFlags::NONBLOCK)?;
    Ok(())
}

/// `fcntl(fd, F_SETPIPE_SZ, bytes)`—Grows a pipe's kernel buffer (best effort).
///
/// A child writing flat out fills the default 64 KiB in a moment; a larger buffer lets
/// each wake-up move more bytes per system call, and absorbs bursts while the loop serves
/// others. Unprivileged processes may go up to `/proc/sys/fs/pipe-max-size` (1 MiB by
/// default); a refusal leaves the pipe as it was.
///
/// # References
///  - [Linux `pipe(7)`](https://man7.org/linux/man-pages/man7/pipe.7.html)
pub fn grow_pipe<Fd: AsFd>(fd: Fd, bytes: usize) -> Option<usize> {
    rustix::pipe::fcntl_setpipe_size(fd, bytes).ok()
}

/// `ioctl(fd, FIONREAD)`—Bytes waiting to be read on a pipe or PTY right now.
///
/// Used to count output that is discarded unread when a drain deadline closes a stream.
///
/// # References
///  - [Linux `ioctl_tty(2)`, `pipe(7)`](https://man7.org/linux/man-pages/man7/pipe.7.html)
pub fn bytes_readable<Fd: AsFd>(fd: Fd) -> io::Result<u64> {
    Ok(rustix::io::ioctl_fionread(fd)?)
}

/// Takes ownership of descriptor `raw`, inherited from whoever started the daemon for it
/// to write to once (a readiness notification), after checking that it really is open
/// and writable, and marks it close-on-exec so that no child inherits it.
///
/// The check comes before the daemon opens anything: if the number was passed but never
/// opened (a `dup2` onto itself leaves close-on-exec set, and `exec` closes it), the
/// daemon's first descriptor would take that number, and writing the notification to it,
/// then closing it, would break whatever had it. Standard input, output and error are
/// refused: the daemon keeps them, and closing one would let the next descriptor opened
/// take its number.
///
/// # References
///  - [Linux `fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn adopt_inherited_writer(raw: RawFd) -> io::Result<OwnedFd> {
    if (0..=2).contains(&raw) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "standard input, output and error stay the daemon's own; pass a descriptor above 2",
        ));
    }
    // SAFETY: F_GETFL only reads the flags of whatever `raw` names (EBADF if nothing);
    // no memory is involved and no descriptor is created or closed.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EBADF) => io::Error::new(
                io::ErrorKind::NotFound,
                "not an open descriptor (was it left close-on-exec?)",
            ),
            _ => e,
        });
    }
    if flags & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "open only for reading",
        ));
    }
    super::reexec::adopt_inherited(raw)
}
