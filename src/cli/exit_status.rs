//! How a child's end becomes `genward`'s own exit status (`attach`, `wait`).
//!
//! Shell convention, as in sh and tini: an exit code passes through, a death by signal N
//! becomes 128+N. A process status is one byte, so anything that cannot be a real status
//! maps to 255 — never to 0, so a failure can never read as success.

/// How a process ended, as reported by the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEnd {
    /// It called `exit(code)`.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
}

/// The status a shell would report for `end`, in `0..=255`.
///
/// # Examples
///
/// ```
/// use genward::cli::exit_status::{shell_status, ChildEnd};
/// assert_eq!(shell_status(ChildEnd::Exited(3)), 3);
/// assert_eq!(shell_status(ChildEnd::Signaled(libc::SIGTERM)), 143);
/// ```
#[must_use]
pub fn shell_status(end: ChildEnd) -> u8 {
    match end {
        ChildEnd::Exited(code) => u8::try_from(code).unwrap_or(u8::MAX),
        // Signal numbers start at 1; 128 + 127 is the largest value that fits.
        ChildEnd::Signaled(signal @ 1..=127) => 128 + signal as u8,
        ChildEnd::Signaled(_) => u8::MAX,
    }
}

/// [`shell_status`] as a [`std::process::ExitCode`] for `main` to return.
#[must_use]
pub fn exit_code(end: ChildEnd) -> std::process::ExitCode {
    std::process::ExitCode::from(shell_status(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_pass_through() {
        for code in [0, 1, 2, 126, 127, 255] {
            assert_eq!(shell_status(ChildEnd::Exited(code)), code as u8);
        }
    }

    #[test]
    fn signals_become_128_plus_n() {
        assert_eq!(shell_status(ChildEnd::Signaled(libc::SIGTERM)), 143);
        assert_eq!(shell_status(ChildEnd::Signaled(libc::SIGKILL)), 137);
        assert_eq!(shell_status(ChildEnd::Signaled(libc::SIGINT)), 130);
        assert_eq!(shell_status(ChildEnd::Signaled(1)), 129);
        assert_eq!(shell_status(ChildEnd::Signaled(127)), 255);
    }

    #[test]
    fn impossible_values_clamp_to_failure_never_success() {
        for code in [-1, 256, 512, i32::MIN, i32::MAX] {
            assert_eq!(shell_status(ChildEnd::Exited(code)), 255, "exit {code}");
        }
        for signal in [0, -9, 128, 1000, i32::MAX, i32::MIN] {
            assert_eq!(
                shell_status(ChildEnd::Signaled(signal)),
                255,
                "signal {signal}"
            );
        }
    }
}
