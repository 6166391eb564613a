//! A child's output and the core's events on their way to subscribers: read from the
//! child's fd, framed into the session's log, delivered to each follower's outbox, written
//! to its socket — and held back at the child's pipe while a lossless follower is behind.

use std::time::Instant;

use mio::Token;

use super::Daemon;
use crate::core::{Event, Input, SessionState, Stream};
use crate::driver::children::Read;
use crate::driver::token::Source;
use crate::proto::encode;

impl Daemon {
    /// Reads one slice of a generation's output stream (one read), frames it into its
    /// session's log and delivers it; a stream that had something is serviced again in
    /// its turn (see `backlog.rs`), until it has nothing.
    ///
    /// While a lossless subscriber of the session is behind, the stream is parked instead
    /// (see `parked.rs`): the child waits on its pipe until the subscriber catches up.
    pub(super) fn read_output(&mut self, gen: u64, stream: Stream, token: Token) {
        if self.turn.holds(gen) {
            return self.turn.park_also(gen, token);
        }
        {
            // A session whose `buffer` is smaller than one read takes smaller reads, so
            // that what it retains of a long write is its tail, not nothing.
            let limit = self
                .core
                .session_of(gen)
                .and_then(|session| self.logs.read_limit(&session));
            let buf = self.turn.read_buf();
            let len = limit.map_or(buf.len(), |l| l.min(buf.len()));
            let registry = self.poll.registry();
            match self.children.read(registry, gen, stream, &mut buf[..len]) {
                Read::Data(n) => {
                    self.turn.sliced(token, n);
                    // Only while a generation waits for an `output` readiness match.
                    if self
                        .ready
                        .on_output(gen, stream, &self.turn.read_buf()[..n])
                    {
                        let signal = crate::core::ReadySignal::Ready;
                        self.tell(Input::Readiness { gen, signal });
                    }
                    if let Some(at) = self.core.output(gen, stream, n) {
                        let t = self.clock.wire.unix_ms(self.clock.now());
                        let data = &self.turn.read_buf()[..n];
                        let seq =
                            self.logs
                                .push_output(&at.session, gen, stream, at.offset, data, t);
                        if self.log_sink.is_active() {
                            let registry = self.poll.registry();
                            self.log_sink
                                .output(registry, &at.session, gen, stream, data);
                        }
                        self.clients.deliver(&at.session, seq, &self.logs);
                        // Live readers get each record as it comes (a fast one keeps up
                        // with the child); ones that stopped reading cost nothing here.
                        self.flush_clients();
                        if self.clients.holds_back(&at.session, &self.logs) {
                            self.clients.hold(&at.session, &self.logs, Instant::now());
                            return self.turn.park(gen, &at.session, token);
                        }
                    }
                }
                Read::Eof => {
                    self.turn.forget(token);
                    if stream == Stream::Pty {
                        // A terminal hangs up once no process holds it open: nobody reads
                        // its input any more either, which is told now (input still
                        // queued for it is dropped), not at the next write.
                        self.flush_input(gen);
                    }
                    self.keeper_closed(gen);
                    return self.tell(Input::Eof { gen, stream });
                }
                Read::WouldBlock => return self.turn.drained(token),
                Read::Gone => return self.turn.forget(token),
            }
        }
        self.turn.again(token);
    }

    /// Appends an event to its session's log, answers `wait`s for a generation's end, and
    /// delivers it to subscribers.
    pub(super) fn emit(&mut self, event: Event) {
        crate::driver::logs::log_event(&event);
        if let Event::Spawned { gen, .. } = &event {
            // Described already (see `spawn_result`); its descriptors held by the keeper
            // too, so that a crash loses none of it.
            if let (Some(keeper), Some((roles, fds))) =
                (self.keeper.as_mut(), self.children.keepable(*gen))
            {
                if let Err(e) = keeper.hold(*gen, roles, &fds) {
                    self.lose_keeper(&e);
                }
            }
        }
        let session = event.session().clone();
        let mut line = Vec::new();
        encode::event(&event, &mut line);
        let terminal = event.is_terminal().then(|| line.clone());
        if let (true, Some(gen)) = (event.is_terminal(), event.gen()) {
            self.log_sink.ended(self.poll.registry(), gen);
        }
        // Readiness decided (`ready`, `ready_failed`; or spawned without a check), or the
        // generation ended first: its readiness waits are answered with that — with the
        // terminal event, not the `ready_failed` its end caused, when it ended first.
        let ready_answer = match event.gen().filter(|g| self.clients.awaits_ready(*g)) {
            None => None,
            Some(_) if event.is_terminal() || event.settles_ready_wait() => Some(line.clone()),
            Some(gen) if matches!(event, Event::Spawned { .. }) => self
                .core
                .ready_event(gen)
                .filter(Event::settles_ready_wait)
                .map(|e| {
                    let mut l = Vec::new();
                    encode::event(&e, &mut l);
                    l
                }),
            Some(_) => None,
        };
        // A session's first record makes its log: to its `buffer` from the start, not
        // only at its first spawn (a generation waiting for its dependencies has none yet,
        // and a `buffer` of 0 must replay nothing meanwhile too).
        if !self.logs.has(&session) {
            if let Some(bytes) = self.core.buffer_bytes(&session) {
                self.logs.set_buffer(&session, bytes);
            }
        }
        let seq = self.logs.push_event(&session, &event, line);
        if let (Some(gen), Some(answer)) = (event.gen(), ready_answer) {
            self.clients.answer_ready_waits(&session, gen, seq, &answer);
        }
        if let (Some(line), Some(gen)) = (terminal, event.gen()) {
            self.clients.answer_waits(&session, gen, seq, &line);
        }
        self.clients.deliver(&session, seq, &self.logs);
        if let Event::State {
            state: SessionState::Removing,
            ..
        } = event
        {
            // Going away: its output is no longer held for its lossless followers (what a
            // process being stopped still writes would only wait out its drain and be
            // thrown away).
            self.clients.unpace_session(&session);
        }
        if let Event::State {
            state: SessionState::Removed,
            ..
        } = event
        {
            self.clients.forget_session(&session, &self.logs);
            self.logs.remove(&session);
            self.log_sink.forget(&session);
        }
    }

    /// Writes what waits in the clients' outboxes — after the session records of what it
    /// tells: whatever ran since the last write of them (a turn's exits, a slice's
    /// requests) is written first, together (the clients take no write without the
    /// [`RecordsSaved`](crate::driver::persist::RecordsSaved) that says so).
    pub(super) fn flush_clients(&mut self) {
        let saved = self.save_sessions();
        let released = self.logs.take_released();
        if !released.is_empty() {
            self.clients.detach_frames(&released);
        }
        for id in self
            .clients
            .flush_dirty(self.poll.registry(), &self.logs, saved)
        {
            if let Some(token) = Source::Client(id).token() {
                self.turn.again(token);
            }
        }
        self.unpark(false);
    }

    /// Logs raised to [`LOSSLESS_LOG_BYTES`](crate::driver::clients::LOSSLESS_LOG_BYTES)
    /// for lossless followers that are all gone (left, unsubscribed, demoted) go back to
    /// their session's `buffer`: the raise is for a reader that must not lose a byte, not
    /// a lasting cost of every session one ever read.
    pub(super) fn lower_unpaced_logs(&mut self) {
        for session in self.clients.take_unpaced() {
            if let Some(bytes) = self.core.buffer_bytes(&session) {
                self.logs.set_buffer(&session, bytes);
            }
        }
    }

    /// Lets held output flow again where no lossless follower is behind any more (gone,
    /// caught up, demoted) or, with `ends`, where the generation's output was closed at
    /// its drain deadline (or its exit reported): its streams are serviced on the next
    /// turn as if they had just become readable, and find nothing more to deliver.
    pub(super) fn unpark(&mut self, ends: bool) {
        if self.turn.nothing_parked() || !(self.clients.take_moved() || ends) {
            return;
        }
        let (clients, logs, core) = (&self.clients, &self.logs, &self.core);
        let mut still = Vec::new();
        let released = self.turn.unpark(|gen, session| {
            let flows = !core.delivers_output(gen) || !clients.holds_back(session, logs);
            if !flows {
                still.push(session.clone());
            }
            flows
        });
        for session in released {
            self.clients.release(&session);
        }
        // Who holds what may have changed (one caught up, another subscribed behind):
        // every follower now holding the output back has its clock running.
        let now = Instant::now();
        for session in still {
            self.clients.hold(&session, &self.logs, now);
        }
    }
}
