//! Readiness: each kind's signal, the timeout, the probe schedule, and every order of a
//! readiness input against the generation's end or its supersession.

use std::time::Duration;

use super::harness::{has, spec, Harness};
use crate::core::{
    Action, Event, ExitStatus, Input, OnBusy, ReadyCheck, ReadyHow, ReadySignal, ReadyState, Spec,
    WaitFor,
};

fn with_ready(how: ReadyHow) -> Spec {
    let mut s = spec();
    s.ready = Some(ReadyCheck {
        how,
        timeout: Duration::from_millis(1_000),
        interval: Duration::from_millis(100),
    });
    s
}

fn ready_state(h: &Harness, gen: u64) -> ReadyState {
    let snap = h.core.get(&h.core.gens[&gen].session).expect("session");
    snap.generations
        .into_iter()
        .find(|g| g.gen == gen)
        .expect("listed")
        .ready
}

fn signal(h: &mut Harness, gen: u64, signal: ReadySignal) -> Vec<Action> {
    h.input(Input::Readiness { gen, signal })
}

fn probe_asked(actions: &[Action], gen: u64) -> Option<u64> {
    actions.iter().find_map(|a| match a {
        Action::Probe { gen: g, probe, .. } if *g == gen => Some(*probe),
        _ => None,
    })
}

fn ready_events(h: &Harness, gen: u64) -> Vec<Event> {
    h.events_of(gen)
        .into_iter()
        .filter(|e| matches!(e, Event::Ready { .. } | Event::ReadyFailed { .. }))
        .collect()
}

#[test]
fn without_a_check_a_generation_is_ready_once_spawned_and_nothing_is_announced() {
    let mut h = Harness::new();
    let gen = h.spawn("a");
    assert_eq!(ready_state(&h, gen), ReadyState::Starting);
    h.started(gen);
    assert_eq!(ready_state(&h, gen), ReadyState::Ready);
    assert!(ready_events(&h, gen).is_empty());
    let answer = h.core.wait_ready("a", None).unwrap();
    assert!(matches!(answer, WaitFor::Ended(Event::Ready { gen: g, .. }) if g == gen));
}

#[test]
fn a_signal_makes_it_ready_once_and_settles_the_watch() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with("a", with_ready(ReadyHow::Fd(3)), OnBusy::Replace)
        .unwrap();
    h.started(gen);
    assert_eq!(ready_state(&h, gen), ReadyState::Starting);
    assert!(matches!(h.core.wait_ready("a", None), Ok(WaitFor::Live(g)) if g == gen));
    let actions = signal(&mut h, gen, ReadySignal::Ready);
    assert!(has(
        &actions,
        |a| matches!(a, Action::ReadySettled { gen: g } if *g == gen)
    ));
    assert_eq!(ready_state(&h, gen), ReadyState::Ready);
    // A second signal (or a late failure) changes nothing.
    let again = signal(&mut h, gen, ReadySignal::Failed("closed".into()));
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(ready_events(&h, gen).len(), 1);
    h.settle();
}

#[test]
fn a_closed_notification_fd_fails_readiness_and_leaves_the_process_running() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with("a", with_ready(ReadyHow::Fd(3)), OnBusy::Replace)
        .unwrap();
    h.started(gen);
    let why = "notification fd closed without a newline";
    signal(&mut h, gen, ReadySignal::Failed(why.into()));
    assert_eq!(ready_state(&h, gen), ReadyState::Failed(why.into()));
    assert!(!has(h.all_actions(), |a| matches!(
        a,
        Action::Signal { .. }
    )));
    assert!(h.core.awaits_exit(gen), "still running");
    h.settle();
}

#[test]
fn the_timeout_fails_readiness_naming_it() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with(
            "a",
            with_ready(ReadyHow::Output(b"up".to_vec())),
            OnBusy::Replace,
        )
        .unwrap();
    h.started(gen);
    assert!(ready_events(&h, gen).is_empty());
    h.advance(999);
    assert!(ready_events(&h, gen).is_empty());
    h.advance(1);
    assert_eq!(
        ready_events(&h, gen),
        vec![Event::ReadyFailed {
            session: "a".into(),
            gen,
            reason: "timed out after 1s".into()
        }]
    );
    // A match after the timeout is too late.
    assert!(signal(&mut h, gen, ReadySignal::Ready).is_empty());
    h.settle();
}

#[test]
fn probes_run_every_interval_one_at_a_time_and_a_stale_answer_is_ignored() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with(
            "a",
            with_ready(ReadyHow::Tcp("127.0.0.1:1".into())),
            OnBusy::Replace,
        )
        .unwrap();
    let started = h.started(gen);
    // The first probe is due at once (at the spawn): the next timeout call asks for it.
    let first = probe_asked(&started, gen).or_else(|| probe_asked(&h.advance(0), gen));
    let first = first.expect("first probe");
    assert!(probe_asked(&h.advance(50), gen).is_none(), "one at a time");
    signal(
        &mut h,
        gen,
        ReadySignal::Probed {
            probe: first,
            ok: false,
        },
    );
    // The next one is one interval after the first began.
    assert!(probe_asked(&h.advance(40), gen).is_none());
    let second = probe_asked(&h.advance(10), gen).expect("second probe");
    assert_ne!(first, second);
    // The first probe's late success is not this probe's answer.
    assert!(signal(
        &mut h,
        gen,
        ReadySignal::Probed {
            probe: first,
            ok: true
        }
    )
    .is_empty());
    assert_eq!(ready_state(&h, gen), ReadyState::Starting);
    // A probe outliving its interval is given up and the next one asked.
    let actions = h.advance(100);
    assert!(has(
        &actions,
        |a| matches!(a, Action::CancelProbe { probe, .. } if *probe == second)
    ));
    let third = probe_asked(&actions, gen).expect("third probe");
    signal(
        &mut h,
        gen,
        ReadySignal::Probed {
            probe: third,
            ok: true,
        },
    );
    assert_eq!(ready_state(&h, gen), ReadyState::Ready);
    assert!(
        probe_asked(&h.advance(5_000), gen).is_none(),
        "no probe once ready"
    );
    h.settle();
}

#[test]
fn an_exit_before_readiness_fails_it_and_a_later_signal_is_ignored() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with("a", with_ready(ReadyHow::Fd(4)), OnBusy::Replace)
        .unwrap();
    h.started(gen);
    h.exit(gen, ExitStatus::Code(1));
    assert_eq!(
        ready_events(&h, gen),
        vec![Event::ReadyFailed {
            session: "a".into(),
            gen,
            reason: "exited before it was ready".into()
        }]
    );
    signal(&mut h, gen, ReadySignal::Ready);
    h.eof(gen);
    h.group_empty(gen);
    // Gone: its readiness inputs are ignored, and a wait answers with its end.
    signal(&mut h, gen, ReadySignal::Ready);
    assert!(matches!(
        h.core.wait_ready("a", Some(gen)),
        Ok(WaitFor::Ended(Event::Exited { .. }))
    ));
    assert_eq!(ready_events(&h, gen).len(), 1);
    h.settle();
}

#[test]
fn readiness_of_a_superseded_generation_never_touches_its_successor() {
    let mut h = Harness::new();
    let old = h
        .spawn_with("a", with_ready(ReadyHow::Fd(3)), OnBusy::Replace)
        .unwrap();
    h.started(old);
    let new = h
        .spawn_with("a", with_ready(ReadyHow::Fd(3)), OnBusy::Overlap)
        .unwrap();
    h.started(new);
    // The superseded one becomes ready: only it does.
    signal(&mut h, old, ReadySignal::Ready);
    assert_eq!(ready_state(&h, old), ReadyState::Ready);
    assert_eq!(ready_state(&h, new), ReadyState::Starting);
    assert!(matches!(h.core.wait_ready("a", None), Ok(WaitFor::Live(g)) if g == new));
    h.settle();
}

#[test]
fn a_check_is_validated_naming_its_field() {
    let mut h = Harness::new();
    for (how, field) in [
        (ReadyHow::Fd(2), "ready.fd"),
        (ReadyHow::Output(Vec::new()), "ready.output"),
        (ReadyHow::Tcp("db.example:5432".into()), "ready.tcp"),
        (ReadyHow::Tcp("127.0.0.1:0".into()), "ready.tcp"),
        (ReadyHow::Unix(Vec::new()), "ready.unix"),
        (ReadyHow::Command(Vec::new()), "ready.command"),
    ] {
        let e = h
            .spawn_with("a", with_ready(how), OnBusy::Replace)
            .unwrap_err();
        assert!(e.message.starts_with(field), "{}", e.message);
    }
    assert!(!h.core.has_session("a"), "a refused spawn changes nothing");
}

#[test]
fn durations_in_reasons_read_as_people_write_them() {
    use crate::core::readiness::human;
    let ms = Duration::from_millis;
    assert_eq!(human(ms(60_000)), "60s");
    assert_eq!(human(ms(1_500)), "1.5s");
    assert_eq!(human(ms(1_250)), "1.25s");
    assert_eq!(human(ms(1_001)), "1.001s");
    assert_eq!(human(ms(250)), "250ms");
}

/// A generation that ends before it is ready: subscribers get `ready_failed`, but a `wait`
/// for its readiness is answered with its terminal event (how it ended), not the failure
/// its end caused — whether the wait came before the end is reported or after.
#[test]
fn a_wait_for_readiness_of_one_that_ends_first_is_answered_with_its_end() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with(
            "a",
            with_ready(ReadyHow::Output(b"READY".to_vec())),
            OnBusy::Replace,
        )
        .unwrap();
    h.started(gen);
    h.exit(gen, ExitStatus::Code(4));
    let failed = ready_events(&h, gen);
    assert!(
        matches!(&failed[..], [Event::ReadyFailed { .. }]),
        "{failed:?}"
    );
    assert!(!failed[0].settles_ready_wait());
    // Still draining: the wait is for its end.
    assert!(matches!(h.core.wait_ready("a", Some(gen)), Ok(WaitFor::Live(g)) if g == gen));
    h.eof(gen);
    let ended = h.core.wait_ready("a", Some(gen));
    assert!(
        matches!(
            ended,
            Ok(WaitFor::Ended(Event::Exited { code: Some(4), .. }))
        ),
        "{ended:?}"
    );
    h.settle();
}

/// A readiness that failed while its leader ran stays the answer after the leader ends.
#[test]
fn a_readiness_failed_before_the_end_answers_a_wait_with_the_failure() {
    let mut h = Harness::new();
    let gen = h
        .spawn_with("a", with_ready(ReadyHow::Fd(3)), OnBusy::Replace)
        .unwrap();
    h.started(gen);
    h.advance(1_000);
    h.exit(gen, ExitStatus::Code(0));
    let answer = h.core.wait_ready("a", Some(gen));
    assert!(
        matches!(&answer, Ok(WaitFor::Ended(e @ Event::ReadyFailed { reason, .. }))
            if &**reason == "timed out after 1s" && e.settles_ready_wait()),
        "{answer:?}"
    );
    h.settle();
}
