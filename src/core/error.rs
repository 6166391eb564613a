//! Stable error codes for command replies.

use std::fmt;

/// A stable, machine-readable error code. The strings never change once published:
/// clients match on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request is malformed or a value is out of range.
    BadRequest,
    /// No session has that name.
    NoSuchSession,
    /// `spawn` with `on_busy: reject` on a session that has a live current generation.
    Busy,
    /// `if_gen` did not match the session's current generation.
    StaleGeneration,
    /// A table, queue or counter is full.
    Limit,
    /// The session has no running process to address.
    NotRunning,
    /// The process's input was closed (by `close_input` or because it stopped reading).
    InputClosed,
    /// A configuration the daemon was asked to load cannot be applied (a session it names
    /// was started by a client, a spec is invalid, ...).
    BadConfig,
}

impl ErrorCode {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::NoSuchSession => "no_such_session",
            ErrorCode::Busy => "busy",
            ErrorCode::StaleGeneration => "stale_generation",
            ErrorCode::Limit => "limit",
            ErrorCode::NotRunning => "not_running",
            ErrorCode::InputClosed => "input_closed",
            ErrorCode::BadConfig => "bad_config",
        }
    }
}

/// A failed command: a stable code plus a message for humans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, for programs.
    pub code: ErrorCode,
    /// What went wrong, for people; names the offending value.
    pub message: String,
}

impl Error {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn bad(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::BadRequest, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Error {}
