//! Requests: the typed operations a client asks for, decoded strictly from a request's
//! arguments and encoded back into request lines.
//!
//! The daemon decodes with [`decode`]; clients (the CLI, tests, benchmarks) build an
//! [`Op`] and write it with [`encode`], so both sides agree on every field by
//! construction instead of by two hand-written copies of the format. A test round-trips
//! every operation, a spawn with every option included.
//!
//! Decoding is strict: unknown fields, wrong types and out-of-range values are rejected
//! with a message naming the field, and nothing is executed.

mod decode;
mod encode;
mod fields;
mod log_file;
mod ready;
mod run_as;
mod spec;

#[cfg(test)]
mod round_trip;
#[cfg(test)]
mod tests;

pub use decode::decode;
pub use encode::encode;

use std::time::Duration;

use crate::core::{Command, OnBusy, Spec};
use crate::proto::error::ProtoError;
use crate::proto::json::{FieldError, ObjWriter, Object};

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

/// The terms of a lossless subscription (`"lossless": true`): the daemon stops reading
/// the session's output while this subscriber's queue is full, so the child waits on its
/// pipe instead of the subscriber losing output; see docs/protocol.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lossless {
    /// How long the subscriber may take nothing while output waits for it before it is
    /// demoted to an ordinary subscription (so a dead reader cannot stop a session).
    pub demote_after: Duration,
}

impl Lossless {
    /// The bound when the request names none: long enough for a log shipper's network
    /// hiccup, short enough that a hung reader does not stall a session for long.
    pub const DEFAULT_DEMOTE_AFTER: Duration = Duration::from_secs(30);
    /// The longest bound a request may ask for.
    pub const MAX_DEMOTE_AFTER: Duration = Duration::from_secs(24 * 3600);
}

impl Default for Lossless {
    fn default() -> Self {
        Lossless {
            demote_after: Self::DEFAULT_DEMOTE_AFTER,
        }
    }
}

/// What a request asks for: decoded by the daemon, built and encoded by clients.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Handled by the core (`shutdown` too: the core decides its stages).
    Core(Command),
    /// A `write` answered only if it fails (`"quiet": true`): what an attached terminal
    /// sends per keystroke, where an answer per key would cost the daemon a write and the
    /// client a wake-up each, and only a failure (`stale_generation`, `input_closed`) is
    /// news. Always a [`Command::Write`].
    QuietWrite(Command),
    /// A `resize` from a terminal attached to the generation (`"attached": true`): its
    /// size for as long as its connection stays. When the terminal whose size the
    /// generation was given last goes, the daemon gives it the size of the terminal
    /// attached most recently before it, as tmux's `window-size latest`. Always a
    /// [`Command::Resize`].
    AttachedResize(Command),
    /// Protocol version, capabilities, daemon identity.
    Hello,
    /// One page of `list`: up to `limit` sessions (at most
    /// [`PAGE_MAX`](crate::proto::list::PAGE_MAX)) whose names come after `after`, in
    /// name order. The classic `list`, every session at once, is `Op::Core(Command::List)`.
    ListPage { after: Option<String>, limit: usize },
    /// Start receiving events.
    Subscribe {
        target: Target,
        replay: Replay,
        /// `Some` for a lossless subscription.
        lossless: Option<Lossless>,
    },
    /// Stop receiving events.
    Unsubscribe { target: Target },
    /// Answer once generation `gen` (default: the current one) has ended.
    Wait { session: String, gen: Option<u64> },
    /// Answer once generation `gen` (default: the current one) is ready, its readiness
    /// failed, or it ended (`"op":"wait","for":"ready"`).
    WaitReady { session: String, gen: Option<u64> },
    /// Replace the daemon's program in place (`binary`: another program than the one it
    /// was started as), keeping every session, process and connection.
    Upgrade { binary: Option<String> },
    /// Read the daemon's configuration again and bring its sessions in line with it
    /// (`dry_run`: only say what that would do); answered with the plan
    /// ([`crate::proto::reload`]).
    Reload { dry_run: bool },
}

/// Most bytes a spec may take encoded (its `spawn` members, as `get` shows them): a spawn
/// or a configured session beyond is refused with `limit`, so that an answer carrying a
/// spec, its recent ends and the rest of the session always fits in one line (1 MiB).
/// The kernel's own bound on one argument or environment string is 128 KiB.
pub const MAX_SPEC_BYTES: usize = 256 << 10;

/// Appends `spec` as a JSON object of its own, spelled exactly as a `spawn` request's
/// members (without `session` and `on_busy`). The state directory keeps each session's
/// spec this way, so the spec's format has one home. Fails, naming the field, for what
/// the wire cannot carry (see [`encode`]); `out` is unchanged then.
pub fn write_spec_object(spec: &Spec, out: &mut Vec<u8>) -> Result<(), FieldError> {
    let mut own = Vec::new();
    let mut w = ObjWriter::new(&mut own);
    spec::write_spec(&mut w, spec, OnBusy::Replace)?;
    w.finish();
    out.extend_from_slice(&own);
    Ok(())
}

/// Decodes one configured session: exactly the members of a `spawn` request but
/// `session` (the name comes from where it is configured), `on_busy` included, as strictly
/// as a request. A member added to `spawn` is a config member by the same stroke.
pub fn decode_config_entry(obj: &Object) -> Result<(Spec, OnBusy), ProtoError> {
    let allowed: Vec<&str> = spec::SPAWN_FIELDS
        .iter()
        .copied()
        .filter(|f| *f != "session")
        .collect();
    obj.check_fields(&allowed)?;
    Ok((spec::spec(obj)?, spec::on_busy(obj)?))
}

/// Decodes an object written by [`write_spec_object`] as strictly as a `spawn` request:
/// an unknown member, a wrong type or a bad value is an error naming the field.
pub fn decode_spec_object(obj: &Object) -> Result<Spec, ProtoError> {
    let allowed: Vec<&str> = spec::SPAWN_FIELDS
        .iter()
        .copied()
        .filter(|f| !matches!(*f, "session" | "on_busy"))
        .collect();
    obj.check_fields(&allowed)?;
    spec::spec(obj)
}
