//! Each session's replay log: the recent output frames and events of all its generations,
//! framed once in wire format, which every subscriber is pumped from (see
//! `subscriptions.rs`). A session's log lives until the session is removed.

use std::collections::HashMap;
use std::sync::Arc;

use super::ring::Ring;
use crate::core::{Event, Stream};
use crate::proto::encode;

/// Default per-session log capacity until a spawn says otherwise.
pub const DEFAULT_LOG_BYTES: usize = 1 << 20;

/// The replay logs of every session.
#[derive(Debug, Default)]
pub struct Logs {
    rings: HashMap<Arc<str>, Ring>,
}

impl Logs {
    fn ring(&mut self, session: &Arc<str>) -> &mut Ring {
        self.rings
            .entry(session.clone())
            .or_insert_with(|| Ring::new(DEFAULT_LOG_BYTES))
    }

    /// The log of `session`, if it has one.
    pub fn get(&self, session: &str) -> Option<&Ring> {
        self.rings.get(session)
    }

    /// The log of `session`, created empty if missing (a subscription to a session that
    /// has not printed anything yet still needs a place to start).
    pub fn get_or_create(&mut self, session: &Arc<str>) -> &Ring {
        self.ring(session)
    }

    /// Sets a session's capacity (a spawn's `buffer`).
    pub fn set_capacity(&mut self, session: &Arc<str>, bytes: usize) {
        self.ring(session).set_capacity(bytes);
    }

    /// Frames `data`, read at `offset` of `gen`'s `stream`, into the session's log;
    /// returns the record's sequence number.
    pub fn push_output(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        stream: Stream,
        offset: u64,
        data: &[u8],
    ) -> u64 {
        let ring = self.ring(session);
        let mut frame = Vec::new();
        encode::output_frame(
            session,
            gen,
            stream,
            offset,
            ring.end_pos(),
            data,
            &mut frame,
        );
        ring.push_output(gen, data.len() as u64, frame)
    }

    /// Appends an already encoded event line about `gen` to the session's log; returns
    /// the record's sequence number.
    pub fn push_event(&mut self, session: &Arc<str>, event: &Event, line: Vec<u8>) -> u64 {
        self.ring(session)
            .push_event(event.gen().unwrap_or(0), line)
    }

    /// Forgets a removed session's log.
    pub fn remove(&mut self, session: &str) {
        self.rings.remove(session);
    }

    /// Names of every session with a log.
    pub fn sessions(&self) -> impl Iterator<Item = &Arc<str>> {
        self.rings.keys()
    }
}

/// The daemon's own log line for an event worth one (ends and surprises).
pub fn log_event(event: &Event) {
    match event {
        Event::Exited {
            session,
            gen,
            code,
            cause,
            ..
        } => {
            let code = code.map_or_else(|| "unknown".to_string(), |c| c.to_string());
            log::info!(
                "{session} gen {gen}: exited, code {code} ({})",
                cause.as_str()
            )
        }
        Event::SpawnFailed { session, gen, .. } => log::info!("{session} gen {gen}: spawn failed"),
        Event::Unkillable { session, gen } => {
            log::warn!("{session} gen {gen}: survived SIGKILL; still tracked")
        }
        Event::Spawned { .. } | Event::State { .. } | Event::InputClosed { .. } => {}
    }
}
