//! Arbitrary orderings of client commands, process events and clock jumps against the
//! core, daemon restarts among them, with the invariant checker watching every step and a
//! settle at the end that checks every generation ended, and was reaped, exactly once.
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use genward::core::check::Checker;
use genward::core::{
    Command, ConfigSession, Core, ExitStatus, Input, OnBusy, ReadySignal, Scope, SpawnError,
    SpawnErrorKind, Stream, Time,
};
use genward::testkit::rng::Bytes;
use genward::testkit::walk::{live_generations, random_spec, reborn, small_limits, NAMES};
use libfuzzer_sys::fuzz_target;

/// Which generation an operation is about, resolved against the core at that step.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum GenRef {
    None,
    Current(u8),
    Live(u8),
    Raw(u8),
}

#[derive(Arbitrary, Debug)]
enum Operation {
    Spawn {
        session: u8,
        on_busy: u8,
        /// The spec's choices, one byte each (more than it takes).
        spec: [u8; 16],
        if_gen: GenRef,
    },
    Write {
        session: u8,
        if_gen: GenRef,
        len: u8,
    },
    CloseInput {
        session: u8,
        if_gen: GenRef,
    },
    Resize {
        session: u8,
        if_gen: GenRef,
        rows: u8,
        cols: u8,
    },
    Signal {
        session: u8,
        if_gen: GenRef,
        signal: i8,
    },
    Stop {
        session: u8,
        if_gen: GenRef,
        zero_grace: bool,
    },
    Restart {
        session: u8,
        if_gen: GenRef,
    },
    Remove {
        session: u8,
    },
    /// The daemon's shutdown; a second one kills at once.
    Shutdown,
    /// A reload of a configuration naming the sessions whose bit is set in `present`, all
    /// with the spec the bytes make (the same bytes again: an unchanged config).
    Reload {
        present: u8,
        on_busy: u8,
        spec: [u8; 16],
    },
    List,
    Get {
        session: u8,
    },
    SpawnOk {
        gen: GenRef,
    },
    SpawnErr {
        gen: GenRef,
        kind: u8,
    },
    Output {
        gen: GenRef,
        stream: u8,
        len: u16,
    },
    Eof {
        gen: GenRef,
        stream: u8,
    },
    Exit {
        gen: GenRef,
        signal: bool,
        value: u8,
    },
    GroupEmpty {
        gen: GenRef,
    },
    InputWritten {
        gen: GenRef,
        len: u8,
    },
    InputError {
        gen: GenRef,
    },
    OutputClosed {
        gen: GenRef,
        unread: u16,
    },
    Lost {
        gen: GenRef,
    },
    /// The leader exited; its status follows (a process taken back after a restart).
    LeaderGone {
        gen: GenRef,
    },
    /// A generation taken back unverified was checked again and verified.
    Verified {
        gen: GenRef,
    },
    /// What the driver saw about a readiness: a signal (kind 0: ready, 1: failed) or a
    /// probe's answer (`probe`, `ok`).
    Readiness {
        gen: GenRef,
        kind: u8,
        probe: u8,
        ok: bool,
    },
    /// A liveness probe's answer.
    Liveness {
        gen: GenRef,
        probe: u8,
        ok: bool,
    },
    Advance {
        ms: u16,
    },
    SpareTimeout,
    /// The daemon restarts: every record exported and restored into a fresh core, the
    /// described generations adopted (some found mismatched), then resumed.
    Reborn {
        /// The choices of the restart (how long it took, which identities mismatch).
        choices: [u8; 16],
    },
}

struct World {
    core: Core,
    check: Checker,
    now: Time,
    request: u64,
}

impl World {
    fn resolve(&self, r: GenRef) -> Option<u64> {
        match r {
            GenRef::None => None,
            GenRef::Current(s) => self.core.get(name(s)).and_then(|s| s.current),
            GenRef::Live(i) => {
                let live = live_generations(&self.core);
                (!live.is_empty()).then(|| live[i as usize % live.len()])
            }
            GenRef::Raw(g) => Some(u64::from(g)),
        }
    }

    fn gen(&self, r: GenRef) -> u64 {
        self.resolve(r).unwrap_or(0)
    }

    fn command(&mut self, command: Command) {
        self.request += 1;
        self.input(Input::Command {
            request: self.request,
            command,
        });
    }

    fn input(&mut self, input: Input) {
        self.check.handle(&mut self.core, self.now, input);
    }

    fn apply(&mut self, op: Operation) {
        let s = |i: u8| name(i).to_string();
        match op {
            Operation::Spawn {
                session,
                on_busy,
                spec,
                if_gen,
            } => {
                let on_busy =
                    [OnBusy::Replace, OnBusy::Overlap, OnBusy::Reject][on_busy as usize % 3];
                let if_gen = self.resolve(if_gen);
                self.command(Command::Spawn {
                    session: s(session),
                    if_gen,
                    spec: Box::new(random_spec(&mut Bytes::new(&spec))),
                    on_busy,
                });
            }
            Operation::Write {
                session,
                if_gen,
                len,
            } => {
                let if_gen = self.resolve(if_gen);
                self.command(Command::Write {
                    session: s(session),
                    if_gen,
                    bytes: vec![b'x'; len as usize],
                });
            }
            Operation::CloseInput { session, if_gen } => {
                let if_gen = self.resolve(if_gen);
                self.command(Command::CloseInput {
                    session: s(session),
                    if_gen,
                });
            }
            Operation::Resize {
                session,
                if_gen,
                rows,
                cols,
            } => {
                let if_gen = self.resolve(if_gen);
                let (rows, cols) = (u16::from(rows), u16::from(cols));
                self.command(Command::Resize {
                    session: s(session),
                    if_gen,
                    rows,
                    cols,
                });
            }
            Operation::Signal {
                session,
                if_gen,
                signal,
            } => {
                let if_gen = self.resolve(if_gen);
                self.command(Command::Signal {
                    session: s(session),
                    if_gen,
                    signal: i32::from(signal),
                    scope: [Scope::Leader, Scope::Tree, Scope::Foreground]
                        [signal.unsigned_abs() as usize % 3],
                });
            }
            Operation::Stop {
                session,
                if_gen,
                zero_grace,
            } => {
                let if_gen = self.resolve(if_gen);
                let grace = zero_grace.then_some(Duration::ZERO);
                self.command(Command::Stop {
                    session: s(session),
                    if_gen,
                    grace,
                });
            }
            Operation::Shutdown => self.command(Command::Shutdown),
            Operation::Reload {
                present,
                on_busy,
                spec,
            } => {
                let on_busy =
                    [OnBusy::Replace, OnBusy::Overlap, OnBusy::Reject][on_busy as usize % 3];
                let config = NAMES
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| present >> i & 1 == 1)
                    .map(|(_, n)| ConfigSession {
                        name: (*n).into(),
                        spec: random_spec(&mut Bytes::new(&spec)),
                        on_busy,
                    })
                    .collect();
                let _ = self.check.reload(&mut self.core, self.now, config);
            }
            Operation::Restart { session, if_gen } => {
                let if_gen = self.resolve(if_gen);
                self.command(Command::Restart {
                    session: s(session),
                    if_gen,
                });
            }
            Operation::Remove { session } => self.command(Command::Remove {
                session: s(session),
            }),
            Operation::List => self.command(Command::List),
            Operation::Get { session } => self.command(Command::Get {
                session: s(session),
            }),
            Operation::SpawnOk { gen } => {
                let gen = self.gen(gen);
                self.input(Input::SpawnResult {
                    gen,
                    result: Ok(genward::core::Started::in_session(gen as u32 + 100)),
                });
            }
            Operation::SpawnErr { gen, kind } => {
                let error = match kind % 4 {
                    0 => SpawnError::new(SpawnErrorKind::NotFound, 2),
                    1 => SpawnError::new(SpawnErrorKind::PermissionDenied, 13),
                    2 => SpawnError::new(SpawnErrorKind::Other, 5),
                    // Out of descriptors: retried uncounted by the restart policy.
                    _ => SpawnError::new(SpawnErrorKind::Other, 24).as_shortage(),
                };
                let gen = self.gen(gen);
                self.input(Input::SpawnResult {
                    gen,
                    result: Err(error),
                });
            }
            Operation::Output { gen, stream, len } => {
                let gen = self.gen(gen);
                self.check
                    .output(&mut self.core, gen, stream_of(stream), len as usize);
            }
            Operation::Eof { gen, stream } => {
                let gen = self.gen(gen);
                self.input(Input::Eof {
                    gen,
                    stream: stream_of(stream),
                });
            }
            Operation::Exit { gen, signal, value } => {
                let gen = self.gen(gen);
                let status = if signal {
                    ExitStatus::Signal(i32::from(value % 65))
                } else {
                    ExitStatus::Code(i32::from(value))
                };
                self.input(Input::LeaderExited { gen, status });
            }
            Operation::GroupEmpty { gen } => {
                let gen = self.gen(gen);
                self.input(Input::GroupEmpty { gen });
            }
            Operation::InputWritten { gen, len } => {
                let gen = self.gen(gen);
                self.input(Input::InputWritten {
                    gen,
                    len: len as usize,
                });
            }
            Operation::InputError { gen } => {
                let gen = self.gen(gen);
                self.input(Input::InputError { gen });
            }
            Operation::OutputClosed { gen, unread } => {
                let gen = self.gen(gen);
                self.input(Input::OutputClosed {
                    gen,
                    unread: u64::from(unread),
                });
            }
            Operation::Lost { gen } => {
                let gen = self.gen(gen);
                self.input(Input::Lost { gen });
            }
            Operation::LeaderGone { gen } => {
                let gen = self.gen(gen);
                self.input(Input::LeaderGone { gen });
            }
            Operation::Verified { gen } => {
                let gen = self.gen(gen);
                self.input(Input::Verified { gen });
            }
            Operation::Readiness {
                gen,
                kind,
                probe,
                ok,
            } => {
                let gen = self.gen(gen);
                let signal = match kind % 3 {
                    0 => ReadySignal::Ready,
                    1 => ReadySignal::Failed("closed".into()),
                    _ => ReadySignal::Probed {
                        probe: u64::from(probe % 4),
                        ok,
                    },
                };
                self.input(Input::Readiness { gen, signal });
            }
            Operation::Liveness { gen, probe, ok } => {
                let gen = self.gen(gen);
                let probe = u64::from(probe % 4);
                self.input(Input::Liveness { gen, probe, ok });
            }
            Operation::Advance { ms } => {
                self.now = Time::from_millis(self.now.as_millis() + u64::from(ms));
                self.check.timeout(&mut self.core, self.now);
            }
            Operation::SpareTimeout => {
                self.check.timeout(&mut self.core, self.now);
            }
            Operation::Reborn { choices } => {
                let (core, check) = reborn(&self.core, self.now, &mut Bytes::new(&choices));
                self.core = core;
                self.check = check;
                self.now = Time::ZERO;
            }
        }
    }
}

fn name(i: u8) -> &'static str {
    NAMES[i as usize % NAMES.len()]
}

fn stream_of(i: u8) -> Stream {
    [Stream::Stdout, Stream::Stderr, Stream::Pty][i as usize % 3]
}

fuzz_target!(|ops: Vec<Operation>| {
    let core = Core::new(small_limits(), 1);
    let check = Checker::new(&core);
    let mut world = World {
        core,
        check,
        now: Time::ZERO,
        request: 0,
    };
    for op in ops.into_iter().take(256) {
        world.apply(op);
        // Persisted after every turn, as the driver does.
        world.core.take_dirty_sessions();
    }
    let World {
        mut core,
        mut check,
        now,
        ..
    } = world;
    check.settle(&mut core, now);
});
