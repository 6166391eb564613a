//! The wire protocol: JSON lines over a Unix stream socket, plus raw output frames.
//!
//! - [`json`]: the strict, bounded JSON codec (no serde at run time).
//! - [`envelope`]: request `{"id", "op", ...}` and the success response line.
//! - [`error`]: stable error codes and the error response line.
//! - [`framing`]: the bounded line splitter for requests and the output frames that carry
//!   a child's raw bytes to clients, with the client-side decoder.
//! - [`base64`]: strict base64 for binary request arguments.
//!
//! The format itself is specified in `docs/protocol.md`.

pub mod base64;
pub mod envelope;
pub mod error;
pub mod framing;
pub mod json;
