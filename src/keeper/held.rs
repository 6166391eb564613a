//! What the keeper holds: each generation's descriptors by role. Nothing is read from
//! them, written to them or asked of them; they are only kept open and handed over.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::wire::{Role, Roles, Slots};

/// Most generations held: the daemon's own table is smaller, so more is a daemon gone
/// wrong, refused rather than grown without bound.
pub const MAX_HELD: usize = 65_536;

/// Held descriptors by generation.
#[derive(Debug, Default)]
pub struct Held {
    gens: HashMap<u64, Slots>,
}

impl Held {
    /// Keeps `fds` (in the roles' order) for `gen`, replacing any held in the same role.
    /// Refused (the descriptors closed) when the table is full.
    pub fn hold(&mut self, gen: u64, roles: Roles, fds: Vec<OwnedFd>) -> bool {
        if !self.gens.contains_key(&gen) && self.gens.len() >= MAX_HELD {
            return false;
        }
        let slots = self.gens.entry(gen).or_default();
        for (role, fd) in roles.iter().zip(fds) {
            slots[role.index()] = Some(fd);
        }
        true
    }

    /// Closes `gen`'s descriptors in `roles`; forgets `gen` once it has none.
    pub fn drop_roles(&mut self, gen: u64, roles: Roles) {
        let Some(slots) = self.gens.get_mut(&gen) else {
            return;
        };
        for role in roles.iter() {
            slots[role.index()] = None;
        }
        if slots.iter().all(Option::is_none) {
            self.gens.remove(&gen);
        }
        if self.gens.is_empty() {
            // A burst of generations gone: give the table's memory back.
            self.gens.shrink_to_fit();
        }
    }

    /// Every generation with the roles held and their descriptors, in role order.
    pub fn each(&self) -> impl Iterator<Item = (u64, Roles, Vec<BorrowedFd<'_>>)> {
        self.gens.iter().map(|(gen, slots)| {
            let mut roles = Roles::NONE;
            let mut fds = Vec::with_capacity(Role::ALL.len());
            for role in Role::ALL {
                if let Some(fd) = &slots[role.index()] {
                    roles = roles.with(role);
                    fds.push(fd.as_fd());
                }
            }
            (*gen, roles, fds)
        })
    }

    /// Closes everything.
    pub fn clear(&mut self) {
        self.gens = HashMap::new();
    }
}
