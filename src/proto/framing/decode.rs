//! The client-side decoder: responses, events and output frames from arbitrary chunks.

use std::fmt;

use super::output::{OutputFrame, MAX_OUTPUT_PAYLOAD};
use super::MAX_LINE;
use crate::proto::event::{EventError, WireEvent};
use crate::proto::json::{parse_with, FieldError, Limits, Object, ParseError, Value};

/// One message from the daemon.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A response (an object with `ok`), matched to its request by `id`.
    Response(Object),
    /// An event; output arrives as [`WireEvent::Output`], its payload byte-exact.
    Event(WireEvent<'static>),
}

/// Why decoding failed. [`FrameError::BadJson`], [`FrameError::BadEvent`] and
/// [`FrameError::NotAMessage`] concern one line, which was skipped, and leave the decoder
/// usable; every other error means the stream can no longer be followed, and the decoder
/// yields nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A line did not parse; it was skipped.
    BadJson(ParseError),
    /// An event line could not be decoded; it was skipped.
    BadEvent(EventError),
    /// A line that is neither a response nor an event (the text says what it is); it was
    /// skipped.
    NotAMessage(&'static str),
    /// No newline within the line limit.
    LineTooLong {
        /// The limit in force.
        limit: usize,
    },
    /// An output header lacks a usable field, so its payload cannot be delimited.
    BadHeader(FieldError),
    /// An output header announces more bytes than allowed.
    PayloadTooLong {
        /// The announced length.
        len: u64,
        /// The limit in force.
        limit: usize,
    },
    /// The byte after a payload is not `\n`.
    MissingTrailer,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadJson(e) => write!(f, "invalid JSON line: {e}"),
            FrameError::BadEvent(e) => write!(f, "bad event: {e}"),
            FrameError::NotAMessage(what) => {
                write!(f, "a line that is neither a response nor an event: {what}")
            }
            FrameError::LineTooLong { limit } => write!(f, "line longer than {limit} bytes"),
            FrameError::BadHeader(e) => write!(f, "bad output header: {e}"),
            FrameError::PayloadTooLong { len, limit } => {
                write!(f, "output frame of {len} bytes exceeds {limit}")
            }
            FrameError::MissingTrailer => f.write_str("output payload not followed by newline"),
        }
    }
}

impl std::error::Error for FrameError {}

#[derive(Debug)]
enum State {
    Line,
    Payload {
        frame: OutputFrame<'static>,
        len: usize,
    },
    Failed,
}

/// Reassembles [`Message`]s from the daemon's byte stream, fed in chunks of any size.
///
/// # Examples
///
/// ```
/// use genward::proto::event::WireEvent;
/// use genward::proto::framing::{FrameDecoder, Message};
///
/// let mut d = FrameDecoder::new();
/// d.feed(b"{\"event\":\"output\",\"session\":\"s\",\"gen\":1,\"stream\":\"pty\",");
/// assert!(d.next_message().is_none());
/// d.feed(b"\"offset\":0,\"pos\":0,\"len\":2}\n\xff\xfe\n");
/// let Some(Ok(Message::Event(WireEvent::Output(frame)))) = d.next_message() else { panic!() };
/// assert_eq!(&frame.data[..], b"\xff\xfe");
/// ```
#[derive(Debug)]
pub struct FrameDecoder {
    limits: Limits,
    max_payload: usize,
    buf: Vec<u8>,
    start: usize,
    state: State,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    /// A decoder with the protocol's limits ([`MAX_LINE`], [`MAX_OUTPUT_PAYLOAD`]).
    pub fn new() -> Self {
        FrameDecoder::with_limits(MAX_LINE, MAX_OUTPUT_PAYLOAD)
    }

    /// A decoder accepting lines up to `max_line` bytes and payloads up to `max_payload`.
    ///
    /// Any line within `max_line` is read whatever number of values it holds: every value
    /// takes at least a byte, so the line limit already bounds the parsed tree, and a
    /// separate count would refuse answers the daemon may send (a `list` of 4,000
    /// sessions holds more than the parser's default 65,536 values).
    pub fn with_limits(max_line: usize, max_payload: usize) -> Self {
        FrameDecoder {
            limits: Limits {
                max_len: max_line,
                max_elements: max_line,
                ..Limits::DEFAULT
            },
            max_payload,
            buf: Vec::new(),
            start: 0,
            state: State::Line,
        }
    }

    /// Appends received bytes.
    pub fn feed(&mut self, chunk: &[u8]) {
        if matches!(self.state, State::Failed) {
            return;
        }
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes received but not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether a fatal error stopped the decoder.
    pub fn is_failed(&self) -> bool {
        matches!(self.state, State::Failed)
    }

    /// The next complete message, `None` if more bytes are needed (or after a fatal error,
    /// which is returned once).
    pub fn next_message(&mut self) -> Option<Result<Message, FrameError>> {
        loop {
            match std::mem::replace(&mut self.state, State::Line) {
                State::Failed => {
                    self.state = State::Failed;
                    return None;
                }
                State::Payload { mut frame, len } => {
                    if self.buffered() <= len {
                        self.state = State::Payload { frame, len };
                        return None;
                    }
                    if self.buf[self.start + len] != b'\n' {
                        return Some(Err(self.fail(FrameError::MissingTrailer)));
                    }
                    frame.data = self.buf[self.start..self.start + len].to_vec().into();
                    self.start += len + 1;
                    return Some(Ok(Message::Event(WireEvent::Output(frame))));
                }
                State::Line => {
                    let pending = &self.buf[self.start..];
                    let Some(nl) = pending.iter().position(|&b| b == b'\n') else {
                        if pending.len() > self.limits.max_len {
                            let limit = self.limits.max_len;
                            return Some(Err(self.fail(FrameError::LineTooLong { limit })));
                        }
                        return None;
                    };
                    if nl > self.limits.max_len {
                        let limit = self.limits.max_len;
                        return Some(Err(self.fail(FrameError::LineTooLong { limit })));
                    }
                    let parsed = parse_with(&pending[..nl], &self.limits);
                    self.start += nl + 1;
                    let value = match parsed {
                        Ok(v) => v,
                        Err(e) => return Some(Err(FrameError::BadJson(e))),
                    };
                    let obj = match value {
                        Value::Object(o) => o,
                        _ => return Some(Err(FrameError::NotAMessage("not an object"))),
                    };
                    let header = match obj.get("event") {
                        Some(Value::Str(name)) if name == "output" => {
                            OutputFrame::read_header(&obj)
                        }
                        Some(_) => {
                            let event = WireEvent::decode(&obj);
                            return Some(event.map(Message::Event).map_err(FrameError::BadEvent));
                        }
                        None if obj.get("ok").is_some() => return Some(Ok(Message::Response(obj))),
                        None => {
                            return Some(Err(FrameError::NotAMessage(
                                "an object without `event` or `ok`",
                            )))
                        }
                    };
                    let (frame, len) = match header {
                        Ok(h) => h,
                        Err(e) => return Some(Err(self.fail(FrameError::BadHeader(e)))),
                    };
                    match usize::try_from(len) {
                        Ok(len) if len <= self.max_payload => {
                            self.state = State::Payload { frame, len };
                        }
                        _ => {
                            let limit = self.max_payload;
                            return Some(Err(self.fail(FrameError::PayloadTooLong { len, limit })));
                        }
                    }
                }
            }
        }
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.state = State::Failed;
        self.buf = Vec::new();
        self.start = 0;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Stream;

    fn frame(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let f = OutputFrame {
            session: "a".into(),
            gen: 2,
            stream: Stream::Stderr,
            offset: 7,
            pos: 70,
            t: None,
            data: data.into(),
        };
        f.write(&mut out);
        out
    }

    #[test]
    fn a_bad_line_is_skipped_and_decoding_goes_on() {
        let mut d = FrameDecoder::new();
        d.feed(b"{oops}\n[1]\n{\"id\":2}\n{\"event\":\"spawned\",\"session\":\"a\"}\n");
        d.feed(b"{\"event\":\"later\"}\n{\"id\":1,\"ok\":true}\n");
        assert!(matches!(
            d.next_message(),
            Some(Err(FrameError::BadJson(_)))
        ));
        assert_eq!(
            d.next_message(),
            Some(Err(FrameError::NotAMessage("not an object")))
        );
        assert!(matches!(
            d.next_message(),
            Some(Err(FrameError::NotAMessage(_)))
        ));
        let Some(Err(e)) = d.next_message() else {
            panic!("a bad event decoded")
        };
        assert_eq!(
            e.to_string(),
            "bad event: `spawned` event: field `gen`: missing"
        );
        let Some(Err(FrameError::BadEvent(EventError::Unknown(name)))) = d.next_message() else {
            panic!("an unknown event decoded")
        };
        assert_eq!(name, "later");
        let Some(Ok(Message::Response(obj))) = d.next_message() else {
            panic!("no message")
        };
        assert_eq!(obj.get("id"), Some(&Value::from(1u64)));
        assert!(d.next_message().is_none());
        assert!(!d.is_failed());
    }

    #[test]
    fn a_wrong_trailer_is_fatal() {
        let mut bytes = frame(b"xy");
        *bytes.last_mut().unwrap() = b'!';
        let mut d = FrameDecoder::new();
        d.feed(&bytes);
        d.feed(b"{}\n");
        assert_eq!(d.next_message(), Some(Err(FrameError::MissingTrailer)));
        assert_eq!(d.next_message(), None);
        assert!(d.is_failed());
    }

    #[test]
    fn header_errors_and_limits_are_fatal() {
        let mut d = FrameDecoder::new();
        d.feed(b"{\"event\":\"output\",\"session\":\"s\",\"gen\":1,\"stream\":\"stdout\",\"offset\":0,\"pos\":0}\n");
        let Some(Err(FrameError::BadHeader(e))) = d.next_message() else {
            panic!()
        };
        assert_eq!(e.to_string(), "field `len`: missing");

        let mut d = FrameDecoder::with_limits(1024, 4);
        d.feed(&frame(b"12345"));
        assert_eq!(
            d.next_message(),
            Some(Err(FrameError::PayloadTooLong { len: 5, limit: 4 }))
        );

        let mut d = FrameDecoder::with_limits(8, 4);
        d.feed(b"[1,2,3,4,5]");
        assert_eq!(
            d.next_message(),
            Some(Err(FrameError::LineTooLong { limit: 8 }))
        );
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn an_empty_payload_is_a_frame() {
        let mut d = FrameDecoder::new();
        d.feed(&frame(b""));
        let Some(Ok(Message::Event(WireEvent::Output(frame)))) = d.next_message() else {
            panic!()
        };
        assert!(frame.data.is_empty());
        assert_eq!(
            (frame.gen, frame.offset, frame.pos, frame.stream),
            (2, 7, 70, Stream::Stderr)
        );
    }
}
