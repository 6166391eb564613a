//! Requests: the typed operations a client asks for, decoded from a request's arguments.
//!
//! Decoding is strict: unknown fields, wrong types and out-of-range values are rejected
//! with a message naming the field, and nothing is executed.

mod decode;
mod fields;
mod spec;

#[cfg(test)]
mod tests;

pub use decode::decode;

use crate::core::Command;

/// What a subscription covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One session.
    Session(String),
    /// Every session, present and future.
    All,
}

/// Where a new subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Only what happens from now on.
    Now,
    /// At least the last `n` retained output bytes (and the events among them).
    Tail(u64),
    /// From a session-wide output position seen earlier (`pos` of an output event).
    Pos(u64),
    /// From the first retained record about generation `gen` or a newer one.
    Gen(u64),
    /// Everything still retained.
    Start,
}

/// A decoded operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Handled by the core.
    Core(Command),
    /// Protocol version, capabilities, daemon identity.
    Hello,
    /// Start receiving events.
    Subscribe { target: Target, replay: Replay },
    /// Stop receiving events.
    Unsubscribe { target: Target },
    /// Answer once generation `gen` (default: the current one) has ended.
    Wait { session: String, gen: Option<u64> },
    /// Stop every session and exit.
    Shutdown,
}
