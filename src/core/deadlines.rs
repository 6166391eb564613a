//! The index of every pending deadline in the core, ordered by time, so the loop's
//! `next_deadline` is the first entry and `handle_timeout` visits only what is due: a
//! turn with 100,000 idle sessions costs O(log n), not a scan of the tables.
//!
//! Exact, not lazy: each entry is replaced whenever its owner's deadline may have
//! changed (see `Core::sync_gen` and `Core::sync_restart`), so the index always equals a
//! scan of the tables — which the invariant checker verifies after every step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::time::Time;

/// What a deadline belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Owner {
    /// A generation's phase or group timer (stop escalation, drain, group KILL, cancel).
    Gen(u64),
    /// A session's restart after backoff.
    Restart(Arc<str>),
}

/// The deadlines in time order, and each owner's entry so it can be replaced.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    by_time: BTreeSet<(Time, Owner)>,
    by_owner: BTreeMap<Owner, Time>,
}

impl Deadlines {
    /// Records `owner`'s deadline (`None`: it has none), replacing any earlier one.
    pub(super) fn set(&mut self, owner: Owner, at: Option<Time>) {
        if self.by_owner.get(&owner).copied() == at {
            return;
        }
        if let Some(old) = self.by_owner.remove(&owner) {
            self.by_time.remove(&(old, owner.clone()));
        }
        if let Some(at) = at {
            self.by_time.insert((at, owner.clone()));
            self.by_owner.insert(owner, at);
        }
    }

    /// The earliest deadline.
    pub(super) fn first(&self) -> Option<Time> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// Every owner whose deadline is at or before `now`, in time order.
    pub(super) fn due(&self, now: Time) -> impl Iterator<Item = &Owner> + '_ {
        self.by_time
            .iter()
            .take_while(move |(t, _)| *t <= now)
            .map(|(_, o)| o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_and_clearing_keep_one_entry_per_owner() {
        let mut d = Deadlines::default();
        d.set(Owner::Gen(1), Some(Time::from_millis(50)));
        d.set(Owner::Restart("a".into()), Some(Time::from_millis(20)));
        d.set(Owner::Gen(1), Some(Time::from_millis(10)));
        assert_eq!(d.first(), Some(Time::from_millis(10)));
        assert_eq!(d.by_owner.len(), 2);
        let due: Vec<_> = d.due(Time::from_millis(20)).cloned().collect();
        assert_eq!(due, vec![Owner::Gen(1), Owner::Restart("a".into())]);
        d.set(Owner::Gen(1), None);
        assert_eq!(d.first(), Some(Time::from_millis(20)));
        d.set(Owner::Restart("a".into()), None);
        assert_eq!((d.first(), d.by_time.len()), (None, 0));
    }
}
