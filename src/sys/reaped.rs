//! Our children reaped since our list of children was last looked at.
//!
//! The copy of that list ([`OwnChildren`](super::tree::OwnChildren)) is read on from where
//! it ended, which holds only while every entry that left the kernel's list left the copy
//! too; a reap it was not told of costs the next look a read of the whole list (some
//! R²/1,400 steps with R children). Reaps happen in many owners' hands — a leader's, a
//! readiness probe's, a start that failed, an orphan, the log writer — so instead of each
//! telling the copy, every reap of a child of ours notes its pid here ([`note`]), and the
//! copy takes the notes at the start of its next look ([`take`]).
//!
//! The notes are the reaping thread's own, as a `children` list is its thread's (the
//! daemon reaps and looks from its one thread). At most [`MOST`] notes are kept: past that (no look for a long while, as under cgroup
//! containment, where nothing looks) the notes are dropped and the copy is told to read
//! the list whole once, so memory stays bounded however many reaps go unlooked at.

use std::cell::RefCell;

/// Notes kept between two looks.
const MOST: usize = 1024;

/// The reaps noted since the last [`take`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Their pids, in the order they were reaped.
    pub pids: Vec<i32>,
    /// More were reaped than could be noted: the copy cannot be mended, only read again.
    pub overflowed: bool,
}

thread_local! {
    static NOTES: RefCell<Reaped> = const {
        RefCell::new(Reaped {
            pids: Vec::new(),
            overflowed: false,
        })
    };
}

impl Reaped {
    fn note(&mut self, pid: i32) {
        if self.overflowed {
            return;
        }
        if self.pids.len() < MOST {
            self.pids.push(pid);
        } else {
            self.overflowed = true;
            self.pids = Vec::new();
        }
    }
}

/// Our child `pid` was just reaped (its entry left our list of children).
pub fn note(pid: i32) {
    NOTES.with_borrow_mut(|notes| notes.note(pid));
    super::started::forget(pid);
}

/// Takes the notes made since the last call.
pub fn take() -> Reaped {
    NOTES.with_borrow_mut(std::mem::take)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_most_the_notes_give_way_to_one_whole_read() {
        let mut notes = Reaped::default();
        for pid in 1..=MOST as i32 {
            notes.note(pid);
        }
        assert_eq!(notes.pids.len(), MOST);
        assert!(!notes.overflowed);
        notes.note(0);
        assert!(notes.overflowed);
        assert!(notes.pids.is_empty());
        notes.note(1);
        assert!(
            notes.pids.is_empty(),
            "nothing kept once the copy is to be read whole"
        );
    }
}
