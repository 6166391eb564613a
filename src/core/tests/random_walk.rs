//! Seeded random walks on stable Rust: thousands of sequences of commands, process events
//! and clock jumps, checked after every step and settled at the end.

use std::collections::BTreeSet;
use std::time::Duration;

use super::harness::Harness;
use crate::core::{
    Action, Command, Core, Event, ExitStatus, Input, OnBusy, SpawnError, SpawnErrorKind, Stream,
    Time,
};
use crate::testkit::rng::SplitMix64 as Rng;
use crate::testkit::walk::{live_generations, random_spec, reborn, small_limits, MILLIS, NAMES};

/// A generation number: usually a live one, sometimes a gone or never-allocated one.
fn some_gen(r: &mut Rng, core: &Core) -> u64 {
    let live = live_generations(core);
    if !live.is_empty() && r.below(5) != 0 {
        r.pick(&live)
    } else {
        r.below(core.next_generation().saturating_add(2))
    }
}

fn random_command(r: &mut Rng, core: &Core) -> Command {
    let session = r.pick(&NAMES).to_string();
    let current = core.get(&session).and_then(|s| s.current);
    // None, the current generation, or any number (often stale: refused, changing nothing).
    let if_gen = match r.below(3) {
        0 => None,
        1 => current,
        _ => Some(r.below(core.next_generation().saturating_add(1))),
    };
    match r.below(11) {
        0 | 1 => {
            let on_busy = r.pick(&[OnBusy::Replace, OnBusy::Overlap, OnBusy::Reject]);
            Command::Spawn {
                session,
                if_gen,
                spec: Box::new(random_spec(r)),
                on_busy,
            }
        }
        2 => Command::Write {
            session,
            if_gen,
            bytes: vec![b'x'; r.pick(&[0, 1, 40, 65]) as usize],
        },
        3 => Command::CloseInput { session, if_gen },
        4 => Command::Resize {
            session,
            if_gen,
            rows: r.below(3) as u16,
            cols: 80,
        },
        5 => Command::Signal {
            session,
            if_gen,
            signal: r.pick(&[0, 2, 9, 15, 99]),
            scope: r.pick(&[
                crate::core::Scope::Leader,
                crate::core::Scope::Tree,
                crate::core::Scope::Foreground,
            ]),
        },
        6 => Command::Stop {
            session,
            if_gen,
            grace: r.pick(&[None, Some(Duration::ZERO)]),
        },
        7 => Command::Restart { session, if_gen },
        8 => Command::Remove { session },
        9 => Command::List,
        _ => Command::Get {
            session: if r.below(10) == 0 {
                "..".into()
            } else {
                session
            },
        },
    }
}

/// One step of a walk, chosen before it is applied: so the same step can be applied to
/// two cores (the core image's round trip compares a core with its copy).
#[derive(Clone, Debug)]
pub(super) enum Step {
    /// An input for `handle`.
    Input(Input),
    /// Bytes read from a generation's stream, for `output`.
    Output {
        gen: u64,
        stream: Stream,
        len: usize,
    },
    /// The clock moves to this instant and `handle_timeout` is called.
    Clock(Time),
}

fn random_step(r: &mut Rng, h: &mut Harness, request: u64) {
    if r.below(30) == 0 {
        return random_reload(r, h);
    }
    let step = choose_step(r, &h.core, h.now, request);
    apply_step(h, step);
}

/// A reload of a random configuration: some of the names, each with its session's spec
/// (unchanged) or a random one, and a random `on_busy`. Refused ones (a name a client
/// started) are checked to change nothing.
fn random_reload(r: &mut Rng, h: &mut Harness) {
    let mut config = Vec::new();
    for name in NAMES {
        if r.below(2) == 0 {
            continue;
        }
        let kept = h.core.sessions.get(name).map(|s| (*s.spec).clone());
        let spec = match kept {
            Some(spec) if r.below(2) == 0 => spec,
            _ => random_spec(r),
        };
        let on_busy = r.pick(&[OnBusy::Replace, OnBusy::Overlap, OnBusy::Reject]);
        config.push(crate::core::ConfigSession {
            name: name.into(),
            spec,
            on_busy,
        });
    }
    let _ = h.reload(config);
}

/// Applies `step` through the harness (and so the invariant checker).
pub(super) fn apply_step(h: &mut Harness, step: Step) {
    match step {
        Step::Input(input) => {
            h.input(input);
        }
        Step::Output { gen, stream, len } => {
            h.output_on(gen, stream, len);
        }
        Step::Clock(now) => {
            h.now = now;
            let actions = h.check.timeout(&mut h.core, h.now);
            h.log.extend(actions);
        }
    }
}

/// A random step for `core` at `now`: usually about a live generation, sometimes about
/// one gone or never allocated.
pub(super) fn choose_step(r: &mut Rng, core: &Core, now: Time, request: u64) -> Step {
    let gen = some_gen(r, core);
    let stream = r.pick(&[Stream::Stdout, Stream::Stderr, Stream::Pty]);
    let input = match r.below(13) {
        0..=2 => Input::Command {
            request,
            command: random_command(r, core),
        },
        3 => {
            let err = SpawnError::new(
                r.pick(&[SpawnErrorKind::NotFound, SpawnErrorKind::Other]),
                2,
            );
            let err = if r.below(3) == 0 {
                err.as_shortage()
            } else {
                err
            };
            let result = if r.below(4) == 0 {
                Err(err)
            } else {
                Ok(crate::core::Started {
                    pid: (gen as u32).wrapping_add(100),
                    containment: r.pick(&[
                        crate::core::Containment::Cgroup,
                        crate::core::Containment::Session,
                    ]),
                })
            };
            Input::SpawnResult { gen, result }
        }
        4 => {
            let len = r.below(100) as usize;
            return Step::Output { gen, stream, len };
        }
        5 => Input::Eof { gen, stream },
        6 => {
            let status = r.pick(&[
                ExitStatus::Code(0),
                ExitStatus::Code(1),
                ExitStatus::Signal(15),
                ExitStatus::Signal(9),
            ]);
            Input::LeaderExited { gen, status }
        }
        7 => Input::GroupEmpty { gen },
        8 => Input::InputWritten {
            gen,
            len: r.below(80) as usize,
        },
        9 => Input::InputError { gen },
        10 if r.below(4) == 0 => Input::Lost { gen },
        11 if r.below(2) == 0 => Input::OutputClosed {
            gen,
            unread: r.below(50),
        },
        12 if r.below(3) == 0 => Input::LeaderGone { gen },
        // A later identity check of a generation taken back unverified.
        12 if r.below(2) == 0 => Input::Verified { gen },
        // What the driver saw about a readiness: a signal, or a probe's answer (its number
        // small, so that answers to the probe in flight and to older ones both come).
        12 if r.below(2) == 0 => Input::Liveness {
            gen,
            probe: r.below(3),
            ok: r.below(2) == 0,
        },
        12 => Input::Readiness {
            gen,
            signal: match r.below(3) {
                0 => crate::core::ReadySignal::Ready,
                1 => crate::core::ReadySignal::Failed("closed".into()),
                _ => crate::core::ReadySignal::Probed {
                    probe: r.below(3),
                    ok: r.below(2) == 0,
                },
            },
        },
        _ => {
            // Time passes (rarely backwards: the core clamps it).
            let ms = r.pick(&MILLIS);
            return Step::Clock(if r.below(50) == 0 {
                Time::from_millis(now.as_millis().saturating_sub(ms))
            } else {
                Time::from_millis(now.as_millis().saturating_add(ms))
            });
        }
    };
    Step::Input(input)
}

/// 3000 seeded sequences of 60 random steps each (a daemon restart among them now and
/// then), then settled: every step is checked by the invariant checker and every run ends
/// with every generation accounted for. The walk
/// must also reach every exit cause, cancellation, `unkillable` and each refusal code, so
/// the invariants were checked where they matter.
#[test]
fn random_walks_keep_every_invariant() {
    const SEQUENCES: u64 = 3000;
    const STEPS: u64 = 60;
    let mut total = 0;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut adopted_alive = 0;
    for seed in 0..SEQUENCES {
        let walked = walk_named(seed, STEPS);
        total += walked.steps;
        seen.extend(walked.reached);
        adopted_alive += walked.adopted_alive;
    }
    assert!(total >= SEQUENCES * STEPS, "checked {total} steps");
    assert!(
        adopted_alive >= 100,
        "only {adopted_alive} restarts adopted a live generation"
    );
    let want = [
        "exited",
        "signaled",
        "stopped",
        "killed",
        "superseded",
        "lost",
        "cancelled",
        "unkillable",
        "truncated",
        "bad_request",
        "no_such_session",
        "busy",
        "stale_generation",
        "limit",
        "not_running",
        "input_closed",
    ];
    let missing: Vec<_> = want.iter().filter(|w| !seen.contains(**w)).collect();
    assert!(missing.is_empty(), "the walk never reached {missing:?}");
}

/// The outcome an action shows, by name.
fn reached(action: &Action) -> Option<String> {
    match action {
        Action::Emit(Event::Exited {
            truncated: true, ..
        }) => Some("truncated".into()),
        Action::Emit(Event::Exited { cause, .. }) => Some(cause.as_str().into()),
        Action::Emit(Event::SpawnFailed { error, .. }) => Some(error.kind.as_str().into()),
        Action::Emit(Event::Unkillable { .. }) => Some("unkillable".into()),
        Action::Reply { result: Err(e), .. } => Some(e.code.as_str().into()),
        _ => None,
    }
}

/// What one walk checked and reached.
struct Walked {
    steps: u64,
    reached: BTreeSet<String>,
    adopted_alive: u64,
}

/// One seeded walk of `steps` random steps (a daemon restart among them now and then),
/// then settled.
fn walk(seed: u64, steps: u64) -> Walked {
    let mut walked = Walked {
        steps: 0,
        reached: BTreeSet::new(),
        adopted_alive: 0,
    };
    let mut r = Rng::new(seed);
    let mut h = Harness::with(small_limits(), 1 + r.below(3));
    for request in 0..steps {
        // Now and then the daemon restarts: records out, a fresh core, records in.
        if r.below(40) == 0 {
            walked.steps += h.check.steps();
            walked.reached.extend(h.log.iter().filter_map(reached));
            let (core, check) = reborn(&h.core, h.now, &mut r);
            h = Harness::from_parts(core, check);
            walked.adopted_alive += u64::from(h.core.generation_count() > 0);
            continue;
        }
        random_step(&mut r, &mut h, request);
        // Persisted after every turn, as the driver does: what the core looks at
        // again after an input must not rest on changes accumulated over many.
        h.core.take_dirty_sessions();
    }
    h.settle();
    walked.steps += h.check.steps();
    walked.reached.extend(h.log.iter().filter_map(reached));
    walked
}

/// [`walk`], its failure naming the seed that replays it.
fn walk_named(seed: u64, steps: u64) -> Walked {
    match std::panic::catch_unwind(|| walk(seed, steps)) {
        Ok(walked) => walked,
        Err(e) => {
            let why = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            panic!("the walk of seed {seed} failed: {why}");
        }
    }
}

/// Many more seeds than the default run takes, for a search after a change to the core
/// or the checker: every walk checked and settled as above.
#[test]
#[ignore = "200,000 walks: about twelve minutes in a debug build"]
fn random_walks_keep_every_invariant_over_many_more_seeds() {
    for seed in 3000..203_000 {
        walk_named(seed, 60);
    }
}
