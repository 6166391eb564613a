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

use rustix::process::getpid;

use super::{
    children, children_files_supported, read_into, read_member, Fail, CHILD_BYTES, MAX_WALK,
};

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

    /// Appends to `out` every child listed now, at most `room`: the copy read on from
    /// where it ended, or the whole list where the copy can no longer be trusted;
    /// `Ok(false)` if some did not fit.
    pub fn read_all(&mut self, out: &mut Vec<i32>, room: usize) -> Result<bool, Fail> {
        let limit = room.saturating_mul(CHILD_BYTES).max(CHILD_BYTES);
        if !self.text.is_empty() && self.read_tail(limit)? {
            return Ok(push_pids(&self.text, out, room));
        }
        self.read_whole(out, room, limit)
    }

    /// Appends to `out` the children listed since the last read (every one, where the
    /// copy can no longer be trusted), at most `room`; `Ok(false)` if some did not fit.
    pub fn read_new(&mut self, out: &mut Vec<i32>, room: usize) -> Result<bool, Fail> {
        let limit = room.saturating_mul(CHILD_BYTES).max(CHILD_BYTES);
        let from = self.text.len();
        if from > 0 && self.read_tail(limit)? {
            return Ok(push_pids(&self.text[from..], out, room));
        }
        self.read_whole(out, room, limit)
    }

    /// Reads the whole list into the copy, and its pids into `out`.
    fn read_whole(&mut self, out: &mut Vec<i32>, room: usize, limit: usize) -> Result<bool, Fail> {
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

/// Our own list of children, carried from one look to the next: read on from where it
/// ended rather than whole (see the [module docs](self)). The list loses an entry only
/// when we reap it: whoever reaps one of our children says so ([`OwnChildren::reaped`]),
/// and the entry leaves the copy too. A reap that was not said is found out (the last
/// entry is no longer where it was) and costs one whole read.
#[derive(Debug, Default)]
pub struct OwnChildren {
    listing: Option<Listing>,
}

impl OwnChildren {
    /// We reaped our child `pid`: it left the kernel's list, and leaves the copy.
    pub fn reaped(&mut self, pid: i32) {
        // Not in the copy: forked or reparented since the last read, so not read yet.
        if let Some(listing) = &mut self.listing {
            listing.remove(pid);
        }
    }

    /// The listing, for a walk of `pid` (one thread, `tid == pid`).
    pub(super) fn listing(&mut self) -> &mut Option<Listing> {
        &mut self.listing
    }

    /// Every child of ours (zombies included), as [`super::children`] of our own pid,
    /// read on from the copy when we have one thread.
    pub fn all(&mut self) -> io::Result<Vec<i32>> {
        let me = getpid().as_raw_pid();
        let threads = read_member(me)?.map_or(1, |m| m.threads);
        if threads != 1 || !children_files_supported() {
            return children(me);
        }
        let listing = match &mut self.listing {
            Some(l) if l.is_of(me, me) => l,
            other => other.insert(Listing::new(me, me)),
        };
        let mut out = Vec::new();
        match listing.read_all(&mut out, MAX_WALK) {
            Ok(_) | Err(Fail::Gone) => Ok(out),
            Err(Fail::Other(e)) => Err(e),
        }
    }
}

impl Listing {
    /// Removes `pid`'s entry from the copy; `false` if it was not there.
    fn remove(&mut self, pid: i32) -> bool {
        let entry = format!("{pid} ");
        let mut at = 0;
        while let Some(i) = find(&self.text[at..], entry.as_bytes()) {
            let start = at + i;
            if start == 0 || self.text[start - 1] == b' ' {
                self.text.drain(start..start + entry.len());
                return true;
            }
            at = start + 1;
        }
        false
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::*;

    /// This thread's children, as a `Listing` of this thread reads them.
    fn own_thread() -> Listing {
        // SAFETY: gettid takes no arguments and only returns the caller's thread id.
        let tid = unsafe { libc::gettid() };
        Listing::new(getpid().as_raw_pid(), tid)
    }

    fn spawn_sleeps(n: usize) -> Vec<Child> {
        (0..n)
            .map(|_| Command::new("sleep").arg("1000").spawn().unwrap())
            .collect()
    }

    fn ids(children: &[Child]) -> Vec<i32> {
        children.iter().map(|c| c.id() as i32).collect()
    }

    fn reap(child: &mut Child) {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Reads on from the copy; every read is checked against a whole read of the list.
    #[test]
    fn the_copy_is_read_on_and_stays_what_a_whole_read_shows() {
        let mut listing = own_thread();
        let whole = |l: &Listing| {
            let mut fresh = Listing::new(0, 0);
            fresh.path = l.path.clone();
            let mut out = Vec::new();
            fresh.read_all(&mut out, MAX_WALK).unwrap();
            out
        };
        let mut kids = spawn_sleeps(3);
        let mut out = Vec::new();
        assert!(listing.read_all(&mut out, MAX_WALK).unwrap());
        assert_eq!(out, ids(&kids));

        // New children: only they are new.
        kids.extend(spawn_sleeps(2));
        let mut new = Vec::new();
        listing.read_new(&mut new, MAX_WALK).unwrap();
        assert_eq!(new, ids(&kids[3..]));

        // A reap that is told: the copy drops it and still reads on.
        reap(&mut kids[1]);
        listing.remove(kids[1].id() as i32);
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));

        // The last one reaped and told, then a new one: read on from the one before.
        let last = kids.len() - 1;
        reap(&mut kids[last]);
        listing.remove(kids[last].id() as i32);
        kids.extend(spawn_sleeps(1));
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));
        assert!(all.contains(&(kids.last().unwrap().id() as i32)));

        // A reap that is not told: found out, the list read whole.
        reap(&mut kids[0]);
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));
        assert!(!all.contains(&(kids[0].id() as i32)));

        // The last one reaped and not told: found out too.
        let last = kids.len() - 1;
        reap(&mut kids[last]);
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));

        for (i, kid) in kids.iter_mut().enumerate() {
            if ![0, 1, 4, last].contains(&i) {
                reap(kid);
            }
        }
    }
}
