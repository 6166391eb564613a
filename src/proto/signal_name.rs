//! Signal names ↔ numbers, as people write them: `TERM`, `SIGTERM`, `term`, `15`,
//! `RTMIN+2`.
//!
//! Part of the wire format (a request's `signal` or `stop_signal`, an `exited` event's
//! `signal`) and shared with the command line (`genward kill -s`), so one spelling works
//! everywhere. Numbers come from `libc` for the
//! platform being built; nothing here sends a signal.

use std::fmt;

/// The names we accept and print, without the `SIG` prefix; the first name listed for a
/// number is the one [`signal_name`] returns.
const NAMES: &[(&str, libc::c_int)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("SYS", libc::SIGSYS),
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("POLL", libc::SIGPOLL),
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("PWR", libc::SIGPWR),
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("STKFLT", libc::SIGSTKFLT),
];

/// A signal name or number we could not use. `Display` says what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalError {
    /// Nothing was given.
    Empty,
    /// Not a signal name we know.
    UnknownName(String),
    /// A number that is not a signal on this system (0 is "check only", not a signal).
    OutOfRange { input: String, max: libc::c_int },
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty signal; give a name or number, e.g. TERM, KILL, 9"),
            Self::UnknownName(s) => write!(
                f,
                "unknown signal `{s}`; use a name like TERM, INT, KILL, HUP, USR1 or a number"
            ),
            Self::OutOfRange { input, max } => {
                write!(f, "signal number `{input}` is out of range; use 1 to {max}")
            }
        }
    }
}

impl std::error::Error for SignalError {}

/// Parses a signal given by name (any case, with or without `SIG`), by number, or as
/// `RTMIN+n` / `RTMAX-n` where the platform has real-time signals.
///
/// # Examples
///
/// ```
/// use genward::proto::signal_name::parse_signal;
/// assert_eq!(parse_signal("term"), Ok(libc::SIGTERM));
/// assert_eq!(parse_signal("SIGKILL"), Ok(libc::SIGKILL));
/// assert_eq!(parse_signal("15"), Ok(15));
/// ```
pub fn parse_signal(input: &str) -> Result<libc::c_int, SignalError> {
    if input.is_empty() {
        return Err(SignalError::Empty);
    }
    if input.bytes().all(|b| b.is_ascii_digit()) {
        let out_of_range = || SignalError::OutOfRange {
            input: input.to_string(),
            max: max_signal(),
        };
        let n: libc::c_int = input.parse().map_err(|_| out_of_range())?;
        return if (1..=max_signal()).contains(&n) {
            Ok(n)
        } else {
            Err(out_of_range())
        };
    }
    let upper = input.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(&(_, n)) = NAMES.iter().find(|(name, _)| *name == bare) {
        return Ok(n);
    }
    realtime(bare).ok_or_else(|| SignalError::UnknownName(input.to_string()))
}

/// The conventional name of a signal number, with the `SIG` prefix (`SIGTERM`), or
/// `SIGRTMIN+n` for real-time signals; `None` for numbers that are not signals here.
pub fn signal_name(signal: libc::c_int) -> Option<String> {
    if let Some((name, _)) = NAMES.iter().find(|(_, n)| *n == signal) {
        return Some(format!("SIG{name}"));
    }
    let (min, max) = realtime_range()?;
    if (min..=max).contains(&signal) {
        return Some(if signal == min {
            "SIGRTMIN".to_string()
        } else {
            format!("SIGRTMIN+{}", signal - min)
        });
    }
    None
}

/// The largest valid signal number on this system.
pub fn max_signal() -> libc::c_int {
    match realtime_range() {
        Some((_, max)) => max,
        None => NAMES.iter().map(|&(_, n)| n).max().unwrap_or(31),
    }
}

/// `RTMIN`, `RTMIN+n`, `RTMAX`, `RTMAX-n` (upper case, `SIG` already stripped).
fn realtime(bare: &str) -> Option<libc::c_int> {
    let (min, max) = realtime_range()?;
    let n = if bare == "RTMIN" {
        min
    } else if bare == "RTMAX" {
        max
    } else if let Some(k) = bare.strip_prefix("RTMIN+") {
        min.checked_add(offset(k)?)?
    } else if let Some(k) = bare.strip_prefix("RTMAX-") {
        max.checked_sub(offset(k)?)?
    } else {
        return None;
    };
    (min..=max).contains(&n).then_some(n)
}

/// The `n` of `RTMIN+n`: plain ASCII digits only.
fn offset(s: &str) -> Option<libc::c_int> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn realtime_range() -> Option<(libc::c_int, libc::c_int)> {
    Some((libc::SIGRTMIN(), libc::SIGRTMAX()))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn realtime_range() -> Option<(libc::c_int, libc::c_int)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_every_spelling() {
        for s in ["TERM", "SIGTERM", "term", "sigterm", "Term", "15"] {
            assert_eq!(parse_signal(s), Ok(libc::SIGTERM), "{s}");
        }
        let expected = [
            ("INT", libc::SIGINT),
            ("KILL", libc::SIGKILL),
            ("HUP", libc::SIGHUP),
            ("USR1", libc::SIGUSR1),
            ("USR2", libc::SIGUSR2),
            ("QUIT", libc::SIGQUIT),
            ("WINCH", libc::SIGWINCH),
            ("CONT", libc::SIGCONT),
            ("STOP", libc::SIGSTOP),
            ("TSTP", libc::SIGTSTP),
            ("ALRM", libc::SIGALRM),
            ("PIPE", libc::SIGPIPE),
        ];
        for (name, n) in expected {
            assert_eq!(parse_signal(name), Ok(n), "{name}");
            assert_eq!(parse_signal(&format!("sig{}", name.to_lowercase())), Ok(n));
        }
    }

    #[test]
    fn numbers_within_range_only() {
        assert_eq!(parse_signal("9"), Ok(libc::SIGKILL));
        assert_eq!(parse_signal("1"), Ok(1));
        assert_eq!(parse_signal(&max_signal().to_string()), Ok(max_signal()));
        for bad in [
            "0",
            "00",
            &(max_signal() + 1).to_string(),
            "99999999999999999999",
        ] {
            assert!(
                matches!(parse_signal(bad), Err(SignalError::OutOfRange { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_and_malformed_are_errors() {
        assert_eq!(parse_signal(""), Err(SignalError::Empty));
        for bad in [
            "TERMX",
            "SIG",
            "-9",
            "+9",
            " TERM",
            "9 ",
            "SIGSIGTERM",
            "ＴＥＲＭ",
            "RTMIN+x",
        ] {
            assert!(
                matches!(parse_signal(bad), Err(SignalError::UnknownName(_))),
                "{bad}"
            );
        }
        let msg = parse_signal("BOGUS").unwrap_err().to_string();
        assert!(
            msg.contains("unknown signal `BOGUS`") && msg.contains("TERM"),
            "{msg}"
        );
    }

    #[test]
    fn names_round_trip() {
        for &(name, n) in NAMES {
            let printed = signal_name(n).expect("named signal has a name");
            assert_eq!(parse_signal(&printed), Ok(n), "{name}");
        }
        assert_eq!(signal_name(libc::SIGTERM).as_deref(), Some("SIGTERM"));
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(-1), None);
        assert_eq!(signal_name(max_signal() + 1), None);
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn realtime_signals() {
        let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
        assert_eq!(parse_signal("RTMIN"), Ok(min));
        assert_eq!(parse_signal("SIGRTMIN+2"), Ok(min + 2));
        assert_eq!(parse_signal("rtmax-1"), Ok(max - 1));
        assert_eq!(parse_signal("RTMAX"), Ok(max));
        assert!(parse_signal("RTMIN+1000").is_err());
        assert!(parse_signal("RTMIN2").is_err());
        assert!(parse_signal("RTMAX+1").is_err());
        assert_eq!(signal_name(min + 3).as_deref(), Some("SIGRTMIN+3"));
        assert_eq!(parse_signal(&signal_name(max).unwrap()), Ok(max));
    }
}
