//! The keeper: a tiny process of the daemon's own (the same binary, `genward __keeper`)
//! that holds duplicates of every child's descriptors — pidfd, stdin, stdout, stderr or
//! PTY master — so that a crash of the daemon loses nothing: no child gets `SIGHUP` (its
//! terminal stays open) or `EPIPE` (its pipes keep a reader; one that fills just blocks),
//! and the next daemon on the same state directory takes the descriptors back and carries
//! on with each generation's I/O. In the spirit of s6-fdholderd.
//!
//! It does nothing else: it never reads output, never signals anyone, keeps no buffers,
//! and has one timer, its own expiry. Its whole life:
//!
//! 1. Started by a daemon with one end of a socket pair as fd [`LINK_FD`]: it detaches
//!    (fork, `setsid`: out of the daemon's process group and session, so a terminal's
//!    signals to the daemon do not reach it), listens on `keeper.sock` in the state
//!    directory, records itself in `keeper` (pid and identity token, written atomically),
//!    and says `Ready`.
//! 2. Holds what the daemon sends (`Hold`), forgets what it is told (`Drop`).
//! 3. The daemon says `Bye` (a clean shutdown): it closes everything, removes its files
//!    and exits at once.
//! 4. The link reaches end of file without a `Bye` (the daemon died): it keeps holding,
//!    for the hold time it was started with, for a daemon to connect to its socket — of
//!    our uid, and the holder of the state directory's lease. That daemon asks for
//!    everything (`Take`), is sent it, and becomes the daemon the keeper serves. If none
//!    comes in time, the keeper closes everything and exits; the durable-state recovery
//!    then applies as without a keeper.
//!
//! The message format and the files are in `docs/keeper.md` and [`wire`].

pub mod wire;

mod held;
mod serve;

use std::ffi::OsString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub use held::MAX_HELD;
pub use serve::serve;

/// The descriptor the link is passed as.
pub const LINK_FD: i32 = 3;

/// The hidden subcommand that runs a keeper.
pub const SUBCOMMAND: &str = "__keeper";

/// How a keeper is started: `genward __keeper HOLD_MS STATE_DIR`, with the link on
/// [`LINK_FD`].
#[derive(Debug)]
pub struct KeeperArgs {
    /// How long to hold without a daemon.
    pub hold: Duration,
    /// The state directory it serves.
    pub state_dir: PathBuf,
}

impl KeeperArgs {
    /// Parses the arguments after the subcommand, strictly.
    pub fn parse(args: &[OsString]) -> Result<KeeperArgs, String> {
        let [hold, dir] = args else {
            return Err("usage: genward __keeper HOLD_MS STATE_DIR".into());
        };
        let hold = hold
            .to_str()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or("HOLD_MS: not a number of milliseconds")?;
        let state_dir = PathBuf::from(dir);
        if !state_dir.is_absolute() {
            return Err("STATE_DIR: not an absolute path".into());
        }
        Ok(KeeperArgs {
            hold: Duration::from_millis(hold),
            state_dir,
        })
    }

    /// The arguments for `parse`.
    pub fn to_args(&self) -> Vec<OsString> {
        vec![
            SUBCOMMAND.into(),
            (self.hold.as_millis() as u64).to_string().into(),
            self.state_dir.clone().into(),
        ]
    }
}

/// `genward __keeper ...`: runs a keeper until it has no purpose left. Never returns to
/// the daemon's code.
pub fn main(args: &[OsString]) -> ExitCode {
    let args = match KeeperArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("genward keeper: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = check_link(LINK_FD) {
        eprintln!("genward keeper: fd {LINK_FD} is not a keeper link: {e}");
        return ExitCode::from(2);
    }
    // SAFETY: fd 3 was checked to be an open socket, inherited for this purpose; nothing
    // else in this process owns it (the keeper opens nothing before this point).
    let link = unsafe { OwnedFd::from_raw_fd(LINK_FD) };
    match serve(link, &args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("genward keeper: {e}");
            ExitCode::from(1)
        }
    }
}

/// Whether `fd` is an open record socket (what a daemon passes).
fn check_link(fd: i32) -> std::io::Result<()> {
    // SAFETY: `fcntl(F_GETFD)` is defined for any integer: EBADF when it is not open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is open (checked above), and nothing closes it while it is borrowed.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    match rustix::net::sockopt::socket_type(borrowed)? {
        rustix::net::SocketType::SEQPACKET => Ok(()),
        other => Err(std::io::Error::other(format!("socket type {other:?}"))),
    }
}
