//! Finding a text within a line of a generation's output, across reads, with bounded
//! memory: of each stream only the end of the current line that a match could still
//! need is kept (fewer bytes than the text).

use crate::core::Stream;

/// Looks for `text` in the lines of each output stream.
#[derive(Debug)]
pub struct LineMatcher {
    text: Vec<u8>,
    /// Per stream (by [`Stream::index`]): the last bytes of the current line, at most
    /// `text.len() - 1` of them.
    tails: [Vec<u8>; 3],
}

impl LineMatcher {
    /// A matcher for `text` (non-empty, without a newline: the spec checked it).
    pub fn new(text: Vec<u8>) -> LineMatcher {
        LineMatcher {
            text,
            tails: Default::default(),
        }
    }

    /// Feeds bytes read from `stream`; whether a line so far contains the text.
    pub fn feed(&mut self, stream: Stream, data: &[u8]) -> bool {
        let keep = self.text.len().saturating_sub(1);
        let tail = &mut self.tails[stream.index()];
        let mut rest = data;
        loop {
            let (line, more) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            // The kept tail joins the first piece of this read (bounded by `keep`).
            let head = line.len().min(keep);
            tail.extend_from_slice(&line[..head]);
            if contains(tail, &self.text) || contains(line, &self.text) {
                return true;
            }
            match more {
                Some(next) => {
                    tail.clear();
                    rest = next;
                }
                None => {
                    if line.len() >= keep {
                        tail.clear();
                        tail.extend_from_slice(&line[line.len() - keep..]);
                    } else if tail.len() > keep {
                        let cut = tail.len() - keep;
                        tail.drain(..cut);
                    }
                    return false;
                }
            }
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.len() <= hay.len() && hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(text: &str, chunks: &[&str]) -> Option<usize> {
        let mut m = LineMatcher::new(text.as_bytes().to_vec());
        chunks
            .iter()
            .position(|c| m.feed(Stream::Stdout, c.as_bytes()))
    }

    #[test]
    fn a_match_within_one_read_is_found() {
        assert_eq!(
            feed_all("ready", &["starting\nnow ready to serve\n"]),
            Some(0)
        );
    }

    #[test]
    fn a_match_split_across_reads_is_found() {
        assert_eq!(
            feed_all("listening", &["web: list", "en", "ing on 80"]),
            Some(2)
        );
    }

    #[test]
    fn a_match_never_spans_a_newline() {
        assert_eq!(feed_all("ab", &["a\n", "b\n", "xa", "\nb"]), None);
    }

    #[test]
    fn streams_are_separate_lines() {
        let mut m = LineMatcher::new(b"ok go".to_vec());
        assert!(!m.feed(Stream::Stdout, b"ok "));
        assert!(!m.feed(Stream::Stderr, b"go"));
        assert!(m.feed(Stream::Stdout, b"go"));
    }

    #[test]
    fn memory_stays_below_the_text_length() {
        let mut m = LineMatcher::new(b"needle".to_vec());
        for _ in 0..1000 {
            assert!(!m.feed(Stream::Stdout, &[b'x'; 4096]));
            assert!(m.tails[0].len() < 6);
        }
        assert!(!m.feed(Stream::Stdout, b"nee"));
        assert!(m.feed(Stream::Stdout, b"dle"));
    }
}
