//! `wait`: answered at once when the generation's end is known, else when its terminal
//! event is appended to the session's log — never before the output that precedes it.

use std::sync::Arc;

use super::Clients;
use crate::core::{Error as CoreError, WaitFor};
use crate::driver::client::Deferred;
use crate::proto::encode;
use crate::proto::envelope::{begin_ok_response, RequestId};
use crate::proto::error::{ErrorCode, ProtoError};

/// Most unanswered `wait` requests one connection may have.
const MAX_WAITS: usize = 1024;

/// The answer to a `wait`: `{"id":..,"ok":true,"end":<terminal event>}`.
fn wait_answer(id: &RequestId, event_line: &[u8]) -> Vec<u8> {
    let mut line = Vec::new();
    let mut w = begin_ok_response(id, &mut line);
    let body = event_line.strip_suffix(b"\n").unwrap_or(event_line);
    w.with("end", |out| out.extend_from_slice(body));
    w.finish();
    line.push(b'\n');
    line
}

impl Clients {
    /// Answers a `wait` now (an end already known, or an error), or registers it to be
    /// answered with the generation's terminal event.
    pub fn wait(&mut self, id: u64, rid: RequestId, target: Result<WaitFor, CoreError>) {
        match target {
            Err(e) => self.send_error(id, &rid, &encode::core_error(&e)),
            Ok(WaitFor::Ended(event)) => {
                let mut line = Vec::new();
                encode::event(&event, &mut line);
                let answer = wait_answer(&rid, &line);
                self.push(id, &answer);
            }
            Ok(WaitFor::Live(gen)) => self.register_wait(id, rid, gen, false),
        }
    }

    /// Registers a `wait` for `gen`'s end (`ready`: for its readiness), within the
    /// connection's bound on pending waits.
    fn register_wait(&mut self, id: u64, rid: RequestId, gen: u64, ready: bool) {
        let Some(client) = self.table.get_mut(&id) else {
            return;
        };
        if client.waiting >= MAX_WAITS {
            let why = format!("{MAX_WAITS} wait requests already pending on this connection");
            self.send_error(id, &rid, &ProtoError::new(ErrorCode::Limit, why));
            return;
        }
        client.waiting += 1;
        let waits = if ready {
            &mut self.ready_waits
        } else {
            &mut self.waits
        };
        waits.entry(gen).or_default().push((id, rid));
    }

    /// Answers every `wait` for `gen` with its terminal event, the record `seq` of
    /// `session`'s log. A waiter that also follows the session gets its answer only after
    /// that record was queued to it, so the answer never overtakes the output it follows.
    pub fn answer_waits(&mut self, session: &Arc<str>, gen: u64, seq: u64, event_line: &[u8]) {
        for (id, rid) in self.waits.remove(&gen).unwrap_or_default() {
            if let Some(c) = self.table.get_mut(&id) {
                c.defer(Deferred {
                    session: session.clone(),
                    seq,
                    line: wait_answer(&rid, event_line),
                });
            }
            self.mark_dirty(id);
        }
    }
}

impl Clients {
    /// Answers a `wait` for readiness now (decided, ended, or an error), or registers it
    /// to be answered when the generation's readiness is decided or it ends.
    pub fn wait_ready(&mut self, id: u64, rid: RequestId, target: Result<WaitFor, CoreError>) {
        match target {
            Ok(WaitFor::Live(gen)) => self.register_wait(id, rid, gen, true),
            other => self.wait(id, rid, other),
        }
    }

    /// Whether a `wait` for the readiness of `gen` is pending.
    pub fn awaits_ready(&self, gen: u64) -> bool {
        self.ready_waits.contains_key(&gen)
    }

    /// Answers every readiness `wait` for `gen` with `event_line` (its `ready`,
    /// `ready_failed` or terminal event), record `seq` of `session`'s log.
    pub fn answer_ready_waits(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        seq: u64,
        event_line: &[u8],
    ) {
        for (id, rid) in self.ready_waits.remove(&gen).unwrap_or_default() {
            if let Some(c) = self.table.get_mut(&id) {
                c.defer(Deferred {
                    session: session.clone(),
                    seq,
                    line: wait_answer(&rid, event_line),
                });
            }
            self.mark_dirty(id);
        }
    }
}
