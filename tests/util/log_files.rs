//! Waiting for what the daemon's log writer puts in files: it writes in a process of its
//! own, with no event to await, so its files are read until they say what is expected
//! (bounded by [`PATIENCE`]).

use std::path::Path;
use std::time::{Duration, Instant};

use super::daemon::PATIENCE;

/// Reads `path` until `done` accepts its bytes; fails with what it last held.
pub fn await_file(path: &Path, mut done: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let bytes = std::fs::read(path).unwrap_or_default();
        if done(&bytes) {
            return bytes;
        }
        assert!(
            Instant::now() < deadline,
            "{} never got what was expected; it holds {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        );
        // A poll interval, not an ordering: the next read looks again.
        std::thread::sleep(Duration::from_millis(10));
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
