//! The core image for an upgrade by re-exec. The first byte picks how the rest is read:
//!
//! - even: as an encoded image. Nothing may panic; an image that decodes encodes back to
//!   itself; one that imports exports itself unchanged, and the core built from it keeps
//!   working (a few timeouts and stops, its snapshots).
//! - odd: as the choices of a walk on a real core (commands, process events, clock
//!   jumps). At a chosen step its image goes through bytes into a second core; both then
//!   take the same further steps and must act, and export, alike.
#![no_main]

use genward::core::{Action, Command, Core, ExitStatus, Input, OnBusy, Started, Stream, Time};
use genward::store::core_image::{decode_core_image, encode_core_image};
use genward::testkit::rng::{Bytes, Choose};
use genward::testkit::walk::{live_generations, random_spec, small_limits, MILLIS, NAMES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        raw(rest);
    } else {
        walk(&mut Bytes::new(rest));
    }
});

fn raw(bytes: &[u8]) {
    let Ok(image) = decode_core_image(bytes) else {
        return;
    };
    let again = encode_core_image(&image).expect("a decoded image encodes");
    assert_eq!(decode_core_image(&again).as_ref(), Ok(&image));
    let Ok(mut core) = genward::core::Core::import_image(small_limits(), image.clone()) else {
        return;
    };
    assert_eq!(core.export_image().as_ref(), Ok(&image));
    let mut now = image.now;
    for (i, s) in core.list().iter().enumerate() {
        let command = Command::Stop {
            session: s.name.to_string(),
            if_gen: None,
            grace: None,
        };
        step(
            &mut core,
            now,
            Input::Command {
                request: i as u64,
                command,
            },
        );
        core.get(&s.name);
    }
    for _ in 0..4 {
        now = core.next_deadline().map_or(now, |t| t.max(now));
        core.handle_timeout(now);
        drain(&mut core, now);
    }
    step(
        &mut core,
        now,
        Input::Command {
            request: 0,
            command: Command::Shutdown,
        },
    );
}

fn walk(c: &mut Bytes<'_>) {
    let mut original = Core::new(small_limits(), 1);
    let mut now = Time::ZERO;
    let split = c.below(48);
    for request in 0..split {
        let (at, input) = choose(c, &original, now, request);
        now = at;
        feed(&mut original, now, input);
    }
    let image = original.export_image().expect("drained");
    let bytes = encode_core_image(&image).expect("a walk's image encodes");
    let decoded = decode_core_image(&bytes).expect("an encoded image decodes");
    assert_eq!(decoded, image);
    let mut copy = Core::import_image(small_limits(), decoded).expect("a real image imports");
    for request in split..split + 32 {
        let (at, input) = choose(c, &original, now, request);
        now = at;
        let a = feed(&mut original, now, input.clone());
        let b = feed(&mut copy, now, input);
        assert_eq!(a, b, "the imported core acted differently");
        assert_eq!(original.export_image(), copy.export_image());
        assert_eq!(original.next_deadline(), copy.next_deadline());
    }
}

/// `None` input: the clock moved and `handle_timeout` is called.
fn feed(core: &mut Core, now: Time, input: Option<Input>) -> Vec<Action> {
    match input {
        Some(input) => step(core, now, input),
        None => {
            core.handle_timeout(now);
            drain(core, now)
        }
    }
}

fn step(core: &mut Core, now: Time, input: Input) -> Vec<Action> {
    core.handle(now, input);
    drain(core, now)
}

/// The actions, with each `CloseOutput` answered as a driver does.
fn drain(core: &mut Core, now: Time) -> Vec<Action> {
    let mut all: Vec<Action> = std::iter::from_fn(|| core.poll_action()).collect();
    let closes: Vec<u64> = all
        .iter()
        .filter_map(|a| match a {
            Action::CloseOutput { gen } => Some(*gen),
            _ => None,
        })
        .collect();
    for gen in closes {
        all.extend(step(core, now, Input::OutputClosed { gen, unread: 0 }));
    }
    all
}

/// The next step of a walk: when, and what (`None`: only the clock).
fn choose(c: &mut Bytes<'_>, core: &Core, now: Time, request: u64) -> (Time, Option<Input>) {
    let live = live_generations(core);
    let gen = if live.is_empty() {
        c.below(8)
    } else {
        c.pick(&live)
    };
    let session = c.pick(&NAMES).to_string();
    let command = |command| Some(Input::Command { request, command });
    let input = match c.below(12) {
        0 | 1 => {
            let mut spec = random_spec(c);
            // The wire cannot ask for unlimited restarts.
            spec.restart.max_restarts.get_or_insert(u32::MAX);
            let on_busy = c.pick(&[OnBusy::Replace, OnBusy::Overlap, OnBusy::Reject]);
            command(Command::Spawn {
                session,
                if_gen: None,
                spec: Box::new(spec),
                on_busy,
            })
        }
        2 => command(Command::Stop {
            session,
            if_gen: None,
            grace: None,
        }),
        3 => command(Command::Restart {
            session,
            if_gen: None,
        }),
        4 => command(Command::Write {
            session,
            if_gen: None,
            bytes: vec![b'x'; 8],
        }),
        5 if c.chance(30) => command(Command::Shutdown),
        6 => Some(Input::SpawnResult {
            gen,
            result: Ok(Started::in_session(gen as u32)),
        }),
        7 => {
            let status = c.pick(&[
                ExitStatus::Code(0),
                ExitStatus::Code(1),
                ExitStatus::Signal(9),
            ]);
            Some(Input::LeaderExited { gen, status })
        }
        8 => {
            let stream = c.pick(&[Stream::Stdout, Stream::Stderr, Stream::Pty]);
            Some(Input::Eof { gen, stream })
        }
        9 => Some(match c.below(4) {
            0 => Input::GroupEmpty { gen },
            1 => Input::Lost { gen },
            2 => Input::LeaderGone { gen },
            _ => Input::InputWritten { gen, len: 8 },
        }),
        _ => None,
    };
    match input {
        Some(input) => (now, Some(input)),
        None => (Time::from_millis(now.as_millis() + c.pick(&MILLIS)), None),
    }
}
