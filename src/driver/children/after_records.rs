//! Signals held until the session records that describe them are written.
//!
//! A stop's step goes into its session's record before its signal is sent, so that a
//! crash in between leaves a successor that does not send it again (docs/operations.md,
//! *After a crash*). Writing the records at each signal would undo their batching — a
//! slice of pipelined `stop`s would pay a record write and its flushes per request — so
//! while records wait to be written, signals wait behind them, in order, and go as soon
//! as the records are written (the slice's or the turn's one write).

use super::Children;
use crate::core::Scope;

/// The signals waiting for the records, in the order the core asked for them.
#[derive(Debug, Default)]
pub struct AfterRecords {
    waiting: Vec<(u64, i32, Scope)>,
}

impl Children {
    /// Sends `signal` now, or, while records are still to be written (`unsaved`) or
    /// other signals wait for them, once they are (see [`Children::records_written`]).
    pub fn signal_after_records(&mut self, gen: u64, signal: i32, scope: Scope, unsaved: bool) {
        if unsaved || !self.after_records.waiting.is_empty() {
            self.after_records.waiting.push((gen, signal, scope));
        } else {
            self.signal(gen, signal, scope);
        }
    }

    /// Whether a signal for `gen` waits for the records: its reap must wait for it.
    pub fn signal_waits_for_records(&self, gen: u64) -> bool {
        self.after_records.waiting.iter().any(|(g, ..)| *g == gen)
    }

    /// The records are written: the signals that waited for them go, in order.
    pub fn records_written(&mut self) {
        for (gen, signal, scope) in std::mem::take(&mut self.after_records.waiting) {
            self.signal(gen, signal, scope);
        }
    }
}
