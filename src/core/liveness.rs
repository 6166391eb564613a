//! Whether a running generation stays healthy: the spec's optional `live` probe, run on
//! a schedule the core keeps (the driver runs each probe it is asked for, as for
//! readiness, and answers with its result). After `failures` failed probes in a row the
//! generation is stopped as unhealthy, and its end counts as a failure for its session's
//! restart policy.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::action::{Action, Event};
use super::error::Error;
use super::readiness::{ReadyCheck, ReadyHow};
use super::time::Time;

/// A spec's liveness probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveCheck {
    /// What is probed: `Tcp`, `Unix` or `Command` (the probe kinds of readiness).
    pub how: ReadyHow,
    /// How often it runs; a run still going after one interval counts as failed.
    pub interval: Duration,
    /// Consecutive failures that make the generation unhealthy.
    pub failures: u32,
}

impl LiveCheck {
    /// A check of `how` every 10 s, unhealthy after 3 failures in a row.
    pub fn new(how: ReadyHow) -> LiveCheck {
        LiveCheck {
            how,
            interval: Duration::from_secs(10),
            failures: 3,
        }
    }

    /// Checks every field, naming it.
    pub fn validate(&self) -> Result<(), Error> {
        if !self.how.is_probe() {
            return Err(Error::bad(
                "live: give exactly one of tcp, unix, command (a probe the daemon runs)",
            ));
        }
        // The probe's own fields are checked as readiness checks them.
        let as_ready = ReadyCheck {
            how: self.how.clone(),
            timeout: Duration::from_secs(1),
            interval: self.interval,
        };
        as_ready
            .validate()
            .map_err(|e| Error::bad(e.message.replacen("ready.", "live.", 1)))?;
        if self.failures == 0 {
            return Err(Error::bad("live.failures: must be at least 1"));
        }
        Ok(())
    }
}

/// One generation's liveness schedule (carried in a core image as is).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Liveness {
    /// When the next probe is due; `None` while one is in flight, or before the schedule
    /// began (it begins once readiness is decided).
    pub next: Option<Time>,
    /// The probe in flight: its number and when it is given up.
    pub probe: Option<(u64, Time)>,
    /// Probes asked so far: the next one's number.
    pub probes: u64,
    /// Consecutive failures.
    pub failures: u32,
    /// It was found unhealthy (and is being stopped): no more probes.
    pub tripped: bool,
}

/// Who the liveness belongs to, for the events and actions it produces.
pub(crate) struct Owner<'a> {
    pub session: &'a Arc<str>,
    pub gen: u64,
    pub check: &'a LiveCheck,
}

/// What a liveness step decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Healthy,
    /// Failed `failures` times in a row: stop it.
    Unhealthy,
}

impl Liveness {
    /// Starts the schedule: the first probe one interval from `now`.
    pub(crate) fn begin(&mut self, now: Time, check: &LiveCheck) {
        if self.next.is_none() && self.probe.is_none() && !self.tripped {
            self.next = Some(now.saturating_add(check.interval));
        }
    }

    /// The earliest instant it wants a timeout call.
    pub(crate) fn deadline(&self) -> Option<Time> {
        if self.tripped {
            return None;
        }
        self.probe.map(|(_, t)| t).or(self.next)
    }

    /// Due deadlines: a probe outliving its interval is given up and counts as failed; a
    /// due probe is asked for.
    pub(crate) fn on_timeout(
        &mut self,
        o: &Owner<'_>,
        now: Time,
        out: &mut VecDeque<Action>,
    ) -> Verdict {
        if self.tripped {
            return Verdict::Healthy;
        }
        if let Some((n, until)) = self.probe {
            if until <= now {
                out.push_back(Action::CancelProbe {
                    gen: o.gen,
                    probe: n,
                    live: true,
                });
                if self.failed(o, until, out) == Verdict::Unhealthy {
                    return Verdict::Unhealthy;
                }
            }
        }
        if self.probe.is_none() && self.next.is_some_and(|t| t <= now) {
            let n = self.probes;
            self.probes = self.probes.saturating_add(1);
            self.next = None;
            self.probe = Some((n, now.saturating_add(o.check.interval)));
            out.push_back(Action::Probe {
                gen: o.gen,
                probe: n,
                live: true,
            });
        }
        Verdict::Healthy
    }

    /// Probe `probe` finished. Ignored unless it is the one in flight.
    pub(crate) fn on_result(
        &mut self,
        o: &Owner<'_>,
        probe: u64,
        ok: bool,
        out: &mut VecDeque<Action>,
    ) -> Verdict {
        let Some((n, until)) = self.probe else {
            return Verdict::Healthy;
        };
        if n != probe || self.tripped {
            return Verdict::Healthy;
        }
        if ok {
            self.failures = 0;
            self.probe = None;
            self.next = Some(until);
            return Verdict::Healthy;
        }
        self.failed(o, until, out)
    }

    fn failed(&mut self, o: &Owner<'_>, until: Time, out: &mut VecDeque<Action>) -> Verdict {
        self.probe = None;
        self.failures = self.failures.saturating_add(1);
        if self.failures < o.check.failures {
            self.next = Some(until);
            return Verdict::Healthy;
        }
        self.tripped = true;
        self.next = None;
        out.push_back(Action::Emit(Event::Unhealthy {
            session: o.session.clone(),
            gen: o.gen,
            failures: self.failures,
        }));
        Verdict::Unhealthy
    }
}
