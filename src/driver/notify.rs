//! systemd's notification protocol: `READY=1` with `MAINPID=` once the socket serves,
//! `RELOADING=1` with `MONOTONIC_USEC=` and `READY=1` around a reload, `STOPPING=1` when
//! shutting down,
//! and `WATCHDOG=1` every half of `$WATCHDOG_USEC` (only when `$WATCHDOG_PID` is unset or
//! is this process).
//!
//! Every message is one datagram sent without blocking: a supervisor that reads slowly
//! loses a notification (logged), it never stalls the loop.
//!
//! # References
//! sd_notify(3), sd_watchdog_enabled(3), systemd.service(5) `Type=notify-reload`.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// Where notifications go (`$NOTIFY_SOCKET`) and when the watchdog is next fed.
#[derive(Debug)]
pub struct Notifier {
    /// The socket and its address; `None` without `$NOTIFY_SOCKET`.
    target: Option<(UnixDatagram, SocketAddr)>,
    /// Half the watchdog period, and when to send the next `WATCHDOG=1`.
    watchdog: Option<(Duration, Instant)>,
}

impl Notifier {
    /// From the environment systemd gives a service. A `$NOTIFY_SOCKET` that cannot be
    /// used is logged and ignored.
    pub fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|path| match open(&path) {
            Ok(t) => Some(t),
            Err(e) => {
                log::warn!("NOTIFY_SOCKET {}: {e}", path.to_string_lossy());
                None
            }
        });
        let ours = std::env::var("WATCHDOG_PID")
            .ok()
            .is_none_or(|pid| pid.trim() == std::process::id().to_string());
        let period = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|us| us.trim().parse::<u64>().ok())
            .filter(|&us| us > 0 && ours && target.is_some())
            .map(|us| Duration::from_micros(us) / 2);
        Notifier {
            target,
            watchdog: period.map(|half| (half, Instant::now())),
        }
    }

    /// `READY=1` and our pid, once the socket accepts connections.
    pub fn ready(&self) {
        self.send(&format!("READY=1\nMAINPID={}\n", std::process::id()));
    }

    /// `RELOADING=1` with the monotonic time, before a reload.
    pub fn reloading(&self) {
        let usec = crate::driver::upgrade::state::mono::to_ns(Instant::now()) / 1000;
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={usec}\n"));
    }

    /// `READY=1`, after a reload.
    pub fn reloaded(&self) {
        self.send("READY=1\n");
    }

    /// `STOPPING=1`, when the shutdown begins.
    pub fn stopping(&self) {
        self.send("STOPPING=1\n");
    }

    /// When the watchdog must next be fed, if there is one.
    pub fn deadline(&self) -> Option<Instant> {
        self.watchdog.map(|(_, at)| at)
    }

    /// Sends `WATCHDOG=1` if it is due, and arms the next.
    pub fn feed_watchdog(&mut self, now: Instant) {
        let Some((half, at)) = self.watchdog else {
            return;
        };
        if now >= at {
            self.send("WATCHDOG=1\n");
            self.watchdog = Some((half, now + half));
        }
    }

    fn send(&self, msg: &str) {
        let Some((socket, addr)) = &self.target else {
            return;
        };
        if let Err(e) = socket.send_to_addr(msg.as_bytes(), addr) {
            log::warn!("sd_notify {:?}: {e}", msg.lines().next().unwrap_or(""));
        }
    }
}

/// A non-blocking unbound datagram socket and the address `path` names (`@name`: an
/// abstract socket).
fn open(path: &std::ffi::OsStr) -> io::Result<(UnixDatagram, SocketAddr)> {
    let socket = UnixDatagram::unbound()?;
    socket.set_nonblocking(true)?;
    let bytes = path.as_encoded_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)?
        }
        None => SocketAddr::from_pathname(path)?,
    };
    Ok((socket, addr))
}
