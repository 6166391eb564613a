//! What the generations taken back left behind, killed by one look through `/proc` per
//! loop turn however many of them ended in it.
//!
//! A process taken back after a crash is not the daemon's child: once it has exited
//! nothing pins its group, so what it started is found by its marker (see
//! [`recover::sweep`]), which means reading the environment of every process on the host.
//! After a crash with many sessions, their ends come together (an `on_recover: stop` stops
//! them all at once, a shutdown cut short by the crash is carried on): one look per end
//! would cost generations × host processes, with the loop answering nobody meanwhile.
//! Gathered here and looked for once at the end of the turn — after its answers are
//! written — the cost is one walk per turn, and nothing in the turn waits for it.
//!
//! Until that walk, a generation released meanwhile keeps its descriptor: the next daemon
//! sweeps what a generation left only while its descriptor is there (one whose end is
//! recorded and whose descriptor is gone is taken as done with), so a crash between the
//! end and the walk must find the descriptor. It goes once the walk is done.

use std::collections::HashSet;

use super::recover;

/// The generations whose leftovers are to be killed at the end of this turn.
#[derive(Debug, Default)]
pub struct Leftovers {
    due: HashSet<u64>,
    /// Of those, the ones released since: their descriptors go after the walk.
    released: Vec<u64>,
}

impl Leftovers {
    /// What still carries `gen`'s marker is to be killed, with the next [`Leftovers::kill`].
    pub fn add(&mut self, gen: u64) {
        self.due.insert(gen);
    }

    /// `gen` is released: whether its descriptor is to wait for the walk (it is due),
    /// in which case [`Leftovers::kill`] returns it.
    pub fn hold_descriptor(&mut self, gen: u64) -> bool {
        let due = self.due.contains(&gen);
        if due {
            self.released.push(gen);
        }
        due
    }

    /// Kills what carries the marker of any generation added since the last call: one
    /// walk of `/proc` for all of them, none when there are none. Returns the released
    /// ones, whose descriptors may go now.
    #[must_use]
    pub fn kill(&mut self, dir_id: &str) -> Vec<u64> {
        if self.due.is_empty() {
            return Vec::new();
        }
        let due = std::mem::take(&mut self.due);
        recover::sweep(dir_id, |gen| !due.contains(&gen));
        std::mem::take(&mut self.released)
    }
}
