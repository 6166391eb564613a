//! What the core's seeded random walk (`core::tests::random_walk`) and its fuzz target
//! (`fuzz/fuzz_targets/event_order.rs`) share: the session names they address, the small
//! limits that make the limits reachable, random specs, the live generations an input
//! may be about, and a daemon restart in the middle of a walk.

use std::time::Duration;

use super::rng::Choose;
use crate::core::check::Checker;
use crate::core::{
    Config, Containment, Core, DependOn, Input, IoMode, Lifecycle, OnExit, ReadyCheck, ReadyHow,
    Restart, Spec, Stderr, Time, WallClock,
};

/// The sessions a walk addresses: few, so that commands collide.
pub const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// Durations to pick from, in milliseconds: graces and drains use the first five, clock
/// jumps all of them.
pub const MILLIS: [u64; 7] = [0, 1, 50, 100, 200, 1000, 5000];

/// Limits small enough for a short walk to reach each of them.
pub fn small_limits() -> Config {
    Config {
        max_sessions: 3,
        max_generations: 6,
        max_pending_input: 64,
        ..Config::default()
    }
}

/// A spec of every kind: I/O mode, graces, exit handling and restart policy chosen by `c`;
/// now and then a bad one (no argv), which the core must refuse whole.
pub fn random_spec(c: &mut impl Choose) -> Spec {
    let mut spec = Spec::new(vec![b"prog".to_vec()]);
    spec.io = match c.below(4) {
        0 => IoMode::Pipes {
            stderr: Stderr::Pipe,
        },
        1 => IoMode::Pipes {
            stderr: Stderr::Merge,
        },
        2 => IoMode::Pipes {
            stderr: Stderr::Null,
        },
        _ => IoMode::Pty { rows: 24, cols: 80 },
    };
    spec.grace = Duration::from_millis(c.pick(&MILLIS[..5]));
    spec.kill_grace = Duration::from_millis(c.pick(&MILLIS[..5]));
    spec.drain = Duration::from_millis(c.pick(&MILLIS[..5]));
    spec.on_exit = c.pick(&[OnExit::KillGroup, OnExit::Leave]);
    spec.restart.mode = c.pick(&[Restart::Never, Restart::OnFailure, Restart::Always]);
    spec.restart.initial = Duration::from_millis(c.pick(&[0, 10, 100]));
    spec.restart.max = Duration::from_millis(400);
    spec.restart.reset_after = Duration::from_millis(c.pick(&[0, 300, 10_000]));
    spec.restart.max_restarts = c.pick(&[None, Some(0), Some(2)]);
    if c.below(20) == 0 {
        spec.argv.clear();
    }
    // Readiness now and then, each kind's timing short enough for a walk to reach it.
    spec.ready = match c.below(4) {
        0 => Some(ReadyHow::Fd(3)),
        1 => Some(ReadyHow::Tcp("127.0.0.1:1".into())),
        2 => Some(ReadyHow::Output(b"up".to_vec())),
        _ => None,
    }
    .map(|how| ReadyCheck {
        how,
        timeout: Duration::from_millis(c.pick(&[50, 200, 1000])),
        interval: Duration::from_millis(c.pick(&[10, 50, 100])),
    });
    // A liveness probe now and then, failing fast enough for a walk to trip it.
    if c.below(4) == 0 {
        spec.live = Some(crate::core::LiveCheck {
            how: ReadyHow::Command(vec![b"check".to_vec()]),
            interval: Duration::from_millis(c.pick(&[10, 100])),
            failures: c.pick(&[1, 2]),
        });
    }
    // A dependency now and then (on itself too: refused, like a cycle).
    if c.below(3) == 0 {
        let on = c.pick(&[DependOn::Started, DependOn::Ready, DependOn::Completed]);
        spec.depends_on.insert(c.pick(&NAMES).to_string(), on);
    }
    spec
}

/// Every generation the core still tracks, current or superseded, in table order.
pub fn live_generations(core: &Core) -> Vec<u64> {
    core.list()
        .iter()
        .flat_map(|s| s.generations.iter().map(|g| g.gen))
        .collect()
}

/// A daemon restart in the middle of a walk, with what the next daemon would find: every
/// session's record, and a descriptor for every generation whose leader was seen running.
/// A fresh core numbering from the old one's counter (what the high-water mark
/// guarantees) restores the records; each described generation is adopted — now and then,
/// per `c`, unverified (its identity could not be told; the walk's `Verified` or `Lost`
/// settles it later) — and reported lost at once when its identity check says `mismatch`
/// (always for a leader that had exited: init reaped it; sometimes, per `c`, for a live
/// one); then it resumes. Returns
/// the new core and its checker, whose clock starts again at zero.
///
/// Generations the old daemon had not spawned yet, or had reported already, have no
/// descriptor worth adopting: the new checker holds the new core to account from its own
/// first number and for what it adopted.
pub fn reborn(old: &Core, now: Time, c: &mut impl Choose) -> (Core, Checker) {
    const BOOT_UNIX_MS: u64 = 1_700_000_000_000;
    let saved_at = BOOT_UNIX_MS + now.as_millis();
    let records = old.session_records(WallClock {
        now,
        unix_ms: saved_at,
    });
    let mut core = Core::new(old.config().clone(), old.next_generation());
    let mut check = Checker::new(&core);
    let clock = WallClock {
        now: Time::ZERO,
        unix_ms: saved_at + c.pick(&MILLIS),
    };
    let problems = check.restore(&mut core, clock, records);
    assert!(
        problems.is_empty(),
        "a saved session was refused: {problems:?}"
    );
    for s in old.list() {
        for g in &s.generations {
            let Some(pid) = g.pid else { continue };
            let exited = match g.lifecycle {
                Lifecycle::Running | Lifecycle::Stopping(_) => false,
                Lifecycle::Draining => true,
                _ => continue,
            };
            // Half the time a keeper held its I/O: its streams go on from their offsets.
            let io = c.chance(50).then(|| {
                let mut io = crate::core::AdoptedIo {
                    input: c.chance(70),
                    ..Default::default()
                };
                for (stream, offset) in &g.offsets {
                    if c.chance(80) {
                        io.outputs[stream.index()] = Some(*offset);
                    }
                }
                io
            });
            let adopt = Input::Adopt {
                gen: g.gen,
                session: s.name.clone(),
                pid,
                containment: g.containment.unwrap_or(Containment::Session),
                verified: !c.chance(25),
                io,
                started_unix_ms: 1_600_000_000_000,
            };
            check.handle(&mut core, Time::ZERO, adopt);
            if exited || c.chance(20) {
                check.handle(&mut core, Time::ZERO, Input::Lost { gen: g.gen });
            }
        }
    }
    check.resume(&mut core, Time::ZERO);
    (core, check)
}
