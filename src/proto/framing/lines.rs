//! The bounded line splitter for a connection's incoming bytes.

use std::fmt;

/// A line exceeded the splitter's limit. It is reported once, as soon as the limit is
/// passed; the rest of that line, up to its newline, is discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong {
    /// The limit in force, in bytes without the newline.
    pub limit: usize,
}

impl fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line longer than {} bytes", self.limit)
    }
}

impl std::error::Error for LineTooLong {}

/// A buffer above this capacity is released after its line is delivered, so that one
/// large request does not pin memory for the life of the connection.
const KEEP_CAPACITY: usize = 64 * 1024;

/// Cuts a byte stream into `\n`-terminated lines of at most `max_line` bytes.
///
/// Feed it whatever `read` returned; lines lying wholly inside a chunk are handed out
/// straight from the chunk, only a line split across chunks is copied. The internal
/// buffer never exceeds `max_line` bytes of content.
///
/// # Examples
///
/// ```
/// use genward::proto::framing::LineSplitter;
///
/// let mut lines = Vec::new();
/// let mut s = LineSplitter::new(8);
/// s.feed(b"{\"a\":1}\n{\"b\"", |l| lines.push(l.map(<[u8]>::to_vec)));
/// s.feed(b":2}\n", |l| lines.push(l.map(<[u8]>::to_vec)));
/// assert_eq!(lines, [Ok(b"{\"a\":1}".to_vec()), Ok(b"{\"b\":2}".to_vec())]);
/// ```
#[derive(Debug, Clone)]
pub struct LineSplitter {
    max_line: usize,
    buf: Vec<u8>,
    skipping: bool,
}

impl LineSplitter {
    /// A splitter accepting lines of up to `max_line` bytes (newline excluded).
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            max_line,
            buf: Vec::new(),
            skipping: false,
        }
    }

    /// Splits `chunk`, calling `on_line` with each complete line (without its `\n`) or
    /// with one [`LineTooLong`] per over-long line, in stream order.
    pub fn feed(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(Result<&[u8], LineTooLong>)) {
        let too_long = LineTooLong {
            limit: self.max_line,
        };
        while !chunk.is_empty() {
            let Some(nl) = chunk.iter().position(|&b| b == b'\n') else {
                if self.skipping {
                    return;
                }
                if self.buf.len() + chunk.len() > self.max_line {
                    self.release();
                    self.skipping = true;
                    on_line(Err(too_long));
                } else {
                    self.buf.extend_from_slice(chunk);
                }
                return;
            };
            let part = &chunk[..nl];
            chunk = &chunk[nl + 1..];
            if self.skipping {
                self.skipping = false;
            } else if self.buf.len() + part.len() > self.max_line {
                self.release();
                on_line(Err(too_long));
            } else if self.buf.is_empty() {
                on_line(Ok(part));
            } else {
                self.buf.extend_from_slice(part);
                on_line(Ok(&self.buf));
                self.release();
            }
        }
    }

    /// Ends the stream: hands out a final line that had no `\n`, if any (a line being
    /// skipped stays skipped). The splitter is then empty and may be reused.
    pub fn finish(&mut self, mut on_line: impl FnMut(Result<&[u8], LineTooLong>)) {
        if !self.skipping && !self.buf.is_empty() {
            on_line(Ok(&self.buf));
        }
        self.skipping = false;
        self.release();
    }

    /// Gives up the unfinished line as if `limit` had been the limit: reports it as
    /// [`LineTooLong`] with `limit` and skips the rest of it. Nothing happens between
    /// lines, or while a line is already being skipped.
    pub fn cut_short(&mut self, limit: usize, mut on_line: impl FnMut(Result<&[u8], LineTooLong>)) {
        if self.skipping || self.buf.is_empty() {
            return;
        }
        self.release();
        self.skipping = true;
        on_line(Err(LineTooLong { limit }));
    }

    /// What it holds between lines: the unfinished line's bytes, and whether the rest of
    /// a too long line is being skipped (carried across an upgrade).
    pub fn state(&self) -> (&[u8], bool) {
        (&self.buf, self.skipping)
    }

    /// A splitter in the state [`state`](Self::state) gave; `None` if `buf` is longer
    /// than `max_line` (no splitter could hold it).
    pub fn resumed(max_line: usize, buf: Vec<u8>, skipping: bool) -> Option<Self> {
        ((buf.is_empty() || !skipping) && buf.len() <= max_line).then_some(LineSplitter {
            max_line,
            buf,
            skipping,
        })
    }

    /// Bytes held for an unfinished line.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether the splitter is discarding the rest of an over-long line.
    pub fn is_skipping(&self) -> bool {
        self.skipping
    }

    fn release(&mut self) {
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(max: usize, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, LineTooLong>> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, |l| out.push(l.map(<[u8]>::to_vec)));
            assert!(s.buffered() <= max);
        }
        s.finish(|l| out.push(l.map(<[u8]>::to_vec)));
        out
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes_one_more_byte_does_not() {
        let err = Err(LineTooLong { limit: 4 });
        assert_eq!(run(4, &[b"abcd\n"]), [Ok(b"abcd".to_vec())]);
        assert_eq!(run(4, &[b"abcde\nok\n"]), [err.clone(), Ok(b"ok".to_vec())]);
        assert_eq!(run(4, &[b"ab", b"cd\n"]), [Ok(b"abcd".to_vec())]);
        assert_eq!(run(4, &[b"ab", b"cde\nok\n"]), [err, Ok(b"ok".to_vec())]);
    }

    #[test]
    fn a_line_cut_short_is_reported_with_the_limit_given_and_skipped_to_its_end() {
        let mut s = LineSplitter::new(64);
        let mut out = Vec::new();
        s.feed(b"ok\npart", |l| out.push(l.map(<[u8]>::to_vec)));
        s.cut_short(2, |l| out.push(l.map(<[u8]>::to_vec)));
        assert_eq!(s.buffered(), 0);
        s.cut_short(2, |l| out.push(l.map(<[u8]>::to_vec)));
        s.feed(b" of it\nnext\n", |l| out.push(l.map(<[u8]>::to_vec)));
        // Between lines there is nothing to cut.
        s.cut_short(2, |l| out.push(l.map(<[u8]>::to_vec)));
        let cut = Err(LineTooLong { limit: 2 });
        assert_eq!(out, [Ok(b"ok".to_vec()), cut, Ok(b"next".to_vec())]);
    }

    #[test]
    fn an_endless_line_is_reported_once_and_memory_stays_bounded() {
        let mut s = LineSplitter::new(16);
        let mut errors = 0;
        let mut lines = Vec::new();
        for _ in 0..1000 {
            s.feed(&[b'x'; 100], |l| match l {
                Ok(l) => lines.push(l.to_vec()),
                Err(_) => errors += 1,
            });
            assert_eq!(s.buffered(), 0);
            assert!(s.is_skipping());
        }
        s.feed(b"xx\nnext\n", |l| lines.push(l.unwrap().to_vec()));
        assert_eq!(errors, 1);
        assert_eq!(lines, [b"next".to_vec()]);
        assert!(!s.is_skipping());
    }

    #[test]
    fn empty_lines_and_an_unterminated_tail_are_lines() {
        assert_eq!(
            run(8, &[b"\n\na\nb"]),
            [Ok(vec![]), Ok(vec![]), Ok(b"a".to_vec()), Ok(b"b".to_vec())]
        );
    }

    #[test]
    fn an_over_long_tail_is_not_delivered_at_finish() {
        let err = Err(LineTooLong { limit: 2 });
        assert_eq!(run(2, &[b"abc"]), [err]);
    }

    #[test]
    fn line_splitter_is_independent_of_chunk_boundaries() {
        let stream: &[u8] = b"{\"op\":\"list\"}\n\nTOO-LONG-LINE-HERE\nok\r\nxx\nlast";
        let max = 13;
        let whole = run(max, &[stream]);
        let too_long = Err(LineTooLong { limit: max });
        assert_eq!(
            whole,
            [
                Ok(b"{\"op\":\"list\"}".to_vec()),
                Ok(vec![]),
                too_long,
                Ok(b"ok\r".to_vec()),
                Ok(b"xx".to_vec()),
                Ok(b"last".to_vec()),
            ]
        );
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let got = run(max, &[&stream[..i], &stream[i..j], &stream[j..]]);
                assert_eq!(got, whole, "split at {i} and {j}");
            }
        }
        // One byte at a time.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(run(max, &bytes), whole);
    }
}
