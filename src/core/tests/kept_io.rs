//! A generation taken back after a crash with the I/O a keeper held: its output goes on
//! at the offsets where it stopped, its input and terminal work again, and its exit is
//! reported only once its output is drained — as for a spawned child.

use super::harness::{has, spec, Harness};
use crate::core::{
    Action, AdoptedIo, Command, Event, ExitCause, ExitStatus, Input, IoMode, OnBusy, Stream,
};

/// A session `s` whose generation ran under a daemon that died: its records restored
/// into a new core. Returns the new harness and the generation.
fn crashed(spec: crate::core::Spec) -> (Harness, u64) {
    let mut h = Harness::new();
    let gen = h.spawn_with("s", spec, OnBusy::Replace).expect("spawn");
    h.started(gen);
    let (n, problems) = h.reborn(h.records(), 5);
    assert_eq!(problems, vec![]);
    (n, gen)
}

fn kept(outputs: [Option<u64>; 3], input: bool) -> AdoptedIo {
    AdoptedIo { outputs, input }
}

fn write(h: &mut Harness, bytes: &[u8]) -> Vec<Action> {
    let before = h.all_actions().len();
    h.cmd(Command::Write {
        session: "s".into(),
        if_gen: None,
        bytes: bytes.to_vec(),
    })
    .expect("write accepted");
    h.all_actions()[before..].to_vec()
}

#[test]
fn output_goes_on_at_the_offsets_where_it_stopped_and_input_works_again() {
    let (mut n, gen) = crashed(spec());
    assert!(n.adopt_with_io(gen, "s", kept([Some(1000), Some(7), None], true)));
    n.resume();
    let adopted = n.get("s").generations[0].adopted.expect("adopted");
    assert!(!adopted.io_lost && adopted.verified);
    assert_eq!(
        n.output_on(gen, Stream::Stdout, 10).map(|a| a.offset),
        Some(1000)
    );
    assert_eq!(
        n.output_on(gen, Stream::Stdout, 5).map(|a| a.offset),
        Some(1010)
    );
    assert_eq!(
        n.output_on(gen, Stream::Stderr, 3).map(|a| a.offset),
        Some(7)
    );
    let actions = write(&mut n, b"hi\n");
    assert!(has(&actions, |a| matches!(
        a,
        Action::WriteInput { gen: g, bytes } if *g == gen && bytes == b"hi\n"
    )));
}

#[test]
fn its_exit_waits_for_its_output_to_drain() {
    let (mut n, gen) = crashed(spec());
    assert!(n.adopt_with_io(gen, "s", kept([Some(0), Some(0), None], true)));
    n.resume();
    n.exit(gen, ExitStatus::Code(3));
    assert!(
        n.events_of(gen).iter().all(|e| !e.is_terminal()),
        "reported before its output reached EOF"
    );
    // What it wrote before exiting is still delivered while draining.
    assert_eq!(
        n.output_on(gen, Stream::Stdout, 4).map(|a| a.offset),
        Some(0)
    );
    n.eof(gen);
    let ends: Vec<Event> = n
        .events_of(gen)
        .into_iter()
        .filter(Event::is_terminal)
        .collect();
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                code: Some(3),
                cause: ExitCause::Exited,
                truncated: false,
                ..
            }]
        ),
        "{ends:?}"
    );
}

#[test]
fn a_stream_still_open_at_the_drain_deadline_is_closed_and_the_exit_truncated() {
    let (mut n, gen) = crashed(spec());
    assert!(n.adopt_with_io(gen, "s", kept([Some(0), None, None], false)));
    n.resume();
    n.exit(gen, ExitStatus::Code(0));
    let actions = n.advance(1000);
    assert!(has(
        &actions,
        |a| matches!(a, Action::CloseOutput { gen: g } if *g == gen)
    ));
    let ends: Vec<Event> = n
        .events_of(gen)
        .into_iter()
        .filter(Event::is_terminal)
        .collect();
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                truncated: true,
                ..
            }]
        ),
        "{ends:?}"
    );
}

#[test]
fn a_terminal_kept_can_be_resized_and_written() {
    let mut s = spec();
    s.io = IoMode::Pty { rows: 24, cols: 80 };
    let (mut n, gen) = crashed(s);
    assert!(n.adopt_with_io(gen, "s", kept([None, None, Some(42)], true)));
    n.resume();
    assert_eq!(n.output_on(gen, Stream::Pty, 2).map(|a| a.offset), Some(42));
    n.cmd(Command::Resize {
        session: "s".into(),
        if_gen: Some(gen),
        rows: 50,
        cols: 132,
    })
    .expect("resize accepted");
    let actions = write(&mut n, b"x");
    assert!(has(&actions, |a| matches!(a, Action::WriteInput { .. })));
    assert!(n.all_actions().iter().any(|a| matches!(
        a,
        Action::Resize { gen: g, rows: 50, cols: 132 } if *g == gen
    )));
}

#[test]
fn without_kept_io_or_unverified_nothing_is_read_or_written() {
    for verified in [true, false] {
        let (mut n, gen) = crashed(spec());
        let io = (!verified).then(|| kept([Some(0), Some(0), None], true));
        n.input(Input::Adopt {
            gen,
            session: "s".into(),
            pid: 1000 + gen as u32,
            containment: crate::core::Containment::Session,
            verified,
            io,
            started_unix_ms: 1_600_000_000_000,
        });
        n.resume();
        let adopted = n.get("s").generations[0].adopted.expect("adopted");
        assert!(
            adopted.io_lost,
            "I/O of an unverified process is never taken in"
        );
        assert_eq!(n.output_on(gen, Stream::Stdout, 1), None);
        let refused = n.cmd(Command::Write {
            session: "s".into(),
            if_gen: None,
            bytes: b"x".to_vec(),
        });
        assert!(refused.is_err());
    }
}

#[test]
fn on_recover_stop_spares_a_process_whose_io_came_back() {
    for io in [true, false] {
        let mut s = spec();
        s.on_recover = crate::core::OnRecover::Stop;
        let (mut n, gen) = crashed(s);
        if io {
            assert!(n.adopt_with_io(gen, "s", kept([Some(0), Some(0), None], true)));
        } else {
            assert!(n.adopt(gen, "s"));
        }
        let actions = n.resume();
        let stopped = has(
            &actions,
            |a| matches!(a, Action::Signal { gen: g, .. } if *g == gen),
        );
        assert_eq!(stopped, !io, "with its I/O kept: {io}");
    }
}
