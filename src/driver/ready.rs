//! Telling a supervisor that the daemon is ready to serve: s6's notification fd (a newline
//! written to a descriptor, then closed) and systemd's `READY=1` (through the
//! [`Notifier`], without blocking). Both are best-effort: failing to notify is logged, not
//! fatal, because the socket is already serving.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use super::notify::Notifier;

/// Notifies every configured readiness channel once.
///
/// The descriptor is closed after the newline, as s6 expects.
pub fn notify_ready(ready_fd: Option<OwnedFd>, systemd: &Notifier) {
    if let Some(fd) = ready_fd {
        let raw = fd.as_raw_fd();
        if let Err(e) = std::fs::File::from(fd).write_all(b"\n") {
            log::warn!("readiness fd {raw}: {e}");
        }
    }
    systemd.ready();
}
