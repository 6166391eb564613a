//! What a core image must never do: panic, or let a core built from a bad image panic
//! later. Cut-short and corrupted encodings are refused, or decode to an image that
//! import accepts or refuses; a core accepted from one keeps working. Inconsistent images
//! are refused with a message naming the problem.

use std::sync::Arc;
use std::time::Duration;

use super::harness::Harness;
use super::image::wire_step;
use super::random_walk::{choose_step, Step};
use crate::core::{
    Action, Config, Core, CoreImage, Event, ExitCause, ExitStatus, GroupImage, OnBusy, PhaseImage,
    ShutdownImage, StopReason, Time,
};
use crate::store::core_image::{decode_core_image, encode_core_image};
use crate::testkit::rng::SplitMix64 as Rng;
use crate::testkit::walk::small_limits;

/// Images of real cores: seeded walks stopped after 40 steps, with at least two
/// generations tracked.
fn walked_images(count: usize) -> Vec<CoreImage> {
    let mut images = Vec::new();
    for seed in 0.. {
        if images.len() == count {
            break;
        }
        let mut r = Rng::new(seed);
        let mut core = Core::new(small_limits(), 1);
        let mut now = Time::ZERO;
        for request in 0..40 {
            let step = wire_step(choose_step(&mut r, &core, now, request));
            now = feed(&mut core, now, step);
        }
        if core.generation_count() >= 2 {
            images.push(core.export_image().expect("drained"));
        }
    }
    images
}

/// Applies a walk's step to a bare core (no checker: it may come from a bad image),
/// draining its actions and answering `CloseOutput` as a driver does. Returns the time.
fn feed(core: &mut Core, now: Time, step: Step) -> Time {
    let now = match step {
        Step::Input(input) => {
            core.handle(now, input);
            now
        }
        Step::Output { gen, stream, len } => {
            core.output(gen, stream, len);
            now
        }
        Step::Clock(t) => {
            core.handle_timeout(t);
            t
        }
    };
    let actions: Vec<Action> = std::iter::from_fn(|| core.poll_action()).collect();
    for action in actions {
        if let Action::CloseOutput { gen } = action {
            feed(
                core,
                now,
                Step::Input(crate::core::Input::OutputClosed { gen, unread: 0 }),
            );
        }
    }
    now
}

/// A core accepted from an odd image keeps answering: a walk on it, snapshots, and its
/// own image, which must import again.
fn exercise(mut core: Core, r: &mut Rng) {
    let mut now = core.export_image().expect("fresh").now;
    for request in 0..30 {
        let step = wire_step(choose_step(r, &core, now, request));
        now = feed(&mut core, now, step);
        core.list();
        core.next_deadline();
    }
    let image = core.export_image().expect("drained");
    if let Ok(bytes) = encode_core_image(&image) {
        let again = decode_core_image(&bytes).expect("its own image decodes");
        Core::import_image(small_limits(), again).expect("its own image imports");
    }
}

/// Every proper prefix of an encoding is refused; random byte corruptions are refused by
/// the decoder, or by import, or make a core that keeps working.
#[test]
fn cut_or_corrupted_images_never_panic() {
    let images = walked_images(8);
    let encoded: Vec<Vec<u8>> = images
        .iter()
        .map(|i| encode_core_image(i).expect("encodes"))
        .collect();
    for bytes in encoded.iter().take(2) {
        for len in 0..bytes.len() {
            assert!(
                decode_core_image(&bytes[..len]).is_err(),
                "a prefix of {len} bytes decoded"
            );
        }
    }
    const PALETTE: &[u8] = b"0123456789{}[]\",:-.eEtruefalsnx\\ ";
    let mut r = Rng::new(7);
    let (mut decoded, mut imported) = (0, 0);
    for _ in 0..8000 {
        let mut bytes = encoded[r.below(encoded.len() as u64) as usize].clone();
        for _ in 0..1 + r.below(3) {
            let at = r.below(bytes.len() as u64) as usize;
            bytes[at] = if r.below(4) == 0 {
                r.below(256) as u8
            } else {
                PALETTE[r.below(PALETTE.len() as u64) as usize]
            };
        }
        let Ok(image) = decode_core_image(&bytes) else {
            continue;
        };
        decoded += 1;
        if let Ok(core) = Core::import_image(small_limits(), image) {
            imported += 1;
            exercise(core, &mut r);
        }
    }
    assert!(
        decoded > 60 && imported > 30,
        "too few corruptions reached import ({decoded}) or were accepted ({imported})"
    );
}

/// One field of a real image changed to another value of its type: refused by import,
/// or a core that keeps working.
#[test]
fn images_changed_field_by_field_never_panic() {
    let images = walked_images(12);
    let mut r = Rng::new(11);
    let mut accepted = 0;
    for round in 0..6000 {
        let mut image = images[round % images.len()].clone();
        mutate(&mut image, &mut r);
        if let Ok(core) = Core::import_image(small_limits(), image) {
            accepted += 1;
            exercise(core, &mut r);
        }
    }
    assert!(accepted > 300, "only {accepted} changed images accepted");
}

/// Changes one field somewhere in `image` to a nearby or extreme value.
fn mutate(image: &mut CoreImage, r: &mut Rng) {
    let number = |r: &mut Rng, n: u64| match r.below(4) {
        0 => 0,
        1 => u64::MAX,
        2 => n.saturating_add(1),
        _ => r.below(n.saturating_add(3)),
    };
    let time = |r: &mut Rng, t: Time| Time::from_millis(number(r, t.as_millis()));
    let some_time = |r: &mut Rng, t: Time| (r.below(3) != 0).then(|| time(r, t));
    let now = image.now;
    if r.below(6) == 0 || image.generations.is_empty() {
        match r.below(6) {
            0 => image.next_gen = number(r, image.next_gen),
            1 => image.now = time(r, now),
            2 => image.shutdown = r.pick(&[ShutdownImage::Stopping, ShutdownImage::Killing]),
            3 => image.dirty.push(Arc::from(r.pick(&["a", "b", "z", ".x"]))),
            4 => {
                let s = image.sessions.len();
                if s > 0 {
                    image.sessions.remove(r.below(s as u64) as usize);
                }
            }
            _ => {
                let s = image.sessions.len();
                if s > 0 {
                    let s = &mut image.sessions[r.below(s as u64) as usize];
                    match r.below(6) {
                        0 => s.current = s.current.map(|c| number(r, c)).or(Some(1)),
                        1 => s.current = None,
                        2 => s.last_gen = Some(number(r, 1)),
                        3 => s.restart_at = some_time(r, now),
                        4 => s.removing = !s.removing,
                        _ => s.recent_ends.push(Event::Exited {
                            session: s.name.clone(),
                            gen: r.below(8),
                            code: Some(0),
                            signal: None,
                            cause: ExitCause::Exited,
                            discarded: 0,
                            truncated: false,
                        }),
                    }
                }
            }
        }
        return;
    }
    let n = image.generations.len() as u64;
    let g = &mut image.generations[r.below(n) as usize];
    let pid = 4242;
    match r.below(17) {
        0 => g.gen = number(r, g.gen),
        1 => g.session = Arc::from(r.pick(&["a", "b", "c", "d"])),
        2 => {
            let until = some_time(r, now);
            g.phase = match r.below(7) {
                0 => PhaseImage::Pending,
                1 => PhaseImage::Starting,
                2 => PhaseImage::Running { pid },
                3 => PhaseImage::Stopping {
                    pid,
                    stage: r.pick(&[
                        crate::core::StopStage::Graceful,
                        crate::core::StopStage::Kill,
                        crate::core::StopStage::Unkillable,
                    ]),
                    until,
                },
                4 => PhaseImage::Draining { pid, until },
                5 => PhaseImage::Reported { pid },
                _ => PhaseImage::Gone,
            }
        }
        3 => g.since = time(r, g.since),
        4 => g.started = some_time(r, now),
        5 => {
            g.stop = r.pick(&[
                None,
                Some(StopReason::Requested),
                Some(StopReason::Superseded),
            ])
        }
        6 => g.grace = r.pick(&[None, Some(Duration::ZERO), Some(Duration::MAX)]),
        7 => g.sent_kill = !g.sent_kill,
        8 => g.cancel_at = some_time(r, now),
        9 => g.offsets[r.below(3) as usize] = number(r, 5),
        10 => g.eof[r.below(3) as usize] ^= true,
        11 => {
            g.group = match r.below(3) {
                0 => GroupImage::Alive,
                1 => GroupImage::Term {
                    until: time(r, now),
                },
                _ => GroupImage::Done,
            }
        }
        12 => g.pending_input = number(r, g.pending_input as u64) as usize,
        13 => g.input_closed = !g.input_closed,
        14 => {
            g.exit = r.pick(&[
                None,
                Some((ExitStatus::Code(0), ExitCause::Exited)),
                Some((ExitStatus::Signal(9), ExitCause::Killed)),
            ])
        }
        15 => g.adopted = some_time(r, now),
        _ => {
            g.unverified = !g.unverified;
            g.leader_gone = r.below(2) == 0;
        }
    }
}

/// A core with a session `a` running generation 1 and a session `b` whose generation 2
/// is stopping for its pending successor 3, 500 ms in.
fn two_sessions() -> (Harness, CoreImage) {
    let mut h = Harness::new();
    h.advance(500);
    let one = h.spawn("a");
    h.started(one);
    let two = h.spawn("b");
    h.started(two);
    let three = h.spawn_with("b", super::harness::spec(), OnBusy::Replace);
    assert_eq!((one, two, three.as_ref().ok()), (1, 2, Some(&3)));
    h.core.take_dirty_sessions();
    let image = h.core.export_image().expect("drained");
    (h, image)
}

fn refused(image: CoreImage, config: Config, says: &str) {
    match Core::import_image(config, image) {
        Ok(_) => panic!("accepted an image that should say {says:?}"),
        Err(e) => assert!(
            e.message().contains(says),
            "refused with {:?}, not {says:?}",
            e.message()
        ),
    }
}

#[test]
fn inconsistent_images_are_refused_naming_the_problem() {
    let (_, good) = two_sessions();
    let config = Config::default;
    assert!(Core::import_image(config(), good.clone()).is_ok());
    let edit = |f: &dyn Fn(&mut CoreImage)| {
        let mut image = good.clone();
        f(&mut image);
        image
    };
    let gen_of = |image: &mut CoreImage, gen: u64| -> usize {
        image
            .generations
            .iter()
            .position(|g| g.gen == gen)
            .expect("tracked")
    };
    let cases: Vec<(CoreImage, &str)> = vec![
        (edit(&|i| i.next_gen = 0), "next_gen is 0"),
        (
            edit(&|i| {
                let copy = i.generations[0].clone();
                i.generations.insert(0, copy);
            }),
            "numbered twice",
        ),
        (
            edit(&|i| {
                let last = i.generations.len() - 1;
                i.generations[last].gen = i.next_gen;
            }),
            "generation 4: not in 1..next_gen",
        ),
        (edit(&|i| i.sessions[0].current = Some(2)), "is \"b\"'s"),
        (
            edit(&|i| {
                let at = gen_of(i, 1);
                i.generations.remove(at);
            }),
            "current generation 1 is not tracked",
        ),
        (
            edit(&|i| i.sessions[0].name = Arc::from(".a")),
            "may not start with `.`",
        ),
        (
            edit(&|i| {
                let copy = i.sessions[0].clone();
                i.sessions.push(copy);
            }),
            "named twice",
        ),
        (
            edit(&|i| i.generations[0].session = Arc::from("zz")),
            "is not in the image",
        ),
        (
            edit(&|i| {
                let at = gen_of(i, 1);
                i.generations[at].exit = Some((ExitStatus::Code(0), ExitCause::Exited));
            }),
            "contradicts its phase",
        ),
        (
            edit(&|i| {
                let at = gen_of(i, 2);
                i.generations[at].stop = None;
            }),
            "contradicts its phase",
        ),
        (
            edit(&|i| i.sessions[1].current = Some(2)),
            "pending but not its session's current",
        ),
        (
            edit(&|i| {
                let at = gen_of(i, 1);
                i.generations[at].phase = PhaseImage::Gone;
            }),
            "gone, yet still in the table",
        ),
        (
            edit(&|i| {
                let at = gen_of(i, 1);
                i.generations[at].phase = PhaseImage::Reported { pid: 1 };
                i.generations[at].exit = Some((ExitStatus::Code(0), ExitCause::Exited));
                i.generations[at].group = GroupImage::Term { until: i.now };
            }),
            "current generation 1 already ended",
        ),
        (
            edit(&|i| {
                let end = Event::Exited {
                    session: i.sessions[0].name.clone(),
                    gen: 1,
                    code: Some(0),
                    signal: None,
                    cause: ExitCause::Exited,
                    discarded: 0,
                    truncated: false,
                };
                i.sessions[0].recent_ends.push(end);
            }),
            "has not ended, yet its session remembers its end",
        ),
        (
            edit(&|i| {
                let end = Event::Unkillable {
                    session: i.sessions[0].name.clone(),
                    gen: 1,
                };
                i.sessions[0].recent_ends.push(end);
            }),
            "is not a terminal event of it",
        ),
        (edit(&|i| i.now = Time::ZERO), "after the image's now"),
        (
            edit(&|i| i.dirty = vec![Arc::from("b"), Arc::from("a")]),
            "out of name order",
        ),
        (
            edit(&|i| i.dirty = vec![Arc::from("a/b")]),
            "not a valid name",
        ),
        (
            edit(&|i| {
                let at = gen_of(i, 1);
                i.generations[at].offsets[2] = 7;
            }),
            "a stream its spec does not have",
        ),
        (
            edit(&|i| {
                let at = gen_of(i, 1);
                i.generations[at].unverified = true;
            }),
            "unverified, yet not an adopted",
        ),
        (
            edit(&|i| i.sessions[0].last_gen = Some(99)),
            "names generation 99, not below next_gen",
        ),
    ];
    for (image, says) in cases {
        refused(image, config(), says);
    }
    let small = |f: &dyn Fn(&mut Config)| {
        let mut c = config();
        f(&mut c);
        c
    };
    refused(
        good.clone(),
        small(&|c| c.max_sessions = 1),
        "2 sessions, above",
    );
    refused(
        good.clone(),
        small(&|c| c.max_generations = 0),
        "2 generations started, above",
    );
    refused(
        good.clone(),
        small(&|c| c.max_spec_items = 0),
        "spec: 1 argv/env entries",
    );
    let mut queued = good.clone();
    queued.generations[0].pending_input = 5;
    refused(
        queued,
        small(&|c| c.max_pending_input = 4),
        "5 input bytes queued",
    );
}

#[test]
fn an_image_is_not_taken_with_actions_queued() {
    let (mut h, _) = two_sessions();
    h.core.handle(h.now, crate::core::Input::Lost { gen: 1 });
    let e = h.core.export_image().expect_err("actions queued");
    assert!(e.message().contains("still queued"), "{e}");
    while h.core.poll_action().is_some() {}
    assert!(h.core.export_image().is_ok());
}
