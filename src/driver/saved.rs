//! What each session's file holds, as far as this daemon knows: a digest of the bytes it
//! last wrote there, or read there at start. A record the core marks changed whose file
//! would be those very bytes is not written again — the core marks generously (every
//! session at a shutdown, a restore and a resume: a spare write, never a missed one), and
//! each write is an `fsync`, a rename and another `fsync`: with 100,000 idle sessions on a
//! disk, minutes at every stop and start.
//!
//! A digest is only ever the bytes on disk durably: it is taken after a write succeeded
//! (file and directory flushed), or after the files read at start had their directory
//! flushed; a write or removal that begins forgets it first, so one that fails leaves
//! nothing known, and the next write is made whatever it holds.
//!
//! A digest is the 64-bit SipHash of the bytes (their length included) under keys drawn
//! at random for this process: no client can make another record of its session hash
//! the same, and by chance two differ with the same hash once in 2^64. It is 8 bytes per
//! session, next to the name the core already holds (an `Arc` shared with it): some 30
//! bytes a session with the table's overhead. It is not carried across an upgrade (the
//! keys are not): the program executed knows nothing, and writes whatever is marked.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Each session's file, by the digest of what it holds.
#[derive(Debug, Default)]
pub struct Saved {
    /// This process's hash keys.
    keys: RandomState,
    /// The digest of each session file known to hold certain bytes durably.
    files: HashMap<Arc<str>, u64>,
}

impl Saved {
    /// Whether session `name`'s file is known to hold `bytes`, durably.
    pub fn holds(&self, name: &str, bytes: &[u8]) -> bool {
        self.files.get(name) == Some(&self.digest(bytes))
    }

    /// Session `name`'s file holds `bytes`, durably (written and flushed, or read and its
    /// directory flushed).
    pub fn holding(&mut self, name: Arc<str>, bytes: &[u8]) {
        let digest = self.digest(bytes);
        self.files.insert(name, digest);
    }

    /// What session `name`'s file holds is no longer known: a write or removal of it
    /// begins, and may fail half done.
    pub fn forget(&mut self, name: &str) {
        self.files.remove(name);
    }

    /// Nothing is known of any file (their reading could not be made durable).
    pub fn forget_all(&mut self) {
        self.files = HashMap::new();
    }

    fn digest(&self, bytes: &[u8]) -> u64 {
        self.keys.hash_one(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bytes_last_held_are_known() {
        let mut saved = Saved::default();
        assert!(!saved.holds("a", b"one"), "nothing is known at first");
        saved.holding(Arc::from("a"), b"one");
        assert!(saved.holds("a", b"one"));
        assert!(!saved.holds("a", b"one "), "other bytes");
        assert!(!saved.holds("a", b"on"), "a prefix");
        assert!(!saved.holds("b", b"one"), "another session's file");
        saved.holding(Arc::from("a"), b"two");
        assert!(saved.holds("a", b"two"));
        assert!(!saved.holds("a", b"one"), "replaced");
        saved.forget("a");
        assert!(!saved.holds("a", b"two"), "forgotten");
        saved.holding(Arc::from("a"), b"");
        saved.holding(Arc::from("b"), b"x");
        assert!(saved.holds("a", b""), "an empty file is bytes too");
        saved.forget_all();
        assert!(!saved.holds("a", b"") && !saved.holds("b", b"x"));
    }

    #[test]
    fn a_digest_costs_one_word_beside_the_shared_name() {
        let name: Arc<str> = Arc::from("web");
        let mut saved = Saved::default();
        saved.holding(name.clone(), b"{}");
        assert_eq!(
            Arc::strong_count(&name),
            2,
            "the name is shared, not copied"
        );
        assert_eq!(std::mem::size_of::<(Arc<str>, u64)>(), 24);
    }
}
