//! One generation's lifecycle as a `match (phase, input)` table with short arms.
//!
//! A generation only ever touches its own record and pushes actions that name itself;
//! what its end means for the session is decided by the caller from the [`Outcome`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::action::{Action, Event, ExitCause, Scope};
use super::input::{AdoptedIo, Containment, ExitStatus, SpawnError, SpawnErrorKind, Started};
use super::liveness::{self, Liveness, Verdict};
use super::persist::{LeaderStop, StopRecord, TreeStop, WallClock};
use super::readiness::{self, Readiness, ReadyHow, ReadySignal};
use super::signal::{self, SIGCONT, SIGKILL, SIGTERM};
use super::snapshot::{Adopted, GenerationSnapshot, Lifecycle, StopReason, StopStage};
use super::spec::{OnExit, Spec, Stream};
use super::time::Time;

/// Where a generation is; each variant carries what is only meaningful there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for older generations of the session to be gone.
    Pending,
    /// `Spawn` asked; waiting for `SpawnResult`.
    Starting,
    /// Leader alive.
    Running { pid: u32 },
    /// Leader alive, stop sequence walking; `until` is the next escalation.
    Stopping {
        pid: u32,
        stage: StopStage,
        until: Option<Time>,
    },
    /// Leader exited (zombie); streams draining until EOF or `until`. `until` is `None`
    /// once the deadline passed and the driver was asked to close the streams: the exit is
    /// reported when it answers with how many bytes it left unread.
    Draining { pid: u32, until: Option<Time> },
    /// Exit reported; waiting for the group, then reap.
    Reported { pid: u32 },
    /// Reaped (or never spawned) and released; the record is about to be dropped.
    Gone,
}

/// The rest of the process group after the leader exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    /// The leader has not exited yet.
    Alive,
    /// TERM sent to the group; KILL at `until`.
    Term { until: Time },
    /// KILL sent to the group; reported unkillable at `until` if it has not emptied by
    /// then. The zombie leader stays unreaped meanwhile: it pins the session id that the
    /// driver finds the members by, and the generation stays listed.
    Killed { until: Time },
    /// KILL sent and `kill_grace` passed with the group not empty (a member stuck in the
    /// kernel): reported `unkillable`, still awaited, reaped once it empties.
    Unkillable,
    /// Nothing more to do for the group: empty, or left alone.
    Done,
}

/// What happened to a generation, for the session to decide on restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It ran; `uptime` is spawn to leader exit.
    Exited {
        status: ExitStatus,
        cause: ExitCause,
        uptime: Duration,
    },
    /// It never ran.
    SpawnFailed(SpawnError),
    /// It ran, and the driver lost sight of it before its exit was seen.
    Lost,
}

/// The result of one input to a generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Its terminal event was just emitted: what it means, and the event (kept for a
    /// `wait` that comes later).
    pub ended: Option<(Ended, Event)>,
    /// It is gone: drop the record.
    pub gone: bool,
}

/// Inputs a generation understands; everything else is translated by the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GenInput {
    Start,
    SpawnOk(Started),
    SpawnErr(SpawnError),
    Stop(StopReason, Option<Duration>),
    /// A second shutdown: SIGKILL to everything of it at once, no grace left (see
    /// [`Generation::kill`]).
    Kill,
    Eof(Stream),
    OutputClosed {
        unread: u64,
    },
    LeaderExited(ExitStatus),
    LeaderGone,
    GroupEmpty,
    Lost,
    /// An adopted generation's identity, unverifiable until now, was verified.
    Verified,
    Timeout,
    /// What the driver saw about its readiness.
    Readiness(ReadySignal),
    /// A liveness probe's result.
    Liveness {
        probe: u64,
        ok: bool,
    },
}

/// Input to a generation's stdin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct InputState {
    /// Bytes handed to the driver and not yet confirmed written.
    pub pending: usize,
    /// Closed by request or EPIPE: no more writes.
    pub closed: bool,
}

/// One generation's record.
#[derive(Debug)]
pub(crate) struct Generation {
    pub gen: u64,
    pub session: Arc<str>,
    pub spec: Arc<Spec>,
    pub phase: Phase,
    /// When `phase` was entered.
    pub since: Time,
    pub(super) started: Option<Time>,
    pub stop: Option<StopReason>,
    pub(super) grace: Option<Duration>,
    pub(super) sent_kill: bool,
    /// Stopped while starting: when to give the start up (a hung `chdir` or `execve`).
    pub(super) cancel_at: Option<Time>,
    /// What holds its process tree, once it runs.
    pub(super) containment: Option<Containment>,
    pub(super) offsets: [u64; 3],
    pub(super) eof: [bool; 3],
    pub discarded: u64,
    pub(super) group: Group,
    pub input: InputState,
    pub(super) exit: Option<(ExitStatus, ExitCause)>,
    pub(super) exited_at: Time,
    /// Started by a previous daemon and taken back at this instant: not our child, so once
    /// its leader exits the zombie does not pin the group id for us (init reaps it), and
    /// only a cgroup may be killed; its output and input stayed with the old daemon.
    pub(super) adopted: Option<Time>,
    /// Adopted: when it started, in Unix milliseconds, as its descriptor recorded (before
    /// this daemon's clock began, so not a [`Time`]). Listed as its `since` while it is
    /// still in the phase it was adopted in (running).
    pub(super) started_unix_ms: Option<u64>,
    /// Adopted with its I/O (a keeper held it across the crash): its streams are read and
    /// its input written like a spawned child's. False for an adopted generation whose
    /// I/O was lost, and for one this daemon spawned.
    pub(super) io_kept: bool,
    /// Adopted while its identity could not be verified, and not verified since: nothing
    /// is signalled to it and nothing about its process is known but `Verified` or `Lost`.
    /// A stop is noted (`stop`, `grace`) and begins once it is verified.
    pub(super) unverified: bool,
    /// The leader is known to have exited and its status is awaited (`LeaderGone`): the
    /// stop sequence is over, nothing more is sent to it.
    pub(super) leader_gone: bool,
    /// Whether it is ready, with the timeout and probe schedule of its check.
    pub(crate) readiness: Readiness,
    /// Its liveness probe schedule (a spec with `live` only), once readiness is decided.
    pub(crate) liveness: Liveness,
    /// Spawned with `on_busy: overlap`: it may start beside an older generation of its
    /// session (once its dependencies are met).
    pub(crate) overlap: bool,
    /// Taken back after a crash whose record says its tree was already being emptied
    /// (its leader had ended before the crash, its exit unseen since): what its leader's
    /// exit carries on with, instead of starting the tree's stop over. Only between a
    /// take-back and that exit (the same turn, or the few that the exit status takes):
    /// not carried across an upgrade, after which the tree's stop would begin again.
    pub(super) taken_tree: Option<Group>,
}

/// How far a generation's stop (or the emptying of its tree) got, as it outlives the
/// daemon: what a session's record keeps of it ([`StopRecord`]), in the core's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DurableStop {
    pub reason: Option<StopReason>,
    pub grace: Option<Duration>,
    /// The leader's stop stage and its next step, while the leader was being stopped.
    pub leader: Option<(StopStage, Option<Time>)>,
    pub sent_kill: bool,
    /// `Term`, `Killed` or `Unkillable` only.
    pub tree: Option<Group>,
}

impl DurableStop {
    /// As a record keeps it, instants in Unix milliseconds per `clock`.
    pub fn record(self, gen: u64, clock: WallClock) -> StopRecord {
        StopRecord {
            gen,
            reason: self.reason,
            grace: self.grace,
            leader: self.leader.map(|(stage, until)| LeaderStop {
                stage,
                until_unix_ms: until.map(|t| clock.unix_ms_of(t)),
            }),
            sent_kill: self.sent_kill,
            tree: match self.tree {
                Some(Group::Term { until }) => Some(TreeStop::Term {
                    until_unix_ms: clock.unix_ms_of(until),
                }),
                Some(Group::Killed { until }) => Some(TreeStop::Killed {
                    until_unix_ms: clock.unix_ms_of(until),
                }),
                Some(Group::Unkillable) => Some(TreeStop::Unkillable),
                _ => None,
            },
        }
    }

    /// From a record, instants in the core's time per `clock` (a deadline passed while no
    /// daemon ran is due at once).
    pub fn from_record(r: &StopRecord, clock: WallClock) -> DurableStop {
        let at = |ms: u64| clock.time_of(ms).max(clock.now);
        DurableStop {
            reason: r.reason,
            grace: r.grace,
            leader: r.leader.map(|l| (l.stage, l.until_unix_ms.map(at))),
            sent_kill: r.sent_kill,
            tree: r.tree.map(|t| match t {
                TreeStop::Term { until_unix_ms } => Group::Term {
                    until: at(until_unix_ms),
                },
                TreeStop::Killed { until_unix_ms } => Group::Killed {
                    until: at(until_unix_ms),
                },
                TreeStop::Unkillable => Group::Unkillable,
            }),
        }
    }
}

impl Generation {
    /// The sessions its spec's `depends_on` names: what it waits on while blocked.
    pub(super) fn depended_on(&self) -> Vec<Arc<str>> {
        self.spec
            .depends_on
            .keys()
            .map(|name| Arc::from(name.as_str()))
            .collect()
    }

    pub fn new(gen: u64, session: Arc<str>, spec: Arc<Spec>, now: Time) -> Generation {
        Generation {
            gen,
            session,
            spec,
            phase: Phase::Pending,
            since: now,
            started: None,
            stop: None,
            grace: None,
            sent_kill: false,
            cancel_at: None,
            containment: None,
            offsets: [0; 3],
            eof: [false; 3],
            discarded: 0,
            group: Group::Alive,
            input: InputState::default(),
            exit: None,
            exited_at: now,
            adopted: None,
            started_unix_ms: None,
            io_kept: false,
            unverified: false,
            leader_gone: false,
            readiness: Readiness::Unstarted,
            liveness: Liveness::default(),
            overlap: false,
            taken_tree: None,
        }
    }

    /// A generation a previous daemon started, found alive at start-up: Running from
    /// `now` (its uptime before is unknown, so a long run before the restart does not
    /// reset its session's restart count). Without `io` its streams and stdin stayed with
    /// the old daemon: they count as at EOF and closed, so its exit is reported as soon as
    /// it is seen. With `io` (a keeper held them) the streams it names are open, their
    /// offsets going on from where it says, and its input is open if it says so; its
    /// output then drains before its exit is reported, as a spawned child's. An unverified
    /// one (`verified` false) is never signalled until `Verified`, and has no I/O.
    pub fn adopted(
        gen: u64,
        session: Arc<str>,
        spec: Arc<Spec>,
        started: Started,
        verified: bool,
        io: Option<AdoptedIo>,
        now: Time,
    ) -> Generation {
        let Started { pid, containment } = started;
        let mut g = Generation::new(gen, session, spec, now);
        g.phase = Phase::Running { pid };
        g.started = Some(now);
        g.containment = Some(containment);
        g.eof = [true; 3];
        g.input.closed = true;
        if let Some(io) = io.filter(|_| verified) {
            for s in g.spec.streams() {
                if let Some(offset) = io.outputs[s.index()] {
                    g.eof[s.index()] = false;
                    g.offsets[s.index()] = offset;
                }
            }
            g.input.closed = !io.input;
            g.io_kept = true;
        }
        g.adopted = Some(now);
        g.unverified = !verified;
        // It ran before the restart: whatever its check was, it is not awaited again.
        g.readiness = Readiness::Ready;
        // Readiness is decided, so its liveness schedule (if its spec has one) begins, as
        // it would have at its readiness. An unverified one is never probed until it is
        // verified (see `on_unverified`).
        if verified {
            g.begin_liveness_taken_back(now);
        }
        g
    }

    /// Carries on, in a generation just taken back after a crash (see [`adopted`]), with
    /// the stop its session's record says was under way: its reason, the grace it was
    /// given, the stage its leader's stop reached with that stage's deadline (what was
    /// left of it), and whether its SIGKILL was sent. Nothing the record says was sent is
    /// sent again here; a SIGKILL is, at [`resume_kill`](Generation::resume_kill)
    /// (harmless twice, and a crash between its record and its sending must not leave a
    /// leader running that is then called unkillable). An unverified one keeps only its
    /// grace and reason (nothing may be sent to it yet): its stop begins once verified.
    /// Its tree's state, if the leader had ended before the crash, waits for the
    /// leader's exit to be seen again (see `leader_exited`).
    ///
    /// [`adopted`]: Generation::adopted
    pub fn resume_stop(&mut self, d: DurableStop, now: Time) {
        self.grace = d.grace;
        self.taken_tree = d.tree;
        let Phase::Running { pid } = self.phase else {
            return;
        };
        let Some(reason) = d.reason else {
            return;
        };
        if self.unverified {
            self.stop = Some(reason);
            return;
        }
        // The leader had ended before the crash (its status comes next): its stop is where
        // it was, and nothing is sent to it.
        let (stage, until) = match d.leader {
            Some((stage, until)) => (stage, until),
            None if d.sent_kill => (StopStage::Kill, None),
            None => (StopStage::Graceful, None),
        };
        self.stop = Some(reason);
        self.sent_kill = stage != StopStage::Graceful;
        let until = match stage {
            StopStage::Unkillable => None,
            StopStage::Kill => until.or(Some(now.saturating_add(self.spec.kill_grace))),
            StopStage::Graceful => until.or(Some(
                now.saturating_add(self.grace.unwrap_or(self.spec.grace)),
            )),
        };
        self.enter(now, Phase::Stopping { pid, stage, until });
    }

    /// At the end of a start-up: a leader taken back with its stop past its SIGKILL gets
    /// it again (see [`resume_stop`](Generation::resume_stop)); nothing for any other.
    pub fn resume_kill(&self, out: &mut VecDeque<Action>) {
        let killed = matches!(
            self.phase,
            Phase::Stopping {
                stage: StopStage::Kill | StopStage::Unkillable,
                ..
            }
        );
        if self.adopted.is_some() && killed && !self.leader_gone {
            out.push_back(Action::Signal {
                gen: self.gen,
                signal: SIGKILL,
                scope: Scope::Leader,
            });
        }
    }

    /// The SIGKILL to the whole tree of one [taken back for its
    /// tree](Generation::tree_taken_back).
    pub fn kill_taken_tree(&self, out: &mut VecDeque<Action>) {
        out.push_back(Action::Signal {
            gen: self.gen,
            signal: SIGKILL,
            scope: Scope::Tree,
        });
    }

    /// A generation whose end was reported before a crash, taken back because what its
    /// leader left in its cgroup still runs: reported already (listed with the end it
    /// had), its whole tree is sent SIGKILL at once (by [`kill_taken_tree`], at the end of
    /// the start-up) — its `kill_grace` after a TERM is not waited out again — and it is
    /// released once the tree is seen empty, or called `unkillable` after `kill_grace` (at
    /// once, if its record says it was).
    ///
    /// [`kill_taken_tree`]: Generation::kill_taken_tree
    pub fn tree_taken_back(
        gen: u64,
        session: Arc<str>,
        spec: Arc<Spec>,
        pid: u32,
        end: Option<&Event>,
        tree: Option<Group>,
        now: Time,
    ) -> Generation {
        let mut g = Generation::new(gen, session, spec, now);
        g.phase = Phase::Reported { pid };
        g.started = Some(now);
        g.containment = Some(Containment::Cgroup);
        g.eof = [true; 3];
        g.input.closed = true;
        g.adopted = Some(now);
        g.readiness = Readiness::Ready;
        if let Some(Event::Exited {
            code: Some(code),
            signal,
            cause,
            ..
        }) = end
        {
            let status = match signal {
                Some(sig) => ExitStatus::Signal(*sig),
                None => ExitStatus::Code(*code),
            };
            g.exit = Some((status, *cause));
        }
        g.group = match tree {
            Some(Group::Unkillable) => Group::Unkillable,
            _ => Group::Killed {
                until: now.saturating_add(g.spec.kill_grace),
            },
        };
        g
    }

    /// What of its stop outlives the daemon (see [`DurableStop`]), if anything: a stop
    /// under way, or a tree being emptied. Nothing for one unverified (its stop has not
    /// begun), not started, or gone.
    ///
    /// A stop noted and not begun (one waiting for its dependents, say) is not: nothing
    /// was sent, and the daemon taking it back stops it as any other. The record's leader
    /// stage says the leader was being stopped; none with a reason says it had ended.
    pub fn durable_stop(&self) -> Option<DurableStop> {
        let leader = match self.phase {
            _ if self.unverified => return None,
            Phase::Pending | Phase::Starting | Phase::Running { .. } | Phase::Gone => return None,
            // (Once the leader is known gone, its stage without a deadline.)
            Phase::Stopping { stage, until, .. } => {
                Some((stage, until.filter(|_| !self.leader_gone)))
            }
            Phase::Draining { .. } | Phase::Reported { .. } => None,
        };
        let tree = match self.group {
            // A tree sent TERM after its leader ended on its own is not kept: every end
            // of a `kill_group` generation goes through it, its tree usually empty at
            // once, and keeping it would cost every exit two more writes of its session's
            // record. A crash then at worst sends the rest SIGKILL at once (the next
            // daemon finds the tree by its cgroup), without waiting out the TERM's grace.
            Group::Term { .. } if self.stop.is_none() => None,
            g @ (Group::Term { .. } | Group::Killed { .. } | Group::Unkillable) => Some(g),
            Group::Alive | Group::Done => None,
        };
        if self.stop.is_none() && tree.is_none() {
            return None;
        }
        Some(DurableStop {
            reason: self.stop,
            grace: self.grace,
            leader,
            sent_kill: self.sent_kill,
            tree,
        })
    }

    /// Applies one input. Inputs that make no sense in the current phase (a late or
    /// duplicate report from the driver) change nothing except that refused output bytes
    /// are counted.
    pub fn on(&mut self, now: Time, input: GenInput, out: &mut VecDeque<Action>) -> Outcome {
        let mut o = Outcome::default();
        if self.unverified {
            self.on_unverified(now, input, out, &mut o);
            return o;
        }
        // Readiness has deadlines of its own, only while it waits (which is only while
        // the leader runs); the phase's deadlines follow.
        if input == GenInput::Timeout {
            let owner = self.ready_owner();
            let mut r = std::mem::replace(&mut self.readiness, Readiness::Unstarted);
            owner.on_timeout(&mut r, now, out);
            self.readiness = r;
            self.begin_liveness(now);
            self.liveness_step(now, out, None);
        }
        match (self.phase, input) {
            (Phase::Pending, GenInput::Start) => self.start(now, out),
            (Phase::Pending, GenInput::Stop(reason, _)) => self.cancel(now, reason, out, &mut o),
            (Phase::Starting, GenInput::SpawnOk(started)) => self.spawned(now, started, out),
            (Phase::Starting, GenInput::SpawnErr(e)) => self.spawn_failed(now, e, out, &mut o),
            (Phase::Starting, GenInput::Stop(reason, grace)) => {
                self.note_stop(reason, grace);
                // If it has not started by the end of its grace, give the start up.
                let until = now.saturating_add(self.grace.unwrap_or(self.spec.grace));
                self.cancel_at = Some(self.cancel_at.map_or(until, |t| t.min(until)));
            }
            (Phase::Starting, GenInput::Timeout) if self.cancel_at.is_some_and(|t| t <= now) => {
                self.cancel_at = None;
                out.push_back(Action::CancelSpawn { gen: self.gen });
            }
            // Its leader exited already: nothing is left to stop, and the cause is fixed by
            // the stops asked before, as for a leader seen exiting.
            // Its grace still bounds how long the leader's group may outlive it.
            (Phase::Running { .. } | Phase::Stopping { .. }, GenInput::Stop(_, grace))
                if self.leader_gone =>
            {
                self.grace = shortest(self.grace, grace);
            }
            (Phase::Running { pid }, GenInput::Stop(reason, grace)) => {
                self.note_stop(reason, grace);
                self.begin_stop(now, pid, out);
            }
            // A stop already walking: the shortest grace given bounds the leader (its
            // SIGKILL brought forward if still to come) and, once it ends, the rest of its
            // tree, whatever stage the walk reached.
            (Phase::Stopping { pid, stage, until }, GenInput::Stop(reason, grace)) => {
                self.note_stop(reason, grace);
                self.shorten_grace(now, pid, stage, until, grace);
            }
            (_, GenInput::Kill) => self.kill(now, out, &mut o),
            (Phase::Running { .. } | Phase::Stopping { .. }, GenInput::Eof(s)) => self.mark_eof(s),
            (Phase::Draining { .. }, GenInput::Eof(s)) => {
                self.mark_eof(s);
                self.try_report(now, out, &mut o);
            }
            (
                Phase::Running { pid } | Phase::Stopping { pid, .. },
                GenInput::LeaderExited(status),
            ) => self.leader_exited(now, pid, status, out, &mut o),
            (Phase::Running { .. } | Phase::Stopping { .. }, GenInput::LeaderGone) => {
                self.leader_gone()
            }
            (
                Phase::Running { .. } | Phase::Stopping { .. } | Phase::Draining { .. } | Phase::Reported { .. },
                GenInput::Lost,
            ) => self.lost(now, out, &mut o),
            (Phase::Draining { .. } | Phase::Reported { .. }, GenInput::Stop(_, Some(grace))) => {
                self.shorten_group_kill(now, grace)
            }
            (Phase::Draining { .. } | Phase::Reported { .. }, GenInput::GroupEmpty) => {
                self.group = Group::Done;
                self.try_reap(now, out, &mut o);
            }
            (
                Phase::Stopping {
                    pid,
                    stage,
                    until: Some(t),
                },
                GenInput::Timeout,
            ) if t <= now => self.escalate(now, pid, stage, out),
            (Phase::Draining { pid, until }, GenInput::Timeout) => {
                self.group_timeout(now, out);
                if until.is_some_and(|t| t <= now) {
                    self.close_output(now, pid, out, &mut o);
                }
            }
            (Phase::Draining { until: None, .. }, GenInput::OutputClosed { unread }) => {
                self.discarded = self.discarded.saturating_add(unread);
                self.report(now, out, &mut o);
                self.try_reap(now, out, &mut o);
            }
            (Phase::Reported { .. }, GenInput::Timeout) => {
                self.group_timeout(now, out);
                self.try_reap(now, out, &mut o);
            }
            // Named no-ops: a stop of an exited leader changes nothing (its cause is fixed);
            // the group cannot be empty while its leader lives; a spare timeout is harmless;
            // spawn results and exits in any other phase are stale or duplicated reports.
            (Phase::Draining { .. } | Phase::Reported { .. } | Phase::Gone, GenInput::Stop(..))
            | (
                Phase::Pending
                | Phase::Starting
                | Phase::Running { .. }
                | Phase::Stopping { .. }
                | Phase::Gone,
                GenInput::GroupEmpty,
            )
            | (_, GenInput::Timeout)
            | (_, GenInput::Start | GenInput::SpawnOk(_) | GenInput::SpawnErr(_))
            | (_, GenInput::Eof(_) | GenInput::LeaderExited(_))
            // Its exit was seen already (or it never ran): the status is what comes next.
            | (
                Phase::Pending
                | Phase::Starting
                | Phase::Draining { .. }
                | Phase::Reported { .. }
                | Phase::Gone,
                GenInput::LeaderGone,
            )
            // Closed streams answered for a generation no longer waiting for that answer.
            | (_, GenInput::OutputClosed { .. })
            // Not spawned yet (or gone): there is nothing to lose.
            | (Phase::Pending | Phase::Starting | Phase::Gone, GenInput::Lost)
            // Only an unverified generation is verified.
            | (_, GenInput::Verified) => {}
            // Acted on only while it waits to be ready (its leader runs); stale otherwise.
            (_, GenInput::Readiness(signal)) => {
                let owner = self.ready_owner();
                let mut r = std::mem::replace(&mut self.readiness, Readiness::Unstarted);
                owner.on_signal(&mut r, now, signal, out);
                self.readiness = r;
                self.begin_liveness(now);
            }
            // Acted on only while the leader runs (not while it is being stopped).
            (_, GenInput::Liveness { probe, ok }) => {
                self.liveness_step(now, out, Some((probe, ok)))
            }
        }
        o
    }

    /// The liveness schedule begins once readiness is decided (ready, or failed: the
    /// process is left running, and liveness is what acts on its health).
    fn begin_liveness(&mut self, now: Time) {
        let decided = matches!(self.readiness, Readiness::Ready | Readiness::Failed(_));
        if let (Some(check), Phase::Running { .. }, true) = (&self.spec.live, self.phase, decided) {
            self.liveness.begin(now, check);
        }
    }

    /// The liveness schedule of a generation taken back after a crash (its readiness is
    /// taken as decided). A probe command whose identity took the lookup helper at the
    /// generation's start (a user, a group name, an `env_file`) cannot run yet: the answer
    /// died with the previous daemon, and the daemon never looks names up itself. Such a
    /// generation is left unprobed rather than found unhealthy for want of an identity.
    fn begin_liveness_taken_back(&mut self, now: Time) {
        let Some(check) = &self.spec.live else {
            return;
        };
        let r = &self.spec.run_as;
        let named = |g: &str| !g.bytes().all(|b| b.is_ascii_digit());
        let lookup = r.user.is_some()
            || r.env_file.is_some()
            || r.group.as_deref().is_some_and(named)
            || r.groups.iter().flatten().any(|g| named(g));
        if lookup && matches!(check.how, ReadyHow::Command(_)) {
            return;
        }
        self.begin_liveness(now);
    }

    /// A liveness timeout (`result` `None`) or probe result; stops it once unhealthy.
    fn liveness_step(
        &mut self,
        now: Time,
        out: &mut VecDeque<Action>,
        result: Option<(u64, bool)>,
    ) {
        let Phase::Running { pid } = self.phase else {
            return;
        };
        let Some(check) = self.spec.live.clone() else {
            return;
        };
        if self.leader_gone {
            return;
        }
        let owner = liveness::Owner {
            session: &self.session,
            gen: self.gen,
            check: &check,
        };
        let verdict = match result {
            None => self.liveness.on_timeout(&owner, now, out),
            Some((probe, ok)) => self.liveness.on_result(&owner, probe, ok, out),
        };
        if verdict == Verdict::Unhealthy {
            self.note_stop(StopReason::Requested, None);
            self.begin_stop(now, pid, out);
        }
    }

    /// Whether it was stopped for failing its liveness probe: its end is a failure.
    pub fn is_unhealthy(&self) -> bool {
        self.liveness.tripped
    }

    fn ready_owner(&self) -> readiness::Owner {
        readiness::Owner {
            session: self.session.clone(),
            gen: self.gen,
            spec: self.spec.clone(),
        }
    }

    /// The leader is gone: a readiness still awaited fails.
    fn readiness_ends(&mut self, out: &mut VecDeque<Action>) {
        let owner = self.ready_owner();
        let mut r = std::mem::replace(&mut self.readiness, Readiness::Unstarted);
        owner.on_exit(&mut r, out);
        self.readiness = r;
    }

    /// An input about an adopted generation whose identity is not verified: a stop is
    /// noted and nothing sent (it begins once verified); `Lost` ends it; anything about
    /// its process is ignored (the driver cannot observe a process it does not hold).
    fn on_unverified(
        &mut self,
        now: Time,
        input: GenInput,
        out: &mut VecDeque<Action>,
        o: &mut Outcome,
    ) {
        match (self.phase, input) {
            (Phase::Running { .. }, GenInput::Stop(reason, grace)) => self.note_stop(reason, grace),
            // Killed once verified: the core repeats the kill after `Verified`.
            (Phase::Running { .. }, GenInput::Kill) => {
                self.note_stop(StopReason::Requested, Some(Duration::ZERO))
            }
            (Phase::Running { pid }, GenInput::Verified) => {
                self.unverified = false;
                if self.stop.is_some() {
                    self.begin_stop(now, pid, out);
                } else {
                    self.begin_liveness_taken_back(now);
                }
            }
            (Phase::Running { .. }, GenInput::Lost) => self.lost(now, out, o),
            _ => {}
        }
    }

    /// The earliest instant this generation wants a timeout call.
    pub fn deadline(&self) -> Option<Time> {
        let group = match self.group {
            Group::Term { until } | Group::Killed { until } => Some(until),
            Group::Alive | Group::Unkillable | Group::Done => None,
        };
        let phase = match self.phase {
            Phase::Starting => self.cancel_at,
            Phase::Stopping { until, .. } => until,
            Phase::Draining { until, .. } => until,
            _ => None,
        };
        let live = match self.phase {
            Phase::Running { .. } => self.liveness.deadline(),
            _ => None,
        };
        [group, phase, self.readiness.deadline(), live]
            .into_iter()
            .flatten()
            .min()
    }

    /// The group id to watch for emptiness: the leader exited, its group was sent SIGTERM
    /// (and maybe SIGKILL since), and the zombie leader still pins the id.
    pub fn awaited_group(&self) -> Option<u32> {
        match (self.phase, self.group) {
            (
                Phase::Draining { pid, .. } | Phase::Reported { pid },
                Group::Term { .. } | Group::Killed { .. } | Group::Unkillable,
            ) => Some(pid),
            _ => None,
        }
    }

    /// Whether it survived SIGKILL for `kill_grace`: its leader, or (the leader gone) a
    /// member of its tree.
    pub fn is_unkillable(&self) -> bool {
        let leader = matches!(
            self.phase,
            Phase::Stopping {
                stage: StopStage::Unkillable,
                ..
            }
        );
        leader || self.group == Group::Unkillable
    }

    /// Whether input, a terminal size and signals may be sent: the driver holds them for
    /// a process still starting; a leader known to have exited takes none.
    pub fn takes_input(&self) -> bool {
        let live = matches!(
            self.phase,
            Phase::Starting | Phase::Running { .. } | Phase::Stopping { .. }
        );
        live && !self.leader_gone && !self.unverified
    }

    /// Whether it was adopted with its I/O (a keeper held it across the crash).
    pub fn io_kept(&self) -> bool {
        self.io_kept
    }

    /// Whether it was adopted unverified and is not verified yet: listed, never signalled.
    pub fn is_unverified(&self) -> bool {
        self.unverified
    }

    /// Whether the leader's exit is still to be reported to it (`LeaderExited` or `Lost`):
    /// it runs, or it exited and its status is awaited.
    pub fn is_live_leader(&self) -> bool {
        matches!(self.phase, Phase::Running { .. } | Phase::Stopping { .. })
    }

    pub fn lifecycle(&self) -> Lifecycle {
        match self.phase {
            Phase::Pending => Lifecycle::Pending,
            Phase::Starting => Lifecycle::Starting,
            Phase::Running { .. } => Lifecycle::Running,
            Phase::Stopping { stage, .. } => Lifecycle::Stopping(stage),
            // What its leader left survived SIGKILL: listed as a stuck leader is.
            Phase::Draining { .. } | Phase::Reported { .. } if self.group == Group::Unkillable => {
                Lifecycle::TreeUnkillable
            }
            Phase::Draining { .. } => Lifecycle::Draining,
            Phase::Reported { .. } => Lifecycle::Reported,
            Phase::Gone => Lifecycle::Gone,
        }
    }

    pub fn pid(&self) -> Option<u32> {
        match self.phase {
            Phase::Running { pid }
            | Phase::Stopping { pid, .. }
            | Phase::Draining { pid, .. }
            | Phase::Reported { pid } => Some(pid),
            Phase::Pending | Phase::Starting | Phase::Gone => None,
        }
    }

    /// Listed with `newer_is_current`: whether its session's current generation is a newer
    /// one. It is superseded if so, or if it was stopped for a newer one (which may have
    /// ended since); one that ended as the current generation is not, though it is no
    /// longer current while its group is still being emptied.
    pub fn snapshot(&self, newer_is_current: bool) -> GenerationSnapshot {
        GenerationSnapshot {
            gen: self.gen,
            pid: self.pid(),
            lifecycle: self.lifecycle(),
            since: self.since,
            since_unix_ms: match self.phase {
                Phase::Running { .. } => self.started_unix_ms,
                _ => None,
            },
            superseded: newer_is_current || self.stop == Some(StopReason::Superseded),
            stop: self.stop,
            cause: self.exit.map(|(_, c)| c),
            ready: self.readiness.state(),
            offsets: self
                .spec
                .streams()
                .iter()
                .map(|s| (*s, self.offsets[s.index()]))
                .collect(),
            discarded: self.discarded,
            pending_input: self.input.pending,
            deadline: self.deadline(),
            containment: self.containment,
            adopted: self.adopted.map(|since| Adopted {
                since,
                verified: !self.unverified,
                io_lost: !self.io_kept,
            }),
        }
    }

    fn enter(&mut self, now: Time, phase: Phase) {
        self.phase = phase;
        self.since = now;
    }

    fn emit(&self, out: &mut VecDeque<Action>, event: Event) {
        out.push_back(Action::Emit(event));
    }

    fn start(&mut self, now: Time, out: &mut VecDeque<Action>) {
        self.phase = Phase::Starting;
        self.since = now;
        out.push_back(Action::Spawn {
            gen: self.gen,
            session: self.session.clone(),
            spec: self.spec.clone(),
        });
    }

    /// Stopped, replaced or removed before it was ever spawned: it still gets its one
    /// terminal event, so every allocated number is accounted for.
    fn cancel(
        &mut self,
        now: Time,
        reason: StopReason,
        out: &mut VecDeque<Action>,
        o: &mut Outcome,
    ) {
        let why = match reason {
            StopReason::Superseded => "replaced before it started",
            StopReason::Requested => "stopped before it started",
        };
        let error = SpawnError::new(SpawnErrorKind::Cancelled, 0).with_message(why);
        self.never_ran(now, error, out, o);
    }

    /// The one terminal event of a generation that never ran, and its end.
    fn never_ran(
        &mut self,
        now: Time,
        error: SpawnError,
        out: &mut VecDeque<Action>,
        o: &mut Outcome,
    ) {
        let event = Event::SpawnFailed {
            session: self.session.clone(),
            gen: self.gen,
            error: error.recorded(),
        };
        self.emit(out, event.clone());
        self.phase = Phase::Gone;
        self.since = now;
        o.ended = Some((Ended::SpawnFailed(error), event));
        o.gone = true;
    }

    fn spawned(&mut self, now: Time, started: Started, out: &mut VecDeque<Action>) {
        let pid = started.pid;
        self.started = Some(now);
        self.containment = Some(started.containment);
        self.emit(
            out,
            Event::Spawned {
                session: self.session.clone(),
                gen: self.gen,
                pid,
            },
        );
        self.enter(now, Phase::Running { pid });
        self.readiness = Readiness::at_spawn(self.spec.ready.as_ref(), now);
        self.begin_liveness(now);
        // A stop (or replacement) that arrived while spawning runs now.
        if self.stop.is_some() {
            self.begin_stop(now, pid, out);
        }
    }

    fn spawn_failed(
        &mut self,
        now: Time,
        error: SpawnError,
        out: &mut VecDeque<Action>,
        o: &mut Outcome,
    ) {
        self.never_ran(now, error, out, o);
        // Spawn was asked for: the driver holds (and now frees) its record.
        out.push_back(Action::Release { gen: self.gen });
    }

    /// Records why it is being stopped. Superseded wins over a plain request: once a newer
    /// generation is current, this one's end is no longer the session's end.
    fn note_stop(&mut self, reason: StopReason, grace: Option<Duration>) {
        self.stop = match (self.stop, reason) {
            (Some(StopReason::Superseded), _) | (_, StopReason::Superseded) => {
                Some(StopReason::Superseded)
            }
            (_, StopReason::Requested) => Some(StopReason::Requested),
        };
        // Several stops: the shortest grace asked for wins, for the leader's stop and for
        // what it leaves behind (see `leader_exited`).
        self.grace = shortest(self.grace, grace);
    }

    /// A second stop with a shorter grace than the one running (e.g. `stop --grace 0`, or
    /// a daemon told twice to shut down) brings the SIGKILL forward; a longer one never
    /// delays it.
    fn shorten_grace(
        &mut self,
        now: Time,
        pid: u32,
        stage: StopStage,
        until: Option<Time>,
        grace: Option<Duration>,
    ) {
        if let (StopStage::Graceful, Some(grace), Some(until)) = (stage, grace, until) {
            let sooner = now.saturating_add(grace);
            if sooner < until {
                self.phase = Phase::Stopping {
                    pid,
                    stage,
                    until: Some(sooner),
                };
            }
        }
    }

    /// The leader is gone and the rest of its group got SIGTERM: a stop with a shorter
    /// grace (a second shutdown signal) brings the group's SIGKILL forward.
    fn shorten_group_kill(&mut self, now: Time, grace: Duration) {
        if let Group::Term { until } = self.group {
            let sooner = now.saturating_add(grace);
            if sooner < until {
                self.group = Group::Term { until: sooner };
            }
        }
    }

    /// A second shutdown: SIGKILL at once to everything of it that runs — its whole tree
    /// (its leader only under `on_exit: leave`) — with no grace left for anything: a
    /// running or gracefully stopping leader gets it now (and `kill_grace` to die before it
    /// is reported unkillable); the rest of an exited leader's group too, instead of
    /// waiting out its TERM's grace. What cannot be killed yet — not started, not verified,
    /// or its leader known gone with its status still to come — is stopped with no grace,
    /// and the core repeats the kill as soon as it can act (`SpawnOk`, `Verified`,
    /// `LeaderExited`). Its end keeps the cause its stops give it.
    fn kill(&mut self, now: Time, out: &mut VecDeque<Action>, o: &mut Outcome) {
        let zero = Some(Duration::ZERO);
        match self.phase {
            Phase::Pending | Phase::Starting => {
                *o = self.on(now, GenInput::Stop(StopReason::Requested, zero), out);
            }
            // Its exit is what comes next: the group's kill follows at `LeaderExited`.
            Phase::Running { .. } | Phase::Stopping { .. } if self.leader_gone => {
                self.grace = zero;
            }
            Phase::Running { pid } | Phase::Stopping { pid, .. } => {
                self.note_stop(StopReason::Requested, zero);
                let scope = match self.spec.on_exit {
                    OnExit::KillGroup => Scope::Tree,
                    OnExit::Leave => Scope::Leader,
                };
                out.push_back(Action::Signal {
                    gen: self.gen,
                    signal: SIGKILL,
                    scope,
                });
                // A leader already past its grace keeps its own `kill_grace` deadline.
                let graceful = match self.phase {
                    Phase::Stopping { stage, .. } => stage == StopStage::Graceful,
                    _ => true,
                };
                if graceful {
                    self.enter_kill_stage(now, pid);
                }
            }
            Phase::Draining { .. } | Phase::Reported { .. } => {
                self.grace = zero;
                if let Group::Term { .. } = self.group {
                    self.kill_group(now, out);
                    self.try_reap(now, out, o);
                }
            }
            Phase::Gone => {}
        }
    }

    /// Sends the stop signal to the leader, then SIGCONT (through the same handle, so never
    /// to a recycled pid): a leader stopped by `kill -STOP`, a debugger or job control
    /// would otherwise keep the signal pending, never run its handler, and end `killed`
    /// after the whole grace (see [`signal::wakes`]).
    fn begin_stop(&mut self, now: Time, pid: u32, out: &mut VecDeque<Action>) {
        let signal = self.spec.stop_signal;
        out.push_back(Action::Signal {
            gen: self.gen,
            signal,
            scope: Scope::Leader,
        });
        if signal::wakes(signal) {
            out.push_back(Action::Signal {
                gen: self.gen,
                signal: SIGCONT,
                scope: Scope::Leader,
            });
        }
        let until = now.saturating_add(self.grace.unwrap_or(self.spec.grace));
        self.enter(
            now,
            Phase::Stopping {
                pid,
                stage: StopStage::Graceful,
                until: Some(until),
            },
        );
    }

    /// SIGKILL was just sent to the leader: it has `kill_grace` to end before it is called
    /// unkillable.
    fn enter_kill_stage(&mut self, now: Time, pid: u32) {
        self.sent_kill = true;
        let until = now.saturating_add(self.spec.kill_grace);
        self.enter(
            now,
            Phase::Stopping {
                pid,
                stage: StopStage::Kill,
                until: Some(until),
            },
        );
    }

    fn escalate(&mut self, now: Time, pid: u32, stage: StopStage, out: &mut VecDeque<Action>) {
        match stage {
            StopStage::Graceful => {
                out.push_back(Action::Signal {
                    gen: self.gen,
                    signal: SIGKILL,
                    scope: Scope::Leader,
                });
                self.enter_kill_stage(now, pid);
            }
            StopStage::Kill => {
                self.emit(
                    out,
                    Event::Unkillable {
                        session: self.session.clone(),
                        gen: self.gen,
                    },
                );
                self.enter(
                    now,
                    Phase::Stopping {
                        pid,
                        stage: StopStage::Unkillable,
                        until: None,
                    },
                );
            }
            StopStage::Unkillable => {}
        }
    }

    /// The leader exited and its status follows: the stop sequence ends where it is (its
    /// deadline dropped, its stage kept), so nothing more is signalled and it is never
    /// reported unkillable.
    fn leader_gone(&mut self) {
        self.leader_gone = true;
        if let Phase::Stopping { pid, stage, .. } = self.phase {
            self.phase = Phase::Stopping {
                pid,
                stage,
                until: None,
            };
        }
    }

    /// Accepts `len` bytes read from `stream`, returning the offset of the first one, or
    /// counts them as discarded when this generation may not deliver them: before it ran,
    /// after its exit was reported (or its streams were closed), or for a stream it does
    /// not have or that already reached EOF.
    pub fn output(&mut self, stream: Stream, len: usize) -> Option<u64> {
        let i = stream.index();
        if !self.delivers_output() || !self.spec.streams().contains(&stream) || self.eof[i] {
            self.discarded = self.discarded.saturating_add(len as u64);
            return None;
        }
        let offset = self.offsets[i];
        self.offsets[i] = offset.saturating_add(len as u64);
        Some(offset)
    }

    /// Whether output read now is still this generation's to deliver: from its start
    /// until its exit is reported or its drain deadline closed its streams.
    pub fn delivers_output(&self) -> bool {
        matches!(
            self.phase,
            Phase::Running { .. } | Phase::Stopping { .. } | Phase::Draining { until: Some(_), .. }
        )
    }

    fn mark_eof(&mut self, stream: Stream) {
        self.eof[stream.index()] = true;
    }

    fn drained(&self) -> bool {
        self.spec.streams().iter().all(|s| self.eof[s.index()])
    }

    fn leader_exited(
        &mut self,
        now: Time,
        pid: u32,
        status: ExitStatus,
        out: &mut VecDeque<Action>,
        o: &mut Outcome,
    ) {
        self.exit = Some((status, self.cause_of(status)));
        self.exited_at = now;
        self.readiness_ends(out);
        // An adopted leader is not our child: once it exits, its group id may be reused,
        // so only a cgroup (which cannot be reused while we hold it) is signalled.
        let pinned = self.adopted.is_none() || self.containment == Some(Containment::Cgroup);
        match self.spec.on_exit {
            // The zombie leader pins the group id: this cannot reach a stranger.
            // Taken back after a crash that came while its tree was being emptied: that
            // goes on where it was (a TERM sent is not sent again, its deadline kept).
            OnExit::KillGroup if pinned && self.taken_tree.is_some() => {
                self.resume_tree(now, out);
            }
            OnExit::KillGroup if pinned => {
                out.push_back(Action::Signal {
                    gen: self.gen,
                    signal: SIGTERM,
                    scope: Scope::Tree,
                });
                // A stop's grace bounds the whole tree, not only its leader: what the
                // leader leaves behind gets no longer than the stop allowed.
                let grace = self
                    .grace
                    .map_or(self.spec.kill_grace, |g| g.min(self.spec.kill_grace));
                self.group = Group::Term {
                    until: now.saturating_add(grace),
                };
            }
            OnExit::KillGroup | OnExit::Leave => self.group = Group::Done,
        }
        let until = now.saturating_add(self.spec.drain);
        self.enter(
            now,
            Phase::Draining {
                pid,
                until: Some(until),
            },
        );
        self.try_report(now, out, o);
    }

    /// Its tree's stop as its record had it before a crash (see `taken_tree`): a TERM
    /// sent waits out what is left of its grace; a SIGKILL sent is sent again (harmless,
    /// and the tree may have gained members since) with its deadline kept.
    fn resume_tree(&mut self, now: Time, out: &mut VecDeque<Action>) {
        let kill = |out: &mut VecDeque<Action>| {
            out.push_back(Action::Signal {
                gen: self.gen,
                signal: SIGKILL,
                scope: Scope::Tree,
            })
        };
        self.group = match self.taken_tree.take() {
            Some(Group::Term { until }) => Group::Term { until },
            Some(Group::Killed { until }) => {
                kill(out);
                Group::Killed { until }
            }
            Some(Group::Unkillable) => {
                kill(out);
                Group::Unkillable
            }
            Some(Group::Alive | Group::Done) | None => {
                kill(out);
                Group::Killed {
                    until: now.saturating_add(self.spec.kill_grace),
                }
            }
        };
    }

    fn cause_of(&self, status: ExitStatus) -> ExitCause {
        match (self.stop, status) {
            (Some(StopReason::Superseded), _) => ExitCause::Superseded,
            (Some(StopReason::Requested), ExitStatus::Signal(SIGKILL)) if self.sent_kill => {
                ExitCause::Killed
            }
            (Some(StopReason::Requested), _) => ExitCause::Stopped,
            (None, ExitStatus::Code(_)) => ExitCause::Exited,
            (None, ExitStatus::Signal(_)) => ExitCause::Signaled,
        }
    }

    /// The group's deadline: SIGKILL after its TERM's grace; `unkillable` after the
    /// SIGKILL's `kill_grace`.
    fn group_timeout(&mut self, now: Time, out: &mut VecDeque<Action>) {
        match self.group {
            Group::Term { until } if until <= now => self.kill_group(now, out),
            Group::Killed { until } if until <= now => {
                self.emit(
                    out,
                    Event::Unkillable {
                        session: self.session.clone(),
                        gen: self.gen,
                    },
                );
                self.group = Group::Unkillable;
            }
            _ => {}
        }
    }

    /// SIGKILL to the rest of the tree. The generation is reaped only once the driver
    /// says the tree is empty (`GroupEmpty`), as a leader is only ever let go of once it
    /// is seen gone: a member that survives SIGKILL for `kill_grace` (stuck in the
    /// kernel) makes it `unkillable`, still tracked, as a leader would.
    fn kill_group(&mut self, now: Time, out: &mut VecDeque<Action>) {
        out.push_back(Action::Signal {
            gen: self.gen,
            signal: SIGKILL,
            scope: Scope::Tree,
        });
        self.group = Group::Killed {
            until: now.saturating_add(self.spec.kill_grace),
        };
    }

    /// Emits the exit once output is drained.
    fn try_report(&mut self, now: Time, out: &mut VecDeque<Action>, o: &mut Outcome) {
        if matches!(self.phase, Phase::Draining { .. }) && self.drained() {
            self.report(now, out, o);
            self.try_reap(now, out, o);
        }
    }

    /// The drain deadline passed with some stream still open (a grandchild may hold it):
    /// the driver closes the streams and answers with what it left unread, which the exit
    /// report counts as discarded.
    fn close_output(&mut self, now: Time, pid: u32, out: &mut VecDeque<Action>, o: &mut Outcome) {
        if self.drained() {
            self.try_report(now, out, o);
            return;
        }
        out.push_back(Action::CloseOutput { gen: self.gen });
        self.phase = Phase::Draining { pid, until: None };
    }

    /// The terminal `exited` event: with the leader's status once it was seen exiting,
    /// as `lost` without one. Output not at EOF by now is cut off.
    fn report(&mut self, now: Time, out: &mut VecDeque<Action>, o: &mut Outcome) {
        let Some(pid) = self.pid() else { return };
        let drained = self.drained();
        let (code, signal, cause) = match self.exit {
            Some((status, cause)) => (Some(status.code()), status.signal(), cause),
            None => (None, None, ExitCause::Lost),
        };
        let (session, gen, discarded) = (self.session.clone(), self.gen, self.discarded);
        let truncated = !drained;
        let event = Event::Exited {
            session,
            gen,
            code,
            signal,
            cause,
            discarded,
            truncated,
        };
        self.emit(out, event.clone());
        let ended = match self.exit {
            Some((status, cause)) => {
                let uptime = self.exited_at.since(self.started.unwrap_or(self.exited_at));
                Ended::Exited {
                    status,
                    cause,
                    uptime,
                }
            }
            None => Ended::Lost,
        };
        o.ended = Some((ended, event));
        self.enter(now, Phase::Reported { pid });
    }

    /// The driver lost sight of the leader: report now if not yet reported, then forget
    /// the generation without reaping or signalling anything again.
    ///
    /// A generation taken back after a crash whose tree is in its cgroup (which, unlike a
    /// session or group id, cannot be anyone else's while we hold it) is not let go of
    /// with its leader: unless its spec leaves what it started, the tree is killed whole
    /// and the generation released only once the cgroup is seen empty (`unkillable` if a
    /// member survives SIGKILL for `kill_grace`), as if its leader had been seen exiting.
    fn lost(&mut self, now: Time, out: &mut VecDeque<Action>, o: &mut Outcome) {
        self.readiness_ends(out);
        if !matches!(self.phase, Phase::Reported { .. }) {
            self.report(now, out, o);
            let contained = self.adopted.is_some()
                && !self.unverified
                && self.containment == Some(Containment::Cgroup)
                && self.spec.on_exit == OnExit::KillGroup
                && matches!(self.phase, Phase::Reported { .. });
            if contained {
                if matches!(self.group, Group::Alive | Group::Done) {
                    self.resume_tree(now, out);
                }
                return;
            }
        }
        out.push_back(Action::Release { gen: self.gen });
        self.phase = Phase::Gone;
        self.since = now;
        o.gone = true;
    }

    /// Reaps once the exit is reported and the group needs nothing more; then the
    /// generation is gone. Reported is left exactly once, so this reaps exactly once.
    fn try_reap(&mut self, now: Time, out: &mut VecDeque<Action>, o: &mut Outcome) {
        if !matches!(
            (self.phase, self.group),
            (Phase::Reported { .. }, Group::Done)
        ) {
            return;
        }
        out.push_back(Action::Reap { gen: self.gen });
        out.push_back(Action::Release { gen: self.gen });
        self.phase = Phase::Gone;
        self.since = now;
        o.gone = true;
    }
}

/// The shorter of two optional graces; either alone when the other is absent.
fn shortest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
