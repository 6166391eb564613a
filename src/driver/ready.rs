//! Telling a supervisor that the daemon is ready to serve: s6's notification fd (a newline
//! written to a descriptor, then closed) and systemd's `sd_notify` (`READY=1` sent to
//! `$NOTIFY_SOCKET`). Both are optional and best-effort: failing to notify is logged, not
//! fatal, because the socket is already serving.

use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixDatagram;

/// Notifies every configured readiness channel once.
pub fn notify_ready(ready_fd: Option<i32>) {
    if let Some(fd) = ready_fd {
        // SAFETY: the fd was handed to us on the command line for exactly this purpose and
        // nothing else in the daemon uses it; we take ownership and close it after writing.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        if let Err(e) = file.write_all(b"\n") {
            log::warn!("readiness fd {fd}: {e}");
        }
    }
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET") {
        let msg = format!("READY=1\nMAINPID={}\n", std::process::id());
        let sent = UnixDatagram::unbound().and_then(|s| {
            let bytes = path.as_encoded_bytes();
            if let Some(abstract_name) = bytes.strip_prefix(b"@") {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name)?;
                s.send_to_addr(msg.as_bytes(), &addr)
            } else {
                s.send_to(msg.as_bytes(), &path)
            }
        });
        if let Err(e) = sent {
            log::warn!("sd_notify: {e}");
        }
    }
}
