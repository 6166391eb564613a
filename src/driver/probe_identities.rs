//! Whom a generation's probe commands run as, when finding that out took the lookup
//! helper: kept from the generation's own start, so that a probe every second costs no
//! lookup (and never one in the loop), and carried across an upgrade.

use std::collections::{HashMap, HashSet};

use crate::lookup::answer::{self, Found};

/// The identities found for generations whose spec has a probe command.
#[derive(Debug, Default)]
pub struct ProbeIdentities {
    /// Started generations whose lookup's answer is to be kept.
    wanted: HashSet<u64>,
    found: HashMap<u64, Found>,
}

impl ProbeIdentities {
    /// `gen` has a probe command and its start waits for a lookup.
    pub fn want(&mut self, gen: u64) {
        self.wanted.insert(gen);
    }

    /// The lookup for `gen` answered `found`.
    pub fn answered(&mut self, gen: u64, found: &Found) {
        if self.wanted.remove(&gen) {
            self.found.insert(gen, found.clone());
        }
    }

    /// What `gen`'s start found, if it took a lookup.
    pub fn get(&self, gen: u64) -> Option<&Found> {
        self.found.get(&gen)
    }

    /// `gen` is gone.
    pub fn forget(&mut self, gen: u64) {
        self.wanted.remove(&gen);
        self.found.remove(&gen);
    }

    /// For an upgrade image: each generation's identity in the lookup answer's encoding.
    pub fn export(&self) -> Vec<(u64, Vec<u8>)> {
        let mut all: Vec<(u64, Vec<u8>)> = self
            .found
            .iter()
            .map(|(gen, f)| (*gen, answer::encode(&Ok(f.clone()))))
            .collect();
        all.sort_unstable_by_key(|(gen, _)| *gen);
        all
    }

    /// Takes back an upgrade image's identities; one that does not decode is dropped
    /// (its generation's probe commands then fail, which its checks report).
    pub fn resume(&mut self, images: Vec<(u64, Vec<u8>)>) {
        for (gen, bytes) in images {
            match answer::decode(&bytes) {
                Ok(Ok(found)) => {
                    self.found.insert(gen, found);
                }
                _ => log::warn!("gen {gen}: its probes' identity did not survive the upgrade"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wanted_answers_are_kept_and_they_cross_an_upgrade() {
        let mut ids = ProbeIdentities::default();
        ids.want(7);
        let found = Found {
            env: vec![("A".into(), "1".into())],
            ..Found::default()
        };
        ids.answered(7, &found);
        ids.answered(8, &found);
        assert_eq!(ids.get(7), Some(&found));
        assert_eq!(ids.get(8), None);
        let mut next = ProbeIdentities::default();
        next.resume(ids.export());
        assert_eq!(next.get(7), Some(&found));
        next.forget(7);
        assert_eq!(next.get(7), None);
    }
}
