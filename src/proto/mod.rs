//! The wire protocol: JSON lines over a Unix stream socket, plus raw output frames.
//!
//! - [`json`]: the strict, bounded JSON codec (no serde at run time).
//! - [`envelope`]: request `{"id", "op", ...}` and the success response line.
//! - [`error`]: stable error codes and the error response line.
//! - [`request`]: the typed operations, decoded by the daemon and encoded by clients.
//! - [`event`]: the typed events, one encoder and one decoder.
//! - [`snapshot`]: sessions and generations as `list` and `get` answer them.
//! - [`list`]: the `list` answers, classic and paged, each bounded.
//! - [`encode`]: the daemon's entry points: replies, events and output frames.
//! - [`framing`]: the bounded line splitter for requests, the output frames that carry a
//!   child's raw bytes to clients, and the client-side decoder of everything the daemon
//!   sends.
//! - [`reload`]: the answer to `reload`, the plan, both ways.
//! - [`base64`]: strict base64 for binary request arguments.
//! - [`names`]: the wire names of the core's enums, read back.
//! - [`duration`], [`signal_name`]: how durations and signals are spelled, on the wire and
//!   on the command line alike.
//!
//! The format itself is specified in `docs/protocol.md`.

pub mod base64;
pub mod duration;
pub mod encode;
pub mod envelope;
pub mod error;
pub mod event;
pub mod framing;
pub mod json;
pub mod list;
pub mod names;
pub mod reload;
pub mod request;
pub mod signal_name;
pub mod snapshot;
