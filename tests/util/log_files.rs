//! Waiting for what the daemon's log writer puts in files. It writes in a process of its
//! own, with nothing on the daemon's socket to await, so the file's directory is watched
//! with inotify and the file read again at each change, until it says what is expected
//! (bounded by [`PATIENCE`]).

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Instant;

use genward::testkit::wait;
use rustix::fs::inotify;

use super::daemon::PATIENCE;

/// Reads `path` until `done` accepts its bytes, after each change in its directory;
/// fails with what it last held.
pub fn await_file(path: &Path, mut done: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let deadline = Instant::now() + PATIENCE;
    let watch = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .expect("inotify_init1");
    let changes = inotify::WatchFlags::MODIFY
        | inotify::WatchFlags::CREATE
        | inotify::WatchFlags::MOVED_TO
        | inotify::WatchFlags::CLOSE_WRITE;
    inotify::add_watch(
        &watch,
        path.parent().expect("a file in a directory"),
        changes,
    )
    .expect("inotify_add_watch");
    let mut buf = [0u8; 4096];
    loop {
        // Watched first, read second: a change after the read wakes the wait below.
        let bytes = std::fs::read(path).unwrap_or_default();
        if done(&bytes) {
            return bytes;
        }
        assert!(
            wait::readable(watch.as_fd(), deadline),
            "{} never got what was expected; it holds {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        );
        while rustix::io::read(&watch, &mut buf).is_ok_and(|n| n > 0) {}
    }
}

/// Waits until `path` holds exactly `want`.
pub fn await_contents(path: &Path, want: &[u8]) {
    await_file(path, |b| b == want);
}

/// The daemon's log writer: its child running `genward __log-writer`.
pub fn writer_pid(daemon_pid: u32) -> Option<u32> {
    genward::testkit::proc::children(daemon_pid)
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(12).any(|w| w == b"__log-writer"))
        })
}

/// Waits until process `pid` has exited (a zombie, or already reaped), on a pidfd.
pub fn await_exit(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        // Already reaped.
        return;
    };
    assert!(
        wait::readable(fd.as_fd(), Instant::now() + PATIENCE),
        "pid {pid:?} did not exit"
    );
}
