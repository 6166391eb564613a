//! Descriptors in reserve: a spawn is refused (`limit`) while taking its descriptors would
//! leave fewer than [`reserve_for`] the limit, so that running out is met by a clear
//! refusal of new work, never by a client that cannot connect, a journal segment that
//! cannot be opened or a state file that cannot be written. Connections may use the
//! reserve, all but its last [`KEPT_FOR_STATE`]: clients alone can never leave the daemon
//! unable to save what it answered (a `stop` taken must survive a crash).
//!
//! What is in use is counted from what the owners hold — each child's descriptors as it
//! was taken in, each starting child at most [`LAUNCH_HELD`], each connection one — on
//! top of what the daemon held for itself once started (counted once, from
//! `/proc/self/fd`). No look at `/proc` per spawn: with 10,000 running sessions that would
//! cost more than the spawn. Descriptors a child closes while it is still tracked stay
//! counted until it is released, so the count is an upper bound, never short.

use crate::proto::error::{ErrorCode, ProtoError};

/// The most descriptors kept in reserve: enough for every connection that is turned away
/// or served while spawns are refused, a journal segment and a state file's write-temp,
/// fsync, rename and directory fsync.
pub const RESERVE_MAX: u64 = 64;

/// The fewest kept in reserve, however small the limit.
pub const RESERVE_MIN: u64 = 8;

/// Descriptors no connection may take: a state file's write (the temporary file and the
/// directory synced after the rename), the generation high-water mark, a process's
/// descriptor file, a journal segment, and a few to spare.
pub const KEPT_FOR_STATE: u64 = 8;

/// Descriptors a spawn holds at its peak: both ends of three pipes (or a terminal's two),
/// the status pipe's two, the pidfd, and a cgroup's directory (for the start) and
/// `cgroup.events`, plus
/// one opened for a moment on the way.
pub const SPAWN_PEAK: usize = 12;

/// Descriptors a child still starting holds at most: its status pipe, our ends of its
/// stdio (or a terminal's master), its pidfd and its cgroup's `cgroup.events`. While its
/// lookup helper runs, the helper's status pipe, stdin, stdout and pidfd take the place of
/// the child's.
pub const LAUNCH_HELD: usize = 7;

/// Descriptors kept in reserve under `limit`: a quarter of it, between [`RESERVE_MIN`] and
/// [`RESERVE_MAX`] — a small limit must still leave room to run something.
pub fn reserve_for(limit: u64) -> u64 {
    (limit / 4).clamp(RESERVE_MIN, RESERVE_MAX)
}

/// How many descriptors this process has open now (one look at `/proc/self/fd`).
fn open_now() -> Option<usize> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory being read is one of them.
    Some(dir.count().saturating_sub(1))
}

/// The daemon's descriptor budget.
#[derive(Debug, Clone, Copy)]
pub struct Descriptors {
    limit: Limit,
    /// What the daemon holds apart from children and connections.
    own: usize,
}

/// Where a budget's limit comes from.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// The soft `RLIMIT_NOFILE` as it is at each check: another process may lower it while
    /// the daemon runs (`prlimit`), and spawns must then be refused with `limit`, not fail
    /// in their setup. One `getrlimit` per check costs next to nothing.
    Current,
    /// A given one (`None`: unlimited), for a budget not measured, and for tests.
    Fixed(Option<u64>),
}

impl Descriptors {
    /// The budget under the current limit, with `held` of the descriptors open now held by
    /// children and connections (counted as they are); the rest is the daemon's own.
    pub fn measure(held: usize) -> Descriptors {
        let own = open_now().map_or(0, |n| n.saturating_sub(held));
        Descriptors {
            limit: Limit::Current,
            own,
        }
    }

    /// No budget yet: everything is admitted until [`Descriptors::measure`] replaces it.
    pub fn unmeasured() -> Descriptors {
        Descriptors {
            limit: Limit::Fixed(None),
            own: 0,
        }
    }

    /// The limit and its reserve, for people (`None` when unlimited).
    pub fn limit(&self) -> Option<(u64, u64)> {
        self.current_limit().map(|l| (l, reserve_for(l)))
    }

    fn current_limit(&self) -> Option<u64> {
        match self.limit {
            Limit::Current => crate::sys::rlimit::nofile_soft_limit(),
            Limit::Fixed(limit) => limit,
        }
    }

    /// Descriptors in use, by this count, with `held` held by children and connections.
    pub fn in_use(&self, held: usize) -> usize {
        self.own.saturating_add(held)
    }

    /// Whether one more spawn fits with `held` held by children and connections; if not,
    /// why, as a `limit` error.
    pub fn admit_spawn(&self, held: usize) -> Result<(), ProtoError> {
        let Some((limit, reserve)) = self.limit() else {
            return Ok(());
        };
        let in_use = self.in_use(held) as u64;
        if in_use + SPAWN_PEAK as u64 + reserve <= limit {
            return Ok(());
        }
        Err(ProtoError::new(
            ErrorCode::Limit,
            format!(
                "no descriptors to spare for a spawn under the descriptor limit {limit}: {in_use} in use, a spawn needs {SPAWN_PEAK} and {reserve} are kept in reserve for clients; stop or remove sessions, or raise the limit (RLIMIT_NOFILE)"
            ),
        ))
    }
}

impl Descriptors {
    /// How many more connections fit with `held` held by children and connections,
    /// leaving [`KEPT_FOR_STATE`] descriptors free (`usize::MAX` when unlimited).
    pub fn connection_room(&self, held: usize) -> usize {
        let Some(limit) = self.current_limit() else {
            return usize::MAX;
        };
        let in_use = self.in_use(held) as u64;
        let room = limit.saturating_sub(KEPT_FOR_STATE).saturating_sub(in_use);
        usize::try_from(room).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_a_quarter_of_a_small_limit_and_at_most_64() {
        assert_eq!(reserve_for(16), RESERVE_MIN);
        assert_eq!(reserve_for(96), 24);
        assert_eq!(reserve_for(1024), RESERVE_MAX);
        assert_eq!(reserve_for(1 << 20), RESERVE_MAX);
    }

    #[test]
    fn a_spawn_is_refused_once_it_would_eat_into_the_reserve() {
        let d = Descriptors {
            limit: Limit::Fixed(Some(100)),
            own: 20,
        };
        // 100 - 25 reserved - 12 for the spawn - 20 own: 43 may be held.
        assert!(d.admit_spawn(43).is_ok());
        let e = d.admit_spawn(44).unwrap_err();
        assert_eq!(e.code, ErrorCode::Limit);
        assert!(e.message.contains("descriptor limit 100"), "{}", e.message);
        assert!(e.message.contains("64 in use"), "{}", e.message);
        let unlimited = Descriptors {
            limit: Limit::Fixed(None),
            own: 20,
        };
        assert!(unlimited.admit_spawn(usize::MAX / 2).is_ok());
    }

    #[test]
    fn connections_may_use_the_reserve_but_never_what_state_writes_need() {
        let d = Descriptors {
            limit: Limit::Fixed(Some(100)),
            own: 20,
        };
        // Spawns stop at 43 held; connections go on to 100 - 8 - 20 = 72.
        assert_eq!(d.connection_room(43), 29);
        assert_eq!(d.connection_room(72), 0);
        assert_eq!(d.connection_room(90), 0);
        assert_eq!(
            Descriptors::unmeasured().connection_room(1 << 20),
            usize::MAX
        );
    }
}
