//! Core → [`CoreImage`]: a copy of every field, specs shared rather than cloned.

use super::{CoreImage, GenerationImage, GroupImage, ImageError, PhaseImage, SessionImage};
use crate::core::generation::{Generation, Group, Phase};
use crate::core::session::Session;
use crate::core::{Core, Shutdown};

impl Core {
    /// The core's whole state, for an upgrade by re-exec (see [`CoreImage`]).
    ///
    /// Call it between turns, once [`poll_action`](Core::poll_action) returned `None`:
    /// a queued action belongs to the turn that produced it and would be lost with this
    /// process, so an image asked for with actions still queued is refused rather than
    /// taken without them. The driver then writes the image (the store's
    /// `encode_core_image`) and re-executes; the new daemon calls
    /// [`import_image`](Core::import_image) before feeding anything else. Exporting
    /// changes nothing: if the upgrade fails, this core simply carries on. Refused too while
    /// the table holds more than the new program would accept: sessions restored beyond a
    /// lowered `--max-sessions`, or processes taken back
    /// ([`Input::Adopt`](crate::core::Input::Adopt)) beyond a lowered `--max-running`.
    ///
    /// Take it once the start-up is finished ([`resume`](Core::resume) called): before
    /// that, a restored current generation has no record yet and the image is refused on
    /// import.
    pub fn export_image(&self) -> Result<CoreImage, ImageError> {
        if !self.actions.is_empty() {
            return Err(ImageError::new(format!(
                "{} actions are still queued; drain poll_action before taking an image",
                self.actions.len()
            )));
        }
        // What the new program (and the rollback) accepts: tables within the limits (and
        // one waiting replacement per session). What a restart took back beyond lowered
        // limits exceeds them until enough has gone.
        if self.sessions.len() > self.config.max_sessions {
            return Err(ImageError::new(format!(
                "{} sessions, more than the --max-sessions limit of {} (taken back from a previous daemon with a higher limit); upgrade once {} more are removed",
                self.sessions.len(),
                self.config.max_sessions,
                self.sessions.len() - self.config.max_sessions
            )));
        }
        let started = self
            .gens
            .values()
            .filter(|g| !matches!(g.phase, Phase::Pending))
            .count();
        let room = self.config.max_generations + self.sessions.len();
        let over = started
            .saturating_sub(self.config.max_generations)
            .max(self.gens.len().saturating_sub(room));
        if over > 0 {
            return Err(ImageError::new(format!(
                "{started} generations started ({} tracked), more than the --max-running limit of {} allows (processes taken back from a previous daemon with a higher limit); upgrade once {over} more have ended",
                self.gens.len(),
                self.config.max_generations,
            )));
        }
        Ok(CoreImage {
            now: self.now,
            next_gen: self.next_gen,
            shutdown: match self.shutdown {
                Shutdown::Running => super::ShutdownImage::Running,
                Shutdown::Stopping => super::ShutdownImage::Stopping,
                Shutdown::Killing => super::ShutdownImage::Killing,
            },
            sessions: self.sessions.values().map(session_image).collect(),
            generations: self.gens.values().map(generation_image).collect(),
            dirty: self.dirty.iter().cloned().collect(),
        })
    }
}

fn session_image(s: &Session) -> SessionImage {
    SessionImage {
        name: s.name.clone(),
        spec: s.spec.clone(),
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
        last_end: s.last_end.clone(),
        recent_ends: s.recent_ends().cloned().collect(),
        announced: s.announced,
    }
}

fn generation_image(g: &Generation) -> GenerationImage {
    GenerationImage {
        gen: g.gen,
        session: g.session.clone(),
        spec: g.spec.clone(),
        phase: match g.phase {
            Phase::Pending => PhaseImage::Pending,
            Phase::Starting => PhaseImage::Starting,
            Phase::Running { pid } => PhaseImage::Running { pid },
            Phase::Stopping { pid, stage, until } => PhaseImage::Stopping { pid, stage, until },
            Phase::Draining { pid, until } => PhaseImage::Draining { pid, until },
            Phase::Reported { pid } => PhaseImage::Reported { pid },
            Phase::Gone => PhaseImage::Gone,
        },
        since: g.since,
        started: g.started,
        stop: g.stop,
        grace: g.grace,
        sent_kill: g.sent_kill,
        cancel_at: g.cancel_at,
        containment: g.containment,
        offsets: g.offsets,
        eof: g.eof,
        discarded: g.discarded,
        group: match g.group {
            Group::Alive => GroupImage::Alive,
            Group::Term { until } => GroupImage::Term { until },
            Group::Killed { until } => GroupImage::Killed { until },
            Group::Unkillable => GroupImage::Unkillable,
            Group::Done => GroupImage::Done,
        },
        pending_input: g.input.pending,
        input_closed: g.input.closed,
        exit: g.exit,
        exited_at: g.exited_at,
        adopted: g.adopted,
        io_kept: g.io_kept,
        started_unix_ms: g.started_unix_ms,
        unverified: g.unverified,
        leader_gone: g.leader_gone,
        readiness: g.readiness.clone(),
        liveness: g.liveness.clone(),
        overlap: g.overlap,
    }
}
