//! Who is on the other end of a Unix socket.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// The peer's credentials as the kernel recorded them at `connect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Effective uid.
    pub uid: u32,
    /// Pid as seen from our PID namespace; 0 when the peer lives outside it (a daemon that
    /// is PID 1 of a container, reached from the host).
    pub pid: i32,
}

/// `getsockopt(fd, SOL_SOCKET, SO_PEERCRED)`—The connected peer's uid and pid.
///
/// Called through libc rather than rustix because rustix refuses the pid 0 the kernel
/// reports for a peer outside our PID namespace, and such a peer's uid is still valid.
///
/// # References
///  - [Linux `unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)
pub fn peer_cred<Fd: AsFd>(fd: Fd) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed, and the fd is
    // borrowed for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCred {
        uid: cred.uid,
        pid: cred.pid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socketpair_peer_is_ourselves() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let cred = peer_cred(&a).unwrap();
        assert_eq!(cred.uid, rustix::process::geteuid().as_raw());
        assert_eq!(cred.pid, std::process::id() as i32);
    }
}
