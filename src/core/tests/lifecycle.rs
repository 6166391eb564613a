//! One generation's lifecycle: stop escalation, group cleanup, drain, causes and codes.

use super::harness::{has, spec, Harness};
use crate::core::OutputAt;
use crate::core::{
    Action, Config, Event, ExitCause, ExitStatus, Input, Lifecycle, OnBusy, OnExit, Scope,
    SessionState, SpawnError, SpawnErrorKind, StopStage, Stream, Time,
};

fn exited(h: &Harness, gen: u64) -> Event {
    let mut all: Vec<Event> = h
        .events_of(gen)
        .into_iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect();
    assert_eq!(all.len(), 1, "one exit for {gen}");
    all.remove(0)
}

#[test]
fn stop_escalates_term_kill_unkillable() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    let a = h.stop("s", Some(g));
    assert!(a.is_ok());
    assert!(has(&h.log, |a| *a
        == Action::Signal {
            gen: g,
            signal: 15,
            scope: Scope::Leader
        }));
    assert_eq!(h.core.next_deadline(), Some(Time::from_millis(100)));
    assert!(
        !has(&h.advance(99), |a| matches!(a, Action::Signal { .. })),
        "no KILL before grace"
    );
    assert!(h.advance(1).contains(&Action::Signal {
        gen: g,
        signal: 9,
        scope: Scope::Leader
    }));
    assert_eq!(
        h.get("s").generations[0].lifecycle,
        Lifecycle::Stopping(StopStage::Kill)
    );
    let a = h.advance(200);
    assert!(a.contains(&Action::Emit(Event::Unkillable {
        session: "s".into(),
        gen: g
    })));
    assert_eq!(
        h.core.next_deadline(),
        None,
        "an unkillable generation is watched, not polled"
    );
    h.exit(g, ExitStatus::Signal(9));
    h.eof(g);
    assert!(matches!(
        exited(&h, g),
        Event::Exited {
            code: Some(137),
            signal: Some(9),
            cause: ExitCause::Killed,
            ..
        }
    ));
    h.settle();
}

#[test]
fn leader_exit_terms_the_group_then_kills_then_reaps() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    let a = h.exit(g, ExitStatus::Code(0));
    assert!(a.contains(&Action::Signal {
        gen: g,
        signal: 15,
        scope: Scope::Tree
    }));
    let a = h.eof(g);
    assert!(has(&a, |a| matches!(
        a,
        Action::Emit(Event::Exited {
            cause: ExitCause::Exited,
            code: Some(0),
            ..
        })
    )));
    assert!(
        !has(&a, |a| matches!(a, Action::Reap { .. })),
        "the group still pins the leader"
    );
    let a = h.advance(200);
    assert!(a.contains(&Action::Signal {
        gen: g,
        signal: 9,
        scope: Scope::Tree,
    }));
    assert!(
        !has(&a, |a| matches!(a, Action::Reap { .. })),
        "the group is signalled only while the leader is unreaped, and it is reaped only \
         once the group is seen empty"
    );
    let a = h.group_empty(g);
    assert!(a.contains(&Action::Reap { gen: g }));
    assert!(a.contains(&Action::Release { gen: g }));
    assert_eq!(h.core.generation_count(), 0);
    h.settle();
}

/// A member of the tree stuck in the kernel (the leader gone, the rest sent SIGKILL)
/// makes the generation `unkillable` after `kill_grace`, as a stuck leader would: still
/// listed, never reaped nor released until the tree is seen empty.
#[test]
fn a_member_that_survives_sigkill_is_unkillable_and_keeps_the_generation() {
    let mut h = Harness::new();
    let mut s = spec();
    s.kill_grace = std::time::Duration::from_millis(1_000);
    let g = h.spawn_with("s", s, OnBusy::Replace).unwrap();
    h.started(g);
    h.exit(g, ExitStatus::Code(0));
    h.eof(g);
    assert!(matches!(exited(&h, g), Event::Exited { .. }));
    let a = h.advance(1_000);
    assert!(a.contains(&Action::Signal {
        gen: g,
        signal: 9,
        scope: Scope::Tree,
    }));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Emit(Event::Unkillable { .. })
    )));
    let a = h.advance(999);
    assert!(!has(&a, |a| matches!(
        a,
        Action::Emit(Event::Unkillable { .. })
    )));
    let a = h.advance(1);
    assert!(a.contains(&Action::Emit(Event::Unkillable {
        session: "s".into(),
        gen: g,
    })));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Reap { .. } | Action::Release { .. }
    )));
    let listed = &h.core.list()[0].generations;
    assert_eq!(listed.len(), 1, "still listed");
    assert_eq!(listed[0].lifecycle, Lifecycle::TreeUnkillable);
    assert_eq!(listed[0].lifecycle.as_str(), "unkillable");
    // Nothing more is sent to it, however long it takes.
    let a = h.advance(3_600_000);
    assert!(a.is_empty(), "{a:?}");
    let a = h.group_empty(g);
    assert!(a.contains(&Action::Reap { gen: g }));
    assert!(a.contains(&Action::Release { gen: g }));
    assert_eq!(h.core.generation_count(), 0);
    h.settle();
}

#[test]
fn leave_reaps_right_after_the_report() {
    let mut h = Harness::new();
    let mut s = spec();
    s.on_exit = OnExit::Leave;
    let g = h.spawn_with("s", s, OnBusy::Replace).unwrap();
    h.started(g);
    let a = h.exit(g, ExitStatus::Code(2));
    assert!(!has(&a, |a| matches!(a, Action::Signal { .. })));
    let a = h.eof(g);
    let report = a
        .iter()
        .position(|x| matches!(x, Action::Emit(Event::Exited { .. })))
        .unwrap();
    let reap = a
        .iter()
        .position(|x| *x == Action::Reap { gen: g })
        .unwrap();
    assert!(report < reap);
    assert_eq!(
        h.get("s").state,
        SessionState::Failed,
        "code 2 without restart is a failure"
    );
    h.settle();
}

#[test]
fn drain_deadline_reports_truncated_and_discards_late_output() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.output(g, 10);
    h.input(Input::Eof {
        gen: g,
        stream: Stream::Stdout,
    });
    h.exit(g, ExitStatus::Code(0));
    assert!(exited_events(&h, g).is_empty(), "stderr still open");
    let a = h.advance(50);
    assert!(has(&a, |a| matches!(
        a,
        Action::Emit(Event::Exited {
            truncated: true,
            ..
        })
    )));
    let close = a.iter().position(|x| *x == Action::CloseOutput { gen: g });
    let exit = a
        .iter()
        .position(|x| matches!(x, Action::Emit(Event::Exited { .. })));
    assert!(
        close < exit,
        "the streams are closed before the exit is reported"
    );
    let late = h.output_on(g, Stream::Stderr, 7);
    assert_eq!(late, None, "nothing is delivered after the terminal event");
    assert_eq!(h.get("s").generations[0].discarded, 7);
    h.settle();
}

fn exited_events(h: &Harness, gen: u64) -> Vec<Event> {
    h.events_of(gen)
        .into_iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect()
}

#[test]
fn offsets_are_per_generation_and_stream() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.output(g, 3);
    h.output_on(g, Stream::Stderr, 4);
    let at = h.output(g, 5);
    assert_eq!(
        at,
        Some(OutputAt {
            session: "s".into(),
            offset: 3,
        })
    );
    assert_eq!(h.output_on(g, Stream::Pty, 1), None, "no pty on pipes");
    assert_eq!(
        h.get("s").generations[0].offsets,
        vec![(Stream::Stdout, 8), (Stream::Stderr, 4)]
    );
    h.settle();
}

#[test]
fn causes_and_codes() {
    let cases = [
        (
            false,
            ExitStatus::Code(0),
            ExitCause::Exited,
            0,
            SessionState::Exited,
        ),
        (
            false,
            ExitStatus::Code(1),
            ExitCause::Exited,
            1,
            SessionState::Failed,
        ),
        (
            false,
            ExitStatus::Signal(11),
            ExitCause::Signaled,
            139,
            SessionState::Failed,
        ),
        (
            true,
            ExitStatus::Signal(15),
            ExitCause::Stopped,
            143,
            SessionState::Stopped,
        ),
        (
            true,
            ExitStatus::Code(0),
            ExitCause::Stopped,
            0,
            SessionState::Stopped,
        ),
    ];
    for (stop, status, cause, code, state) in cases {
        let mut h = Harness::new();
        let g = h.spawn("s");
        h.started(g);
        if stop {
            h.stop("s", None).unwrap();
        }
        h.exit(g, status);
        h.eof(g);
        match exited(&h, g) {
            Event::Exited {
                cause: c, code: k, ..
            } => assert_eq!((c, k), (cause, Some(code)), "{status:?}"),
            _ => unreachable!(),
        }
        assert_eq!(h.get("s").state, state);
        h.settle();
    }
}

#[test]
fn spawn_failure_is_terminal_and_never_reaped() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    let err = SpawnError::new(SpawnErrorKind::NotFound, 2);
    let a = h.input(Input::SpawnResult {
        gen: g,
        result: Err(err.clone()),
    });
    assert!(a.contains(&Action::Emit(Event::SpawnFailed {
        session: "s".into(),
        gen: g,
        error: err
    })));
    assert!(a.contains(&Action::Release { gen: g }));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Reap { .. } | Action::Signal { .. }
    )));
    assert_eq!(h.get("s").state, SessionState::Failed);
    // A duplicate or late report changes nothing.
    assert!(h
        .input(Input::SpawnResult {
            gen: g,
            result: Ok(crate::core::Started::in_session(5))
        })
        .is_empty());
    h.settle();
}

#[test]
fn stop_while_spawning_runs_once_spawned() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.stop("s", None).unwrap();
    assert_eq!(h.get("s").state, SessionState::Stopping);
    let a = h.started(g);
    assert!(a.contains(&Action::Signal {
        gen: g,
        signal: 15,
        scope: Scope::Leader
    }));
    h.settle();
}

#[test]
fn replace_of_pending_cancels_it() {
    let mut h = Harness::new();
    let g1 = h.spawn("s");
    h.started(g1);
    let g2 = h.spawn("s");
    let g3 = h.spawn("s");
    let cancelled =
        SpawnError::new(SpawnErrorKind::Cancelled, 0).with_message("replaced before it started");
    assert!(h.events_of(g2).contains(&Event::SpawnFailed {
        session: "s".into(),
        gen: g2,
        error: cancelled
    }));
    assert_eq!(h.get("s").current, Some(g3));
    h.settle();
}

#[test]
fn generations_start_at_the_given_number_and_only_grow() {
    let mut h = Harness::with(Config::default(), 41);
    assert_eq!(h.core.next_generation(), 41);
    assert_eq!(h.spawn("a"), 41);
    assert_eq!(h.spawn("b"), 42);
    assert_eq!(h.core.next_generation(), 43);
    h.settle();
    assert_eq!(h.spawn("a"), 43);
    h.settle();
}

#[test]
fn spare_timeouts_and_backward_clocks_are_harmless() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.stop("s", None).unwrap();
    h.now = Time::from_millis(1_000);
    assert!(!h.check.timeout(&mut h.core, h.now).is_empty(), "KILL due");
    assert!(h.check.timeout(&mut h.core, h.now).is_empty(), "spare call");
    assert!(
        h.check
            .timeout(&mut h.core, Time::from_millis(10))
            .is_empty(),
        "earlier now is clamped"
    );
    h.settle();
}

#[test]
fn state_events_announce_each_change_once() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.exit(g, ExitStatus::Code(0));
    h.eof(g);
    let states: Vec<SessionState> = h
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::State { state, .. } => Some(state),
            _ => None,
        })
        .collect();
    use SessionState::*;
    assert_eq!(states, vec![Starting, Running, Exiting, Exited]);
    h.settle();
}

#[test]
fn lost_generations_are_reported_once_and_never_signalled_again() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.stop("s", None).unwrap();
    let a = h.input(Input::Lost { gen: g });
    assert!(has(&a, |a| matches!(
        a,
        Action::Emit(Event::Exited {
            code: None,
            signal: None,
            cause: ExitCause::Lost,
            truncated: true,
            ..
        })
    )));
    assert!(a.contains(&Action::Release { gen: g }));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Reap { .. } | Action::Signal { .. }
    )));
    assert!(
        h.advance(10_000)
            .iter()
            .all(|a| !matches!(a, Action::Signal { .. })),
        "no escalation"
    );
    assert_eq!(h.core.generation_count(), 0);

    // Lost after the exit was seen: reported with the real status, then forgotten.
    let g = h.spawn("s");
    h.started(g);
    h.exit(g, ExitStatus::Code(4));
    let a = h.input(Input::Lost { gen: g });
    assert!(has(&a, |a| matches!(
        a,
        Action::Emit(Event::Exited {
            code: Some(4),
            cause: ExitCause::Exited,
            ..
        })
    )));
    assert!(!has(&a, |a| matches!(a, Action::Reap { .. })));
    h.settle();
}

/// A stop that arrives while a spawn's exec result is outstanding waits for it as long as
/// the stop's grace, then asks the driver to give the start up; its answer decides:
/// cancelled before exec, or a running process that is then stopped like any other.
#[test]
fn a_stop_while_starting_cancels_the_start_or_stops_what_started() {
    for exec_already_done in [false, true] {
        let mut h = Harness::new();
        let g = h.spawn("s");
        let a = h.stop("s", None).unwrap();
        assert_eq!(a, crate::core::Response::Gen(g));
        assert!(!has(&h.log, |a| *a == Action::CancelSpawn { gen: g }));
        h.advance(99);
        assert!(!has(&h.log, |a| *a == Action::CancelSpawn { gen: g }));
        let a = h.advance(1);
        assert!(has(&a, |a| *a == Action::CancelSpawn { gen: g }), "{a:?}");
        if exec_already_done {
            let a = h.started(g);
            assert!(has(&a, |a| matches!(
                a,
                Action::Signal { gen, signal: 15, .. } if *gen == g
            )));
        } else {
            let a = h.input(Input::SpawnResult {
                gen: g,
                result: Err(SpawnError::new(SpawnErrorKind::Cancelled, 0)),
            });
            assert!(has(&a, |a| matches!(
                a,
                Action::Emit(Event::SpawnFailed { error, .. }) if error.kind == SpawnErrorKind::Cancelled
            )));
            assert_eq!(h.get("s").state, SessionState::Stopped);
        }
        // Nothing more is asked of the driver.
        let before = h.log.len();
        h.stop("s", None).unwrap();
        h.advance(1000);
        assert!(!h.log[before..]
            .iter()
            .any(|a| matches!(a, Action::CancelSpawn { .. })));
        h.settle();
    }
}
