//! The two seed reports replayed at the core level.

use super::harness::{has, spec, Harness};
use crate::core::OutputAt;
use crate::core::{
    Action, Command, Event, ExitCause, ExitStatus, Lifecycle, OnBusy, Response, Restart, Scope,
    SessionState, SpawnError, SpawnErrorKind, StopStage, Stream,
};

/// (a) Generation 1 is replaced while generation 2 runs beside it (overlap); 1's late
/// output, EOF and exit 143 arrive after 2 is running: 2 is untouched, still current and
/// stoppable; 1's exit is reported once, tagged 1, cause superseded.
#[test]
fn seed_000_late_exit_of_replaced_generation_is_its_own() {
    let mut h = Harness::new();
    let g1 = h.spawn("agent");
    h.started(g1);
    h.output(g1, 10);
    let g2 = h.spawn_with("agent", spec(), OnBusy::Overlap).unwrap();
    assert!(has(&h.log, |a| *a
        == Action::Signal {
            gen: g1,
            signal: 15,
            scope: Scope::Leader
        }));
    h.started(g2);
    h.output(g2, 7);

    let late = h.output(g1, 5);
    assert_eq!(
        late,
        Some(OutputAt {
            session: "agent".into(),
            offset: 10,
        }),
        "late output of generation 1 is delivered as its own"
    );
    h.eof(g1);
    h.exit(g1, ExitStatus::Signal(15));

    let exits: Vec<Event> = h
        .events_of(g1)
        .into_iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect();
    assert_eq!(exits.len(), 1);
    assert!(
        matches!(exits[0], Event::Exited { gen, code: Some(143), cause: ExitCause::Superseded, .. } if gen == g1)
    );

    let s = h.get("agent");
    assert_eq!((s.current, s.state), (Some(g2), SessionState::Running));
    let two = s.generations.iter().find(|g| g.gen == g2).unwrap();
    assert_eq!(two.offsets[0], (Stream::Stdout, 7));
    assert!(h
        .events_of(g2)
        .iter()
        .all(|e| !matches!(e, Event::Exited { .. })));

    let stop = h.stop("agent", Some(g2)).unwrap();
    assert_eq!(stop, Response::Gen(g2));
    assert!(has(&h.log, |a| *a
        == Action::Signal {
            gen: g2,
            signal: 15,
            scope: Scope::Leader
        }));
    h.settle();
}

/// (a) with the default `replace`: 2 waits until 1 is reaped; 1's late output is its own.
#[test]
fn seed_000_replace_waits_for_predecessor() {
    let mut h = Harness::new();
    let g1 = h.spawn("agent");
    h.started(g1);
    let g2 = h.spawn("agent");
    assert_eq!(h.get("agent").current, Some(g2));
    assert!(!has(
        &h.log,
        |a| matches!(a, Action::Spawn { gen, .. } if *gen == g2)
    ));
    let late = h.output(g1, 3);
    assert_eq!(
        late,
        Some(OutputAt {
            session: "agent".into(),
            offset: 0
        }),
        "generation 1's own stream"
    );
    h.exit(g1, ExitStatus::Signal(15));
    h.eof(g1);
    let reaped = h.group_empty(g1);
    let reap = reaped
        .iter()
        .position(|a| *a == Action::Reap { gen: g1 })
        .expect("reaped");
    let spawn = reaped
        .iter()
        .position(|a| matches!(a, Action::Spawn { gen, .. } if *gen == g2))
        .expect("spawned");
    assert!(
        reap < spawn,
        "successor spawns only after the predecessor is reaped"
    );
    h.started(g2);
    assert_eq!(h.get("agent").state, SessionState::Running);
    h.settle();
}

/// (b) The reviewer's hole: generation 2 exits and is removed first, then 1's late events
/// arrive. They are still only ever about 1, and change nothing else.
#[test]
fn seed_000_successor_gone_first() {
    let mut h = Harness::new();
    let g1 = h.spawn("agent");
    h.started(g1);
    let g2 = h.spawn_with("agent", spec(), OnBusy::Overlap).unwrap();
    h.started(g2);
    h.exit(g2, ExitStatus::Code(0));
    h.eof(g2);
    h.group_empty(g2);
    assert!(h.get("agent").generations.iter().all(|g| g.gen != g2));
    assert_eq!(h.get("agent").state, SessionState::Exited);

    let mark = h.log.len();
    h.output(g1, 4);
    h.eof(g1);
    h.exit(g1, ExitStatus::Signal(15));
    h.group_empty(g1);
    for a in &h.log[mark..] {
        match a {
            Action::Emit(Event::State { .. }) => {
                panic!("a superseded generation changed the session: {a:?}")
            }
            Action::Emit(e) => assert_eq!(e.gen(), Some(g1)),
            Action::Signal { gen, .. } | Action::Reap { gen } | Action::Release { gen } => {
                assert_eq!(*gen, g1)
            }
            _ => {}
        }
    }
    let s = h.get("agent");
    assert_eq!((s.current, s.state), (None, SessionState::Exited));
    assert!(
        matches!(s.last_end, Some(crate::core::LastEnd::Exited { gen, code: Some(0), .. }) if gen == g2)
    );
    h.settle();
}

/// (b) again, with the session removed (and re-created) before 1's late events arrive.
#[test]
fn seed_000_session_removed_then_recreated() {
    let mut h = Harness::new();
    let g1 = h.spawn("agent");
    h.started(g1);
    let g2 = h.spawn_with("agent", spec(), OnBusy::Overlap).unwrap();
    h.started(g2);
    h.cmd(Command::Remove {
        session: "agent".into(),
    })
    .unwrap();
    h.exit(g2, ExitStatus::Signal(15));
    h.eof(g2);
    h.group_empty(g2);
    assert_eq!(h.get("agent").state, SessionState::Removing);
    let g3 = h.spawn("agent");
    assert!(
        !has(
            &h.log,
            |a| matches!(a, Action::Spawn { gen, .. } if *gen == g3)
        ),
        "waits for 1"
    );
    h.exit(g1, ExitStatus::Signal(15));
    h.eof(g1);
    let gone = h.group_empty(g1);
    assert!(has(
        &gone,
        |a| matches!(a, Action::Spawn { gen, .. } if *gen == g3)
    ));
    assert_eq!(h.get("agent").current, Some(g3));
    h.settle();
}

/// (c) A failed session and an unkillable generation next to a healthy one: `list`
/// answers for all of them.
#[test]
fn seed_004_failed_and_unkillable_never_fail_list() {
    let mut h = Harness::new();
    let ok = h.spawn("healthy");
    h.started(ok);

    let mut flaky = spec();
    flaky.restart.mode = Restart::OnFailure;
    flaky.restart.max_restarts = Some(1);
    let b1 = h.spawn_with("flaky", flaky, OnBusy::Replace).unwrap();
    let err = SpawnError::new(SpawnErrorKind::NotFound, 2);
    h.input(crate::core::Input::SpawnResult {
        gen: b1,
        result: Err(err),
    });
    h.advance(1000);
    let b2 = h.get("flaky").current.expect("restarted once");
    h.started(b2);
    h.exit(b2, ExitStatus::Code(1));
    h.eof(b2);
    assert_eq!(h.get("flaky").state, SessionState::Failed);

    let stuck = h.spawn("stuck");
    h.started(stuck);
    h.stop("stuck", Some(stuck)).unwrap();
    h.advance(100);
    assert!(has(&h.log, |a| *a
        == Action::Signal {
            gen: stuck,
            signal: 9,
            scope: Scope::Leader
        }));
    h.advance(200);
    assert!(h.events_of(stuck).contains(&Event::Unkillable {
        session: "stuck".into(),
        gen: stuck
    }));

    let Ok(Response::List(list)) = h.cmd(Command::List) else {
        panic!("list failed")
    };
    let states: Vec<_> = list.iter().map(|s| (s.name.to_string(), s.state)).collect();
    assert_eq!(
        states,
        vec![
            ("flaky".to_string(), SessionState::Failed),
            ("healthy".to_string(), SessionState::Running),
            ("stuck".to_string(), SessionState::Stopping)
        ]
    );
    let stuck_gen = &list[2].generations[0];
    assert_eq!(
        stuck_gen.lifecycle,
        Lifecycle::Stopping(StopStage::Unkillable)
    );
    for name in ["flaky", "healthy", "stuck"] {
        assert!(matches!(
            h.cmd(Command::Get {
                session: name.into()
            }),
            Ok(Response::Session(_))
        ));
    }
    h.settle();
}
