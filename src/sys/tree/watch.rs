//! Watching a session empty after its members were signalled, without looking every loop
//! turn, and without a walk per session when many are watched at once.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{epoll, Timespec};
use rustix::io::Errno;
use rustix::process::Signal;

use super::survey::Survey;
use super::OwnChildren;
use super::{
    check_pinned, pid_set, signal_each, verify, Check, Member, Reach, SignalCounts, Within,
};
use crate::sys::process::{Process, SignalError};

/// What [`SessionWatch::poll`] concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchState {
    /// Two consecutive complete walks found no live member (the leader aside).
    Empty,
    /// Members remain, or emptiness is not proven yet.
    Waiting,
}

/// What [`SessionWatch::observe`] made of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// Members remain (or the walk was incomplete); what the signal did to them.
    Members(SignalCounts),
    /// No live member, for the first time: another walk must confirm it, at once.
    Unconfirmed,
    /// A SIGKILL is due and the members are being frozen first (see
    /// [`SessionWatch`], *Killing a tree that forks*): another walk is wanted at once.
    Freezing,
    /// Two consecutive complete walks found no live member.
    Empty,
}

/// Watching a session empty after its members were signalled, without looking every loop
/// turn.
///
/// The watch holds a pidfd for each member it found and verified (up to [`MAX_WATCHED`]),
/// all in an epoll instance of its own, created with the first: [`SessionWatch::fd`]
/// becomes readable when any of them exits. The driver registers that descriptor with its
/// poller for readable interest once it exists (edge-triggered is fine: the watch always
/// drains it) and deregisters it before dropping the watch.
///
/// The session is walked again (never more than this):
/// - after a signal ([`SessionWatch::mark`]): the members get it;
/// - when every watched member has exited (to find what they left behind, or to prove the
///   session empty), or when the driver says the leader exited;
/// - on a timer that starts at [`FIRST_RESCAN`] after a signal and doubles up to
///   [`MAX_RESCAN`] (to find members forked since, and any it could not watch).
///
/// Members found by a later walk get the last signal sent (a process forked while the
/// session was being killed is killed too), and are watched. A member stopped by job
/// control (a shell's Ctrl-Z) is sent SIGCONT right after the signal, as systemd does, so
/// that a SIGTERM does not wait in it until the SIGKILL. "Empty" needs two
/// consecutive complete walks with no live member; it is final once the leader has exited
/// (no live member is left to fork into the session), and while the leader runs it means
/// "empty now" (the watch then stops looking until the next signal).
///
/// # Killing a tree that forks
/// A SIGKILL sent to the members a walk found misses a child forked after the walk read
/// its parent; a tree whose processes keep forking and exiting (each forks its
/// successor) can slip past every walk that way, for ever. So a SIGKILL is never sent
/// straight: every member found is sent SIGSTOP first (a process with a stop pending
/// cannot complete a `fork`: the kernel restarts it after the stop), and the session is
/// walked again, until a walk finds no member it had not stopped already and every member
/// stopped (`T`) or in an uninterruptible wait (`D`: it cannot fork there, and stops
/// when it leaves it). Then nothing of the session can fork any more, and every member
/// found gets the SIGKILL (which ends a stopped process as it is). A few walks per call
/// ([`Observed::Freezing`] asks the caller for the next one at once, and the deadline
/// stays due, so a driver spreads the rest over its next turns); after
/// [`MAX_FREEZE_WALKS`] walks without settling, the SIGKILL goes to what was found, and
/// the freeze starts over for what is found after it.
///
/// # Alone or surveyed
/// [`SessionWatch::signal`] and [`SessionWatch::poll`] walk for this session alone. A
/// driver watching many sessions instead marks the signal ([`SessionWatch::mark`]), asks
/// each watch whether it wants a walk ([`SessionWatch::wants_walk`]), walks once for all
/// that do ([`Survey::take`]) and hands each the result ([`SessionWatch::observe`]): a
/// second survey, at once, for those that answer [`Observed::Unconfirmed`].
#[derive(Debug)]
pub struct SessionWatch {
    sid: i32,
    reach: Reach,
    /// Created with the first member watched: a session with none costs no descriptor.
    epoll: Option<OwnedFd>,
    watched: HashMap<i32, OwnedFd>,
    /// The last signal sent: members found later get it too.
    sticky: Option<Signal>,
    /// Signals marked and not sent yet, to every member, in order (see
    /// [`SessionWatch::mark`]).
    to_send: Vec<Signal>,
    /// The last complete walk found no live member: the next one confirms or refutes it.
    seen_empty: bool,
    delay: Duration,
    next_walk: Option<Instant>,
    empty: bool,
    walks: u64,
    warned: bool,
    /// A SIGKILL waits for the members to be frozen: those sent SIGSTOP so far, by pid
    /// and start time, and how many walks the freeze took.
    freeze: Option<Freeze>,
}

/// The members a freeze has sent SIGSTOP, and how many walks it took.
#[derive(Debug, Default)]
struct Freeze {
    stopped: HashSet<(i32, u64)>,
    walks: u32,
}

/// Most walks a freeze takes before it sends its SIGKILL anyway (a member that never
/// reaches `T`: one running in the kernel for long).
pub const MAX_FREEZE_WALKS: u32 = 64;

/// First rescan after a signal.
pub const FIRST_RESCAN: Duration = Duration::from_millis(20);
/// Longest time between rescans.
pub const MAX_RESCAN: Duration = Duration::from_secs(1);
/// Most members watched through pidfds at once; beyond it the timer finds them.
pub const MAX_WATCHED: usize = 256;
/// Most signals marked and not sent yet (one turn's worth; the oldest go first).
const MAX_MARKED: usize = 64;

const ZERO: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

impl SessionWatch {
    /// A watch on `leader`'s session, reaching members per [`Reach::of`], that wants a walk
    /// at once (its deadline is `now`).
    pub fn new(leader: &Process, now: Instant) -> SessionWatch {
        SessionWatch::with_reach(leader, Reach::of(leader), now)
    }

    /// [`SessionWatch::new`] with a given reach.
    pub fn with_reach(leader: &Process, reach: Reach, now: Instant) -> SessionWatch {
        SessionWatch {
            sid: leader.pid(),
            reach,
            epoll: None,
            watched: HashMap::new(),
            sticky: None,
            to_send: Vec::new(),
            seen_empty: false,
            delay: FIRST_RESCAN,
            next_walk: Some(now),
            empty: false,
            walks: 0,
            warned: false,
            freeze: None,
        }
    }

    /// The session watched: its leader's pid.
    pub fn sid(&self) -> i32 {
        self.sid
    }

    /// Where its members can be.
    pub fn reach(&self) -> Reach {
        self.reach
    }

    /// The descriptor to register for readable interest, once a member is watched:
    /// readable when a watched member exited.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.epoll.as_ref().map(OwnedFd::as_fd)
    }

    /// The descriptors it holds: the epoll instance and a pidfd per watched member.
    pub fn descriptors(&self) -> usize {
        usize::from(self.epoll.is_some()) + self.watched.len()
    }

    /// When it wants a walk even if [`SessionWatch::fd`] stays quiet; `None` once the
    /// session is empty.
    pub fn deadline(&self) -> Option<Instant> {
        if self.empty {
            None
        } else {
            self.next_walk
        }
    }

    /// How many members are watched through pidfds.
    pub fn watched(&self) -> usize {
        self.watched.len()
    }

    /// How many walks the watch has taken in.
    pub fn walks(&self) -> u64 {
        self.walks
    }

    /// Whether a marked signal waits for the next walk to reach the members.
    pub fn signal_pending(&self) -> bool {
        !self.to_send.is_empty()
    }

    /// Forgets the signals marked and not sent (a walk to send them failed); whether
    /// there were any. Members found later still get the last one.
    pub fn drop_marked(&mut self) -> bool {
        let had = !self.to_send.is_empty();
        self.to_send.clear();
        had
    }

    /// Whether the last look found the session empty.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Signals every live member of the session with `sig` and watches them, walking for
    /// this session alone; the same signal goes to members found by later walks.
    /// Refused once the leader no longer pins the session ([`SignalError::Reaped`]).
    pub fn signal(
        &mut self,
        leader: &Process,
        others: &[i32],
        sig: Signal,
        now: Instant,
    ) -> Result<SignalCounts, SignalError> {
        self.mark(leader, sig, now)?;
        self.look_alone(leader, others, now)
    }

    /// Whether the session is empty, walking for it alone if a walk is due (see the type).
    pub fn poll(
        &mut self,
        leader: &Process,
        others: &[i32],
        now: Instant,
    ) -> io::Result<WatchState> {
        if self.wants_walk(now, true, false)? {
            match self.look_alone(leader, others, now) {
                Ok(_) => {}
                Err(SignalError::Os(e)) => return Err(e),
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        Ok(if self.empty {
            WatchState::Empty
        } else {
            WatchState::Waiting
        })
    }

    /// Notes `sig` for every live member: the next walk sends it, and later walks send it
    /// to newcomers. Refused once the leader no longer pins the session.
    pub fn mark(&mut self, leader: &Process, sig: Signal, now: Instant) -> Result<(), SignalError> {
        check_pinned(leader)?;
        self.sticky = Some(sig);
        // In order, each once in a row: `KILL` then `CONT` must not become `CONT`. Bounded:
        // a flood of requests within one turn keeps the latest.
        if self.to_send.last() != Some(&sig) {
            if self.to_send.len() == MAX_MARKED {
                self.to_send.remove(0);
            }
            self.to_send.push(sig);
        }
        self.seen_empty = false;
        self.empty = false;
        self.delay = FIRST_RESCAN;
        self.next_walk = Some(now);
        Ok(())
    }

    /// Whether it wants a walk now: a signal to send, emptiness to confirm, the timer due,
    /// every watched member gone (after `readable`: its descriptor was readable, so it is
    /// drained), or `leader_exited` just now.
    pub fn wants_walk(
        &mut self,
        now: Instant,
        readable: bool,
        leader_exited: bool,
    ) -> io::Result<bool> {
        let exited = if readable { self.drain()? } else { 0 };
        if self.empty && !leader_exited {
            return Ok(false);
        }
        let due = self.next_walk.is_some_and(|t| now >= t);
        let all_exited = exited > 0 && self.watched.is_empty();
        Ok(!self.to_send.is_empty() || self.seen_empty || due || all_exited || leader_exited)
    }

    /// Takes in a walk that surveyed this session: sends the marked signal (to every
    /// member, or to newcomers), watches the members, and says whether the session is
    /// empty. An error is about the marked signal: members were not signalled (the
    /// leader no longer pins the session).
    pub fn observe(
        &mut self,
        leader: &Process,
        survey: &Survey,
        now: Instant,
    ) -> Result<Observed, SignalError> {
        self.walks += 1;
        self.empty = false;
        let walk = survey.walk();
        let complete = walk.is_complete();
        if !complete && !self.warned {
            self.warned = true;
            log::warn!(
                "session {}: walk incomplete ({} processes, truncated: {}, unreadable: {}); \
                 emptiness cannot be proven",
                self.sid,
                walk.members.len(),
                walk.truncated,
                walk.unreadable
            );
        }
        let members = survey.members(self.sid);
        if members.is_empty() && complete {
            if !self.seen_empty {
                self.seen_empty = true;
                return Ok(Observed::Unconfirmed);
            }
            self.seen_empty = false;
            self.to_send.clear();
            self.freeze = None;
            self.empty = true;
            self.next_walk = None;
            return Ok(Observed::Empty);
        }
        self.seen_empty = false;
        if self.wants_freeze(members) {
            return self.freeze(leader, members, now);
        }
        let all = std::mem::take(&mut self.to_send);
        if !all.is_empty() {
            self.delay = FIRST_RESCAN;
        } else if self.next_walk.is_some_and(|t| now >= t) {
            self.delay = (self.delay * 2).min(MAX_RESCAN);
        }
        self.next_walk = Some(now + self.delay);
        let counts = self.reach_members(leader, members, &all)?;
        Ok(Observed::Members(counts))
    }

    /// Whether a SIGKILL is due for some of `members`: marked for all of them, or the
    /// last signal sent and one of them is new (or a freeze is under way).
    fn wants_freeze(&self, members: &[Member]) -> bool {
        if self.freeze.is_some() || self.to_send.contains(&Signal::KILL) {
            return !members.is_empty();
        }
        self.to_send.is_empty()
            && self.sticky == Some(Signal::KILL)
            && members.iter().any(|m| !self.watched.contains_key(&m.pid))
    }

    /// One walk of a freeze (see the type): SIGSTOP to every member not stopped yet; the
    /// SIGKILL to them all once the walk shows nothing that can still fork.
    fn freeze(
        &mut self,
        leader: &Process,
        members: &[Member],
        now: Instant,
    ) -> Result<Observed, SignalError> {
        // The SIGKILL to come supersedes whatever else was marked (a SIGTERM's SIGCONT to
        // a stopped member would let it fork again before its SIGKILL).
        self.to_send.clear();
        let freeze = self.freeze.get_or_insert_with(Freeze::default);
        freeze.walks += 1;
        let new = members
            .iter()
            .filter(|m| !freeze.stopped.contains(&(m.pid, m.starttime)))
            .count();
        let still = |m: &&Member| !matches!(m.state, b'T' | b't' | b'D');
        let settled = new == 0 && !members.iter().any(|m| still(&m));
        if settled || freeze.walks >= MAX_FREEZE_WALKS {
            if !settled {
                log::warn!(
                    "session {}: {} member(s) not stopped after {} walks; killing what was found",
                    self.sid,
                    members.iter().filter(still).count(),
                    freeze.walks
                );
            }
            self.freeze = None;
            self.sticky = Some(Signal::KILL);
            self.delay = FIRST_RESCAN;
            self.next_walk = Some(now + self.delay);
            let counts = self.reach_members(leader, members, &[Signal::KILL])?;
            return Ok(Observed::Members(counts));
        }
        // Each new member, and again each one not stopped (a `SIGCONT` may have woken it).
        let to_stop: Vec<Member> = members
            .iter()
            .filter(|m| still(m) || !freeze.stopped.contains(&(m.pid, m.starttime)))
            .copied()
            .collect();
        let mut counts = SignalCounts::default();
        signal_each(
            leader,
            &to_stop,
            Within::Session,
            Signal::STOP,
            false,
            &mut counts,
            |_, _| {},
        )?;
        freeze
            .stopped
            .extend(members.iter().map(|m| (m.pid, m.starttime)));
        self.next_walk = Some(now);
        Ok(Observed::Freezing)
    }

    /// A walk for it failed: it tries again later, and needs two walks again to be empty.
    pub fn walk_failed(&mut self, now: Instant) {
        self.seen_empty = false;
        self.delay = (self.delay * 2).min(MAX_RESCAN);
        self.next_walk = Some(now + self.delay);
    }

    /// [`SessionWatch::observe`] of walks for this session alone, a second at once if the
    /// first found it empty.
    fn look_alone(
        &mut self,
        leader: &Process,
        others: &[i32],
        now: Instant,
    ) -> Result<SignalCounts, SignalError> {
        let sids = pid_set([self.sid]);
        let leaders = pid_set(others.iter().copied());
        let mut own = OwnChildren::default();
        loop {
            let survey = match Survey::take(self.reach, &sids, &leaders, &mut own) {
                Ok(s) => s,
                Err(e) => {
                    self.walk_failed(now);
                    return Err(SignalError::Os(e));
                }
            };
            match self.observe(leader, &survey, now)? {
                Observed::Unconfirmed | Observed::Freezing => continue,
                Observed::Empty => return Ok(SignalCounts::default()),
                Observed::Members(counts) => return Ok(counts),
            }
        }
    }

    /// Sends `marked` to every one of `members`, in order, or (none marked) the sticky
    /// signal to those not watched yet; watches them.
    fn reach_members(
        &mut self,
        leader: &Process,
        members: &[Member],
        marked: &[Signal],
    ) -> Result<SignalCounts, SignalError> {
        let mut counts = SignalCounts::default();
        let all = !marked.is_empty();
        let fresh: Vec<Member>;
        let members = if all {
            members
        } else {
            fresh = members
                .iter()
                .filter(|m| !self.watched.contains_key(&m.pid))
                .copied()
                .collect();
            &fresh
        };
        if members.is_empty() {
            return Ok(counts);
        }
        let newcomers: Vec<Signal> = self.sticky.into_iter().collect();
        let signals = if all { marked } else { &newcomers[..] };
        let mut keep = Vec::new();
        let mut sent = if signals.is_empty() {
            Err(SignalError::Unverifiable)
        } else {
            Ok(())
        };
        for (i, &sig) in signals.iter().enumerate() {
            // The members are watched through the pidfds of the last pass only: one each.
            let last = i + 1 == signals.len();
            let once = signal_each(
                leader,
                members,
                Within::Session,
                sig,
                true,
                &mut counts,
                |m, fd| {
                    if last {
                        keep.push((*m, fd))
                    }
                },
            );
            if let Err(e) = once {
                sent = Err(e);
                break;
            }
        }
        match sent {
            Ok(()) => {}
            Err(e) if all => return Err(e),
            // Nothing to send, or the leader no longer pins the session: watched only.
            Err(_) => {
                for m in members {
                    if let Check::Verified(Some(fd), _) = verify(m, self.sid, Within::Session) {
                        keep.push((*m, fd));
                    }
                }
            }
        }
        for (m, fd) in keep {
            self.watch(&m, fd);
        }
        Ok(counts)
    }

    /// Drains the epoll instance, forgetting the members that exited; how many did.
    fn drain(&mut self) -> io::Result<usize> {
        let Some(epoll) = &self.epoll else {
            return Ok(0);
        };
        let mut exited = 0;
        let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
        loop {
            events.clear();
            match epoll::wait(
                epoll,
                rustix::buffer::spare_capacity(&mut events),
                Some(&ZERO),
            ) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            for event in &events {
                let pid = event.data.u64() as i32;
                if let Some(fd) = self.watched.remove(&pid) {
                    let _ = epoll::delete(epoll, &fd);
                    exited += 1;
                }
            }
            if events.len() < events.capacity() {
                return Ok(exited);
            }
        }
    }

    fn watch(&mut self, m: &Member, fd: OwnedFd) {
        if self.watched.len() >= MAX_WATCHED || self.watched.contains_key(&m.pid) {
            return;
        }
        if self.epoll.is_none() {
            match epoll::create(epoll::CreateFlags::CLOEXEC) {
                Ok(e) => self.epoll = Some(e),
                Err(_) => return, // no descriptor: the timer finds its end
            }
        }
        let Some(epoll) = &self.epoll else { return };
        let data = epoll::EventData::new_u64(m.pid as u32 as u64);
        let flags = epoll::EventFlags::IN | epoll::EventFlags::ET;
        if epoll::add(epoll, &fd, data, flags).is_ok() {
            self.watched.insert(m.pid, fd);
        }
    }
}
