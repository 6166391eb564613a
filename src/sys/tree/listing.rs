//! The root of a walk's own children, read again without reading them all again.
//!
//! A `children` file is generated a page at a time, and each page's `read` counts its
//! way from the head of the kernel's list again: reading the list of R children whole
//! costs some R²/1,400 steps (75,000 for 10,000 running leaders, the daemon's own list).
//! A walk reads its root's list at its start and again at its end, and a look at a
//! session walks twice. But the list only grows while nothing is reaped: a fork and an
//! orphan reparented to the root are both added at its end, and an entry leaves only when
//! its process is reaped (by us, as no child of ours is ignored). So once read, the list
//! is read on from where it ended (one positioned `read`: a count from the head, then
//! only what was added), as long as its last entry is still where it was: that is checked,
//! and the whole list read again if not.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;

use super::{read_into, Fail, CHILD_BYTES};

/// One thread's `children` list as last read: the file's text, whole pids only.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    path: String,
    text: Vec<u8>,
}

impl Listing {
    /// The list of `pid`'s thread `tid`, not read yet.
    pub fn new(pid: i32, tid: i32) -> Listing {
        Listing {
            path: format!("/proc/{pid}/task/{tid}/children"),
            text: Vec::new(),
        }
    }

    /// Whether it lists `pid`'s thread `tid`.
    pub fn is_of(&self, pid: i32, tid: i32) -> bool {
        self.path == format!("/proc/{pid}/task/{tid}/children")
    }

    /// Appends to `out` the children it listed when last read, at most `room`; `false` if
    /// some did not fit.
    pub fn listed(&self, out: &mut Vec<i32>, room: usize) -> bool {
        push_pids(&self.text, out, room)
    }

    /// Appends to `out` the children listed since the last read (all of them at the first,
    /// or when the list did not just grow), at most `room`; `Ok(false)` if some did not fit
    /// (the listing then starts over at the next read).
    pub fn read_new(&mut self, out: &mut Vec<i32>, room: usize) -> Result<bool, Fail> {
        let limit = room.saturating_mul(CHILD_BYTES).max(CHILD_BYTES);
        let from = self.text.len();
        if from > 0 && self.read_tail(limit)? {
            return Ok(push_pids(&self.text[from..], out, room));
        }
        let complete = read_into(&self.path, &mut self.text, limit)?;
        if !complete {
            // Possibly cut in the middle of a pid: nothing of it is kept for the next read.
            let cut = self
                .text
                .iter()
                .rposition(|&b| b == b' ')
                .map_or(0, |i| i + 1);
            self.text.truncate(cut);
            push_pids(&self.text, out, room);
            self.text.clear();
            return Ok(false);
        }
        Ok(push_pids(&self.text, out, room))
    }

    /// Reads what follows the last entry into `text`; `Ok(false)` if the last entry is not
    /// where it was (the list changed other than at its end) or the tail is too long.
    fn read_tail(&mut self, limit: usize) -> Result<bool, Fail> {
        let body = &self.text[..self.text.len() - 1]; // every entry ends with a space
        let last_at = body.iter().rposition(|&b| b == b' ').map_or(0, |i| i + 1);
        // From the space before the last entry: the entry must start where it started.
        let start = last_at.saturating_sub(1);
        let expected = &self.text[start..];
        let file = fs::File::open(&self.path)?;
        let mut tail = vec![0; expected.len() + limit.min(64 * 1024)];
        let mut got = 0;
        loop {
            if got == tail.len() {
                return Ok(false);
            }
            match file.read_at(&mut tail[got..], (start + got) as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        tail.truncate(got);
        if !tail.starts_with(expected) || tail.last() != Some(&b' ') {
            return Ok(false);
        }
        self.text.extend_from_slice(&tail[expected.len()..]);
        Ok(true)
    }
}

/// Parses the pids of `text` into `out`, at most `room`; `false` if some did not fit.
fn push_pids(text: &[u8], out: &mut Vec<i32>, room: usize) -> bool {
    let text = std::str::from_utf8(text).unwrap_or("");
    let mut taken = 0;
    for word in text.split_ascii_whitespace() {
        if taken == room {
            return false;
        }
        if let Ok(pid) = word.parse() {
            out.push(pid);
            taken += 1;
        }
    }
    true
}
