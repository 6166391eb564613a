//! The few signal numbers the core names. They are plain numbers, so the core needs no
//! libc call: the first four match every Unix genward targets; job control's differ
//! between Linux and the BSDs, so they are chosen by target (a test compares them with
//! libc's).

/// Hangup.
pub const SIGHUP: i32 = 1;
/// Interrupt.
pub const SIGINT: i32 = 2;
/// Kill: cannot be caught; the last step of every stop sequence.
pub const SIGKILL: i32 = 9;
/// Terminate: the default stop signal and the first signal sent to an orphaned group.
pub const SIGTERM: i32 = 15;

/// Continue: sent to the leader right after a stop's signal (see [`wakes`]).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub const SIGCONT: i32 = 18;
/// Continue: sent to the leader right after a stop's signal (see [`wakes`]).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub const SIGCONT: i32 = 19;
/// Stop: cannot be caught.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub const SIGSTOP: i32 = 19;
/// Stop: cannot be caught.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub const SIGSTOP: i32 = 17;
/// Terminal stop (Ctrl-Z).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub const SIGTSTP: i32 = 20;
/// Terminal stop (Ctrl-Z).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub const SIGTSTP: i32 = 18;
/// Background read from the terminal (stops by default); the same number everywhere.
pub const SIGTTIN: i32 = 21;
/// Background write to the terminal (stops by default); the same number everywhere.
pub const SIGTTOU: i32 = 22;

/// The highest signal number accepted from clients (Linux's `SIGRTMAX`).
pub const MAX_SIGNAL: i32 = 64;

/// Whether `signal` is a number a client may ask us to send (0 is a probe, not a signal).
pub fn is_valid(signal: i32) -> bool {
    (1..=MAX_SIGNAL).contains(&signal)
}

/// Whether a stop's `signal` is followed by SIGCONT, as systemd does after its
/// `KillSignal=`: a stopped process (`kill -STOP`, a debugger, job control's Ctrl-Z) keeps
/// a SIGTERM pending and never runs its handler until the SIGKILL, so it is woken to act
/// on it. Not after a signal that kills, continues or stops by itself: waking would undo
/// the stop that a `stop_signal` of STOP asked for.
pub fn wakes(signal: i32) -> bool {
    !matches!(
        signal,
        SIGKILL | SIGCONT | SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_are_the_platforms() {
        let ours = [
            SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU,
        ];
        let libc = [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGKILL,
            libc::SIGTERM,
            libc::SIGCONT,
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ];
        assert_eq!(ours, libc);
    }

    #[test]
    fn only_signals_that_neither_kill_stop_nor_continue_wake() {
        assert!(wakes(SIGTERM) && wakes(SIGINT) && wakes(SIGHUP) && wakes(34));
        for s in [SIGKILL, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU] {
            assert!(!wakes(s), "{s}");
        }
    }
}
