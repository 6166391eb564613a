//! Seeded choices for test inputs: [`SplitMix64`] for the seeded tests, [`Bytes`] for a
//! fuzzer's input, and [`Choose`], which generators take so that they serve both.

/// A source of choices: a number below a bound, from which the rest follows.
pub trait Choose {
    /// A number in `0..n` (`0` when `n` is 0).
    fn below(&mut self, n: u64) -> u64;

    /// One of `items` (which must not be empty).
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// SplitMix64: tiny, seedable, and good enough to pick test inputs (not for anything that
/// needs real randomness).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64().checked_rem(n).unwrap_or(0)
    }

    /// [`SplitMix64::below`] for lengths and positions.
    pub fn below_usize(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// One of `items` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below_usize(items.len())]
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Fills `buf` with pseudo-random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

impl Choose for SplitMix64 {
    fn below(&mut self, n: u64) -> u64 {
        SplitMix64::below(self, n)
    }
}

/// Choices read from a fuzzer's bytes, one byte each (so a mutated byte changes exactly
/// one choice; a bound above 256 reaches only its first 256 values); `0` once they run
/// out.
#[derive(Debug, Clone)]
pub struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    pub fn new(bytes: &'a [u8]) -> Bytes<'a> {
        Bytes(bytes)
    }
}

impl Choose for Bytes<'_> {
    fn below(&mut self, n: u64) -> u64 {
        let Some((&first, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        u64::from(first).checked_rem(n).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(SplitMix64::new(7).next_u64(), SplitMix64::new(8).next_u64());
    }

    #[test]
    fn choices_stay_in_range() {
        let mut r = SplitMix64::new(1);
        for n in 1..50 {
            assert!(r.below(n) < n);
            assert!(Choose::below(&mut Bytes::new(&[255, 3]), n) < n);
        }
        assert_eq!(r.below(0), 0);
        let mut b = Bytes::new(&[5]);
        assert_eq!(b.below(3), 2);
        assert_eq!(b.below(3), 0, "exhausted");
        let mut buf = [0u8; 13];
        r.fill(&mut buf);
        assert!(buf.iter().any(|&x| x != 0));
    }
}
