//! Reloading a declarative configuration: which sessions a config owns, the plan that
//! brings the table in line with it, and carrying it out.
//!
//! The plan is one pure function of (config, table), [`Core::plan_reload`], so a dry run
//! and a real reload can never disagree; [`Core::reload`] computes it and executes it in
//! the same call. Sessions a client started ([`Origin::Client`]) are never touched: a
//! config entry naming one is refused, changing nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::error::{Error, ErrorCode};
use super::session::Session;
use super::spec::{OnBusy, Spec};
use super::time::Time;
use super::{Core, Shutdown};

/// Who started a session, and so who may change it without being asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Origin {
    /// A client's `spawn`: a reload never touches it.
    #[default]
    Client,
    /// The daemon's configuration: a reload starts, replaces and removes it. A client may
    /// still spawn, stop or restart it; the next reload brings it back to the config's spec.
    Config,
}

impl Origin {
    /// The name used on disk and in images.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Config => "config",
        }
    }

    /// The origin named `s` ([`as_str`](Self::as_str)), if any.
    pub fn from_name(s: &str) -> Option<Origin> {
        match s {
            "client" => Some(Origin::Client),
            "config" => Some(Origin::Config),
            _ => None,
        }
    }
}

/// One session of a configuration: a `spawn` without the request around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSession {
    /// The session's name.
    pub name: Arc<str>,
    /// What it runs.
    pub spec: Spec,
    /// How a changed spec replaces a running generation.
    pub on_busy: OnBusy,
}

/// What a reload does (or, dry, would do), by session name, each list in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// In the config, not in the table (or being removed, by whoever started it, or stopped
    /// by the last daemon's shutdown): started.
    pub start: Vec<Arc<str>>,
    /// Started by the config, no longer in it: stopped, and removed once ended.
    pub stop: Vec<Arc<str>>,
    /// In both with a different spec: a new generation, per the entry's `on_busy`.
    pub replace: Vec<Arc<str>>,
    /// Changed, but `on_busy` is `reject` and a generation is live: left as it runs, its
    /// session taking the new spec for its next start (an automatic restart, a `restart`).
    pub busy: Vec<Arc<str>>,
    /// In both with an equal spec: not touched (same generation, same process).
    pub unchanged: Vec<Arc<str>>,
}

impl Plan {
    /// Whether the plan changes nothing (a busy session changes: its next start runs the
    /// new spec).
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
            && self.stop.is_empty()
            && self.replace.is_empty()
            && self.busy.is_empty()
    }
}

impl Core {
    /// The plan that brings the table in line with `config`, without changing anything.
    ///
    /// Fails, naming the session, when an entry's name or spec is invalid, a name appears
    /// twice, an entry names a session a client started, the daemon is shutting down, or
    /// the starts would exceed the session or generation limits.
    pub fn plan_reload(&self, config: &[ConfigSession]) -> Result<Plan, Error> {
        if self.shutdown != Shutdown::Running {
            return Err(Error::new(ErrorCode::Busy, "the daemon is shutting down"));
        }
        let mut plan = Plan::default();
        let mut named = BTreeSet::new();
        for entry in config {
            if let Some(why) = Session::name_problem(&entry.name) {
                return Err(Error::new(ErrorCode::BadConfig, why));
            }
            if !named.insert(entry.name.clone()) {
                let why = format!("session {:?} is configured twice", entry.name);
                return Err(Error::new(ErrorCode::BadConfig, why));
            }
            entry.spec.validate(&self.config).map_err(|e| {
                Error::new(
                    ErrorCode::BadConfig,
                    format!("{}: {}", entry.name, e.message),
                )
            })?;
            let list = match self.sessions.get(&entry.name) {
                None => &mut plan.start,
                // Going away, whoever started it: the config's from now on, its new
                // generation waiting for the old one to end.
                Some(s) if s.removing => &mut plan.start,
                // Left down by the last daemon's end (its shutdown, or a crash that lost
                // its process), not by a client: the config runs it again, as at a first
                // start.
                Some(s) if s.stopped_by_shutdown && s.origin == Origin::Config => &mut plan.start,
                Some(s) if s.origin == Origin::Client => {
                    let why = format!(
                        "session {:?} was started by a client, not by the config: remove it, or name the config's session otherwise",
                        entry.name
                    );
                    return Err(Error::new(ErrorCode::BadConfig, why));
                }
                Some(s) if *s.spec == entry.spec => &mut plan.unchanged,
                Some(s) if self.runs_its_current(s) && entry.on_busy == OnBusy::Reject => {
                    &mut plan.busy
                }
                Some(_) => &mut plan.replace,
            };
            list.push(entry.name.clone());
        }
        plan.stop = self
            .sessions
            .values()
            .filter(|s| s.origin == Origin::Config && !s.removing && !named.contains(&s.name))
            .map(|s| s.name.clone())
            .collect();
        let new = plan
            .start
            .iter()
            .filter(|n| !self.sessions.contains_key(*n))
            .count();
        // Only what the config adds is refused: sessions and processes taken back beyond
        // lowered limits do not block a reload that adds nothing.
        if new > 0 && self.sessions.len() + new > self.config.max_sessions {
            let msg = format!(
                "the config adds {new} sessions to {}, beyond the limit of {}",
                self.sessions.len(),
                self.config.max_sessions
            );
            return Err(Error::new(ErrorCode::Limit, msg));
        }
        let on_busy: BTreeMap<&str, OnBusy> = config
            .iter()
            .map(|e| (e.name.as_ref(), e.on_busy))
            .collect();
        let gens = plan
            .start
            .iter()
            .chain(&plan.replace)
            .filter(|name| {
                let on_busy = on_busy.get(name.as_ref()).copied().unwrap_or_default();
                !self.takes_the_place_of_its_own(name, on_busy)
            })
            .count();
        if gens > 0 && self.gens.len() + gens > self.config.max_generations {
            let msg = format!(
                "the config starts {gens} generations next to {}, beyond the limit of {}",
                self.gens.len(),
                self.config.max_generations
            );
            return Err(Error::new(ErrorCode::Limit, msg));
        }
        if let Some(full) = plan
            .start
            .iter()
            .chain(&plan.replace)
            .find_map(|name| self.session_full(name))
        {
            return Err(full);
        }
        self.refuse_config_cycle(config, &plan)?;
        for list in [&mut plan.start, &mut plan.replace, &mut plan.busy] {
            list.sort();
        }
        plan.unchanged.sort();
        Ok(plan)
    }

    /// Refuses a config whose dependencies, with the sessions it leaves running, would
    /// close a cycle: checked whole before anything starts, so a refused reload starts
    /// nothing (each spawn would refuse only its own part of the cycle).
    fn refuse_config_cycle(&self, config: &[ConfigSession], plan: &Plan) -> Result<(), Error> {
        let specs: BTreeMap<&str, &Spec> = config.iter().map(|e| (&*e.name, &e.spec)).collect();
        let edges = |n: &str| -> Option<Box<dyn Iterator<Item = &str> + '_>> {
            let spec = match specs.get(n) {
                Some(spec) => *spec,
                None if plan.stop.iter().any(|s| &**s == n) => return None,
                None => &self.sessions.get(n).filter(|s| !s.removing)?.spec,
            };
            Some(Box::new(spec.depends_on.keys().map(String::as_str)))
        };
        match super::depends::find_cycle(edges, config.iter().map(|e| &*e.name)) {
            Some(cycle) => Err(Error::new(
                ErrorCode::BadConfig,
                format!("dependency cycle: {}", cycle.join(" -> ")),
            )),
            None => Ok(()),
        }
    }

    /// Brings the table in line with `config` at `now` (see [`plan_reload`]): starts,
    /// replaces and removes sessions, and returns what it did. A refused config changes
    /// nothing. Drain [`poll_action`](Core::poll_action) afterwards as after any input.
    ///
    /// [`plan_reload`]: Core::plan_reload
    pub fn reload(&mut self, now: Time, config: Vec<ConfigSession>) -> Result<Plan, Error> {
        self.advance_clock(now);
        let plan = self.plan_reload(&config)?;
        // Removals first: a cycle through a session the config drops is none (see
        // `refuse_config_cycle`), and a spawn must see it going.
        // Every removed session is marked first, then stopped: one that others being
        // removed depend on waits for them to end (stops in reverse of the start order).
        for name in &plan.stop {
            if let Some(s) = self.sessions.get_mut(name) {
                s.removing = true;
            }
        }
        for name in &plan.stop {
            self.mark_dirty(name.clone());
            self.remove(name)?;
        }
        // `reject` was the plan's to apply (a busy one is not started); what is left to
        // start waits for what still runs, as `replace` does (a removed session's last
        // generation, still stopping, say).
        let (busy, config): (Vec<_>, Vec<_>) = config
            .into_iter()
            .partition(|e| plan.busy.contains(&e.name));
        // A busy one runs on as it is; the new spec is its session's from now on, for its
        // next start (an automatic restart, a `restart`).
        for entry in busy {
            if let Some(s) = self.sessions.get_mut(&entry.name) {
                s.spec = Arc::new(entry.spec);
                self.mark_dirty(entry.name);
            }
        }
        let mut todo: Vec<(ConfigSession, OnBusy)> = config
            .into_iter()
            .filter(|e| plan.start.contains(&e.name) || plan.replace.contains(&e.name))
            .map(|e| {
                let on_busy = match e.on_busy {
                    OnBusy::Reject => OnBusy::Replace,
                    other => other,
                };
                (e, on_busy)
            })
            .collect();
        // What adds to what runs first, the replacements (which wait beyond the limit)
        // after: in the config's order, a waiting replacement would take the room the
        // plan counted for a start after it.
        todo.sort_by_key(|(e, on_busy)| self.takes_the_place_of_its_own(&e.name, *on_busy));
        for (entry, on_busy) in todo {
            let name = entry.name.clone();
            // Checked by the plan: the spec is valid, the name is free or the config's,
            // the whole config closes no cycle, and there is room, so this cannot fail.
            self.spawn_acyclic(&name, entry.spec, on_busy)?;
            if let Some(s) = self.sessions.get_mut(&name) {
                s.origin = Origin::Config;
            }
        }
        self.follow_order();
        self.announce_states();
        Ok(plan)
    }
}
