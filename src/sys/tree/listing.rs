//! The root of a walk's own children, read again without reading them all again.
//!
//! A `children` file is a `seq_file`: a `read` hands out at most a page, and finds its
//! place by counting from the head of the kernel's list to the entry it stopped at (a
//! `read` at any other offset first formats every entry up to it). Read whole, the list of
//! R children costs some R²/1,400 steps (75,000 for 10,000 running leaders, the daemon's
//! own list), and a look at sessions reads it at least three times (at the start and end
//! of its first walk, and at the end of its second, which starts where the first ended).
//!
//! But the list only grows while nothing is reaped: a fork and an orphan reparented to
//! the root are both added at its end, and an entry leaves only when its process is
//! reaped (by us, as no child of ours is ignored). So the copy is kept, and the file held
//! open for the length of a look:
//! - within a look, where nothing is reaped, the list is read on from where the last read
//!   ended: one count from the head to the end, no formatting;
//! - at the start of a look, from just before the copy's last few entries (one count and
//!   the formatting of what precedes them), which must still be where they were — a reap
//!   since that was not noted ([`crate::sys::reaped`]) moves them — or the whole list is
//!   read again.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;

use rustix::process::getpid;

use super::{children, children_files_supported, read_member, Fail, CHILD_BYTES, MAX_WALK};

/// The entries at the end of the copy that a look's first read checks are still there.
const CHECKED_ENTRIES: usize = 8;

/// A read of a `children` file shorter than this ended at the end of the list: a read
/// returns less than a page (4 KiB or more) only there, given room for more.
const SHORT_READ: usize = 4096 - 64;

/// One thread's `children` list as last read: the file's text, whole pids only, and the
/// file kept open where the last read ended.
#[derive(Debug, Default)]
pub struct Listing {
    path: String,
    text: Vec<u8>,
    file: Option<fs::File>,
    /// Nothing was reaped since the last read (the caller says: see [`Listing::begin`]):
    /// the kernel's place in the open file is the end of `text`.
    in_place: bool,
    /// The last read, in place, found nothing new: the copy is the whole list as of then,
    /// and the next [`Listing::read_all`] of this look hands it out without reading. A look
    /// walks twice in a row; the second walk's start is the first walk's last read, and
    /// its own last read still catches what arrived since.
    settled: bool,
}

impl Listing {
    /// The list of `pid`'s thread `tid`, not read yet.
    pub fn new(pid: i32, tid: i32) -> Listing {
        Listing {
            path: format!("/proc/{pid}/task/{tid}/children"),
            ..Listing::default()
        }
    }

    /// Whether it lists `pid`'s thread `tid`.
    pub fn is_of(&self, pid: i32, tid: i32) -> bool {
        self.path == format!("/proc/{pid}/task/{tid}/children")
    }

    /// A new look: something may have been reaped since the last read, so the next read
    /// checks that the copy still holds.
    pub fn begin(&mut self) {
        self.in_place = false;
        self.settled = false;
    }

    /// The look ended: the file is closed (a descriptor held between looks would be one
    /// the daemon's budget does not count); the copy stays.
    pub fn end(&mut self) {
        self.file = None;
        self.in_place = false;
        self.settled = false;
    }

    /// Appends to `out` every child listed now, at most `room`: the copy read on, or the
    /// whole list where the copy can no longer be trusted; `Ok(false)` if some did not fit.
    pub fn read_all(&mut self, out: &mut Vec<i32>, room: usize) -> Result<bool, Fail> {
        if std::mem::take(&mut self.settled) {
            return Ok(push_pids(&self.text, out, room));
        }
        match self.read_on(room)? {
            Some(_) => Ok(push_pids(&self.text, out, room)),
            None => self.read_whole(out, room),
        }
    }

    /// Appends to `out` the children listed since the last read (every one, where the
    /// copy can no longer be trusted), at most `room`; `Ok(false)` if some did not fit.
    pub fn read_new(&mut self, out: &mut Vec<i32>, room: usize) -> Result<bool, Fail> {
        match self.read_on(room)? {
            Some(from) => Ok(push_pids(&self.text[from..], out, room)),
            None => self.read_whole(out, room),
        }
    }

    /// Reads what was added since the copy was read into it; `Some(old length)`, or `None`
    /// if the copy cannot be read on (none yet, changed, or too long a tail).
    fn read_on(&mut self, room: usize) -> Result<Option<usize>, Fail> {
        if self.text.is_empty() {
            return Ok(None);
        }
        if self.file.is_none() {
            // Opened again for this look: its first read is the checked one.
            self.file = Some(fs::File::open(&self.path)?);
            self.in_place = false;
        }
        let Some(file) = &self.file else {
            return Ok(None);
        };
        let limit = room.saturating_mul(CHILD_BYTES).max(CHILD_BYTES);
        let from = self.text.len();
        if self.in_place {
            let tail = read_at_end(file, from, limit)?;
            if !tail.whole {
                return Ok(None);
            }
            self.settled = tail.bytes.is_empty();
            self.text.extend_from_slice(&tail.bytes);
            return Ok(Some(from));
        }
        // From the space before the last few entries: they must be where they were. An
        // untold reap before them moves them (a later fork reusing a pid at the very same
        // place would have to do so for each of them).
        let body = &self.text[..from - 1]; // every entry ends with a space
        let mut spaces = body.iter().enumerate().rev().filter(|(_, &b)| b == b' ');
        let start = spaces.nth(CHECKED_ENTRIES - 1).map_or(0, |(i, _)| i);
        let expected = &self.text[start..];
        let read = read_at_end(file, start, expected.len() + limit)?;
        let tail = &read.bytes[..];
        if !read.whole || !tail.starts_with(expected) || tail.last() != Some(&b' ') {
            return Ok(None);
        }
        self.text.extend_from_slice(&tail[expected.len()..]);
        self.in_place = true;
        Ok(Some(from))
    }

    /// Reads the whole list into the copy, and its pids into `out`.
    fn read_whole(&mut self, out: &mut Vec<i32>, room: usize) -> Result<bool, Fail> {
        let limit = room.saturating_mul(CHILD_BYTES).max(CHILD_BYTES);
        self.text.clear();
        self.in_place = false;
        self.settled = false;
        let file = fs::File::open(&self.path)?;
        let read = read_at_end(&file, 0, limit)?;
        if !read.whole {
            // Too many to keep: what was read is handed out, cut at the last whole pid.
            let part = &read.bytes;
            let cut = part.iter().rposition(|&b| b == b' ').map_or(0, |i| i + 1);
            push_pids(&part[..cut], out, room);
            self.file = None;
            return Ok(false);
        }
        self.text = read.bytes;
        self.file = Some(file);
        self.in_place = true;
        Ok(push_pids(&self.text, out, room))
    }
}

/// What [`read_at_end`] read: everything from the offset to the end of the list, or only
/// the first `limit` bytes or so of it.
struct Tail {
    bytes: Vec<u8>,
    whole: bool,
}

/// Reads `file` from `offset` to its end, stopping once more than `limit` bytes came.
fn read_at_end(file: &fs::File, offset: usize, limit: usize) -> Result<Tail, Fail> {
    let mut bytes = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        let n = match file.read_at(&mut buf, (offset + bytes.len()) as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        bytes.extend_from_slice(&buf[..n]);
        if bytes.len() > limit {
            return Ok(Tail {
                bytes,
                whole: false,
            });
        }
        if n < SHORT_READ {
            return Ok(Tail { bytes, whole: true });
        }
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
/// when we reap it: every reap of a child of ours is noted ([`crate::sys::reaped`]), and
/// at the start of a look the entries noted leave the copy too. A reap that was not noted
/// is found out (the last entry is no longer where it was) and costs one whole read.
#[derive(Debug, Default)]
pub struct OwnChildren {
    listing: Option<Listing>,
}

impl OwnChildren {
    /// A new look at our children begins: the children reaped since the last one leave
    /// the copy (see [`Listing::begin`]).
    pub fn begin(&mut self) {
        let reaped = crate::sys::reaped::take();
        if reaped.overflowed {
            self.listing = None;
        }
        if let Some(listing) = &mut self.listing {
            listing.remove(&reaped.pids);
            listing.begin();
        }
    }

    /// The look ended: see [`Listing::end`].
    pub fn end(&mut self) {
        if let Some(listing) = &mut self.listing {
            listing.end();
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
        self.begin();
        let listing = match &mut self.listing {
            Some(l) if l.is_of(me, me) => l,
            other => other.insert(Listing::new(me, me)),
        };
        let mut out = Vec::new();
        let read = listing.read_all(&mut out, MAX_WALK);
        listing.end();
        match read {
            Ok(_) | Err(Fail::Gone) => Ok(out),
            Err(Fail::Other(e)) => Err(e),
        }
    }
}

impl Listing {
    /// Removes the entries of `reaped` from the copy (their processes were reaped), in one
    /// pass however many there are; pids it does not hold (forked and reaped since the
    /// last read) change nothing.
    fn remove(&mut self, reaped: &[i32]) {
        if reaped.is_empty() {
            return;
        }
        self.in_place = false;
        self.settled = false;
        let gone = super::pid_set(reaped.iter().copied());
        let mut kept = Vec::with_capacity(self.text.len());
        for entry in self.text.split_inclusive(|&b| b == b' ') {
            let pid = std::str::from_utf8(entry.strip_suffix(b" ").unwrap_or(entry))
                .ok()
                .and_then(|p| p.parse().ok());
            if !pid.is_some_and(|p| gone.contains(&p)) {
                kept.extend_from_slice(entry);
            }
        }
        self.text = kept;
    }
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

    /// More children than a walk may take: as many as it may are handed out, however many
    /// pages of the file that takes (a read returns one page, some 500 to 800 pids).
    #[test]
    fn a_list_longer_than_the_room_hands_out_the_room() {
        /// Reaped however the test ends: a failed one leaves no thousands of sleeps.
        struct Reaped(Vec<Child>);
        impl Drop for Reaped {
            fn drop(&mut self) {
                self.0.iter_mut().for_each(reap);
            }
        }
        let room = 1000;
        let kids = Reaped(spawn_sleeps(2 * room));
        let mut out = Vec::new();
        let fit = own_thread().read_all(&mut out, room).unwrap();
        assert!(!fit);
        assert_eq!(out, ids(&kids.0[..room]));
    }

    /// A child reaped through its handle, whoever holds it (a readiness probe, a failed
    /// start), without a word to the copy: the reap's note mends the copy at the next
    /// look, which reads on instead of reading the whole list again.
    #[test]
    fn a_reap_through_any_handle_leaves_the_copy_readable_on() {
        use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};

        use crate::sys::process::Process;

        let mut kids = spawn_sleeps(12);
        let mut own = OwnChildren {
            listing: Some(own_thread()),
        };
        own.begin();
        let listing = own.listing.as_mut().unwrap();
        let mut out = Vec::new();
        listing.read_all(&mut out, MAX_WALK).unwrap();
        assert_eq!(out, ids(&kids));
        own.end();

        // Early in the list, so that the entries a look checks move without the note.
        let pid = Pid::from_raw(kids[2].id() as i32).unwrap();
        kids[2].kill().unwrap();
        let exited = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
        waitid(WaitId::Pid(pid), exited).unwrap();
        let mut handle = Process::child(pid, None, None);
        assert!(handle.reap().unwrap().is_some());

        own.begin();
        let listing = own.listing.as_mut().unwrap();
        assert_eq!(listing.read_on(MAX_WALK).unwrap(), Some(listing.text.len()));
        let mut out = Vec::new();
        listing.read_all(&mut out, MAX_WALK).unwrap();
        own.end();
        let mut left = ids(&kids);
        left.remove(2);
        assert_eq!(out, left);

        for (i, kid) in kids.iter_mut().enumerate() {
            if i != 2 {
                reap(kid);
            }
        }
    }

    /// Reads on from the copy; every read is checked against a whole read of the list.
    #[test]
    fn the_copy_is_read_on_and_stays_what_a_whole_read_shows() {
        let mut listing = own_thread();
        let whole = |l: &Listing| {
            let mut fresh = Listing {
                path: l.path.clone(),
                ..Listing::default()
            };
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
        listing.remove(&[kids[1].id() as i32]);
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));

        // The last one reaped and told, then a new one: read on from the one before.
        let last = kids.len() - 1;
        reap(&mut kids[last]);
        listing.remove(&[kids[last].id() as i32]);
        kids.extend(spawn_sleeps(1));
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));
        assert!(all.contains(&(kids.last().unwrap().id() as i32)));

        // A reap that is not told, found out at the next look: the list read whole.
        reap(&mut kids[0]);
        listing.begin();
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));
        assert!(!all.contains(&(kids[0].id() as i32)));

        // The last one reaped and not told: found out too.
        let last = kids.len() - 1;
        reap(&mut kids[last]);
        listing.begin();
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        assert_eq!(all, whole(&listing));

        // A second walk of the same look starts from where the first walk's last read
        // ended, found nothing new, and its own last read finds what came since.
        listing.begin();
        let mut all = Vec::new();
        listing.read_all(&mut all, MAX_WALK).unwrap();
        let mut none = Vec::new();
        listing.read_new(&mut none, MAX_WALK).unwrap();
        assert!(none.is_empty());
        kids.extend(spawn_sleeps(1));
        let mut again = Vec::new();
        listing.read_all(&mut again, MAX_WALK).unwrap();
        assert_eq!(again, all);
        let mut new = Vec::new();
        listing.read_new(&mut new, MAX_WALK).unwrap();
        assert_eq!(new, ids(&kids[kids.len() - 1..]));

        for (i, kid) in kids.iter_mut().enumerate() {
            if ![0, 1, 4, last].contains(&i) {
                reap(kid);
            }
        }
    }
}
