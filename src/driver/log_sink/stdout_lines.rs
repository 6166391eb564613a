//! `--output-to-stdout`: each session's output cut into lines and each line prefixed
//! with the session's name, `web  | line`, the names padded to a common width as
//! foreman and overmind do, and coloured per session when standard output is a terminal.
//!
//! Lines are held per generation and stream, so two streams (or a generation and its
//! overlapping successor) never mix within a line. No line written is longer than
//! [`PARTIAL_BYTES`] (its newline aside): a longer one is cut into pieces of at most that
//! size, each written as a line of its own, wherever the reads that brought it ended — so
//! a partial line is held up to that size, and what is left when the generation ends is
//! written then. A cut falls before a UTF-8 character rather than through it.
//!
//! Bytes are passed through as they are, a PTY's escape sequences included, with one
//! exception: the `\r` a terminal puts before each `\n` (its `onlcr`) is taken off a PTY
//! session's lines, which line-oriented collectors (the journal, `docker logs`) would
//! otherwise show as `^M`. Its log file and subscribers get the bytes unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use crate::core::Stream;

/// The longest line written (its newline aside); a longer one is cut into pieces.
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
    /// `gen` of `session`, completes, and the [`PARTIAL_BYTES`] pieces of longer ones.
    pub fn feed(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        stream: Stream,
        data: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.widen(session);
        let prefix = Prefix {
            session,
            width: self.width,
            colour: self.colour,
        };
        let pty = stream == Stream::Pty;
        let (_, held) = self
            .partial
            .entry((gen, stream))
            .or_insert_with(|| (session.clone(), Vec::new()));
        for piece in data.split_inclusive(|&b| b == b'\n') {
            if let Some(text) = piece.strip_suffix(b"\n") {
                if held.is_empty() {
                    prefix.lines(out, line_text(text, pty));
                } else {
                    held.extend_from_slice(text);
                    prefix.lines(out, line_text(held, pty));
                    held.clear();
                }
            } else {
                held.extend_from_slice(piece);
                // A PTY's `\r` last may be the start of its line end: held, not cut off.
                let keep = usize::from(pty && held.ends_with(b"\r"));
                let mut at = 0;
                while held.len() - keep - at > PARTIAL_BYTES {
                    let cut = cut_at(&held[at..]);
                    prefix.line(out, &held[at..at + cut]);
                    at += cut;
                }
                held.drain(..at);
            }
        }
        if held.is_empty() {
            self.partial.remove(&(gen, stream));
        }
    }

    /// Appends to `out` what generation `gen` left unfinished, each as a line.
    pub fn end(&mut self, gen: u64, out: &mut Vec<u8>) {
        for stream in [Stream::Stdout, Stream::Stderr, Stream::Pty] {
            if let Some((session, held)) = self.partial.remove(&(gen, stream)) {
                let prefix = Prefix {
                    session: &session,
                    width: self.width,
                    colour: self.colour,
                };
                prefix.lines(out, &held);
            }
        }
    }
}

/// A line's text without its line end: a PTY's `\r` before the `\n` goes too.
fn line_text(text: &[u8], pty: bool) -> &[u8] {
    match text.strip_suffix(b"\r") {
        Some(text) if pty => text,
        _ => text,
    }
}

/// Where a text longer than [`PARTIAL_BYTES`] is cut: at the bound, or up to 3 bytes
/// before it so as not to split a UTF-8 character (when the bytes there look like one).
fn cut_at(text: &[u8]) -> usize {
    if text.len() <= PARTIAL_BYTES {
        return text.len();
    }
    let continuation = |b: u8| b & 0xC0 == 0x80;
    (PARTIAL_BYTES - 3..=PARTIAL_BYTES)
        .rev()
        .find(|&at| !continuation(text[at]))
        .unwrap_or(PARTIAL_BYTES)
}

/// A session's line prefix.
struct Prefix<'a> {
    session: &'a str,
    width: usize,
    colour: bool,
}

impl Prefix<'_> {
    /// Appends `text` (no line end) as lines of at most [`PARTIAL_BYTES`].
    fn lines(&self, out: &mut Vec<u8>, mut text: &[u8]) {
        loop {
            let cut = cut_at(text);
            self.line(out, &text[..cut]);
            text = &text[cut..];
            if text.is_empty() {
                return;
            }
        }
    }

    /// Appends `NAME | text` and a newline.
    fn line(&self, out: &mut Vec<u8>, text: &[u8]) {
        let (session, width) = (self.session, self.width);
        if self.colour {
            let c = COLOURS[hash(session) % COLOURS.len()];
            out.extend_from_slice(format!("\x1b[{c}m{session:<width$} |\x1b[0m ").as_bytes());
        } else {
            out.extend_from_slice(format!("{session:<width$} | ").as_bytes());
        }
        out.extend_from_slice(text);
        out.push(b'\n');
    }
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

    fn fed_on(lines: &mut StdoutLines, stream: Stream, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        lines.feed(&"s".into(), 1, stream, data, &mut out);
        out
    }

    /// Each line's text, without the prefix `s | ` and the newline.
    fn texts(out: &[u8]) -> Vec<&[u8]> {
        assert!(out.is_empty() || out.ends_with(b"\n"), "{out:?}");
        out.split_inclusive(|&b| b == b'\n')
            .map(|l| {
                let l = l.strip_prefix(b"s | ").expect("prefixed");
                &l[..l.len() - 1]
            })
            .collect()
    }

    #[test]
    fn a_long_partial_line_is_cut_at_the_bound() {
        let mut l = StdoutLines::new(false);
        let out = fed_on(&mut l, Stream::Stdout, &[b'a'; 2 * PARTIAL_BYTES + 10]);
        let lens: Vec<usize> = texts(&out).iter().map(|t| t.len()).collect();
        assert_eq!(lens, [PARTIAL_BYTES, PARTIAL_BYTES]);
        // The rest is held for its newline.
        let out = fed_on(&mut l, Stream::Stdout, b"b\n");
        assert_eq!(texts(&out), [[&[b'a'; 10][..], b"b"].concat()]);
        assert!(l.partial.is_empty());
    }

    #[test]
    fn the_bound_holds_whatever_the_reads_bring() {
        // Reads that each bring less than the bound, but more than it together (as a
        // program's 1,000-byte writes come), and whole lines far longer than it.
        let mut l = StdoutLines::new(false);
        let mut out = Vec::new();
        for _ in 0..30 {
            out.extend(fed_on(&mut l, Stream::Stdout, &[b'r'; 3000]));
        }
        out.extend(fed_on(&mut l, Stream::Stdout, b"\n"));
        let mut whole = vec![b'q'; 10_000];
        whole.push(b'\n');
        out.extend(fed_on(&mut l, Stream::Stdout, &whole));
        let pieces = texts(&out);
        assert!(pieces.iter().all(|t| t.len() <= PARTIAL_BYTES));
        assert_eq!(
            pieces.iter().map(|t| t.len()).sum::<usize>(),
            90_000 + 10_000
        );
        let q: Vec<usize> = pieces
            .iter()
            .filter(|t| t[0] == b'q')
            .map(|t| t.len())
            .collect();
        assert_eq!(
            q,
            [PARTIAL_BYTES, PARTIAL_BYTES, 10_000 - 2 * PARTIAL_BYTES]
        );
        let mut out = Vec::new();
        l.end(1, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_cut_falls_before_a_utf8_character_not_through_it() {
        let mut l = StdoutLines::new(false);
        // "é" (2 bytes) straddling the bound: it goes whole to the next piece.
        let mut text = vec![b'a'; PARTIAL_BYTES - 1];
        text.extend("é€".as_bytes());
        text.push(b'\n');
        let out = fed_on(&mut l, Stream::Stdout, &text);
        let pieces = texts(&out);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].len(), PARTIAL_BYTES - 1);
        assert_eq!(pieces[1], "é€".as_bytes());
        // Bytes that are no UTF-8 at all are cut at the bound.
        let mut l = StdoutLines::new(false);
        let out = fed_on(&mut l, Stream::Stdout, &[0x80; PARTIAL_BYTES + 1]);
        assert_eq!(texts(&out)[0].len(), PARTIAL_BYTES);
    }

    #[test]
    fn a_pty_line_loses_its_carriage_return_on_stdout_only() {
        let mut l = StdoutLines::new(false);
        // Whole, split before the `\n`, and a lone `\r` within a line (progress bars).
        let out = fed_on(&mut l, Stream::Pty, b"one\r\n50%\r100%\r\ntwo\r");
        assert_eq!(out, b"s | one\ns | 50%\r100%\n");
        let out = fed_on(&mut l, Stream::Pty, b"\n\r\n");
        assert_eq!(out, b"s | two\ns | \n");
        // A pipe's bytes are the program's own: its `\r` stays.
        let out = fed_on(&mut l, Stream::Stdout, b"dos\r\n");
        assert_eq!(out, b"s | dos\r\n");
        // A `\r` held at the bound is not cut off from its `\n`.
        let mut long = vec![b'p'; PARTIAL_BYTES];
        long.push(b'\r');
        assert!(fed_on(&mut l, Stream::Pty, &long).is_empty());
        let out = fed_on(&mut l, Stream::Pty, b"\n");
        assert_eq!(texts(&out), [&[b'p'; PARTIAL_BYTES][..]]);
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
