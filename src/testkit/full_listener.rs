//! A Unix listener that accepts nothing and whose queue of connections is full, as a
//! daemon stopped with SIGSTOP leaves its socket: a blocking connect(2) to it waits.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// The listener bound at `path` and the connections that fill its queue (kept open; the
/// queue stays full while they live).
#[derive(Debug)]
pub struct FullListener {
    pub listener: UnixListener,
    pub held: Vec<std::os::unix::net::UnixStream>,
}

/// Binds `path`, shrinks the queue, and connects (without blocking) until one more
/// connection would wait.
pub fn full_listener(path: &Path) -> FullListener {
    let listener = UnixListener::bind(path).expect("bind the listener");
    // SAFETY: listen(2) again on the listener's own open socket, only to shrink its queue.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let addr = rustix::net::SocketAddrUnix::new(path).expect("a socket address");
    let mut held = Vec::new();
    loop {
        let s = rustix::net::socket_with(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::STREAM,
            rustix::net::SocketFlags::NONBLOCK | rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .expect("a socket");
        match rustix::net::connect(&s, &addr) {
            Ok(()) => held.push(s.into()),
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => panic!("connecting to fill the queue: {e}"),
        }
        assert!(held.len() < 64, "the queue never filled");
    }
    FullListener { listener, held }
}
