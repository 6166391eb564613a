//! One walk for many sessions, and the escapees it meets, each handed out once.
//!
//! A walk of our subtree starts at the daemon, where orphans arrive, by listing its own
//! children: every leader we run is among them. The kernel hands that list out one page
//! (some 700 pids) per `read`, and each `read` counts its way from the head of the list
//! again, so listing 10,000 leaders takes some 75,000 steps; a look at a session lists it
//! at least twice (the re-read that catches processes reparented during the walk), and
//! twice again to confirm that the session is empty. Looked at one by one, the sessions
//! of a `shutdown` of R running sessions would cost R such looks. A [`Survey`] looks at a
//! set of sessions with one walk that enters their leaders and skips every other one:
//! what grows with the number of running leaders is paid once per set, not per session.

use std::collections::{HashMap, HashSet};
use std::io;

use rustix::process::getpid;

use super::{
    read_member, scan_all, walk_on, Escapee, Member, OwnChildren, PidSet, Reach, Walk, MAX_WALK,
};
use crate::sys::procscan::MAX_SCAN;

/// What one walk found of a set of sessions.
#[derive(Debug)]
pub struct Survey {
    walk: Walk,
    /// The live members of each surveyed session, leaders left out.
    by_sid: HashMap<i32, Vec<Member>>,
}

impl Survey {
    /// Walks for the sessions `sids`, all with the same `reach`. `leaders` are the leaders
    /// we spawned and have not reaped (and those starting), as `others` for
    /// [`super::session_members`]: those not surveyed are skipped with their subtrees.
    ///
    /// `own`: our list of children as the last survey left it (see [`OwnChildren`]).
    pub fn take(
        reach: Reach,
        sids: &PidSet,
        leaders: &PidSet,
        own: &mut OwnChildren,
    ) -> io::Result<Survey> {
        let walk = match reach {
            Reach::Host => scan_all(MAX_SCAN)?,
            Reach::Subtree => {
                let skip = |pid| leaders.contains(&pid) && !sids.contains(&pid);
                walk_on(getpid().as_raw_pid(), MAX_WALK, &skip, own.listing())?
            }
        };
        let mut by_sid: HashMap<i32, Vec<Member>> = HashMap::new();
        for m in &walk.members {
            if m.pid != m.sid && !m.is_exited() && sids.contains(&m.sid) {
                by_sid.entry(m.sid).or_default().push(*m);
            }
        }
        Ok(Survey { walk, by_sid })
    }

    /// The live members of surveyed session `sid`, its leader left out.
    pub fn members(&self, sid: i32) -> &[Member] {
        self.by_sid.get(&sid).map_or(&[], Vec::as_slice)
    }

    /// The walk itself.
    pub fn walk(&self) -> &Walk {
        &self.walk
    }
}

/// The escapees already handed out, by pid and start time: each is reported once.
#[derive(Debug, Default)]
pub struct EscapeeLedger {
    seen: HashSet<(i32, u64)>,
}

impl EscapeeLedger {
    /// The escapees of `walk` not handed out before (see [`Walk::escapees`] for
    /// `tracked`). Once [`MAX_WALK`] are remembered, those that ended are forgotten; if
    /// that frees no room, no new one is handed out.
    pub fn new_in(&mut self, walk: &Walk, tracked: &PidSet) -> Vec<Escapee> {
        if self.seen.len() >= MAX_WALK {
            self.seen.retain(|&(pid, start)| {
                matches!(read_member(pid), Ok(Some(m)) if m.starttime == start && !m.is_exited())
            });
            if self.seen.len() >= MAX_WALK {
                return Vec::new();
            }
        }
        let seen = &self.seen;
        let found = walk.escapees_where(tracked, |m| !seen.contains(&(m.pid, m.starttime)));
        for e in &found {
            self.seen.insert((e.member.pid, e.member.starttime));
        }
        found
    }
}
