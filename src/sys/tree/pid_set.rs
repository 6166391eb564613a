//! Sets of process ids hashed for speed: a look at sessions builds and queries sets of
//! every running leader, and SipHash (the standard sets' default, made to resist keys an
//! attacker picks) costs more there than the rest of the set's work. Pids are handed out
//! by the kernel, not chosen by whoever sends them, so a plain multiplicative hash does.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// A set of pids with [`PidHasher`].
pub type PidSet = HashSet<i32, BuildHasherDefault<PidHasher>>;

/// Fibonacci hashing of one integer: its bits spread over the whole word, high bits
/// included (the table takes its probe tags from them).
#[derive(Debug, Default, Clone, Copy)]
pub struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_i32(&mut self, pid: i32) {
        self.0 = (self.0 ^ u64::from(pid as u32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// `pids` as a [`PidSet`].
pub fn pid_set(pids: impl IntoIterator<Item = i32>) -> PidSet {
    pids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_pids_hash_apart_in_low_and_high_bits() {
        let hash = |p: i32| {
            let mut h = PidHasher::default();
            h.write_i32(p);
            h.finish()
        };
        let set: HashSet<u64> = (1000..1064).map(|p| hash(p) & 0x3f).collect();
        assert!(
            set.len() > 32,
            "low bits collide: {} distinct of 64",
            set.len()
        );
        let tags: HashSet<u64> = (1000..1064).map(|p| hash(p) >> 57).collect();
        assert!(
            tags.len() > 32,
            "high bits collide: {} distinct of 64",
            tags.len()
        );
        let s = pid_set([3, 5, 3]);
        assert_eq!(s.len(), 2);
        assert!(s.contains(&5) && !s.contains(&4));
    }
}
