//! The sessions whose Pending generation waits for its dependencies (`depends_on`),
//! indexed by the sessions they wait on, so that after an input only those its changes may
//! release are looked at again: an input costs the same with one blocked session or
//! 10,000 (see [`Core::retry_blocked`](super::Core)).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Default, Clone)]
pub(super) struct Blocked {
    /// Each blocked session, with the sessions it waits on (its current generation's
    /// `depends_on`).
    waiting: BTreeMap<Arc<str>, Vec<Arc<str>>>,
    /// Each session waited on, with the blocked sessions waiting on it.
    waited_on: BTreeMap<Arc<str>, BTreeSet<Arc<str>>>,
    /// Every blocked session is to be looked at on the next look (after an import, which
    /// does not know what changed).
    all_due: bool,
}

impl Blocked {
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Remembers `name` as waiting on `deps` (in place of what it waited on before).
    pub fn insert(&mut self, name: Arc<str>, deps: Vec<Arc<str>>) {
        self.remove(&name);
        for dep in &deps {
            self.waited_on
                .entry(dep.clone())
                .or_default()
                .insert(name.clone());
        }
        self.waiting.insert(name, deps);
    }

    /// Forgets `name`; whether it was blocked.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(deps) = self.waiting.remove(name) else {
            return false;
        };
        for dep in deps {
            if let Some(set) = self.waited_on.get_mut(&dep) {
                set.remove(name);
                if set.is_empty() {
                    self.waited_on.remove(&dep);
                }
            }
        }
        true
    }

    /// Every blocked session to be looked at on the next look.
    pub fn mark_all_due(&mut self) {
        self.all_due = true;
    }

    /// The blocked sessions a change of the sessions `changed` may release — each one
    /// named, and each waiting on one named — in name order; every blocked session once
    /// [`mark_all_due`](Self::mark_all_due) was called.
    pub fn due<'a>(&mut self, changed: impl IntoIterator<Item = &'a Arc<str>>) -> Vec<Arc<str>> {
        if std::mem::take(&mut self.all_due) {
            return self.waiting.keys().cloned().collect();
        }
        let mut due = BTreeSet::new();
        for name in changed {
            if self.waiting.contains_key(name) {
                due.insert(name.clone());
            }
            if let Some(set) = self.waited_on.get(name) {
                due.extend(set.iter().cloned());
            }
        }
        due.into_iter().collect()
    }

    /// The blocked sessions, in name order (for the invariant checker).
    #[cfg(any(test, feature = "testkit"))]
    pub fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.waiting.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<Arc<str>> {
        v.iter().map(|s| Arc::from(*s)).collect()
    }

    #[test]
    fn only_what_a_change_may_release_is_due() {
        let mut b = Blocked::default();
        b.insert("web".into(), names(&["db", "cache"]));
        b.insert("worker".into(), names(&["db"]));
        b.insert("cron".into(), names(&["queue"]));
        assert_eq!(b.due(&names(&["db"])), names(&["web", "worker"]));
        assert_eq!(b.due(&names(&["cron", "other"])), names(&["cron"]));
        assert!(b.due(&names(&["other"])).is_empty());
        // Waiting on something else now: the old edge is gone.
        b.insert("web".into(), names(&["queue"]));
        assert_eq!(b.due(&names(&["db"])), names(&["worker"]));
        assert_eq!(b.due(&names(&["queue"])), names(&["cron", "web"]));
        assert!(b.remove("worker"));
        assert!(!b.remove("worker"));
        assert!(b.due(&names(&["db"])).is_empty());
        b.mark_all_due();
        assert_eq!(b.due(&names(&[])), names(&["cron", "web"]));
        assert!(b.due(&names(&[])).is_empty(), "all due once");
    }
}
