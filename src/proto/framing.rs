//! Framing on the socket: newline-terminated JSON lines, plus output frames that carry a
//! child's raw bytes.
//!
//! - [`LineSplitter`] cuts a client's incoming byte stream into lines with bounded memory;
//!   an over-long line is reported once and skipped, and the connection goes on.
//! - [`OutputFrame`] writes an output event: a JSON header line announcing `len`, then
//!   exactly `len` raw bytes, then `\n`. Raw bytes cost nothing to encode and need no
//!   UTF-8, so output reaches clients byte-exact at pipe speed.
//! - [`FrameDecoder`] is the client side: it reassembles lines and output frames from
//!   arbitrary chunks and reads each as a response or a typed
//!   [`WireEvent`](super::event::WireEvent).

mod decode;
mod lines;
mod output;

pub use decode::{FrameDecoder, FrameError, Message};
pub use lines::{LineSplitter, LineTooLong};
pub use output::{OutputFrame, MAX_OUTPUT_PAYLOAD, OUTPUT_TRAILER};

/// The default longest line, in bytes without its newline: 1 MiB.
pub const MAX_LINE: usize = 1 << 20;
