//! [`CoreImage`] → Core, after checking everything a corrupted but well-formed image
//! could get wrong. The core trusts its own tables (it indexes them after checking a
//! command, it never re-derives a phase's data), so every relation it relies on is
//! checked here once, and a bad image is refused whole with a sentence naming the first
//! problem, leaving the caller free to start from its session records instead.
//!
//! These checks are the gate: the invariant checker of the tests and the fuzzer
//! (`core::check`) watches a core step by step from its creation and
//! cannot vouch for a table it did not see being built. Every check is one a real core
//! always passes between turns (the round-trip property test imports thousands of them).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::{CoreImage, GenerationImage, GroupImage, ImageError, PhaseImage, SessionImage};
use crate::core::action::Event;
use crate::core::generation::{Generation, Group, InputState, Phase};
use crate::core::session::{Session, RECENT_ENDS};
use crate::core::snapshot::StopStage;
use crate::core::{Config, Core, Shutdown};

type Checked = Result<(), ImageError>;

fn bad(message: impl Into<String>) -> ImageError {
    ImageError::new(message)
}

impl Core {
    /// A core that carries on from `image`, under this daemon's `config` (its limits
    /// must hold for everything in the image: a table, a spec or an input queue beyond
    /// them is refused, as [`restore`](Core::restore) refuses such a record).
    ///
    /// Refused, naming the first problem: a session name that is not valid or appears
    /// twice; a spec `config` refuses; a generation numbered 0, twice, or not below
    /// `next_gen`; a generation whose session is missing; a current generation that is
    /// not tracked, belongs to another session or already ended; a phase whose data
    /// contradicts it (a stopping generation with no stop reason, an exited one with no
    /// exit, a pending one that is not its session's current, ...); an instant after the
    /// image's `now` where only a past one can be; recent ends that are not this
    /// session's terminal events, or name a generation still running.
    ///
    /// It takes the place of [`Core::new`] and of the whole start-up of
    /// [`restore`](Core::restore): the core it returns has nothing queued, the old
    /// daemon's [`next_deadline`](Core::next_deadline), and takes the next input as the
    /// old one would have.
    pub fn import_image(config: Config, image: CoreImage) -> Result<Core, ImageError> {
        check_table(&config, &image)?;
        for s in &image.sessions {
            check_session(&config, &image, s).map_err(|e| in_session(&s.name, e))?;
        }
        for g in &image.generations {
            check_generation(&config, &image, g)
                .map_err(|e| bad(format!("generation {}: {}", g.gen, e.message())))?;
        }
        check_links(&image)?;
        check_dirty(&config, &image)?;
        Ok(build(config, image))
    }
}

fn in_session(name: &str, e: ImageError) -> ImageError {
    bad(format!("session {name:?}: {}", e.message()))
}

/// Sizes, order and uniqueness of the tables.
fn check_table(config: &Config, image: &CoreImage) -> Checked {
    if image.next_gen == 0 {
        return Err(bad("next_gen is 0; generation numbers start at 1"));
    }
    if image.sessions.len() > config.max_sessions {
        return Err(bad(format!(
            "{} sessions, above this daemon's limit of {}",
            image.sessions.len(),
            config.max_sessions
        )));
    }
    // A replacement waiting for the generations it replaces is tracked beyond the limit,
    // one per session at most.
    let started = image
        .generations
        .iter()
        .filter(|g| g.phase != PhaseImage::Pending)
        .count();
    if started > config.max_generations {
        return Err(bad(format!(
            "{started} generations started, above this daemon's limit of {}",
            config.max_generations
        )));
    }
    let room = config.max_generations + image.sessions.len();
    if image.generations.len() > room {
        return Err(bad(format!(
            "{} generations, above this daemon's limit of {} and one waiting per session",
            image.generations.len(),
            config.max_generations
        )));
    }
    for pair in image.sessions.windows(2) {
        if pair[0].name >= pair[1].name {
            return Err(bad(format!(
                "sessions out of name order or named twice: {:?} before {:?}",
                pair[0].name, pair[1].name
            )));
        }
    }
    for pair in image.generations.windows(2) {
        if pair[0].gen >= pair[1].gen {
            return Err(bad(format!(
                "generations out of order or numbered twice: {} before {}",
                pair[0].gen, pair[1].gen
            )));
        }
    }
    Ok(())
}

fn check_session(config: &Config, image: &CoreImage, s: &SessionImage) -> Checked {
    if let Some(why) = Session::name_problem(&s.name) {
        return Err(bad(why));
    }
    s.spec
        .validate(config)
        .map_err(|e| bad(format!("spec: {}", e.message)))?;
    let named = [s.current, s.last_gen, s.last_end.as_ref().map(|e| e.gen())];
    if let Some(gen) = named.into_iter().flatten().find(|g| *g >= image.next_gen) {
        return Err(bad(format!(
            "names generation {gen}, not below next_gen {}",
            image.next_gen
        )));
    }
    if s.recent_ends.len() > RECENT_ENDS {
        return Err(bad(format!(
            "{} recent ends, at most {RECENT_ENDS}",
            s.recent_ends.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for e in &s.recent_ends {
        let gen = e
            .gen()
            .filter(|_| e.is_terminal() && *e.session() == s.name);
        let Some(gen) = gen else {
            return Err(bad(format!(
                "recent end {e:?} is not a terminal event of it"
            )));
        };
        if gen >= image.next_gen || !seen.insert(gen) {
            return Err(bad(format!(
                "recent end of generation {gen} is not below next_gen or comes twice"
            )));
        }
    }
    Ok(())
}

fn check_generation(config: &Config, image: &CoreImage, g: &GenerationImage) -> Checked {
    if g.gen == 0 || g.gen >= image.next_gen {
        return Err(bad(format!("not in 1..next_gen ({})", image.next_gen)));
    }
    if find_session(image, &g.session).is_none() {
        return Err(bad(format!(
            "its session {:?} is not in the image",
            g.session
        )));
    }
    g.spec
        .validate(config)
        .map_err(|e| bad(format!("spec: {}", e.message)))?;
    if g.pending_input > config.max_pending_input {
        return Err(bad(format!(
            "{} input bytes queued, above this daemon's limit of {}",
            g.pending_input, config.max_pending_input
        )));
    }
    let past = [Some(g.since), g.started, Some(g.exited_at), g.adopted];
    if past.into_iter().flatten().any(|t| t > image.now) {
        return Err(bad("an instant of its past is after the image's now"));
    }
    let streams = g.spec.streams();
    if (0..3).any(|i| g.offsets[i] != 0 && !streams.iter().any(|s| s.index() == i)) {
        return Err(bad("output delivered on a stream its spec does not have"));
    }
    if g.cancel_at.is_some() && g.stop.is_none() {
        return Err(bad("a start to give up, with no stop asked"));
    }
    if g.unverified && !(g.adopted.is_some() && matches!(g.phase, PhaseImage::Running { .. })) {
        return Err(bad("unverified, yet not an adopted running generation"));
    }
    if g.io_kept && g.adopted.is_none() {
        return Err(bad("its I/O kept across a crash, yet not adopted"));
    }
    if g.adopted.is_some()
        && !g.io_kept
        && !(g.eof == [true; 3] && g.input_closed && g.pending_input == 0)
    {
        return Err(bad(
            "adopted without its I/O, yet holding output streams or input",
        ));
    }
    check_phase(g)
}

/// What each phase implies about the rest of the record.
fn check_phase(g: &GenerationImage) -> Checked {
    let ran = g.started.is_some() && g.containment.is_some();
    let alive = g.exit.is_none() && g.group == GroupImage::Alive;
    let fresh = g.started.is_none()
        && g.containment.is_none()
        && alive
        && g.adopted.is_none()
        && !g.leader_gone
        && !g.sent_kill
        && g.offsets == [0; 3]
        && g.eof == [false; 3];
    let drained = g.spec.streams().iter().all(|s| g.eof[s.index()]);
    let ok = match g.phase {
        PhaseImage::Gone => return Err(bad("gone, yet still in the table")),
        PhaseImage::Pending => {
            fresh && g.stop.is_none() && g.grace.is_none() && g.pending_input == 0
        }
        PhaseImage::Starting => fresh,
        // A stop of a running leader begins at once, unless nothing may be sent to it yet.
        PhaseImage::Running { .. } => {
            ran && alive && !g.sent_kill && (g.stop.is_none() || g.unverified)
        }
        PhaseImage::Stopping { stage, until, .. } => {
            let timed = match stage {
                StopStage::Graceful => !g.sent_kill,
                StopStage::Kill => g.sent_kill,
                StopStage::Unkillable => g.sent_kill && until.is_none(),
            };
            let settled = until.is_none() == (g.leader_gone || stage == StopStage::Unkillable);
            ran && alive && g.stop.is_some() && timed && settled
        }
        PhaseImage::Draining { .. } => {
            ran && g.exit.is_some() && g.group != GroupImage::Alive && !drained
        }
        // One taken back after a crash may have been reported `lost` (no status), its
        // tree still being emptied.
        PhaseImage::Reported { .. } => {
            ran && (g.exit.is_some() || g.adopted.is_some())
                && matches!(
                    g.group,
                    GroupImage::Term { .. } | GroupImage::Killed { .. } | GroupImage::Unkillable
                )
        }
    };
    if !ok {
        return Err(bad(format!(
            "its record contradicts its phase {:?} (started {:?}, exit {:?}, group {:?}, \
             stop {:?}, sent_kill {}, leader_gone {})",
            g.phase, g.started, g.exit, g.group, g.stop, g.sent_kill, g.leader_gone
        )));
    }
    Ok(())
}

/// Relations between sessions and generations.
fn check_links(image: &CoreImage) -> Checked {
    let gens: BTreeMap<u64, &GenerationImage> =
        image.generations.iter().map(|g| (g.gen, g)).collect();
    for s in &image.sessions {
        let Some(c) = s.current else { continue };
        let Some(g) = gens.get(&c) else {
            return Err(in_session(
                &s.name,
                bad(format!("current generation {c} is not tracked")),
            ));
        };
        if g.session != s.name {
            return Err(in_session(
                &s.name,
                bad(format!("current generation {c} is {:?}'s", g.session)),
            ));
        }
        if matches!(g.phase, PhaseImage::Reported { .. } | PhaseImage::Gone) {
            return Err(in_session(
                &s.name,
                bad(format!("current generation {c} already ended")),
            ));
        }
    }
    for g in &image.generations {
        let Some(s) = find_session(image, &g.session) else {
            continue; // refused by check_generation already
        };
        if g.phase == PhaseImage::Pending && s.current != Some(g.gen) {
            return Err(bad(format!(
                "generation {} is pending but not its session's current",
                g.gen
            )));
        }
        let ended = matches!(g.phase, PhaseImage::Reported { .. });
        if !ended && s.recent_ends.iter().any(|e| e.gen() == Some(g.gen)) {
            return Err(bad(format!(
                "generation {} has not ended, yet its session remembers its end",
                g.gen
            )));
        }
    }
    Ok(())
}

/// Dirty names: valid, in order, each once, and no more than the table's sessions plus
/// as many removed since the driver last took them (a table's worth at most).
fn check_dirty(config: &Config, image: &CoreImage) -> Checked {
    let bound = image.sessions.len().saturating_add(config.max_sessions);
    if image.dirty.len() > bound {
        return Err(bad(format!(
            "{} dirty sessions, more than {bound}",
            image.dirty.len()
        )));
    }
    if let Some(name) = image.dirty.iter().find(|n| !Session::valid_name(n)) {
        return Err(bad(format!("dirty session {name:?} is not a valid name")));
    }
    if image.dirty.windows(2).any(|p| p[0] >= p[1]) {
        return Err(bad("dirty sessions out of name order or named twice"));
    }
    Ok(())
}

fn find_session<'a>(image: &'a CoreImage, name: &str) -> Option<&'a SessionImage> {
    image
        .sessions
        .binary_search_by(|s| (*s.name).cmp(name))
        .ok()
        .map(|i| &image.sessions[i])
}

/// Builds the core from a checked image.
fn build(config: Config, image: CoreImage) -> Core {
    let mut sessions = BTreeMap::new();
    for s in image.sessions {
        let session = Session {
            origin: s.origin,
            current: s.current,
            last_gen: s.last_gen,
            want_up: s.want_up,
            removing: s.removing,
            recovery_stop: s.recovery_stop,
            stopped_by_shutdown: s.stopped_by_shutdown,
            restarts: s.restarts,
            restart_at: s.restart_at,
            restart_uncounted: s.restart_uncounted && s.restart_at.is_some(),
            rest: s.rest.into(),
            last_end: s.last_end,
            recent_ends: s.recent_ends.into_iter().collect::<VecDeque<Event>>(),
            announced: s.announced,
            ..Session::new(s.name.clone(), s.spec)
        };
        sessions.insert(s.name, session);
    }
    // One name per session, shared by its generations, as the core does.
    let name_of = |n: &Arc<str>| {
        sessions
            .get_key_value(n)
            .map_or(n.clone(), |(k, _)| k.clone())
    };
    let gens = image
        .generations
        .into_iter()
        .map(|g| (g.gen, generation(name_of(&g.session), g)))
        .collect();
    let dirty: BTreeSet<Arc<str>> = image.dirty.iter().map(name_of).collect();
    let mut core = Core {
        config,
        now: image.now,
        next_gen: image.next_gen,
        sessions,
        gens,
        actions: VecDeque::new(),
        shutdown: match image.shutdown {
            super::ShutdownImage::Running => Shutdown::Running,
            super::ShutdownImage::Stopping => Shutdown::Stopping,
            super::ShutdownImage::Killing => Shutdown::Killing,
        },
        // Not yet written, nor looked at since they changed (see `Core::mark_dirty`).
        touched: dirty.clone(),
        dirty,
        deadlines: Default::default(),
        by_session: Default::default(),
        blocked: Default::default(),
        taken_stops: Default::default(),
        trees_taken: Default::default(),
        deferred_stops: Default::default(),
    };
    // A Pending current generation with dependencies may wait for them: looked at again
    // after the next input (the image does not carry the wait itself; one that was
    // may start beside its predecessor keeps that, from its generation).
    let blocked: Vec<(Arc<str>, Vec<Arc<str>>)> = core
        .sessions
        .values()
        .filter_map(|s| {
            let g = core.gens.get(&s.current?)?;
            (g.phase == Phase::Pending && !g.spec.depends_on.is_empty())
                .then(|| (s.name.clone(), g.depended_on()))
        })
        .collect();
    for (name, deps) in blocked {
        core.blocked.insert(name, deps);
    }
    core.blocked.mark_all_due();
    // A removed session's generation still running waited for its dependents to end
    // (the image does not carry the wait): it waits again, and is stopped once they have.
    // So does one replaced while it waited (no stop asked: see `replace_current`).
    // During a shutdown, the shutdown's own order does the same.
    core.deferred_stops = core
        .gens
        .values()
        .filter(|g| matches!(g.phase, Phase::Running { .. }))
        .filter(|g| {
            let session = core.sessions.get(&g.session);
            core.shutdown != Shutdown::Running
                || session.is_some_and(|s| s.removing)
                || (g.stop.is_none() && session.is_some_and(|s| s.current != Some(g.gen)))
        })
        .map(|g| g.gen)
        .collect();
    core.by_session = core
        .gens
        .values()
        .map(|g| (g.session.clone(), g.gen))
        .collect();
    core.index_deadlines();
    core
}

fn generation(session: Arc<str>, g: GenerationImage) -> Generation {
    let mut r = Generation::new(g.gen, session, g.spec, g.since);
    r.phase = match g.phase {
        PhaseImage::Pending => Phase::Pending,
        PhaseImage::Starting => Phase::Starting,
        PhaseImage::Running { pid } => Phase::Running { pid },
        PhaseImage::Stopping { pid, stage, until } => Phase::Stopping { pid, stage, until },
        PhaseImage::Draining { pid, until } => Phase::Draining { pid, until },
        PhaseImage::Reported { pid } => Phase::Reported { pid },
        PhaseImage::Gone => Phase::Gone,
    };
    r.started = g.started;
    r.stop = g.stop;
    r.grace = g.grace;
    r.sent_kill = g.sent_kill;
    r.started_unix_ms = g.started_unix_ms;
    r.cancel_at = g.cancel_at;
    r.containment = g.containment;
    r.offsets = g.offsets;
    r.eof = g.eof;
    r.discarded = g.discarded;
    r.group = match g.group {
        GroupImage::Alive => Group::Alive,
        GroupImage::Term { until } => Group::Term { until },
        GroupImage::Killed { until } => Group::Killed { until },
        GroupImage::Unkillable => Group::Unkillable,
        GroupImage::Done => Group::Done,
    };
    r.input = InputState {
        pending: g.pending_input,
        closed: g.input_closed,
    };
    r.exit = g.exit;
    r.exited_at = g.exited_at;
    r.adopted = g.adopted;
    r.io_kept = g.io_kept;
    r.unverified = g.unverified;
    r.leader_gone = g.leader_gone;
    r.readiness = g.readiness;
    r.liveness = g.liveness;
    r.overlap = g.overlap;
    r
}
