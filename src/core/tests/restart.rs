//! Restart policy: backoff arithmetic, limits, reset, and stops cancelling restarts.

use std::time::Duration;

use super::harness::{spec, Harness};
use crate::core::restart::{backoff, decide, Decision, Rest};
use crate::core::{
    Command, ExitStatus, OnBusy, Response, Restart, RestartPolicy, SessionState, Spec,
};

fn policy(mode: Restart) -> RestartPolicy {
    RestartPolicy {
        mode,
        initial: Duration::from_millis(100),
        max: Duration::from_millis(1000),
        reset_after: Duration::from_secs(10),
        max_restarts: Some(3),
    }
}

#[test]
fn backoff_doubles_up_to_max() {
    let p = policy(Restart::Always);
    let got: Vec<u64> = (0..6).map(|n| backoff(&p, n).as_millis() as u64).collect();
    assert_eq!(got, vec![100, 200, 400, 800, 1000, 1000]);
    assert_eq!(backoff(&p, u32::MAX), Duration::from_millis(1000));
}

#[test]
fn a_backoff_starting_above_its_cap_is_refused_naming_the_field() {
    let mut h = Harness::new();
    let mut s = spec();
    s.restart = RestartPolicy {
        initial: Duration::from_secs(2),
        ..policy(Restart::Always)
    };
    let e = h.spawn_with("s", s, OnBusy::Replace).unwrap_err();
    assert_eq!(
        e.message,
        "restart.initial: above restart.max (which is 60s unless given)"
    );
    h.settle();
}

#[test]
fn decisions() {
    use crate::core::generation::Ended;
    use crate::core::ExitCause;
    let ok = Ended::Exited {
        status: ExitStatus::Code(0),
        cause: ExitCause::Exited,
        uptime: Duration::ZERO,
    };
    let bad = Ended::Exited {
        status: ExitStatus::Code(1),
        cause: ExitCause::Exited,
        uptime: Duration::ZERO,
    };
    let long = Ended::Exited {
        status: ExitStatus::Code(1),
        cause: ExitCause::Exited,
        uptime: Duration::from_secs(60),
    };
    assert_eq!(
        decide(&policy(Restart::Never), 0, &bad),
        Decision::Rest(Rest::Failed)
    );
    assert_eq!(
        decide(&policy(Restart::Never), 0, &ok),
        Decision::Rest(Rest::Exited)
    );
    assert_eq!(
        decide(&policy(Restart::OnFailure), 0, &ok),
        Decision::Rest(Rest::Exited)
    );
    // The count so far: the restart decided is counted when it happens.
    let first = Decision::Restart {
        delay: Duration::from_millis(100),
        restarts: 0,
    };
    assert_eq!(decide(&policy(Restart::OnFailure), 0, &bad), first);
    assert_eq!(
        decide(&policy(Restart::Always), 3, &ok),
        Decision::Rest(Rest::Failed)
    );
    assert_eq!(
        decide(&policy(Restart::Always), 3, &long),
        first,
        "a long run resets the count"
    );
}

fn always() -> Spec {
    let mut s = spec();
    s.restart = policy(Restart::OnFailure);
    s
}

/// Runs the current generation to a failing exit.
fn crash(h: &mut Harness) -> u64 {
    let g = h.get("s").current.expect("current");
    h.started(g);
    h.exit(g, ExitStatus::Code(1));
    h.eof(g);
    h.group_empty(g);
    g
}

#[test]
fn restarts_back_off_then_fail() {
    let mut h = Harness::new();
    h.spawn_with("s", always(), OnBusy::Replace).unwrap();
    for (n, delay) in [(1, 100), (2, 200), (3, 400)] {
        let g = crash(&mut h);
        let s = h.get("s");
        assert_eq!((s.state, s.restarts), (SessionState::Backoff, n - 1));
        h.advance(delay - 1);
        assert_eq!(h.get("s").current, None, "not before the backoff");
        assert_eq!(h.get("s").restarts, n - 1, "not counted before it happens");
        h.advance(1);
        assert_eq!(h.get("s").current, Some(g + 1));
        assert_eq!(h.get("s").restarts, n, "counted as it happens");
    }
    crash(&mut h);
    let s = h.get("s");
    assert_eq!(
        (s.state, s.restart_at, s.restarts),
        (SessionState::Failed, None, 3)
    );
    // `restart` clears failed and the count.
    let Ok(Response::Gen(g)) = h.cmd(Command::Restart {
        session: "s".into(),
        if_gen: None,
    }) else {
        panic!()
    };
    assert_eq!(
        (h.get("s").state, h.get("s").restarts),
        (SessionState::Starting, 0)
    );
    h.started(g);
    h.settle();
}

#[test]
fn stop_and_remove_cancel_a_pending_restart() {
    for remove in [false, true] {
        let mut h = Harness::new();
        h.spawn_with("s", always(), OnBusy::Replace).unwrap();
        crash(&mut h);
        assert_eq!(h.get("s").state, SessionState::Backoff);
        let next = h.core.next_generation();
        if remove {
            h.cmd(Command::Remove {
                session: "s".into(),
            })
            .unwrap();
            assert!(h.core.get("s").is_none());
        } else {
            assert_eq!(h.stop("s", None), Ok(Response::Ok));
            assert_eq!(h.get("s").state, SessionState::Stopped);
        }
        h.advance(60_000);
        assert_eq!(
            h.core.next_generation(),
            next,
            "no restart after stop/remove"
        );
        h.settle();
    }
}

/// A start that failed for want of descriptors, processes or memory is not the session's
/// failure: its policy tries again after its longest delay, uncounted, however often,
/// and an ordinary failure afterwards counts from where the count was.
#[test]
fn a_start_short_of_resources_is_retried_without_counting() {
    use crate::core::{Input, SpawnError, SpawnErrorKind};
    let mut h = Harness::new();
    h.spawn_with("s", always(), OnBusy::Replace).unwrap();
    crash(&mut h);
    h.advance(100);
    for round in 0..10 {
        let g = h.get("s").current.expect("restarted");
        let short = SpawnError::new(SpawnErrorKind::Other, 24).as_shortage();
        h.input(Input::SpawnResult {
            gen: g,
            result: Err(short),
        });
        let s = h.get("s");
        assert_eq!(
            (s.state, s.restarts),
            (SessionState::Backoff, 1),
            "uncounted, round {round}"
        );
        h.advance(999);
        assert_eq!(h.get("s").current, None, "the policy's longest delay first");
        h.advance(1);
    }
    // The same errno without the mark is an ordinary failure.
    let g = h.get("s").current.expect("restarted");
    h.input(Input::SpawnResult {
        gen: g,
        result: Err(SpawnError::new(SpawnErrorKind::Other, 24)),
    });
    assert_eq!(h.get("s").restarts, 1, "counted once it happens");
    h.advance(200);
    assert!(h.get("s").current.is_some_and(|c| c > g));
    assert_eq!(h.get("s").restarts, 2);
    h.settle();
}

/// `restarts` counts restarts that happened: a stop in the backoff cancels the restart, and
/// the count stays what it was (only one process ever ran: no restart).
#[test]
fn a_restart_cancelled_in_its_backoff_is_not_counted() {
    for after_a_restart in [false, true] {
        let mut h = Harness::new();
        h.spawn_with("s", always(), OnBusy::Replace).unwrap();
        crash(&mut h);
        assert_eq!(
            (h.get("s").state, h.get("s").restarts),
            (SessionState::Backoff, 0)
        );
        assert_eq!(h.stop("s", None), Ok(Response::Ok));
        h.advance(60_000);
        let s = h.get("s");
        assert_eq!((s.state, s.restarts), (SessionState::Stopped, 0));
        // One crash and one restart later, then a stop in the backoff: 1, not 2.
        if after_a_restart {
            h.spawn_with("s", always(), OnBusy::Replace).unwrap();
            crash(&mut h);
            h.advance(100);
            assert_eq!(h.get("s").restarts, 1);
            crash(&mut h);
            assert_eq!(h.get("s").state, SessionState::Backoff);
            assert_eq!(h.stop("s", None), Ok(Response::Ok));
            assert_eq!(h.get("s").restarts, 1);
        }
        h.settle();
    }
}

/// Counting at the start keeps `max_restarts` what it was: a crash loop starts exactly
/// `max_restarts` times again after its first run, then rests `failed` with the count at
/// the limit.
#[test]
fn max_restarts_still_ends_a_crash_loop() {
    for max in [0, 1, 3] {
        let mut h = Harness::new();
        let mut s = always();
        s.restart.max_restarts = Some(max);
        s.restart.initial = Duration::ZERO;
        h.spawn_with("s", s, OnBusy::Replace).unwrap();
        let mut runs = 0;
        while h.get("s").current.is_some() {
            crash(&mut h);
            runs += 1;
            h.advance(0);
            assert!(runs <= max + 1, "more than {max} restarts");
        }
        let s = h.get("s");
        assert_eq!(
            (runs, s.state, s.restarts),
            (max + 1, SessionState::Failed, max),
            "max_restarts {max}"
        );
        h.settle();
    }
}

/// A start retried for the daemon's shortage stays uncounted across a crash of the daemon
/// (its record says so) and across an upgrade (its image does).
#[test]
fn an_uncounted_retry_stays_uncounted_across_a_restart_of_the_daemon() {
    use crate::core::{Input, SpawnError, SpawnErrorKind};
    let mut h = Harness::new();
    h.spawn_with("s", always(), OnBusy::Replace).unwrap();
    crash(&mut h);
    h.advance(100);
    assert_eq!(h.get("s").restarts, 1);
    let g = h.get("s").current.expect("restarted");
    h.input(Input::SpawnResult {
        gen: g,
        result: Err(SpawnError::new(SpawnErrorKind::Other, 24).as_shortage()),
    });
    assert!(h
        .records()
        .iter()
        .any(|r| r.name.as_ref() == "s" && r.restart_uncounted));
    let (mut n, problems) = h.reborn(h.records(), 0);
    assert_eq!(problems, vec![]);
    n.resume();
    assert_eq!(n.get("s").state, SessionState::Backoff);
    n.advance(1000);
    let s = n.get("s");
    assert!(s.current.is_some_and(|c| c > g), "retried");
    assert_eq!(s.restarts, 1, "a retry for a shortage is not a restart");
    n.settle();
}
