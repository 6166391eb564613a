//! Stable error codes and the error response line.
//!
//! Codes are part of the protocol: clients match on them, so a code's string never
//! changes meaning and is never removed. The message is for people and may change.

use std::fmt;

use super::envelope::RequestId;
use super::framing::LineTooLong;
use super::json::{FieldError, ObjWriter, ParseError, ParseErrorKind};

/// The `code` of an error response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request is not valid JSON, not an object, or has a missing, unknown or
    /// ill-typed field.
    BadRequest,
    /// The `op` is not one the daemon knows.
    UnknownOp,
    /// No session has the given name.
    NoSuchSession,
    /// The session already runs a generation and `on_busy` is `reject`.
    Busy,
    /// `if_gen` does not name the session's current generation; nothing was done.
    StaleGeneration,
    /// The child could not be started.
    SpawnFailed,
    /// A limit was hit (line length, sessions, queue, buffer, ...).
    Limit,
    /// The peer or the operation is not permitted.
    PermissionDenied,
    /// The session has no running generation to address.
    NotRunning,
    /// The generation no longer reads its input (it closed it, or `close_input` was sent).
    InputClosed,
    /// A bug or an unexpected operating-system failure in the daemon.
    Internal,
    /// An upgrade was refused (the program cannot be run or cannot read this daemon's
    /// state) or rolled back (the new program could not resume): the daemon runs on as it
    /// was, and the message says which version runs.
    UpgradeFailed,
    /// `reload` on a daemon started without `--config`: there is nothing to reload.
    NoConfig,
    /// The configuration cannot be loaded or applied; the message says where and why
    /// (`file:line:column: field: problem`). Nothing was changed.
    BadConfig,
}

impl ErrorCode {
    /// Every code, in documentation order.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::BadRequest,
        ErrorCode::UnknownOp,
        ErrorCode::NoSuchSession,
        ErrorCode::Busy,
        ErrorCode::StaleGeneration,
        ErrorCode::SpawnFailed,
        ErrorCode::Limit,
        ErrorCode::PermissionDenied,
        ErrorCode::NotRunning,
        ErrorCode::InputClosed,
        ErrorCode::Internal,
        ErrorCode::UpgradeFailed,
        ErrorCode::NoConfig,
        ErrorCode::BadConfig,
    ];

    /// The code as sent on the wire, e.g. `"stale_generation"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownOp => "unknown_op",
            ErrorCode::NoSuchSession => "no_such_session",
            ErrorCode::Busy => "busy",
            ErrorCode::StaleGeneration => "stale_generation",
            ErrorCode::SpawnFailed => "spawn_failed",
            ErrorCode::Limit => "limit",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::NotRunning => "not_running",
            ErrorCode::InputClosed => "input_closed",
            ErrorCode::Internal => "internal",
            ErrorCode::UpgradeFailed => "upgrade_failed",
            ErrorCode::NoConfig => "no_config",
            ErrorCode::BadConfig => "bad_config",
        }
    }

    /// The code for a wire string, as a client reads it.
    pub fn from_wire(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error to answer a request with: a stable code and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoError {
    /// The stable code.
    pub code: ErrorCode,
    /// What happened, specifically (which field, which limit, which session).
    pub message: String,
}

impl ProtoError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ProtoError {
            code,
            message: message.into(),
        }
    }
}

impl ProtoError {
    /// For an error made from a [`FieldError`]: the field it names (`grace`,
    /// `restart.mode`, `argv[2]`) and the problem without the field's name, so a caller
    /// that knows where the field was written (a config file) can say so.
    pub fn field_problem(&self) -> Option<(&str, String)> {
        // The two shapes of `FieldError`'s Display: "unknown field `F`" and
        // "field `F`: problem".
        let m = self.message.as_str();
        if let Some(f) = m
            .strip_prefix("unknown field `")
            .and_then(|r| r.strip_suffix('`'))
        {
            return Some((f, "unknown field".to_owned()));
        }
        let rest = m.strip_prefix("field `")?;
        let (field, problem) = rest.split_once("`: ")?;
        Some((field, problem.to_owned()))
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ProtoError {}

impl From<FieldError> for ProtoError {
    fn from(e: FieldError) -> Self {
        ProtoError::new(ErrorCode::BadRequest, e.to_string())
    }
}

/// Input over the length limit is `limit`; every other parse error is `bad_request`.
impl From<ParseError> for ProtoError {
    fn from(e: ParseError) -> Self {
        let code = match e.kind {
            ParseErrorKind::TooLong { .. } => ErrorCode::Limit,
            _ => ErrorCode::BadRequest,
        };
        ProtoError::new(code, format!("invalid JSON: {e}"))
    }
}

/// An over-long request line is answered with `limit` (and `"id": null`).
impl From<LineTooLong> for ProtoError {
    fn from(e: LineTooLong) -> Self {
        ProtoError::new(ErrorCode::Limit, e.to_string())
    }
}

/// Most bytes of a message an answer or an event carries. A message may quote what a
/// client sent (a path, a name), and a line may hold several (a session's recent ends):
/// each line must stay within the 1 MiB line limit whatever was quoted.
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// `message`, cut at a character boundary to at most [`MAX_MESSAGE_BYTES`] with `…` in
/// place of the rest.
pub fn bounded_message(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.into();
    }
    const MORE: &str = "…";
    let mut end = MAX_MESSAGE_BYTES - MORE.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &message[..end]).into()
}

/// Appends the response line `{"id":..,"ok":false,"error":{"code":..,"message":..}}\n`.
pub fn write_error_response(id: &RequestId, error: &ProtoError, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.with("id", |out| id.write(out))
        .bool("ok", false)
        .with("error", |out| {
            let mut e = ObjWriter::new(out);
            e.str("code", error.code.as_str())
                .str("message", &bounded_message(&error.message));
            e.finish();
        });
    w.finish();
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(bounded_message("short"), "short");
        let exact = "x".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(bounded_message(&exact), exact.as_str());
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = bounded_message(&long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
    }

    #[test]
    fn codes_round_trip_through_their_wire_strings() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::from_wire("nope"), None);
        assert_eq!(ErrorCode::StaleGeneration.to_string(), "stale_generation");
    }

    #[test]
    fn error_response_line_is_exact() {
        let mut out = Vec::new();
        let err = ProtoError::new(ErrorCode::NoSuchSession, "no session \"a\"\n");
        write_error_response(&RequestId::U64(7), &err, &mut out);
        assert_eq!(
            out,
            b"{\"id\":7,\"ok\":false,\"error\":{\"code\":\"no_such_session\",\
              \"message\":\"no session \\\"a\\\"\\n\"}}\n"
        );
    }

    #[test]
    fn parse_and_field_errors_become_bad_request() {
        let e: ProtoError = crate::proto::json::parse(b"[1,]").unwrap_err().into();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert_eq!(e.message, "invalid JSON: expected a value at byte 3");
        let f = FieldError::invalid("signal", "unknown signal `SIGFOO`");
        let e: ProtoError = f.into();
        assert_eq!(
            e.to_string(),
            "bad_request: field `signal`: unknown signal `SIGFOO`"
        );
    }

    #[test]
    fn length_limits_become_limit() {
        let e: ProtoError = LineTooLong { limit: 1 << 20 }.into();
        assert_eq!(e.to_string(), "limit: line longer than 1048576 bytes");
        let limits = crate::proto::json::Limits {
            max_len: 2,
            ..Default::default()
        };
        let e: ProtoError = crate::proto::json::parse_with(b"[1]", &limits)
            .unwrap_err()
            .into();
        assert_eq!(e.code, ErrorCode::Limit);
    }
}
