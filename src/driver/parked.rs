//! Output streams the daemon stopped reading because a lossless subscriber of their
//! session is behind (see `pacers.rs`).
//!
//! Reading is paused without touching the descriptors' registration: a parked stream's
//! readiness is simply not acted on, and its token is kept here. When the session's
//! lossless followers have caught up (or gone, or been demoted), or the generation's
//! output was closed (its drain deadline bounds how long a reader can hold up its end
//! after the leader exited), the tokens go back to the loop's list of sources to service,
//! as if they had just become readable: edge-triggered readiness would not fire again for
//! a pipe that stayed full.
//!
//! Nothing else waits: a parked stream costs one entry here, its child blocks in its own
//! `write`, and every other source is serviced as before.

use std::collections::HashMap;
use std::sync::Arc;

use mio::Token;

/// The parked streams of one generation.
#[derive(Debug)]
struct Held {
    session: Arc<str>,
    tokens: Vec<Token>,
}

/// Every parked stream, by generation.
#[derive(Debug, Default)]
pub struct Parked {
    gens: HashMap<u64, Held>,
}

impl Parked {
    /// Whether nothing is parked.
    pub fn is_empty(&self) -> bool {
        self.gens.is_empty()
    }

    /// Whether `gen`'s output is held: its other streams wait too (so that none of them
    /// adds to a log a lossless follower is behind on).
    pub fn holds(&self, gen: u64) -> bool {
        self.gens.contains_key(&gen)
    }

    /// Parks `gen`'s stream `token`, whose output goes to `session`'s log.
    pub fn park(&mut self, gen: u64, session: &Arc<str>, token: Token) {
        let held = self.gens.entry(gen).or_insert_with(|| Held {
            session: session.clone(),
            tokens: Vec::new(),
        });
        if !held.tokens.contains(&token) {
            held.tokens.push(token);
        }
    }

    /// Parks one more stream of a generation already held.
    pub fn park_also(&mut self, gen: u64, token: Token) {
        if let Some(held) = self.gens.get_mut(&gen) {
            if !held.tokens.contains(&token) {
                held.tokens.push(token);
            }
        }
    }

    /// Unparks the generations `flows(gen, session)` lets go: their sessions and tokens.
    pub fn release(
        &mut self,
        mut flows: impl FnMut(u64, &Arc<str>) -> bool,
    ) -> Vec<(Arc<str>, Token)> {
        let mut out = Vec::new();
        self.gens.retain(|&gen, held| {
            if !flows(gen, &held.session) {
                return true;
            }
            out.extend(held.tokens.drain(..).map(|t| (held.session.clone(), t)));
            false
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_of_a_held_generation_are_released_together() {
        let s: Arc<str> = "s".into();
        let mut p = Parked::default();
        p.park(7, &s, Token(1));
        p.park(7, &s, Token(1));
        p.park_also(7, Token(2));
        p.park_also(8, Token(3)); // Not held: nothing to add it to.
        assert!(p.holds(7) && !p.holds(8));
        assert!(p.release(|_, _| false).is_empty());
        let out = p.release(|gen, session| gen == 7 && &**session == "s");
        assert_eq!(out.len(), 2);
        assert!(p.is_empty());
    }
}
