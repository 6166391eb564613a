//! Output frames: a JSON header line announcing `len`, then `len` raw bytes, then `\n`.
//!
//! ```text
//! {"event":"output","session":"s","gen":3,"stream":"stdout","offset":1024,"len":5}\n
//! <5 raw bytes>\n
//! ```
//!
//! `offset` is the position of the first byte in the generation's stream, so a client
//! can detect gaps and resume. The trailing `\n` keeps the stream line-oriented for tools
//! that skip frames and lets a decoder detect desynchronisation.

use super::super::json::FieldError;
use super::super::json::{ObjWriter, Object};

/// The largest payload one output frame may carry; writers split larger output.
pub const MAX_OUTPUT_PAYLOAD: usize = 1 << 20;

/// The byte that follows every payload.
pub const OUTPUT_TRAILER: &[u8] = b"\n";

/// Which of a generation's output streams the bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    /// The child's standard output (pipes mode).
    Stdout,
    /// The child's standard error (pipes mode, when kept separate).
    Stderr,
    /// The terminal (PTY mode), where both are one stream.
    Pty,
}

impl OutputStream {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
            OutputStream::Pty => "pty",
        }
    }

    /// The stream for a wire name.
    pub fn from_wire(s: &str) -> Option<OutputStream> {
        match s {
            "stdout" => Some(OutputStream::Stdout),
            "stderr" => Some(OutputStream::Stderr),
            "pty" => Some(OutputStream::Pty),
            _ => None,
        }
    }
}

/// What an output frame's header says about its payload (borrowed, for writing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputFrame<'a> {
    /// The session name.
    pub session: &'a str,
    /// The generation that produced the bytes.
    pub gen: u64,
    /// The stream they were read from.
    pub stream: OutputStream,
    /// Offset of the first payload byte within that generation's stream.
    pub offset: u64,
}

/// An output frame's header as a client decoded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputHeader {
    /// The session name.
    pub session: String,
    /// The generation that produced the bytes.
    pub gen: u64,
    /// The stream they were read from.
    pub stream: OutputStream,
    /// Offset of the first payload byte within that generation's stream.
    pub offset: u64,
}

impl OutputHeader {
    /// Reads a header from an `"event":"output"` object, returning it with its `len`.
    /// Members it does not know are ignored, so the daemon may add some later.
    pub(crate) fn from_object(obj: &Object) -> Result<(OutputHeader, u64), FieldError> {
        let stream = obj.req_str("stream")?;
        let stream = OutputStream::from_wire(stream)
            .ok_or_else(|| FieldError::invalid("stream", format!("unknown stream `{stream}`")))?;
        let header = OutputHeader {
            session: obj.req_str("session")?.to_owned(),
            gen: obj.req_u64("gen")?,
            stream,
            offset: obj.req_u64("offset")?,
        };
        Ok((header, obj.req_u64("len")?))
    }
}

/// Appends the header line (with its `\n`) for a payload of `len` bytes. The caller
/// sends the payload and [`OUTPUT_TRAILER`] next, e.g. with one vectored write.
pub fn write_output_header(frame: &OutputFrame<'_>, len: usize, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.str("event", "output")
        .str("session", frame.session)
        .u64("gen", frame.gen)
        .str("stream", frame.stream.as_str())
        .u64("offset", frame.offset)
        .u64("len", len as u64);
    w.finish();
    out.push(b'\n');
}

/// Appends a whole frame: header line, `data`, trailer.
pub fn write_output_frame(frame: &OutputFrame<'_>, data: &[u8], out: &mut Vec<u8>) {
    write_output_header(frame, data.len(), out);
    out.extend_from_slice(data);
    out.extend_from_slice(OUTPUT_TRAILER);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_bytes_are_exact() {
        let mut out = Vec::new();
        let frame = OutputFrame {
            session: "s",
            gen: 3,
            stream: OutputStream::Stdout,
            offset: 1024,
        };
        write_output_frame(&frame, b"\xff\n\0ab", &mut out);
        let expected: &[u8] = b"{\"event\":\"output\",\"session\":\"s\",\"gen\":3,\
            \"stream\":\"stdout\",\"offset\":1024,\"len\":5}\n\xff\n\0ab\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn stream_names_round_trip() {
        for s in [
            OutputStream::Stdout,
            OutputStream::Stderr,
            OutputStream::Pty,
        ] {
            assert_eq!(OutputStream::from_wire(s.as_str()), Some(s));
        }
        assert_eq!(OutputStream::from_wire("tty"), None);
    }
}
