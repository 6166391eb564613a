//! A blocking wait for the first of a few descriptors to become ready, with a deadline:
//! what the daemon does once its loop is over (its exit waiting for the log writer), where
//! no event loop is left to wait in.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

/// Waits until one of `fds` is ready for its flags (or has an error or hang-up), or until
/// `deadline`; returns the index of the first ready one, `None` once the deadline passed.
/// `EINTR` is retried with the time left.
///
/// # References
///  - [Linux `poll(2)`](https://man7.org/linux/man-pages/man2/poll.2.html)
pub fn first_ready(
    fds: &[(BorrowedFd<'_>, PollFlags)],
    deadline: Instant,
) -> io::Result<Option<usize>> {
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|(fd, flags)| PollFd::new(fd, *flags))
        .collect();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        match poll(&mut polled, Some(&timeout)) {
            Ok(0) if left.is_zero() => return Ok(None),
            Ok(0) | Err(Errno::INTR) => {}
            Ok(_) => return Ok(polled.iter().position(|p| !p.revents().is_empty())),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn the_ready_one_is_named_and_the_deadline_ends_the_wait() {
        let (r1, _w1) = rustix::pipe::pipe().unwrap();
        let (r2, w2) = rustix::pipe::pipe().unwrap();
        let fds = [(r1.as_fd(), PollFlags::IN), (r2.as_fd(), PollFlags::IN)];
        assert_eq!(first_ready(&fds, Instant::now()).unwrap(), None);
        rustix::io::write(&w2, b"x").unwrap();
        let later = Instant::now() + Duration::from_secs(60);
        assert_eq!(first_ready(&fds, later).unwrap(), Some(1));
    }
}
