//! The few signal numbers the core names. They are plain numbers (Linux values, which
//! match every Unix genward targets for these four), so the core needs no libc call.

/// Hangup.
pub const SIGHUP: i32 = 1;
/// Interrupt.
pub const SIGINT: i32 = 2;
/// Kill: cannot be caught; the last step of every stop sequence.
pub const SIGKILL: i32 = 9;
/// Terminate: the default stop signal and the first signal sent to an orphaned group.
pub const SIGTERM: i32 = 15;

/// The highest signal number accepted from clients (Linux's `SIGRTMAX`).
pub const MAX_SIGNAL: i32 = 64;

/// Whether `signal` is a number a client may ask us to send (0 is a probe, not a signal).
pub fn is_valid(signal: i32) -> bool {
    (1..=MAX_SIGNAL).contains(&signal)
}
