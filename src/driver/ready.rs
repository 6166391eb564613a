//! Telling a supervisor that the daemon is ready to serve: s6's notification fd (a newline
//! written to a descriptor, then closed) and systemd's `READY=1` (through the
//! [`Notifier`], without blocking). Both are best-effort: failing to notify is logged, not
//! fatal, because the socket is already serving.

use std::io::Write;
use std::os::fd::FromRawFd;

use super::notify::Notifier;

/// Notifies every configured readiness channel once.
pub fn notify_ready(ready_fd: Option<i32>, systemd: &Notifier) {
    if let Some(fd) = ready_fd {
        // SAFETY: the fd was handed to us on the command line for exactly this purpose and
        // nothing else in the daemon uses it; we take ownership and close it after writing.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        if let Err(e) = file.write_all(b"\n") {
            log::warn!("readiness fd {fd}: {e}");
        }
    }
    systemd.ready();
}
