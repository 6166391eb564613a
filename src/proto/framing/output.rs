//! Output frames: a JSON header line announcing `len`, then `len` raw bytes, then `\n`.
//!
//! ```text
//! {"event":"output","session":"s","gen":3,"stream":"stdout","offset":1024,"pos":8192,"t":1764650000123,"len":5}\n
//! <5 raw bytes>\n
//! ```
//!
//! `offset` counts within the generation's stream, so a client can see gaps; `pos` counts
//! within the session's whole output, so a client can resume a subscription from it. The
//! trailing `\n` keeps the stream line-oriented for tools that skip frames and lets a
//! decoder detect desynchronisation.
//!
//! This is the only writer and the only header reader of output frames: the daemon, the
//! client decoder, the fuzzer and the benchmarks all go through [`OutputFrame`].

use std::borrow::Cow;

use crate::core::Stream;
use crate::proto::json::{FieldError, ObjWriter, Object};
use crate::proto::names::read_name;

/// The largest payload one output frame may carry; writers split larger output.
pub const MAX_OUTPUT_PAYLOAD: usize = 1 << 20;

/// The byte that follows every payload.
pub const OUTPUT_TRAILER: &[u8] = b"\n";

/// One output frame: which bytes of which generation, and the bytes.
///
/// Borrowed when written (the daemon frames bytes it already holds, without a copy),
/// owned when decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFrame<'a> {
    /// The session name.
    pub session: Cow<'a, str>,
    /// The generation that produced the bytes.
    pub gen: u64,
    /// The stream they were read from.
    pub stream: Stream,
    /// Offset of the first payload byte within that generation's stream.
    pub offset: u64,
    /// Position of the first payload byte within the session's whole output.
    pub pos: u64,
    /// When the daemon read the bytes, in Unix milliseconds (`t`); absent in frames of
    /// daemons that did not record it.
    pub t: Option<u64>,
    /// The payload, byte-exact.
    pub data: Cow<'a, [u8]>,
}

impl OutputFrame<'_> {
    /// Appends the header line (with its `\n`) announcing `data.len()` bytes. The caller
    /// sends the payload and [`OUTPUT_TRAILER`] next, e.g. with one vectored write.
    pub fn write_header(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.str("event", "output")
            .str("session", &self.session)
            .u64("gen", self.gen)
            .str("stream", self.stream.as_str())
            .u64("offset", self.offset)
            .u64("pos", self.pos);
        if let Some(t) = self.t {
            w.u64("t", t);
        }
        w.u64("len", self.data.len() as u64);
        w.finish();
        out.push(b'\n');
    }

    /// Appends the whole frame: header line, payload, trailer.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.reserve(self.data.len() + 128);
        self.write_header(out);
        out.extend_from_slice(&self.data);
        out.extend_from_slice(OUTPUT_TRAILER);
    }

    /// The same frame, owning its session name and payload.
    pub fn into_owned(self) -> OutputFrame<'static> {
        OutputFrame {
            session: Cow::Owned(self.session.into_owned()),
            data: Cow::Owned(self.data.into_owned()),
            ..self
        }
    }
}

impl OutputFrame<'static> {
    /// Reads a header from an `"event":"output"` object: the frame with an empty payload,
    /// and the `len` its payload will have. Members it does not know are ignored, so the
    /// daemon may add some later.
    pub(crate) fn read_header(obj: &Object) -> Result<(OutputFrame<'static>, u64), FieldError> {
        let frame = OutputFrame {
            session: Cow::Owned(obj.req_str("session")?.to_owned()),
            gen: obj.req_u64("gen")?,
            stream: read_name(obj, "stream")?,
            offset: obj.req_u64("offset")?,
            pos: obj.req_u64("pos")?,
            t: obj.opt_u64("t")?,
            data: Cow::Owned(Vec::new()),
        };
        Ok((frame, obj.req_u64("len")?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    #[test]
    fn frame_bytes_are_exact() {
        let mut out = Vec::new();
        let frame = OutputFrame {
            session: "s".into(),
            gen: 3,
            stream: Stream::Stdout,
            offset: 1024,
            pos: 8192,
            t: None,
            data: (&b"\xff\n\0ab"[..]).into(),
        };
        frame.write(&mut out);
        let expected: &[u8] = b"{\"event\":\"output\",\"session\":\"s\",\"gen\":3,\
            \"stream\":\"stdout\",\"offset\":1024,\"pos\":8192,\"len\":5}\n\xff\n\0ab\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_frame_with_its_time_reads_back_with_it() {
        let frame = OutputFrame {
            session: "s".into(),
            gen: 1,
            stream: Stream::Stderr,
            offset: 0,
            pos: 0,
            t: Some(1_764_650_000_123),
            data: (&b"x"[..]).into(),
        };
        let mut out = Vec::new();
        frame.write_header(&mut out);
        assert!(
            out.ends_with(b",\"t\":1764650000123,\"len\":1}\n"),
            "{out:?}"
        );
        let obj = parse(&out[..out.len() - 1]).unwrap();
        let (back, len) = OutputFrame::read_header(obj.as_object().unwrap()).unwrap();
        assert_eq!((back.t, len), (Some(1_764_650_000_123), 1));
    }

    #[test]
    fn a_header_reads_back_as_the_frame_without_its_payload() {
        let frame = OutputFrame {
            session: "a.b-c_1".into(),
            gen: u64::MAX,
            stream: Stream::Pty,
            offset: u64::MAX - 1,
            pos: 7,
            t: None,
            data: (&b"xyz"[..]).into(),
        };
        let mut out = Vec::new();
        frame.write_header(&mut out);
        let v = parse(&out[..out.len() - 1]).unwrap();
        let (read, len) = OutputFrame::read_header(v.as_object().unwrap()).unwrap();
        assert_eq!(len, 3);
        assert_eq!(
            read,
            OutputFrame {
                data: Vec::new().into(),
                ..frame.into_owned()
            }
        );
    }
}
