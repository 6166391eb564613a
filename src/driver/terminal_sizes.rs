//! Whose size a PTY has while several terminals are attached to it: the latest one's, as
//! tmux's `window-size latest` — and, when that terminal goes, the size of the one
//! attached or resized most recently before it, not the size of a terminal nobody looks
//! at any more.
//!
//! A terminal says it is attached by sending its `resize` with `"attached": true`
//! ([`Op::AttachedResize`](crate::proto::Op::AttachedResize)); a plain `resize` is a
//! one-off that holds until a terminal resizes again, and is never taken back. A
//! connection has at most one attached terminal per session (the generation it sized
//! last: one that follows a replacement leaves the one before), so what is kept is
//! bounded by the connections times the sessions. Not carried across an `upgrade`: the
//! terminals are known again as they next resize.

use std::collections::HashMap;

/// A connection's terminal attached to a session.
#[derive(Debug)]
struct Attached {
    gen: u64,
    rows: u16,
    cols: u16,
    /// When it sized `gen`, in resizes counted by [`TerminalSizes`]: the latest is largest.
    seq: u64,
}

/// A size to give a generation again: its session, the generation, rows, columns.
pub type SizeAgain = (String, u64, u16, u16);

/// The attached terminals of every connection, and who sized each generation last.
#[derive(Debug, Default)]
pub struct TerminalSizes {
    /// Connection → session → its terminal there (the generation it sized last).
    attached: HashMap<u64, HashMap<String, Attached>>,
    /// For each generation with attached terminals: the connection whose size it was
    /// given last, `None` when a one-off `resize` came after.
    given_by: HashMap<u64, Option<u64>>,
    seq: u64,
}

impl TerminalSizes {
    /// Connection `client`'s terminal, attached to `gen` of `session`, is `rows` × `cols`
    /// (the core has taken the resize).
    pub fn attached(&mut self, client: u64, session: &str, gen: u64, rows: u16, cols: u16) {
        self.seq += 1;
        let now = Attached {
            gen,
            rows,
            cols,
            seq: self.seq,
        };
        let terminals = self.attached.entry(client).or_default();
        if let Some(before) = terminals.insert(session.to_owned(), now) {
            if before.gen != gen {
                self.forget_unless_attached(before.gen);
            }
        }
        self.given_by.insert(gen, Some(client));
    }

    /// A one-off `resize` of `gen`: no attached terminal's size is to be given back to it
    /// when one goes.
    pub fn one_off(&mut self, gen: u64) {
        if let Some(by) = self.given_by.get_mut(&gen) {
            *by = None;
        }
    }

    /// Connection `client` is gone: the sizes its generations go back to — for each, the
    /// most recent other terminal attached to it — where its terminal's was the one
    /// given last.
    pub fn gone(&mut self, client: u64) -> Vec<SizeAgain> {
        let Some(terminals) = self.attached.remove(&client) else {
            return Vec::new();
        };
        let mut again = Vec::new();
        for (session, gone) in terminals {
            let given_last = self.given_by.get(&gone.gen).copied().flatten() == Some(client);
            let next = self
                .attached
                .iter()
                .filter_map(|(&c, t)| Some((c, t.get(&session).filter(|a| a.gen == gone.gen)?)))
                .max_by_key(|(_, a)| a.seq);
            match next {
                None => {
                    self.given_by.remove(&gone.gen);
                }
                Some((next, a)) if given_last => {
                    again.push((session, a.gen, a.rows, a.cols));
                    self.given_by.insert(gone.gen, Some(next));
                }
                Some(_) => {}
            }
        }
        again
    }

    fn forget_unless_attached(&mut self, gen: u64) {
        let attached = self.attached.values().flat_map(HashMap::values);
        if !attached.into_iter().any(|a| a.gen == gen) {
            self.given_by.remove(&gen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_terminal_wins_and_its_going_gives_back_the_one_before() {
        let mut t = TerminalSizes::default();
        t.attached(1, "s", 7, 20, 90);
        t.attached(2, "s", 7, 30, 100);
        t.attached(3, "s", 7, 40, 120);
        // One that did not size it last goes: nothing changes.
        assert_eq!(t.gone(2), []);
        assert_eq!(t.gone(3), [("s".into(), 7, 20, 90)]);
        // The last one goes: its size stays, nobody else looks.
        assert_eq!(t.gone(1), []);
        assert!(t.given_by.is_empty() && t.attached.is_empty());
    }

    #[test]
    fn a_one_off_resize_is_not_taken_back() {
        let mut t = TerminalSizes::default();
        t.attached(1, "s", 7, 20, 90);
        t.attached(2, "s", 7, 30, 100);
        t.one_off(7);
        assert_eq!(t.gone(2), []);
        // A terminal resizing again is the latest again.
        t.attached(3, "s", 7, 50, 150);
        assert_eq!(t.gone(3), [("s".into(), 7, 20, 90)]);
    }

    #[test]
    fn a_terminal_following_a_newer_generation_leaves_the_old_one() {
        let mut t = TerminalSizes::default();
        t.attached(1, "s", 7, 20, 90);
        t.attached(1, "s", 8, 20, 90);
        assert!(!t.given_by.contains_key(&7));
        t.attached(2, "s", 8, 30, 100);
        assert_eq!(t.gone(2), [("s".into(), 8, 20, 90)]);
        assert_eq!(t.attached.len(), 1);
    }

    #[test]
    fn one_connection_may_hold_terminals_of_several_sessions() {
        let mut t = TerminalSizes::default();
        t.attached(1, "a", 3, 20, 90);
        t.attached(1, "b", 4, 21, 91);
        t.attached(2, "a", 3, 30, 100);
        t.attached(2, "b", 4, 31, 101);
        let mut again = t.gone(2);
        again.sort();
        assert_eq!(again, [("a".into(), 3, 20, 90), ("b".into(), 4, 21, 91)]);
    }
}
