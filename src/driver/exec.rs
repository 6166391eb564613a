//! Executing the core's actions against the operating system and the clients.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use mio::unix::SourceFd;
use mio::Interest;

use super::children::{spawn_request, Child, OutputFd};
use super::daemon::{unwatch, Daemon, Source};
use super::fanout::cursor_at;
use crate::core::{Action, Event, Input, Scope, SpawnError, SpawnErrorKind, Spec, Stream};
use crate::proto::encode;
use crate::sys::spawn::{spawn, SpawnError as SysSpawnError};

/// Kernel buffer asked for each output pipe (see [`crate::sys::fd::grow_pipe`]).
const OUTPUT_PIPE_BYTES: usize = 1 << 20;

/// Output bytes just read, to pair with the core's `Output` event for them.
pub(super) type Fresh<'a> = Option<(u64, Stream, &'a [u8])>;

/// `Signal::from_named_raw` covers the named signals; real-time ones are valid too.
fn to_signal(sig: i32) -> Option<rustix::process::Signal> {
    if let Some(s) = rustix::process::Signal::from_named_raw(sig) {
        return Some(s);
    }
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) {
        // SAFETY: `sig` is a real-time signal number in the range the C library reports as
        // usable by applications, so it is a valid signal and not one libc reserves.
        return Some(unsafe { rustix::process::Signal::from_raw_unchecked(sig) });
    }
    None
}

impl Daemon {
    /// Drains and executes the core's actions. `fresh` carries bytes just read so the
    /// matching `Output` event can deliver them.
    pub(super) fn run_actions(&mut self, fresh: Fresh<'_>) {
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Spawn { gen, session, spec } => self.spawn_child(gen, session, &spec),
                Action::Signal { gen, signal, scope } => self.signal(gen, signal, scope),
                Action::Reap { gen } => self.reap(gen),
                Action::WriteInput { gen, bytes } => {
                    if let Some(c) = self.children.get_mut(&gen) {
                        c.input.extend_from_slice(&bytes);
                    }
                    self.flush_input(gen);
                }
                Action::CloseInput { gen } => {
                    if let Some(c) = self.children.get_mut(&gen) {
                        c.close_after_input = true;
                    }
                    self.flush_input(gen);
                }
                Action::Resize { gen, rows, cols } => self.resize(gen, rows, cols),
                Action::CloseOutput { gen } => self.close_outputs(gen),
                Action::Release { gen } => self.release(gen),
                Action::PersistDescriptor(d) => {
                    log::trace!("descriptor {} gen {} pid {}", d.session, d.gen, d.pid)
                }
                Action::ForgetDescriptor { gen } => log::trace!("forget descriptor gen {gen}"),
                Action::Emit(event) => self.emit(event, fresh),
                Action::Reply { request, result } => {
                    if let Some((token, id)) = self.requests.remove(&request) {
                        let mut line = Vec::new();
                        encode::reply(&id, &result, self.clock, &mut line);
                        self.send(token, &line);
                    }
                }
            }
        }
    }

    fn spawn_child(&mut self, gen: u64, session: Arc<str>, spec: &Spec) {
        self.logs.set_capacity(&session, spec.buffer_bytes);
        let req = spawn_request(spec, self.cfg.reaper);
        let child = match spawn(&req) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("{session} gen {gen}: spawn failed: {e}");
                let (kind, errno) = match &e {
                    SysSpawnError::NotFound { .. } => (SpawnErrorKind::NotFound, libc::ENOENT),
                    SysSpawnError::PermissionDenied { .. } => {
                        (SpawnErrorKind::PermissionDenied, libc::EACCES)
                    }
                    SysSpawnError::Os { errno, .. } => (SpawnErrorKind::Other, *errno),
                    SysSpawnError::Invalid(_) => (SpawnErrorKind::Other, libc::EINVAL),
                };
                self.feed(Input::SpawnResult {
                    gen,
                    result: Err(SpawnError { kind, errno }),
                });
                return;
            }
        };
        let pid = child.process.pid();
        log::info!("{session} gen {gen}: spawned pid {pid}");
        let mut entry = Child {
            session,
            pidfd_token: None,
            outputs: Vec::new(),
            stdin: None,
            pty: child.pty.is_some(),
            input: Vec::new(),
            close_after_input: false,
            exit_seen: false,
            awaiting_group: false,
            kill_group: spec.on_exit == crate::core::OnExit::KillGroup,
            process: child.process,
        };
        let mut outputs = Vec::new();
        for (stream, fd) in [
            (Stream::Stdout, child.stdout),
            (Stream::Stderr, child.stderr),
            (Stream::Pty, child.pty),
        ] {
            if let Some(fd) = fd {
                outputs.push((stream, fd));
            }
        }
        for (stream, fd) in outputs {
            if stream != Stream::Pty {
                crate::sys::fd::grow_pipe(&fd, OUTPUT_PIPE_BYTES);
            }
            let token = self.token(Source::Output { gen });
            let interest = if stream == Stream::Pty {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if let Err(e) = self.poll.registry().register(
                &mut SourceFd(&fd.as_fd().as_raw_fd()),
                token,
                interest,
            ) {
                log::error!("gen {gen}: register output: {e}");
            }
            entry.outputs.push(OutputFd { stream, fd, token });
        }
        if let Some(fd) = child.stdin {
            let token = self.token(Source::Stdin { gen });
            if let Err(e) = self.poll.registry().register(
                &mut SourceFd(&fd.as_fd().as_raw_fd()),
                token,
                Interest::WRITABLE,
            ) {
                log::error!("gen {gen}: register stdin: {e}");
            }
            entry.stdin = Some((fd, token));
        }
        if let Some(pidfd) = entry.process.pidfd() {
            let raw = pidfd.as_raw_fd();
            let token = self.token(Source::Pidfd { gen });
            match self
                .poll
                .registry()
                .register(&mut SourceFd(&raw), token, Interest::READABLE)
            {
                Ok(()) => entry.pidfd_token = Some(token),
                Err(e) => log::error!("gen {gen}: register pidfd: {e}"),
            }
        }
        self.children.insert(gen, entry);
        self.feed(Input::SpawnResult {
            gen,
            result: Ok(pid as u32),
        });
        // It may have exited before the pidfd was registered: edge-triggered readiness
        // still fires for a pidfd that is already readable, but check once anyway.
        self.check_exit(gen);
    }

    fn signal(&mut self, gen: u64, signal: i32, scope: Scope) {
        let Some(child) = self.children.get(&gen) else {
            return;
        };
        let Some(sig) = to_signal(signal) else {
            log::warn!("gen {gen}: signal {signal} is not deliverable");
            return;
        };
        let result = match scope {
            Scope::Leader => child.process.signal(sig),
            Scope::Group => child.process.signal_group(sig),
        };
        match result {
            Ok(()) => log::debug!("gen {gen}: sent signal {signal} to {scope:?}"),
            Err(e) => log::info!("gen {gen}: signal {signal} to {scope:?} not sent: {e}"),
        }
    }

    fn reap(&mut self, gen: u64) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        child.awaiting_group = false;
        match child.process.reap() {
            Ok(Some(exit)) => log::debug!("gen {gen}: reaped ({exit:?})"),
            Ok(None) => log::warn!("gen {gen}: reap requested but the process has not exited"),
            Err(e) => log::error!("gen {gen}: reap: {e}"),
        }
        self.unwatch_pidfd(gen);
    }

    /// Stops watching a generation's pidfd (reaped, or released).
    fn unwatch_pidfd(&mut self, gen: u64) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        if let (Some(token), Some(fd)) = (child.pidfd_token.take(), child.process.pidfd()) {
            unwatch(&self.poll, &mut self.sources, fd.as_raw_fd(), token);
        }
    }

    /// Closes a generation's stdin pipe (input done, or the child stopped reading).
    pub(super) fn drop_stdin(&mut self, gen: u64) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        if let Some((fd, token)) = child.stdin.take() {
            unwatch(&self.poll, &mut self.sources, fd.as_raw_fd(), token);
        }
    }

    fn resize(&mut self, gen: u64, rows: u16, cols: u16) {
        let Some(child) = self.children.get(&gen) else {
            return;
        };
        if let Some(o) = child.outputs.iter().find(|o| o.stream == Stream::Pty) {
            if let Err(e) = crate::sys::pty::resize(o.fd.as_fd(), rows, cols) {
                log::info!("gen {gen}: resize: {e}");
            }
        }
    }

    /// Stops reading a generation's output (drain deadline passed or streams done).
    pub(super) fn close_outputs(&mut self, gen: u64) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        for o in child.outputs.drain(..) {
            unwatch(&self.poll, &mut self.sources, o.fd.as_raw_fd(), o.token);
        }
        child.pty = false;
        child.input.clear();
    }

    fn release(&mut self, gen: u64) {
        self.close_outputs(gen);
        self.drop_stdin(gen);
        self.unwatch_pidfd(gen);
        self.children.remove(&gen);
        log::debug!("gen {gen}: released");
    }

    /// Output still waiting in a generation's streams, about to be discarded unread.
    fn unread_bytes(&self, gen: u64) -> u64 {
        self.children.get(&gen).map_or(0, |c| {
            c.outputs
                .iter()
                .map(|o| crate::sys::fd::bytes_readable(&o.fd).unwrap_or(0))
                .sum()
        })
    }

    /// Appends an event to its session's log and delivers it to subscribers.
    fn emit(&mut self, mut event: Event, fresh: Fresh<'_>) {
        // An exit reported at the drain deadline discards what is still unread: count it
        // (the streams are closed right after this event).
        if let Event::Exited {
            gen,
            discarded,
            truncated: true,
            ..
        } = &mut event
        {
            *discarded += self.unread_bytes(*gen);
        }
        let mut frame = Vec::new();
        match &event {
            Event::Output {
                session,
                gen,
                stream,
                offset,
                len,
            } => {
                let Some((fgen, fstream, data)) = fresh else {
                    log::error!("gen {gen}: output event without bytes");
                    return;
                };
                if fgen != *gen || fstream != *stream || data.len() != *len {
                    log::error!("gen {gen}: output event does not match the bytes read");
                    return;
                }
                let ring = self.logs.ring(session);
                let pos = ring.end_pos();
                encode::output_frame(session, *gen, *stream, *offset, pos, data, &mut frame);
                let seq = ring.push_output(*gen, *len as u64, frame);
                self.deliver(session.clone(), seq);
                return;
            }
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
            Event::SpawnFailed { session, gen, .. } => {
                log::info!("{session} gen {gen}: spawn failed")
            }
            Event::Unkillable { session, gen } => {
                log::warn!("{session} gen {gen}: survived SIGKILL; still tracked")
            }
            Event::Spawned { .. } | Event::State { .. } | Event::InputClosed { .. } => {}
        }
        encode::event(&event, &mut frame);
        let (session, gen) = match &event {
            Event::Spawned { session, gen, .. }
            | Event::SpawnFailed { session, gen, .. }
            | Event::Exited { session, gen, .. }
            | Event::Unkillable { session, gen }
            | Event::InputClosed { session, gen }
            | Event::Output { session, gen, .. } => (session.clone(), *gen),
            Event::State { session, gen, .. } => (session.clone(), gen.unwrap_or(0)),
        };
        let removed = matches!(
            event,
            Event::State {
                state: crate::core::SessionState::Removed,
                ..
            }
        );
        let terminal = matches!(event, Event::Exited { .. } | Event::SpawnFailed { .. });
        let seq = self.logs.ring(&session).push_event(gen, frame.clone());
        if terminal {
            self.answer_waiters(&session, gen, seq, &frame);
            self.remember_end(&session, gen, frame);
        }
        self.deliver(session.clone(), seq);
        if removed {
            self.forget_session(&session);
        }
    }

    /// Brings every subscriber of `session` up to date after record `seq` was appended.
    fn deliver(&mut self, session: Arc<str>, seq: u64) {
        let mut targets: Vec<mio::Token> = self.all_subscribers.iter().copied().collect();
        if let Some(s) = self.subscribers.get(&session) {
            targets.extend(s.iter().copied());
        }
        for token in targets {
            if let (Some(client), Some(ring)) =
                (self.clients.get_mut(&token), self.logs.get(&session))
            {
                // A subscriber to every session meets this one at this record.
                client
                    .subs
                    .entry(session.clone())
                    .or_insert_with(|| cursor_at(ring, seq));
                client.pump(&session, ring);
            }
            self.flush_client(token);
        }
    }

    /// A removed session: its log and subscriptions go.
    fn forget_session(&mut self, session: &str) {
        // Subscribers still behind lose the rest of the log with it: say so, counted.
        let mut behind = Vec::new();
        if let Some(ring) = self.logs.get(session) {
            let end = ring.end_pos();
            for (token, client) in self.clients.iter_mut() {
                if let Some(cursor) = client.subs.get(session) {
                    if cursor.seq < ring.end_seq() {
                        let mut line = Vec::new();
                        encode::dropped(session, cursor.pos, end.max(cursor.pos), &mut line);
                        client.outbox.push(&line);
                        behind.push(*token);
                    }
                }
            }
        }
        self.logs.remove(session);
        self.subscribers.remove(session);
        for client in self.clients.values_mut() {
            client.unsubscribe(session);
        }
        for token in behind {
            self.flush_client(token);
        }
    }
}
