//! Readiness (and liveness) as the driver sees it: the one owner of what each
//! generation's `ready` check needs at run time — its notification pipe, its output
//! matcher, its probe in flight — and of its `live` probe in flight.
//!
//! Nothing here decides anything: the core says when to probe and when readiness is
//! settled ([`Action::Probe`](crate::core::Action::Probe),
//! [`Action::ReadySettled`](crate::core::Action::ReadySettled)); this only detects
//! signals and reports them as [`ReadySignal`]s about one generation. A generation whose
//! readiness is settled (or that is released) has nothing here, so the output hot path
//! pays one empty-map check when no generation waits for an `output` match.

mod matcher;
mod probe;

use super::run_as::Resolution;
use crate::driver::children::HelperStart;
use crate::lookup::answer::Found;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use mio::unix::SourceFd;
use mio::{Interest, Registry};
use rustix::pipe::{pipe_with, PipeFlags};

use self::matcher::LineMatcher;
use self::probe::{Probe, Purpose, Step};
use super::token::Source;
use crate::core::readiness::check_host_port;
use crate::core::{Input, ReadyHow, ReadySignal, Spec, Stream};
use crate::sys::fd::{read_nonblocking, ReadOutcome};

/// Most bytes read from a notification pipe per readiness (a program writing a flood to
/// it must not hold the loop).
const NOTIFY_READ: usize = 4096;

/// Descriptors one probe in flight holds at most: a socket for `tcp` and `unix`; for a
/// `command`, its start's status pipe and its pidfd.
const PROBE_HELD: usize = 2;

/// Whether a check of this kind runs probes (and so holds descriptors while one runs).
fn probes(how: &ReadyHow) -> bool {
    matches!(
        how,
        ReadyHow::Tcp(_) | ReadyHow::Unix(_) | ReadyHow::Command(_)
    )
}

/// What one generation's readiness needs while it waits.
#[derive(Debug)]
struct Watch {
    spec: Arc<Spec>,
    /// Read end of the notification pipe (`ready.fd`), registered.
    notify: Option<OwnedFd>,
    /// Looking for `ready.output` in its output.
    matcher: Option<LineMatcher>,
    /// The probe in flight, with its number.
    probe: Option<(u64, Probe)>,
}

/// A probe in flight, with its number.
type InFlight = Option<(u64, Probe)>;

/// What one generation's liveness needs while it runs.
#[derive(Debug)]
struct LiveWatch {
    spec: Arc<Spec>,
    /// The probe in flight, with its number.
    probe: Option<(u64, Probe)>,
}

/// Every waiting generation's readiness watch, and every running generation's liveness.
#[derive(Debug, Default)]
pub struct Readiness {
    watches: HashMap<u64, Watch>,
    /// Read ends of notification pipes whose readiness is decided, kept (unread, not
    /// watched) until their generation is gone: closed, a program that notifies late —
    /// after its timeout — or twice would die of `SIGPIPE`, and a failed readiness is
    /// reported, never acted on.
    kept: HashMap<u64, OwnedFd>,
    live: HashMap<u64, LiveWatch>,
    /// Generations with an output matcher.
    matching: usize,
    /// Watches with their notification pipe registered (not yet moved to `kept`).
    pipes_watched: usize,
    /// Watches whose readiness check runs probes.
    probing: usize,
    /// Notifications read before their generation's start was told (see `hold`).
    early: HashMap<u64, ReadySignal>,
}

impl Readiness {
    /// Prepares `gen`'s watch before it is spawned. For `ready.fd`, returns the pipe's
    /// write end and the number the child gets it at (the read end is registered here).
    pub fn prepare(
        &mut self,
        registry: &Registry,
        gen: u64,
        spec: &Arc<Spec>,
    ) -> io::Result<Option<(Arc<OwnedFd>, u32)>> {
        if spec.live.is_some() {
            let watch = LiveWatch {
                spec: spec.clone(),
                probe: None,
            };
            if let Some(LiveWatch {
                probe: Some((_, p)),
                ..
            }) = self.live.insert(gen, watch)
            {
                p.abandon(registry);
            }
        }
        let Some(check) = &spec.ready else {
            return Ok(None);
        };
        let mut watch = Watch {
            spec: spec.clone(),
            notify: None,
            matcher: None,
            probe: None,
        };
        let mut extra = None;
        match &check.how {
            ReadyHow::Fd(n) => {
                let (r, w) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
                let token = Source::ReadyFd { gen }
                    .token()
                    .ok_or_else(|| io::Error::other("generation number too large"))?;
                registry.register(&mut SourceFd(&r.as_raw_fd()), token, Interest::READABLE)?;
                // The child's end must block like any pipe a program is handed.
                clear_nonblocking(&w)?;
                watch.notify = Some(r);
                extra = Some((Arc::new(w), *n));
            }
            ReadyHow::Output(text) => {
                watch.matcher = Some(LineMatcher::new(text.clone()));
                self.matching += 1;
            }
            ReadyHow::Tcp(_) | ReadyHow::Unix(_) | ReadyHow::Command(_) => {}
        }
        self.count_in(&watch);
        if let Some(old) = self.watches.insert(gen, watch) {
            self.close(registry, gen, old);
        }
        Ok(extra)
    }

    /// After an upgrade: what `gen`'s checks need to go on (`waiting`: its readiness is
    /// still awaited) — its spec for probes, a fresh output matcher (a partial line read
    /// before is not joined), its liveness. The notification pipe is not carried: a
    /// generation waiting for one fails readiness by its timeout.
    pub fn resume(&mut self, gen: u64, spec: &Arc<Spec>, waiting: bool) {
        if spec.live.is_some() {
            self.live.insert(
                gen,
                LiveWatch {
                    spec: spec.clone(),
                    probe: None,
                },
            );
        }
        let Some(check) = spec.ready.as_ref().filter(|_| waiting) else {
            return;
        };
        let matcher = match &check.how {
            ReadyHow::Output(text) => {
                self.matching += 1;
                Some(LineMatcher::new(text.clone()))
            }
            _ => None,
        };
        let watch = Watch {
            spec: spec.clone(),
            notify: None,
            matcher,
            probe: None,
        };
        self.count_in(&watch);
        // Nothing is watched for a generation before the image is resumed: a replaced
        // watch would only have its count taken back.
        if let Some(old) = self.watches.insert(gen, watch) {
            self.count_out(&old);
        }
    }

    /// Output of `gen` read from `stream`: whether it holds the awaited text. Cheap when
    /// nothing waits for a match.
    pub fn on_output(&mut self, gen: u64, stream: Stream, data: &[u8]) -> bool {
        if self.matching == 0 {
            return false;
        }
        self.watches
            .get_mut(&gen)
            .and_then(|w| w.matcher.as_mut())
            .is_some_and(|m| m.feed(stream, data))
    }

    /// The notification pipe of `gen` is readable: a newline is readiness, end of file
    /// before one is failure. Anything else read is ignored.
    pub fn on_notify(&mut self, registry: &Registry, gen: u64) -> Option<ReadySignal> {
        let w = self.watches.get_mut(&gen)?;
        let fd = w.notify.as_ref()?;
        let mut buf = [0u8; 512];
        let mut read = 0;
        let signal = loop {
            if read >= NOTIFY_READ {
                // Enough for one turn. Registering it again re-arms the edge-triggered
                // registration, so what is left is reported on the next poll.
                if let Some(token) = (Source::ReadyFd { gen }).token() {
                    let raw = fd.as_raw_fd();
                    let _ = registry.reregister(&mut SourceFd(&raw), token, Interest::READABLE);
                }
                break None;
            }
            match read_nonblocking(fd.as_fd(), &mut buf) {
                Ok(ReadOutcome::Data(n)) => {
                    read += n;
                    if buf[..n].contains(&b'\n') {
                        break Some(ReadySignal::Ready);
                    }
                }
                Ok(ReadOutcome::WouldBlock) => break None,
                Ok(ReadOutcome::Eof) => {
                    break Some(ReadySignal::Failed(
                        "notification fd closed without a newline".into(),
                    ))
                }
                Err(e) => break Some(ReadySignal::Failed(format!("notification fd: {e}").into())),
            }
        };
        if signal.is_some() {
            // Kept open, not closed: a second notification must not cost the program a
            // `SIGPIPE` (see `kept`).
            if let Some(fd) = w.notify.take() {
                let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
                self.pipes_watched = self.pipes_watched.saturating_sub(1);
                self.kept.insert(gen, fd);
            }
        }
        signal
    }

    /// Starts probe `n` of `gen` (`live`: its liveness probe, else its readiness one).
    /// Returns its result, as the core's input, when known at once (a refused
    /// connection, a command that could not start). `identity`: what the lookup found
    /// for the generation's start, when its run-as options needed one.
    pub fn start_probe(
        &mut self,
        registry: &Registry,
        gen: u64,
        n: u64,
        live: bool,
        helper: HelperStart,
        identity: Option<&Found>,
    ) -> Option<Input> {
        let why = if live { Purpose::Live } else { Purpose::Ready };
        let (spec, slot) = self.slot(gen, why)?;
        if let Some((_, old)) = slot.take() {
            old.abandon(registry);
        }
        let how = match why {
            Purpose::Ready => &spec.ready.as_ref()?.how,
            Purpose::Live => &spec.live.as_ref()?.how,
        };
        let started = match how {
            ReadyHow::Tcp(addr) => check_host_port(addr)
                .map_err(io::Error::other)
                .and_then(|a| Probe::tcp(registry, gen, why, a)),
            ReadyHow::Unix(path) => {
                use std::os::unix::ffi::OsStrExt;
                let path = PathBuf::from(std::ffi::OsStr::from_bytes(path));
                Probe::unix(registry, gen, why, &path)
            }
            ReadyHow::Command(argv) => probe_request(gen, &spec, argv, helper, identity)
                .and_then(|req| Probe::command(registry, gen, why, &req)),
            ReadyHow::Fd(_) | ReadyHow::Output(_) => return None,
        };
        match started {
            Err(e) => {
                log::debug!("gen {gen}: {why:?} probe {n}: {e}");
                Some(result(gen, why, n, false))
            }
            Ok(p) => {
                *slot = Some((n, p));
                self.on_probe(registry, gen, live)
            }
        }
    }

    /// The spec and the probe slot of `gen` for `why`, if it has that check.
    fn slot(&mut self, gen: u64, why: Purpose) -> Option<(Arc<Spec>, &mut InFlight)> {
        match why {
            Purpose::Ready => self
                .watches
                .get_mut(&gen)
                .map(|w| (w.spec.clone(), &mut w.probe)),
            Purpose::Live => self
                .live
                .get_mut(&gen)
                .map(|w| (w.spec.clone(), &mut w.probe)),
        }
    }

    /// The probe of `gen` had a readiness (or `SIGCHLD` came): its result once known.
    pub fn on_probe(&mut self, registry: &Registry, gen: u64, live: bool) -> Option<Input> {
        let why = if live { Purpose::Live } else { Purpose::Ready };
        let (_, slot) = self.slot(gen, why)?;
        let (n, p) = slot.as_mut()?;
        let n = *n;
        match p.step(registry, gen, why) {
            Step::Pending => None,
            Step::Done(ok) => {
                if let Some((_, p)) = slot.take() {
                    p.abandon(registry);
                }
                Some(result(gen, why, n, ok))
            }
        }
    }

    /// Probes whose command runs without a pidfd, each as `(gen, live)`: looked at on
    /// `SIGCHLD`.
    pub fn awaiting_sigchld(&self) -> Vec<(u64, bool)> {
        let waits = |p: &Option<(u64, Probe)>| p.as_ref().is_some_and(|(_, p)| p.awaits_sigchld());
        let ready = self.watches.iter().filter(|(_, w)| waits(&w.probe));
        let live = self.live.iter().filter(|(_, w)| waits(&w.probe));
        ready
            .map(|(g, _)| (*g, false))
            .chain(live.map(|(g, _)| (*g, true)))
            .collect()
    }

    /// Gives up probe `n` of `gen` (the core says it outlived its interval).
    pub fn cancel_probe(&mut self, registry: &Registry, gen: u64, n: u64, live: bool) {
        let why = if live { Purpose::Live } else { Purpose::Ready };
        let Some((_, slot)) = self.slot(gen, why) else {
            return;
        };
        if slot.as_ref().is_some_and(|(m, _)| *m == n) {
            if let Some((_, p)) = slot.take() {
                p.abandon(registry);
            }
        }
    }

    /// A notification of `gen` read before its start was told: a program that notifies
    /// first thing may be read in the same turn as its start's status, and first. The core
    /// awaits it only once the start is told, so it is told then ([`take_early`]).
    ///
    /// [`take_early`]: Readiness::take_early
    pub fn hold(&mut self, gen: u64, signal: ReadySignal) {
        self.early.insert(gen, signal);
    }

    /// What [`hold`](Readiness::hold) kept for `gen`, once its start was told.
    pub fn take_early(&mut self, gen: u64) -> Option<ReadySignal> {
        self.early.remove(&gen)
    }

    /// `gen` is gone: forget its readiness and its liveness.
    pub fn release(&mut self, registry: &Registry, gen: u64) {
        self.early.remove(&gen);
        self.settled(registry, gen);
        self.kept.remove(&gen);
        if let Some(LiveWatch {
            probe: Some((_, p)),
            ..
        }) = self.live.remove(&gen)
        {
            p.abandon(registry);
        }
    }

    /// `gen`'s readiness is decided, or `gen` is gone: forget everything about it but
    /// its notification pipe (see [`Readiness::kept`]).
    pub fn settled(&mut self, registry: &Registry, gen: u64) {
        if let Some(w) = self.watches.remove(&gen) {
            self.close(registry, gen, w);
        }
    }

    /// Descriptors this holds, or may hold at any moment, for the daemon's budget: the
    /// notification pipes (watched or kept), and [`PROBE_HELD`] for every generation with
    /// a probe to run — its `ready` check while it waits, its `live` probe while it runs
    /// — whether one is in flight now or not. Counted for the check's whole life, as a
    /// running generation's pipes are: else clients would take, between two probes, the
    /// descriptors the next probe needs (it would fail, and a healthy session be stopped
    /// as unhealthy), and those kept for the state files with them. Kept as counts, so
    /// that asking costs the same with 100,000 sessions.
    pub fn kept(&self) -> usize {
        self.kept.len() + self.pipes_watched + PROBE_HELD * (self.probing + self.live.len())
    }

    /// Counts what `w` may hold, as it is taken in.
    fn count_in(&mut self, w: &Watch) {
        self.pipes_watched += usize::from(w.notify.is_some());
        self.probing += usize::from(w.spec.ready.as_ref().is_some_and(|c| probes(&c.how)));
    }

    /// Takes back what [`count_in`](Self::count_in) counted of `w` (less a pipe already
    /// moved to `kept`).
    fn count_out(&mut self, w: &Watch) {
        if w.notify.is_some() {
            self.pipes_watched = self.pipes_watched.saturating_sub(1);
        }
        if w.spec.ready.as_ref().is_some_and(|c| probes(&c.how)) {
            self.probing = self.probing.saturating_sub(1);
        }
    }

    fn close(&mut self, registry: &Registry, gen: u64, w: Watch) {
        self.count_out(&w);
        if w.matcher.is_some() {
            self.matching = self.matching.saturating_sub(1);
        }
        if let Some(fd) = w.notify {
            let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
            self.kept.insert(gen, fd);
        }
        if let Some((_, p)) = w.probe {
            p.abandon(registry);
        }
    }
}

/// A finished probe's result as the core's input.
fn result(gen: u64, why: Purpose, probe: u64, ok: bool) -> Input {
    match why {
        Purpose::Ready => Input::Readiness {
            gen,
            signal: ReadySignal::Probed { probe, ok },
        },
        Purpose::Live => Input::Liveness { gen, probe, ok },
    }
}

/// The spawn request of a probe command: the session's user, environment and directory,
/// its argv, `/dev/null` for stdio, and the helpers' mark instead of the generation's (it
/// is not the generation's process; a sweep after a crash ends it).
fn probe_request(
    gen: u64,
    spec: &Spec,
    argv: &[Vec<u8>],
    helper: HelperStart,
    identity: Option<&Found>,
) -> io::Result<crate::sys::spawn::SpawnRequest> {
    use std::os::unix::ffi::OsStrExt;
    let mut req = super::children::spawn_request(gen, spec, helper.reaper, "");
    req.env
        .set
        .retain(|(k, _)| k != crate::sys::tree::GEN_MARKER);
    req.env.set.push(helper.marker);
    req.argv = argv
        .iter()
        .map(|a| std::ffi::OsStr::from_bytes(a).to_os_string())
        .collect();
    req.io = crate::sys::spawn::IoMode::Null;
    let found = match super::run_as::resolution(&spec.run_as) {
        Resolution::Known(found) => found.map_err(io::Error::other)?,
        Resolution::Lookup(_) => identity.cloned().ok_or_else(|| {
            io::Error::other("whom the generation runs as is not known to this daemon")
        })?,
    };
    super::run_as::apply(&spec.run_as, found, &mut req).map_err(|e| {
        io::Error::other(e.message.as_deref().unwrap_or("run-as options").to_owned())
    })?;
    Ok(req)
}

fn clear_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags - OFlags::NONBLOCK)?;
    Ok(())
}
