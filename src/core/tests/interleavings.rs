//! Exhaustive interleavings: for small races, every ordering of the concurrent inputs is
//! replayed from the same start, the invariant checker watches each step, the outcome is
//! asserted, and the run is settled to check the once-per-generation invariants. Each test
//! asserts how many orderings it covered.

use super::harness::{spec, Harness};
use crate::core::{
    Action, Command, Event, ExitCause, ExitStatus, Input, OnBusy, Response, Restart, Scope,
    SessionState, Stderr, Stream,
};

/// One concurrent input: from the processes, from a client, or time passing.
#[derive(Clone, Debug)]
enum Step {
    In(Input),
    Output(u64, Stream, usize),
    Cmd(Command),
    Tick(u64),
}

impl Harness {
    fn step(&mut self, step: &Step) {
        match step {
            Step::In(i) => {
                self.input(i.clone());
            }
            Step::Output(gen, stream, len) => {
                self.output_on(*gen, *stream, *len);
            }
            Step::Cmd(c) => {
                let _ = self.cmd(c.clone());
            }
            Step::Tick(ms) => {
                self.advance(*ms);
            }
        }
    }
}

/// Every permutation of `0..n`, in lexicographic order.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut all = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            all.push(p);
        }
    }
    all
}

/// Replays every ordering of `steps` after `setup`, calls `outcome` on each, then settles.
/// Returns the number of orderings.
fn every_order(
    setup: impl Fn() -> Harness,
    steps: &[Step],
    outcome: impl Fn(&mut Harness, &[usize]),
) -> usize {
    let orders = permutations(steps.len());
    for order in &orders {
        let mut h = setup();
        for &i in order {
            h.step(&steps[i]);
        }
        outcome(&mut h, order);
        h.settle();
    }
    orders.len()
}

fn pos(order: &[usize], step: usize) -> usize {
    order
        .iter()
        .position(|&s| s == step)
        .expect("step in order")
}

fn exits(h: &Harness, gen: u64) -> Vec<Event> {
    h.events_of(gen)
        .into_iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect()
}

fn cause(h: &Harness, gen: u64) -> ExitCause {
    match exits(h, gen)[..] {
        [Event::Exited { cause, .. }] => cause,
        ref other => panic!("generation {gen}: exits {other:?}"),
    }
}

fn eofs(gen: u64) -> [Step; 2] {
    [
        Step::In(Input::Eof {
            gen,
            stream: Stream::Stdout,
        }),
        Step::In(Input::Eof {
            gen,
            stream: Stream::Stderr,
        }),
    ]
}

/// A spawn replacing generation 1 while 1's leader has exited and its output drains.
/// The successor spawns only after 1 is reaped; 1 reports exactly once, as `exited`
/// (it ended on its own before it was replaced).
#[test]
fn replace_during_drain() {
    let setup = || {
        let mut h = Harness::new();
        h.spawn("s");
        h.started(1);
        h.exit(1, ExitStatus::Code(3));
        h
    };
    let [e1, e2] = eofs(1);
    let steps = [
        Step::Cmd(Command::Spawn {
            session: "s".into(),
            if_gen: None,
            spec: Box::new(spec()),
            on_busy: OnBusy::Replace,
        }),
        Step::Output(1, Stream::Stdout, 8),
        e1,
        e2,
        Step::In(Input::GroupEmpty { gen: 1 }),
        Step::Tick(60),
    ];
    let n = every_order(setup, &steps, |h, _| {
        assert_eq!(cause(h, 1), ExitCause::Exited);
        let reap = h.log.iter().position(|a| *a == Action::Reap { gen: 1 });
        let spawn2 = h
            .log
            .iter()
            .position(|a| matches!(a, Action::Spawn { gen: 2, .. }));
        if let Some(spawn2) = spawn2 {
            assert!(
                reap.is_some_and(|r| r < spawn2),
                "2 spawned before 1 was reaped"
            );
        }
    });
    assert_eq!(n, 720);
}

/// A client stop racing the leader's own exit, with `restart: always` (the pm2#1043
/// trap): the exit is reported once, `stopped` if the stop came first, and no restart
/// ever follows the stop.
#[test]
fn stop_racing_exit() {
    let setup = always_restarting;
    let [e1, e2] = eofs(1);
    let steps = [
        Step::Cmd(Command::Stop {
            session: "s".into(),
            if_gen: None,
            grace: None,
        }),
        Step::In(Input::LeaderExited {
            gen: 1,
            status: ExitStatus::Code(0),
        }),
        e1,
        e2,
        Step::In(Input::GroupEmpty { gen: 1 }),
        Step::Tick(100),
    ];
    let n = every_order(setup, &steps, |h, order| {
        let stop_first = pos(order, 0) < pos(order, 1);
        let expected = if stop_first {
            ExitCause::Stopped
        } else {
            ExitCause::Exited
        };
        assert_eq!(cause(h, 1), expected, "order {order:?}");
        h.advance(120_000);
        assert!(
            h.core.next_generation() == 2,
            "restarted after a stop: order {order:?}"
        );
        assert_eq!(h.get("s").state, SessionState::Stopped);
    });
    assert_eq!(n, 720);
}

/// Stop escalation deadlines racing the leader's exit: SIGKILL only before the exit is
/// seen, `unkillable` only if the exit came after both deadlines, and one report.
#[test]
fn deadline_racing_exit() {
    let setup = || {
        let mut h = Harness::new();
        h.spawn("s");
        h.started(1);
        h.stop("s", Some(1)).unwrap();
        h
    };
    let [e1, e2] = eofs(1);
    let steps = [
        Step::Tick(100),
        Step::Tick(200),
        Step::In(Input::LeaderExited {
            gen: 1,
            status: ExitStatus::Signal(15),
        }),
        e1,
        e2,
        Step::In(Input::GroupEmpty { gen: 1 }),
    ];
    let n = every_order(setup, &steps, |h, order| {
        // Walk the clock up to the exit: SIGKILL at the first tick reaching the grace
        // (100 ms), unkillable at a later tick reaching the kill grace (200 ms) after it.
        let (mut t, mut kill_at, mut expect_unkillable) = (0, None, false);
        for &i in &order[..pos(order, 2)] {
            if let Step::Tick(ms) = steps[i] {
                t += ms;
                match kill_at {
                    None if t >= 100 => kill_at = Some(t),
                    Some(k) if t >= k + 200 => expect_unkillable = true,
                    _ => {}
                }
            }
        }
        let leader_kill = |a: &Action| {
            matches!(
                a,
                Action::Signal {
                    gen: 1,
                    signal: 9,
                    scope: Scope::Leader
                }
            )
        };
        let kill_sent = h.log.iter().any(leader_kill);
        let unkillable = h
            .events_of(1)
            .iter()
            .any(|e| matches!(e, Event::Unkillable { .. }));
        assert_eq!(kill_sent, kill_at.is_some(), "order {order:?}");
        assert_eq!(unkillable, expect_unkillable, "order {order:?}");
        assert_eq!(exits(h, 1).len(), 1);
        assert_eq!(cause(h, 1), ExitCause::Stopped);
    });
    assert_eq!(n, 720);
}

/// Overlap replacement with both generations exiting in any order: each reports once
/// with its own cause; only 2's end changes the session.
#[test]
fn overlap_both_exiting() {
    let mut merged = spec();
    merged.io = crate::core::IoMode::Pipes {
        stderr: Stderr::Merge,
    };
    let setup = || {
        let mut h = Harness::new();
        h.spawn_with("s", merged.clone(), OnBusy::Replace).unwrap();
        h.started(1);
        h.spawn_with("s", merged.clone(), OnBusy::Overlap).unwrap();
        h.started(2);
        h
    };
    let steps = [
        Step::In(Input::LeaderExited {
            gen: 1,
            status: ExitStatus::Signal(15),
        }),
        Step::In(Input::LeaderExited {
            gen: 2,
            status: ExitStatus::Code(0),
        }),
        Step::In(Input::Eof {
            gen: 1,
            stream: Stream::Stdout,
        }),
        Step::In(Input::Eof {
            gen: 2,
            stream: Stream::Stdout,
        }),
        Step::In(Input::GroupEmpty { gen: 1 }),
        Step::In(Input::GroupEmpty { gen: 2 }),
        Step::Tick(50),
    ];
    let n = every_order(setup, &steps, |h, _| {
        assert_eq!(cause(h, 1), ExitCause::Superseded);
        assert_eq!(cause(h, 2), ExitCause::Exited);
        let s = h.get("s");
        assert_eq!((s.current, s.state), (None, SessionState::Exited));
        assert!(matches!(
            s.last_end,
            Some(crate::core::LastEnd::Exited { gen: 2, .. })
        ));
    });
    assert_eq!(n, 5040);
}

/// A restart's backoff racing a stop: whatever the order, nothing is spawned after the
/// stop was answered, and the session ends stopped.
#[test]
fn restart_backoff_racing_stop() {
    let setup = || {
        let mut h = always_restarting();
        h.exit(1, ExitStatus::Code(1));
        h
    };
    let [e1, e2] = eofs(1);
    let steps = [
        e1,
        e2,
        Step::In(Input::GroupEmpty { gen: 1 }),
        Step::Tick(50),
        Step::Tick(1000),
        Step::Cmd(Command::Stop {
            session: "s".into(),
            if_gen: None,
            grace: None,
        }),
    ];
    let n = every_order(setup, &steps, |h, order| {
        let stop_reply = h
            .log
            .iter()
            .rposition(|a| {
                matches!(
                    a,
                    Action::Reply {
                        result: Ok(Response::Gen(_) | Response::Ok),
                        ..
                    }
                )
            })
            .expect("stop answered");
        let after_stop = h.log[stop_reply..]
            .iter()
            .any(|a| matches!(a, Action::Spawn { .. }));
        assert!(!after_stop, "spawned after stop: order {order:?}");
        h.advance(120_000);
        assert!(!h.log[stop_reply..]
            .iter()
            .any(|a| matches!(a, Action::Spawn { .. })));
        assert_eq!(h.get("s").restart_at, None);
        // A restart spawned before the stop is stopped as soon as its spawn is confirmed.
        let spawned_before = h.log[..stop_reply]
            .iter()
            .any(|a| matches!(a, Action::Spawn { gen: 2, .. }));
        let expected = if spawned_before {
            SessionState::Stopping
        } else {
            SessionState::Stopped
        };
        assert_eq!(h.get("s").state, expected, "order {order:?}");
    });
    assert_eq!(n, 720);
}

#[test]
fn permutations_are_complete() {
    let p = permutations(4);
    let mut sorted = p.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!((p.len(), sorted.len()), (24, 24));
}

/// Session `s` with `restart: always`, generation 1 running.
fn always_restarting() -> Harness {
    let mut h = Harness::new();
    let mut s = spec();
    s.restart.mode = Restart::Always;
    h.spawn_with("s", s, OnBusy::Replace).unwrap();
    h.started(1);
    h
}

/// A generation's readiness signal, its exit, its replacement and its timeout, in every
/// order: exactly one readiness decision, the first of signal, exit or timeout, about it
/// only; its successor is never made ready by any of them.
#[test]
fn readiness_racing_exit_replacement_and_timeout() {
    use crate::core::{ReadyCheck, ReadyHow, ReadySignal};
    let mut s = spec();
    s.ready = Some(ReadyCheck {
        how: ReadyHow::Fd(3),
        timeout: std::time::Duration::from_millis(1_000),
        interval: std::time::Duration::from_millis(100),
    });
    let setup = || {
        let mut h = Harness::new();
        let gen = h.spawn_with("a", s.clone(), OnBusy::Replace).unwrap();
        h.started(gen);
        h
    };
    let steps = [
        Step::In(Input::Readiness {
            gen: 1,
            signal: ReadySignal::Ready,
        }),
        Step::In(Input::LeaderExited {
            gen: 1,
            status: ExitStatus::Code(0),
        }),
        Step::Cmd(Command::Spawn {
            session: "a".into(),
            if_gen: None,
            spec: Box::new(s.clone()),
            on_busy: OnBusy::Replace,
        }),
        Step::Tick(1_000),
    ];
    let n = every_order(setup, &steps, |h, order| {
        let decided: Vec<Event> = h
            .events()
            .into_iter()
            .filter(|e| matches!(e, Event::Ready { .. } | Event::ReadyFailed { .. }))
            .collect();
        let first = [0, 1, 3]
            .into_iter()
            .min_by_key(|s| pos(order, *s))
            .unwrap();
        let want = match first {
            0 => Event::Ready {
                session: "a".into(),
                gen: 1,
            },
            1 => Event::ReadyFailed {
                session: "a".into(),
                gen: 1,
                reason: "exited before it was ready".into(),
            },
            _ => Event::ReadyFailed {
                session: "a".into(),
                gen: 1,
                reason: "timed out after 1s".into(),
            },
        };
        assert_eq!(decided, vec![want], "order {order:?}");
    });
    assert_eq!(n, 24);
}

/// A dependency's readiness, its exit and a stop of its dependent, in every order: the
/// dependent starts exactly when the readiness comes first.
#[test]
fn a_dependency_ready_racing_its_exit_and_the_dependents_stop() {
    use crate::core::{DependOn, ReadyCheck, ReadyHow, ReadySignal};
    let setup = || {
        let mut h = Harness::new();
        let mut db = spec();
        db.ready = Some(ReadyCheck::new(ReadyHow::Fd(3)));
        let gen = h.spawn_with("db", db, OnBusy::Replace).unwrap();
        h.started(gen);
        let mut web = spec();
        web.depends_on.insert("db".into(), DependOn::Ready);
        h.spawn_with("web", web, OnBusy::Replace).unwrap();
        h
    };
    let steps = [
        Step::In(Input::Readiness {
            gen: 1,
            signal: ReadySignal::Ready,
        }),
        Step::In(Input::LeaderExited {
            gen: 1,
            status: ExitStatus::Code(1),
        }),
        Step::Cmd(Command::Stop {
            session: "web".into(),
            if_gen: None,
            grace: None,
        }),
    ];
    let n = every_order(setup, &steps, |h, order| {
        let spawned = h
            .all_actions()
            .iter()
            .any(|a| matches!(a, Action::Spawn { gen: 2, .. }));
        let ready_first = pos(order, 0) < pos(order, 1) && pos(order, 0) < pos(order, 2);
        assert_eq!(spawned, ready_first, "order {order:?}");
    });
    assert_eq!(n, 6);
}
