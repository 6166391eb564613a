//! Events: what subscribers are told, as one typed value with one encoder and one decoder.
//!
//! The daemon turns the core's events into [`WireEvent`]s and writes them
//! ([`WireEvent::write`]); clients get them back from the
//! [`FrameDecoder`](super::framing::FrameDecoder), which reads every line through
//! [`WireEvent::decode`]. A test round-trips every event the daemon can emit, so neither
//! side can drift from the other.
//!
//! Field types are the core's own enums where they fit ([`Stream`], [`ExitCause`],
//! [`SessionState`], [`SpawnErrorKind`]), read back through
//! [`WireName`](super::names::WireName).

mod read;
mod write;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::core::{Event, LastEnd, SpawnError};
pub use crate::core::{ExitCause, SessionState, SpawnErrorKind, Stream};
pub use crate::proto::framing::OutputFrame;
use crate::proto::json::FieldError;

/// One event line (or, for output, one frame) as it travels to a subscriber.
///
/// Borrowed when the daemon writes it, owned (`WireEvent<'static>`) when decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireEvent<'a> {
    /// A generation started as `pid`.
    Spawned {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
        /// Leader pid.
        pid: u32,
    },
    /// A generation could not start: its terminal event.
    SpawnFailed {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
        /// Why.
        error: WireSpawnError,
    },
    /// Output bytes of a generation, framed.
    Output(OutputFrame<'a>),
    /// A generation ended, after all its output: its terminal event.
    Exited {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
        /// Exit code, 128 + signal when signalled; `None` when lost (nobody saw it end).
        code: Option<i32>,
        /// The signal that ended it, if any.
        signal: Option<i32>,
        /// Why it ended.
        cause: ExitCause,
        /// Output bytes refused because they came for a closed stream.
        discarded: u64,
        /// Whether output was cut at the drain deadline.
        truncated: bool,
    },
    /// The session changed state.
    State {
        /// Session name.
        session: Cow<'a, str>,
        /// Its current (or last) generation, if it ever had one.
        gen: Option<u64>,
        /// The new state.
        state: SessionState,
    },
    /// A generation survived SIGKILL for `kill_grace`; still tracked.
    Unkillable {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
    },
    /// A generation stopped reading its input.
    InputClosed {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
    },
    /// A generation is ready (its spec's `ready` check passed).
    Ready {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
    },
    /// A generation failed its liveness probe `failures` times in a row and is being
    /// stopped; its end counts as a failure for the restart policy.
    Unhealthy {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
        /// Consecutive failed probes.
        failures: u32,
    },
    /// A generation's readiness check failed; its process is left running.
    ReadyFailed {
        /// Session name.
        session: Cow<'a, str>,
        /// Generation.
        gen: u64,
        /// Why, for people.
        reason: Cow<'a, str>,
    },
    /// This subscriber missed session output positions `[from, to)`.
    Dropped {
        /// Session name.
        session: Cow<'a, str>,
        /// First position missed.
        from: u64,
        /// First position not missed.
        to: u64,
    },
    /// This subscriber's lossless subscription to the session became an ordinary one.
    Demoted {
        /// Session name.
        session: Cow<'a, str>,
        /// The session output position it had been sent up to when demoted.
        pos: u64,
        /// Why.
        reason: Demotion,
    },
}

/// Why a lossless subscription became an ordinary one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demotion {
    /// It took nothing for its `demote_after` while the session's output waited for it.
    Stalled,
    /// The session is being removed: its output is held for nobody any more.
    Removing,
}

impl Demotion {
    /// The wire spelling (`reason` of a `demoted` event).
    pub const fn as_str(self) -> &'static str {
        match self {
            Demotion::Stalled => "stalled",
            Demotion::Removing => "removing",
        }
    }
}

/// Why a generation never ran, as the wire carries it: the core's [`SpawnError`] plus the
/// system's explanation of its `errno`, which only the daemon's side can phrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireSpawnError {
    /// The class of failure.
    pub kind: SpawnErrorKind,
    /// The OS error number, 0 when there is none.
    pub errno: i32,
    /// What failed, for people: the step and the path (`exec "/x/prog": no such file or
    /// directory`), or why a start was cancelled; else the system's text for `errno`.
    pub message: Option<String>,
}

impl From<SpawnError> for WireSpawnError {
    fn from(e: SpawnError) -> Self {
        WireSpawnError {
            kind: e.kind,
            errno: e.errno,
            message: e.message.map(|m| m.to_string()).or_else(|| {
                (e.errno != 0).then(|| std::io::Error::from_raw_os_error(e.errno).to_string())
            }),
        }
    }
}

/// Back to the core's form, as a stored record keeps it: the system's text for `errno`,
/// which the wire adds when there was no message of the daemon's own, is dropped again,
/// so a record reads back exactly as it was written.
impl From<WireSpawnError> for SpawnError {
    fn from(error: WireSpawnError) -> Self {
        let system =
            (error.errno != 0).then(|| std::io::Error::from_raw_os_error(error.errno).to_string());
        let own = error.message.filter(|m| Some(m) != system.as_ref());
        let e = SpawnError::new(error.kind, error.errno);
        match own {
            Some(m) => e.with_message(m),
            None => e,
        }
    }
}

/// How a generation ended: what a terminal event says, and a snapshot's `last_end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It ran and ended.
    Exited {
        /// Generation.
        gen: u64,
        /// Exit code (128 + signal when signalled); `None` when lost.
        code: Option<i32>,
        /// The signal that ended it, if any.
        signal: Option<i32>,
        /// Why it ended.
        cause: ExitCause,
    },
    /// It never ran.
    SpawnFailed {
        /// Generation.
        gen: u64,
        /// Why.
        error: WireSpawnError,
    },
}

impl End {
    /// The generation that ended.
    pub fn gen(&self) -> u64 {
        match self {
            End::Exited { gen, .. } | End::SpawnFailed { gen, .. } => *gen,
        }
    }
}

impl From<&LastEnd> for End {
    fn from(end: &LastEnd) -> Self {
        match end.clone() {
            LastEnd::Exited {
                gen,
                code,
                signal,
                cause,
            } => End::Exited {
                gen,
                code,
                signal,
                cause,
            },
            LastEnd::SpawnFailed { gen, error } => End::SpawnFailed {
                gen,
                error: error.into(),
            },
        }
    }
}

impl From<End> for LastEnd {
    fn from(end: End) -> Self {
        match end {
            End::Exited {
                gen,
                code,
                signal,
                cause,
            } => LastEnd::Exited {
                gen,
                code,
                signal,
                cause,
            },
            End::SpawnFailed { gen, error } => LastEnd::SpawnFailed {
                gen,
                error: error.into(),
            },
        }
    }
}

/// Why an event line could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// The `event` member is missing or not a string.
    Name(FieldError),
    /// An event this build does not know (a newer daemon may send it).
    Unknown(String),
    /// A known event with a missing or ill-typed field.
    Field {
        /// The event's name.
        event: &'static str,
        /// What is wrong.
        error: FieldError,
    },
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::Name(e) => write!(f, "not an event: {e}"),
            EventError::Unknown(name) => write!(f, "unknown event `{name}`"),
            EventError::Field { event, error } => write!(f, "`{event}` event: {error}"),
        }
    }
}

impl std::error::Error for EventError {}

impl<'a> WireEvent<'a> {
    /// The event's name on the wire (`"exited"`, `"output"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            WireEvent::Spawned { .. } => "spawned",
            WireEvent::SpawnFailed { .. } => "spawn_failed",
            WireEvent::Output(_) => "output",
            WireEvent::Exited { .. } => "exited",
            WireEvent::State { .. } => "state",
            WireEvent::Unkillable { .. } => "unkillable",
            WireEvent::InputClosed { .. } => "input_closed",
            WireEvent::Ready { .. } => "ready",
            WireEvent::ReadyFailed { .. } => "ready_failed",
            WireEvent::Unhealthy { .. } => "unhealthy",
            WireEvent::Dropped { .. } => "dropped",
            WireEvent::Demoted { .. } => "demoted",
        }
    }

    /// The session the event is about.
    pub fn session(&self) -> &str {
        match self {
            WireEvent::Output(f) => &f.session,
            WireEvent::Spawned { session, .. }
            | WireEvent::SpawnFailed { session, .. }
            | WireEvent::Exited { session, .. }
            | WireEvent::State { session, .. }
            | WireEvent::Unkillable { session, .. }
            | WireEvent::InputClosed { session, .. }
            | WireEvent::Ready { session, .. }
            | WireEvent::ReadyFailed { session, .. }
            | WireEvent::Unhealthy { session, .. }
            | WireEvent::Dropped { session, .. }
            | WireEvent::Demoted { session, .. } => session,
        }
    }

    /// The core's end event this is, about `session` (which the caller has checked it
    /// names); `None` for an event that is not an end.
    pub fn into_end(self, session: &Arc<str>) -> Option<Event> {
        Some(match self {
            WireEvent::Exited {
                gen,
                code,
                signal,
                cause,
                discarded,
                truncated,
                ..
            } => Event::Exited {
                session: session.clone(),
                gen,
                code,
                signal,
                cause,
                discarded,
                truncated,
            },
            WireEvent::SpawnFailed { gen, error, .. } => Event::SpawnFailed {
                session: session.clone(),
                gen,
                error: error.into(),
            },
            _ => return None,
        })
    }

    /// The generation the event is about, if it names one.
    pub fn gen(&self) -> Option<u64> {
        match self {
            WireEvent::Output(f) => Some(f.gen),
            WireEvent::Spawned { gen, .. }
            | WireEvent::SpawnFailed { gen, .. }
            | WireEvent::Exited { gen, .. }
            | WireEvent::Unkillable { gen, .. }
            | WireEvent::InputClosed { gen, .. }
            | WireEvent::Ready { gen, .. }
            | WireEvent::ReadyFailed { gen, .. }
            | WireEvent::Unhealthy { gen, .. } => Some(*gen),
            WireEvent::State { gen, .. } => *gen,
            WireEvent::Dropped { .. } | WireEvent::Demoted { .. } => None,
        }
    }

    /// How the generation ended, for a terminal event (`exited`, `spawn_failed`).
    pub fn end(&self) -> Option<End> {
        match self {
            WireEvent::Exited {
                gen,
                code,
                signal,
                cause,
                ..
            } => Some(End::Exited {
                gen: *gen,
                code: *code,
                signal: *signal,
                cause: *cause,
            }),
            WireEvent::SpawnFailed { gen, error, .. } => Some(End::SpawnFailed {
                gen: *gen,
                error: error.clone(),
            }),
            _ => None,
        }
    }

    /// The wire form of a core event, borrowing its session name. (Output is not a core
    /// event: it is framed from the bytes read, with [`OutputFrame`].)
    pub fn from_core(ev: &'a Event) -> WireEvent<'a> {
        match ev {
            Event::Spawned { session, gen, pid } => WireEvent::Spawned {
                session: Cow::Borrowed(session),
                gen: *gen,
                pid: *pid,
            },
            Event::SpawnFailed {
                session,
                gen,
                error,
            } => WireEvent::SpawnFailed {
                session: Cow::Borrowed(session),
                gen: *gen,
                error: error.clone().into(),
            },
            Event::Exited {
                session,
                gen,
                code,
                signal,
                cause,
                discarded,
                truncated,
            } => WireEvent::Exited {
                session: Cow::Borrowed(session),
                gen: *gen,
                code: *code,
                signal: *signal,
                cause: *cause,
                discarded: *discarded,
                truncated: *truncated,
            },
            Event::State {
                session,
                gen,
                state,
            } => WireEvent::State {
                session: Cow::Borrowed(session),
                gen: *gen,
                state: *state,
            },
            Event::Unkillable { session, gen } => WireEvent::Unkillable {
                session: Cow::Borrowed(session),
                gen: *gen,
            },
            Event::InputClosed { session, gen } => WireEvent::InputClosed {
                session: Cow::Borrowed(session),
                gen: *gen,
            },
            Event::Ready { session, gen } => WireEvent::Ready {
                session: Cow::Borrowed(session),
                gen: *gen,
            },
            Event::Unhealthy {
                session,
                gen,
                failures,
            } => WireEvent::Unhealthy {
                session: Cow::Borrowed(session),
                gen: *gen,
                failures: *failures,
            },
            Event::ReadyFailed {
                session,
                gen,
                reason,
            } => WireEvent::ReadyFailed {
                session: Cow::Borrowed(session),
                gen: *gen,
                reason: Cow::Borrowed(reason),
            },
        }
    }

    /// The same event, owning its strings and bytes.
    pub fn into_owned(self) -> WireEvent<'static> {
        let own = |s: Cow<'a, str>| Cow::Owned(s.into_owned());
        match self {
            WireEvent::Spawned { session, gen, pid } => WireEvent::Spawned {
                session: own(session),
                gen,
                pid,
            },
            WireEvent::SpawnFailed {
                session,
                gen,
                error,
            } => WireEvent::SpawnFailed {
                session: own(session),
                gen,
                error,
            },
            WireEvent::Output(frame) => WireEvent::Output(frame.into_owned()),
            WireEvent::Exited {
                session,
                gen,
                code,
                signal,
                cause,
                discarded,
                truncated,
            } => WireEvent::Exited {
                session: own(session),
                gen,
                code,
                signal,
                cause,
                discarded,
                truncated,
            },
            WireEvent::State {
                session,
                gen,
                state,
            } => WireEvent::State {
                session: own(session),
                gen,
                state,
            },
            WireEvent::Unkillable { session, gen } => WireEvent::Unkillable {
                session: own(session),
                gen,
            },
            WireEvent::InputClosed { session, gen } => WireEvent::InputClosed {
                session: own(session),
                gen,
            },
            WireEvent::Ready { session, gen } => WireEvent::Ready {
                session: own(session),
                gen,
            },
            WireEvent::Unhealthy {
                session,
                gen,
                failures,
            } => WireEvent::Unhealthy {
                session: own(session),
                gen,
                failures,
            },
            WireEvent::ReadyFailed {
                session,
                gen,
                reason,
            } => WireEvent::ReadyFailed {
                session: own(session),
                gen,
                reason: own(reason),
            },
            WireEvent::Dropped { session, from, to } => WireEvent::Dropped {
                session: own(session),
                from,
                to,
            },
            WireEvent::Demoted {
                session,
                pos,
                reason,
            } => WireEvent::Demoted {
                session: own(session),
                pos,
                reason,
            },
        }
    }
}
