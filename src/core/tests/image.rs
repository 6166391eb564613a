//! The core image's round trip, as a property: a core driven through a seeded random walk
//! (restarts with adoption among it) is exported, encoded, decoded and imported at a
//! random point; from then on the original and the copy get the same inputs, and must
//! answer alike in everything — actions, snapshots, deadlines, dirty sessions, images —
//! until both have settled. The copy is imported again now and then on the way.

use std::collections::BTreeSet;

use super::harness::Harness;
use super::random_walk::{apply_step, choose_step, Step};
use crate::core::{Action, Command, Config, Core, ExitStatus, Input, Lifecycle, Started, Time};
use crate::store::core_image::{decode_core_image, encode_core_image};
use crate::testkit::rng::SplitMix64 as Rng;
use crate::testkit::walk::{reborn, small_limits};

/// `core` through the whole upgrade path: export, encode, decode, import under `config`.
/// The image must survive the bytes unchanged and the imported core must export it again.
pub(super) fn through_bytes(core: &Core, config: Config) -> Core {
    let image = core.export_image().expect("exported between turns");
    let bytes = encode_core_image(&image).expect("a walk's image encodes");
    let decoded = decode_core_image(&bytes).expect("an encoded image decodes");
    assert_eq!(decoded, image, "the image changed through its bytes");
    let imported = Core::import_image(config, decoded)
        .unwrap_or_else(|e| panic!("a real core's image was refused: {e}\n{image:#?}"));
    assert_eq!(
        imported.export_image().as_ref(),
        Ok(&image),
        "the imported core exports another image"
    );
    imported
}

/// What the wire can carry: unlimited restarts cannot be asked for, so a spawn asking for
/// them asks for the most there is (the walk's specs are otherwise all wire specs).
pub(super) fn wire_step(step: Step) -> Step {
    match step {
        Step::Input(Input::Command {
            request,
            command:
                Command::Spawn {
                    session,
                    if_gen,
                    mut spec,
                    on_busy,
                },
        }) => {
            spec.restart.max_restarts.get_or_insert(u32::MAX);
            let command = Command::Spawn {
                session,
                if_gen,
                spec,
                on_busy,
            };
            Step::Input(Input::Command { request, command })
        }
        other => other,
    }
}

/// A core and its imported copy, fed alike.
struct Twin {
    original: Core,
    copy: Core,
    now: Time,
}

impl Twin {
    fn step(&mut self, step: Step) {
        match step {
            Step::Input(input) => {
                self.original.handle(self.now, input.clone());
                self.copy.handle(self.now, input);
            }
            Step::Output { gen, stream, len } => {
                let a = self.original.output(gen, stream, len);
                let b = self.copy.output(gen, stream, len);
                assert_eq!(a, b, "output of generation {gen} placed differently");
            }
            Step::Clock(now) => {
                self.now = now;
                self.original.handle_timeout(now);
                self.copy.handle_timeout(now);
            }
        }
        self.drain();
        self.compare();
    }

    /// Both action streams, which must be equal; a `CloseOutput` is answered at once, as
    /// the harness does.
    fn drain(&mut self) {
        let a: Vec<Action> = std::iter::from_fn(|| self.original.poll_action()).collect();
        let b: Vec<Action> = std::iter::from_fn(|| self.copy.poll_action()).collect();
        assert_eq!(a, b, "the imported core acted differently");
        for action in a {
            if let Action::CloseOutput { gen } = action {
                self.step(Step::Input(Input::OutputClosed { gen, unread: 0 }));
            }
        }
    }

    fn compare(&mut self) {
        let (a, b) = (&mut self.original, &mut self.copy);
        assert_eq!(a.list(), b.list(), "snapshots differ");
        assert_eq!(a.next_deadline(), b.next_deadline(), "deadlines differ");
        assert_eq!(a.is_shut_down(), b.is_shut_down());
        let groups = |c: &Core| c.groups_awaited().collect::<Vec<_>>();
        assert_eq!(groups(a), groups(b));
        for gen in 0..a.next_generation() + 1 {
            assert_eq!(a.awaits_exit(gen), b.awaits_exit(gen));
        }
        assert_eq!(a.export_image(), b.export_image(), "images differ");
        assert_eq!(a.take_dirty_sessions(), b.take_dirty_sessions());
    }

    /// A well-behaved system and client until nothing is left (as the checker's `settle`
    /// does): stop every session, start what starts, end every leader, close every
    /// stream, empty every group, let deadlines pass.
    fn settle(&mut self) {
        for _ in 0..200 {
            let list = self.original.list();
            let quiet = |s: &crate::core::SessionSnapshot| {
                s.generations.is_empty() && s.restart_at.is_none()
            };
            if list.iter().all(quiet) {
                return;
            }
            for s in &list {
                let command = Command::Stop {
                    session: s.name.to_string(),
                    if_gen: None,
                    grace: None,
                };
                let request = u64::MAX;
                self.step(Step::Input(Input::Command { request, command }));
            }
            for s in &list {
                for g in &s.generations {
                    for input in settling_inputs(g) {
                        self.step(Step::Input(input));
                    }
                }
            }
            let next = self
                .original
                .next_deadline()
                .map_or(self.now, |t| t.max(self.now));
            self.step(Step::Clock(next));
        }
        panic!("the twins did not settle: {:?}", self.original.list());
    }
}

fn settling_inputs(g: &crate::core::GenerationSnapshot) -> Vec<Input> {
    let gen = g.gen;
    match g.lifecycle {
        Lifecycle::Pending | Lifecycle::Gone => vec![],
        Lifecycle::Starting => vec![Input::SpawnResult {
            gen,
            result: Ok(Started::in_session(gen as u32)),
        }],
        Lifecycle::Running | Lifecycle::Stopping(_) => vec![
            Input::Verified { gen },
            Input::LeaderExited {
                gen,
                status: ExitStatus::Signal(15),
            },
        ],
        Lifecycle::Draining => g
            .offsets
            .iter()
            .map(|(stream, _)| Input::Eof {
                gen,
                stream: *stream,
            })
            .collect(),
        Lifecycle::Reported => vec![Input::GroupEmpty { gen }],
        Lifecycle::TreeUnkillable => vec![Input::GroupEmpty { gen }],
    }
}

/// 5000 seeded walks of 60 steps: checked by the invariant checker up to a random point
/// (with daemon restarts and adoption on the way), then imported through bytes and fed
/// alike with the original, imported again now and then, and settled. The walks must
/// reach images with generations in every lifecycle step, adopted ones (verified or not)
/// and a shutdown in progress, so the round trip is proved where it matters.
#[test]
fn an_imported_core_carries_on_exactly_like_the_original() {
    const SEEDS: u64 = 5000;
    const STEPS: u64 = 60;
    let mut seen: BTreeSet<&'static str> = BTreeSet::new();
    for seed in 0..SEEDS {
        let mut r = Rng::new(seed);
        let mut h = Harness::with(small_limits(), 1 + r.below(3));
        let split = r.below(STEPS);
        for request in 0..split {
            if r.below(40) == 0 {
                let (core, check) = reborn(&h.core, h.now, &mut r);
                h = Harness::from_parts(core, check);
                continue;
            }
            let step = wire_step(choose_step(&mut r, &h.core, h.now, request));
            apply_step(&mut h, shutdown_now_and_then(&mut r, step));
        }
        note_reached(&h.core, &mut seen);
        let copy = through_bytes(&h.core, small_limits());
        let original = std::mem::replace(&mut h.core, Core::new(small_limits(), 1));
        let mut twin = Twin {
            original,
            copy,
            now: h.now,
        };
        twin.compare();
        for request in split..STEPS {
            if r.below(15) == 0 {
                twin.copy = through_bytes(&twin.copy, small_limits());
            }
            let step = choose_step(&mut r, &twin.original, twin.now, request);
            twin.step(shutdown_now_and_then(&mut r, wire_step(step)));
        }
        twin.settle();
    }
    let want = [
        "pending",
        "starting",
        "running",
        "stopping",
        "killing",
        "unkillable",
        "exited",
        "reported",
        "adopted",
        "unverified",
        "shutdown",
        "backoff",
    ];
    let missing: Vec<_> = want.iter().filter(|w| !seen.contains(**w)).collect();
    assert!(missing.is_empty(), "no image had {missing:?}");
}

/// Now and then the daemon is asked to shut down instead (the walk never asks it): its
/// stages must cross an upgrade too.
fn shutdown_now_and_then(r: &mut Rng, step: Step) -> Step {
    match step {
        Step::Input(Input::Command { request, .. }) if r.below(12) == 0 => {
            let command = Command::Shutdown;
            Step::Input(Input::Command { request, command })
        }
        other => other,
    }
}

/// What an exported image shows, by name.
fn note_reached(core: &Core, seen: &mut BTreeSet<&'static str>) {
    let image = core.export_image().expect("between turns");
    for s in core.list() {
        if s.restart_at.is_some() {
            seen.insert("backoff");
        }
        for g in &s.generations {
            seen.insert(g.lifecycle.as_str());
            match g.adopted {
                Some(a) if a.verified => seen.insert("adopted"),
                Some(_) => seen.insert("unverified"),
                None => false,
            };
        }
    }
    if image.shutdown != crate::core::ShutdownImage::Running {
        seen.insert("shutdown");
    }
}
