//! The wire protocol: JSON lines over a Unix stream socket, plus raw output frames.
//!
//! - [`json`]: the strict, bounded JSON codec (no serde at run time).
//! - [`envelope`]: request `{"id", "op", ...}` and the success response line.
//! - [`error`]: stable error codes and the error response line.
//! - [`encode`]: what the daemon sends: replies, snapshots, events and output frames.
//! - [`request`]: the typed operations, decoded by the daemon and encoded by clients.
//! - [`framing`]: the bounded line splitter for requests and the output frames that carry
//!   a child's raw bytes to clients, with the client-side decoder.
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
pub mod framing;
pub mod json;
pub mod names;
pub mod request;
pub mod signal_name;
