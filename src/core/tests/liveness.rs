//! Liveness: probes begin once readiness is decided, a success resets the count, enough
//! failures in a row stop the generation as unhealthy and its restart policy brings it
//! back; stale and late results change nothing.

use std::time::Duration;

use super::harness::{has, spec, Harness};
use crate::core::{
    Action, Event, ExitStatus, Input, LiveCheck, OnBusy, ReadyCheck, ReadyHow, ReadySignal,
    Restart, Scope, Spec,
};

fn live(failures: u32) -> Spec {
    let mut s = spec();
    s.live = Some(LiveCheck {
        how: ReadyHow::Command(vec![b"check".to_vec()]),
        interval: Duration::from_millis(100),
        failures,
    });
    s
}

fn live_probe(actions: &[Action], gen: u64) -> Option<u64> {
    actions.iter().find_map(|a| match a {
        Action::Probe {
            gen: g,
            probe,
            live: true,
        } if *g == gen => Some(*probe),
        _ => None,
    })
}

fn result(h: &mut Harness, gen: u64, probe: u64, ok: bool) -> Vec<Action> {
    h.input(Input::Liveness { gen, probe, ok })
}

fn stopped(actions: &[Action], gen: u64) -> bool {
    has(
        actions,
        |a| matches!(a, Action::Signal { gen: g, scope: Scope::Leader, .. } if *g == gen),
    )
}

#[test]
fn failures_in_a_row_stop_it_as_unhealthy_and_the_restart_policy_brings_it_back() {
    let mut h = Harness::new();
    let mut s = live(2);
    s.restart.mode = Restart::OnFailure;
    s.restart.initial = Duration::from_millis(10);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    assert!(
        live_probe(&h.advance(99), gen).is_none(),
        "one interval after the spawn"
    );
    let p0 = live_probe(&h.advance(1), gen).expect("first probe");
    result(&mut h, gen, p0, false);
    let p1 = live_probe(&h.advance(100), gen).expect("second probe");
    // A success resets the count.
    result(&mut h, gen, p1, true);
    let p2 = live_probe(&h.advance(100), gen).expect("third probe");
    assert!(!stopped(&result(&mut h, gen, p2, false), gen));
    let p3 = live_probe(&h.advance(100), gen).expect("fourth probe");
    let actions = result(&mut h, gen, p3, false);
    assert!(stopped(&actions, gen), "two failures in a row: {actions:?}");
    assert!(h.events_of(gen).contains(&Event::Unhealthy {
        session: "a".into(),
        gen,
        failures: 2
    }));
    // No probe while it stops; its end is a failure, so the policy restarts it.
    assert!(live_probe(&h.advance(50), gen).is_none());
    h.exit(gen, ExitStatus::Signal(15));
    h.eof(gen);
    h.group_empty(gen);
    h.advance(10);
    let next = h.get("a").current.expect("restarted");
    assert_ne!(next, gen);
    h.settle();
}

#[test]
fn probes_begin_once_readiness_is_decided_and_stale_results_are_ignored() {
    let mut h = Harness::new();
    let mut s = live(1);
    s.ready = Some(ReadyCheck::new(ReadyHow::Fd(3)));
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    assert!(
        live_probe(&h.advance(1_000), gen).is_none(),
        "not ready yet"
    );
    h.input(Input::Readiness {
        gen,
        signal: ReadySignal::Ready,
    });
    let p0 = live_probe(&h.advance(100), gen).expect("probe after ready");
    // An answer to another probe number changes nothing.
    assert!(result(&mut h, gen, p0 + 7, false).is_empty());
    // A probe outliving its interval is given up and counts as a failure.
    let actions = h.advance(100);
    assert!(has(&actions, |a| matches!(
        a,
        Action::CancelProbe { live: true, .. }
    )));
    assert!(
        stopped(&actions, gen),
        "one failure is enough here: {actions:?}"
    );
    // Its late answer is ignored.
    assert!(!stopped(&result(&mut h, gen, p0, false), gen));
    h.settle();
}

#[test]
fn a_check_that_is_not_a_probe_is_refused() {
    let mut h = Harness::new();
    let mut s = live(3);
    s.live.as_mut().unwrap().how = ReadyHow::Output(b"ok".to_vec());
    let e = h.spawn_with("a", s, OnBusy::Replace).unwrap_err();
    assert!(e.message.starts_with("live"), "{}", e.message);
    let mut s = live(0);
    s.live.as_mut().unwrap().failures = 0;
    let e = h.spawn_with("a", s, OnBusy::Replace).unwrap_err();
    assert!(e.message.contains("live.failures"), "{}", e.message);
}

/// A daemon started again after a crash, with generation `gen` of session `a` (spawned
/// from `spec` by the one before) taken back, its identity `verified` or not.
fn taken_back(spec: Spec, verified: bool) -> (Harness, u64) {
    let mut h = Harness::new();
    let gen = h.spawn_with("a", spec, OnBusy::Replace).unwrap();
    h.started(gen);
    let (mut n, problems) = h.reborn(h.records(), 5);
    assert_eq!(problems, vec![]);
    assert!(n.adopt_as(gen, "a", verified));
    n.resume();
    (n, gen)
}

#[test]
fn a_generation_taken_back_after_a_crash_is_still_probed() {
    let (mut n, gen) = taken_back(live(2), true);
    let p0 =
        live_probe(&n.advance(100), gen).expect("a probe one interval after it was taken back");
    result(&mut n, gen, p0, false);
    let p1 = live_probe(&n.advance(100), gen).expect("a second probe");
    let actions = result(&mut n, gen, p1, false);
    assert!(stopped(&actions, gen), "two failures in a row: {actions:?}");
}

#[test]
fn an_unverified_generation_is_probed_only_once_verified() {
    let (mut n, gen) = taken_back(live(2), false);
    assert!(
        live_probe(&n.advance(500), gen).is_none(),
        "never probed unverified"
    );
    n.input(Input::Verified { gen });
    assert!(
        live_probe(&n.advance(100), gen).is_some(),
        "probed once verified"
    );
}

#[test]
fn a_probe_command_that_needed_a_lookup_is_not_run_after_a_crash() {
    let mut s = live(2);
    s.run_as.user = Some("www-data".into());
    let (mut n, gen) = taken_back(s, true);
    // Whom it runs as died with the old daemon: no probe, and certainly no stop for it.
    let actions = n.advance(1000);
    assert!(live_probe(&actions, gen).is_none());
    assert!(!stopped(&actions, gen));
}
