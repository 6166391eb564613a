//! What the core's seeded random walk (`core::tests::random_walk`) and its fuzz target
//! (`fuzz/fuzz_targets/event_order.rs`) share: the session names they address, the small
//! limits that make the limits reachable, random specs, and the live generations an input
//! may be about.

use std::time::Duration;

use super::rng::Choose;
use crate::core::{Config, Core, IoMode, OnExit, Restart, Spec, Stderr};

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
    spec
}

/// Every generation the core still tracks, current or superseded, in table order.
pub fn live_generations(core: &Core) -> Vec<u64> {
    core.list()
        .iter()
        .flat_map(|s| s.generations.iter().map(|g| g.gen))
        .collect()
}
