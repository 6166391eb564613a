//! `--output-to-stdout`: each session's output cut into lines and each line prefixed
//! with the session's name, `web  | line`, the names padded to a common width as
//! foreman and overmind do, and coloured per session when standard output is a terminal.
//!
//! Lines are held per generation and stream, so two streams (or a generation and its
//! overlapping successor) never mix within a line. A partial line is held up to
//! [`PARTIAL_BYTES`], then written as a line of its own; what is left when the
//! generation ends is written then. Bytes are passed through as they are: a PTY's `\r`
//! and escape sequences included.

use std::collections::HashMap;
use std::sync::Arc;

use crate::core::Stream;

/// The longest partial line held; longer, it is written as it is.
pub const PARTIAL_BYTES: usize = 4096;

/// ANSI colours given to sessions in turn by a hash of the name: cyan, yellow, green,
/// magenta, blue, red and their bright forms.
const COLOURS: [u8; 12] = [36, 33, 32, 35, 34, 31, 96, 93, 92, 95, 94, 91];

/// Lines on their way to standard output.
#[derive(Debug)]
pub struct StdoutLines {
    colour: bool,
    /// The width names are padded to: the longest seen so far (it only grows).
    width: usize,
    /// Each stream's partial line, with its session's name.
    partial: HashMap<(u64, Stream), (Arc<str>, Vec<u8>)>,
}

impl StdoutLines {
    /// Lines with coloured prefixes if `colour`.
    pub fn new(colour: bool) -> StdoutLines {
        StdoutLines {
            colour,
            width: 0,
            partial: HashMap::new(),
        }
    }

    /// Makes names at least as wide as `session`'s line up with it.
    pub fn widen(&mut self, session: &str) {
        self.width = self.width.max(session.len());
    }

    /// Appends to `out` the whole lines that `data`, read from `stream` of generation
    /// `gen` of `session`, completes.
    pub fn feed(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        stream: Stream,
        data: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.widen(session);
        let (colour, width) = (self.colour, self.width);
        let (_, held) = self
            .partial
            .entry((gen, stream))
            .or_insert_with(|| (session.clone(), Vec::new()));
        for piece in data.split_inclusive(|&b| b == b'\n') {
            if piece.ends_with(b"\n") {
                if held.is_empty() {
                    line(out, session, width, colour, piece);
                } else {
                    held.extend_from_slice(piece);
                    line(out, session, width, colour, held);
                    held.clear();
                }
            } else {
                held.extend_from_slice(piece);
                if held.len() >= PARTIAL_BYTES {
                    held.push(b'\n');
                    line(out, session, width, colour, held);
                    held.clear();
                }
            }
        }
        if held.is_empty() {
            self.partial.remove(&(gen, stream));
        }
    }

    /// Appends to `out` what generation `gen` left unfinished, each as a line.
    pub fn end(&mut self, gen: u64, out: &mut Vec<u8>) {
        for stream in [Stream::Stdout, Stream::Stderr, Stream::Pty] {
            if let Some((session, mut held)) = self.partial.remove(&(gen, stream)) {
                held.push(b'\n');
                line(out, &session, self.width, self.colour, &held);
            }
        }
    }
}

/// Appends `NAME | text` (`text` ends with its newline).
fn line(out: &mut Vec<u8>, session: &str, width: usize, colour: bool, text: &[u8]) {
    if colour {
        let c = COLOURS[hash(session) % COLOURS.len()];
        out.extend_from_slice(format!("\x1b[{c}m{session:<width$} |\x1b[0m ").as_bytes());
    } else {
        out.extend_from_slice(format!("{session:<width$} | ").as_bytes());
    }
    out.extend_from_slice(text);
}

/// FNV-1a: the same name gets the same colour in every run.
fn hash(s: &str) -> usize {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(lines: &mut StdoutLines, session: &str, gen: u64, data: &[u8]) -> String {
        let mut out = Vec::new();
        lines.feed(&session.into(), gen, Stream::Stdout, data, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_are_prefixed_and_partial_lines_joined() {
        let mut l = StdoutLines::new(false);
        l.widen("web-server");
        assert_eq!(fed(&mut l, "db", 1, b"one\ntw"), "db         | one\n");
        assert_eq!(fed(&mut l, "web-server", 2, b"x\n"), "web-server | x\n");
        assert_eq!(fed(&mut l, "db", 1, b"o\nthr"), "db         | two\n");
        let mut out = Vec::new();
        l.end(1, &mut out);
        assert_eq!(out, b"db         | thr\n");
        assert!(l.partial.is_empty());
    }

    #[test]
    fn a_long_partial_line_is_written_at_the_bound() {
        let mut l = StdoutLines::new(false);
        let long = vec![b'a'; PARTIAL_BYTES + 10];
        let out = fed(&mut l, "s", 1, &long);
        assert_eq!(out.len(), "s | ".len() + PARTIAL_BYTES + 10 + 1);
        assert!(l.partial.is_empty());
    }

    #[test]
    fn colour_only_when_asked() {
        let mut l = StdoutLines::new(true);
        let out = fed(&mut l, "web", 1, b"hi\n");
        assert!(
            out.starts_with("\x1b[") && out.ends_with("\x1b[0m hi\n"),
            "{out:?}"
        );
    }
}
