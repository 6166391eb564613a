//! The messages between a daemon and its keeper: fixed-size records on a `SOCK_SEQPACKET`
//! socket, each with the descriptors it names attached (see `docs/keeper.md`).
//!
//! Every message is exactly [`MESSAGE_BYTES`] bytes:
//!
//! ```text
//!  0     1        2     3      4..8      8..16
//!  'K'   version  kind  roles  0 0 0 0   gen (u64, little-endian)
//! ```
//!
//! Decoding is strict: a wrong length, magic, version or kind, a reserved byte that is
//! not zero, a role set that does not fit the kind, or descriptors that do not match the
//! roles named, and the message is refused (its descriptors closed) — never a panic, and
//! nothing allocated beyond the descriptors the kernel already delivered.

use std::os::fd::OwnedFd;

/// The size of every message.
pub const MESSAGE_BYTES: usize = 16;

const MAGIC: u8 = b'K';
const VERSION: u8 = 1;

/// One descriptor of a generation, as a bit of a role set. The attached descriptors come
/// in this order (lowest bit first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The leader's pidfd.
    Pidfd,
    /// Our end of its stdin pipe.
    Stdin,
    /// Our end of its stdout pipe.
    Stdout,
    /// Our end of its stderr pipe.
    Stderr,
    /// Its PTY master (output, input and the terminal size).
    Pty,
}

impl Role {
    /// Every role, in attachment order.
    pub const ALL: [Role; 5] = [
        Role::Pidfd,
        Role::Stdin,
        Role::Stdout,
        Role::Stderr,
        Role::Pty,
    ];

    /// Its bit in a role set.
    pub const fn bit(self) -> u8 {
        1 << self as u8
    }

    /// Its index in a per-role table.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// A set of roles, as one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Roles(u8);

impl Roles {
    /// Every role.
    pub const ALL: Roles = Roles(0b1_1111);

    /// No role.
    pub const NONE: Roles = Roles(0);

    /// The set from its byte, if every bit names a role.
    pub const fn from_bits(bits: u8) -> Option<Roles> {
        if bits & !Roles::ALL.0 == 0 {
            Some(Roles(bits))
        } else {
            None
        }
    }

    /// Its byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether `role` is in the set.
    pub const fn has(self, role: Role) -> bool {
        self.0 & role.bit() != 0
    }

    /// The set with `role` added.
    #[must_use]
    pub const fn with(self, role: Role) -> Roles {
        Roles(self.0 | role.bit())
    }

    /// How many roles.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether it is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The roles in the set, in attachment order.
    pub fn iter(self) -> impl Iterator<Item = Role> {
        Role::ALL.into_iter().filter(move |r| self.has(*r))
    }
}

/// What a message says.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    /// Keep these descriptors of `gen` (daemon → keeper); or, during a hand-over, these
    /// are the ones kept (keeper → daemon). Adds to what is held for `gen`.
    Hold,
    /// Close the descriptors of `gen` in the role set (all of them: forget `gen`).
    Drop,
    /// The daemon shuts down cleanly: close everything, remove the keeper's files, exit.
    Bye,
    /// A new daemon asks for everything held (answered by `Hold`s, then `End`).
    Take,
    /// Every held generation was sent; `gen` is how many.
    End,
    /// The keeper is listening and recorded; `gen` is its pid (keeper → the daemon that
    /// started it).
    Ready,
}

impl Kind {
    const fn code(&self) -> u8 {
        match self {
            Kind::Hold => 1,
            Kind::Drop => 2,
            Kind::Bye => 3,
            Kind::Take => 4,
            Kind::End => 5,
            Kind::Ready => 6,
        }
    }

    const fn of(code: u8) -> Option<Kind> {
        Some(match code {
            1 => Kind::Hold,
            2 => Kind::Drop,
            3 => Kind::Bye,
            4 => Kind::Take,
            5 => Kind::End,
            6 => Kind::Ready,
            _ => return None,
        })
    }
}

/// One message, without its descriptors.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    /// What it says.
    pub kind: Kind,
    /// The roles it is about (`Hold`, `Drop`); empty otherwise.
    pub roles: Roles,
    /// The generation (`Hold`, `Drop`), the count (`End`), the pid (`Ready`); else 0.
    pub gen: u64,
}

impl Message {
    /// A message with no roles.
    pub const fn plain(kind: Kind, gen: u64) -> Message {
        Message {
            kind,
            roles: Roles::NONE,
            gen,
        }
    }

    /// Its bytes.
    pub fn encode(&self) -> [u8; MESSAGE_BYTES] {
        let mut out = [0u8; MESSAGE_BYTES];
        out[0] = MAGIC;
        out[1] = VERSION;
        out[2] = self.kind.code();
        out[3] = self.roles.bits();
        out[8..16].copy_from_slice(&self.gen.to_le_bytes());
        out
    }

    /// Decodes `bytes` received with `fds` descriptors attached, checking that the
    /// descriptors are the ones the message names (see the module docs).
    pub fn decode(bytes: &[u8], fds: usize) -> Result<Message, &'static str> {
        let b: &[u8; MESSAGE_BYTES] = bytes.try_into().map_err(|_| "wrong length")?;
        if b[0] != MAGIC {
            return Err("not a keeper message");
        }
        if b[1] != VERSION {
            return Err("unknown version");
        }
        if b[4..8] != [0; 4] {
            return Err("reserved bytes set");
        }
        let kind = Kind::of(b[2]).ok_or("unknown kind")?;
        let roles = Roles::from_bits(b[3]).ok_or("unknown role")?;
        let mut gen_bytes = [0u8; 8];
        gen_bytes.copy_from_slice(&b[8..16]);
        let gen = u64::from_le_bytes(gen_bytes);
        let (roles_ok, fds_ok, gen_ok) = match kind {
            Kind::Hold => (!roles.is_empty(), fds == roles.len(), gen > 0),
            Kind::Drop => (!roles.is_empty(), fds == 0, gen > 0),
            Kind::Bye | Kind::Take => (roles.is_empty(), fds == 0, gen == 0),
            Kind::End | Kind::Ready => (roles.is_empty(), fds == 0, true),
        };
        match (roles_ok, fds_ok, gen_ok) {
            (false, _, _) => Err("roles do not fit the kind"),
            (_, false, _) => Err("descriptors do not match the roles"),
            (_, _, false) => Err("generation out of range"),
            (true, true, true) => Ok(Message { kind, roles, gen }),
        }
    }
}

/// One generation's descriptors by [`Role::index`].
pub type Slots = [Option<OwnedFd>; 5];

/// Puts received descriptors in their slots, in attachment order (`fds.len()` is
/// `roles.len()`, as [`Message::decode`] checked).
pub fn slots(roles: Roles, fds: Vec<OwnedFd>) -> Slots {
    let mut out: Slots = Default::default();
    for (role, fd) in roles.iter().zip(fds) {
        out[role.index()] = Some(fd);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        let hold = Message {
            kind: Kind::Hold,
            roles: Roles::NONE.with(Role::Pidfd).with(Role::Pty),
            gen: 42,
        };
        assert_eq!(Message::decode(&hold.encode(), 2), Ok(hold));
        for m in [
            Message::plain(Kind::Bye, 0),
            Message::plain(Kind::Take, 0),
            Message::plain(Kind::End, 1000),
            Message::plain(Kind::Ready, 77),
        ] {
            assert_eq!(Message::decode(&m.encode(), 0), Ok(m));
        }
    }

    #[test]
    fn garbage_is_refused_never_a_panic() {
        let good = Message {
            kind: Kind::Drop,
            roles: Roles::ALL,
            gen: 3,
        }
        .encode();
        assert!(Message::decode(&good, 0).is_ok());
        assert!(Message::decode(&good[..15], 0).is_err());
        assert!(Message::decode(&[good.as_slice(), &[0]].concat(), 0).is_err());
        assert!(
            Message::decode(&good, 1).is_err(),
            "a drop carries no descriptor"
        );
        for i in 0..8 {
            let mut bad = good;
            bad[i] ^= 0x80;
            assert!(Message::decode(&bad, 0).is_err(), "byte {i} flipped");
        }
        let hold = Message {
            kind: Kind::Hold,
            roles: Roles::NONE.with(Role::Stdout),
            gen: 3,
        }
        .encode();
        assert!(
            Message::decode(&hold, 2).is_err(),
            "more descriptors than roles"
        );
        assert!(Message::decode(&Message::plain(Kind::Hold, 0).encode(), 0).is_err());
        // Every byte value in every position: refused or accepted, never a panic.
        for i in 0..MESSAGE_BYTES {
            for v in 0..=255u8 {
                let mut m = good;
                m[i] = v;
                let _ = Message::decode(&m, 0);
            }
        }
    }
}
