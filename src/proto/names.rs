//! The wire names of the core's enums, both ways.
//!
//! The core spells each value for the wire (`as_str`); a client also needs the way back.
//! The reverse lives here, next to a list of every value, so the core holds no decoding
//! code and one test can prove that every name reads back as the value that wrote it.
//! Each `wire_name` matches exhaustively: a new variant fails to build here until it
//! joins its `ALL` list, so no value can be written that cannot be read.

use crate::core::{ExitCause, SessionState, SpawnErrorKind, Stream};
use crate::proto::json::{FieldError, Object};

/// A core enum with a fixed spelling on the wire.
pub trait WireName: Sized + Copy + PartialEq + 'static {
    /// Every value.
    const ALL: &'static [Self];

    /// The value's spelling on the wire.
    fn wire_name(self) -> &'static str;

    /// The value spelled `name`, if any.
    fn from_wire(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.wire_name() == name)
    }
}

/// Reads required field `key` as one of `T`'s names; an unknown name is an error that
/// lists the known ones.
pub fn read_name<T: WireName>(obj: &Object, key: &str) -> Result<T, FieldError> {
    let name = obj.req_str(key)?;
    T::from_wire(name).ok_or_else(|| {
        let known: Vec<&str> = T::ALL.iter().map(|v| v.wire_name()).collect();
        FieldError::invalid(key, format!("`{name}` is not one of {}", known.join(", ")))
    })
}

impl WireName for Stream {
    const ALL: &'static [Stream] = &[Stream::Stdout, Stream::Stderr, Stream::Pty];

    fn wire_name(self) -> &'static str {
        match self {
            Stream::Stdout | Stream::Stderr | Stream::Pty => self.as_str(),
        }
    }
}

impl WireName for ExitCause {
    const ALL: &'static [ExitCause] = &[
        ExitCause::Exited,
        ExitCause::Signaled,
        ExitCause::Stopped,
        ExitCause::Killed,
        ExitCause::Superseded,
        ExitCause::Lost,
    ];

    fn wire_name(self) -> &'static str {
        match self {
            ExitCause::Exited
            | ExitCause::Signaled
            | ExitCause::Stopped
            | ExitCause::Killed
            | ExitCause::Superseded
            | ExitCause::Lost => self.as_str(),
        }
    }
}

impl WireName for SessionState {
    const ALL: &'static [SessionState] = &[
        SessionState::Starting,
        SessionState::Running,
        SessionState::Stopping,
        SessionState::Exiting,
        SessionState::Backoff,
        SessionState::Stopped,
        SessionState::Exited,
        SessionState::Failed,
        SessionState::Removing,
        SessionState::Removed,
    ];

    fn wire_name(self) -> &'static str {
        match self {
            SessionState::Starting
            | SessionState::Running
            | SessionState::Stopping
            | SessionState::Exiting
            | SessionState::Backoff
            | SessionState::Stopped
            | SessionState::Exited
            | SessionState::Failed
            | SessionState::Removing
            | SessionState::Removed => self.as_str(),
        }
    }
}

impl WireName for SpawnErrorKind {
    const ALL: &'static [SpawnErrorKind] = &[
        SpawnErrorKind::NotFound,
        SpawnErrorKind::PermissionDenied,
        SpawnErrorKind::Other,
        SpawnErrorKind::Cancelled,
    ];

    fn wire_name(self) -> &'static str {
        match self {
            SpawnErrorKind::NotFound
            | SpawnErrorKind::PermissionDenied
            | SpawnErrorKind::Other
            | SpawnErrorKind::Cancelled => self.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    fn round_trips<T: WireName + std::fmt::Debug>() {
        for (i, &v) in T::ALL.iter().enumerate() {
            assert_eq!(T::from_wire(v.wire_name()), Some(v));
            assert!(
                T::ALL[..i].iter().all(|w| w.wire_name() != v.wire_name()),
                "{v:?} shares its name"
            );
        }
        assert_eq!(T::from_wire(""), None);
    }

    #[test]
    fn every_name_reads_back_as_its_value() {
        round_trips::<Stream>();
        round_trips::<ExitCause>();
        round_trips::<SessionState>();
        round_trips::<SpawnErrorKind>();
        assert_eq!(Stream::from_wire("tty"), None);
    }

    #[test]
    fn unknown_names_are_refused_listing_the_known_ones() {
        let v = parse(br#"{"stream":"tty","n":1}"#).unwrap();
        let o = v.as_object().unwrap();
        let e = read_name::<Stream>(o, "stream").unwrap_err();
        assert_eq!(
            e.to_string(),
            "field `stream`: `tty` is not one of stdout, stderr, pty"
        );
        let e = read_name::<Stream>(o, "n").unwrap_err();
        assert_eq!(e.to_string(), "field `n`: expected string, got integer");
    }
}
