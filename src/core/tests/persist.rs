//! State that outlives the daemon: records exported and restored into a new core, live
//! generations adopted, what no descriptor vouched for reported lost, numbers never reused.

use std::time::Duration;

use super::harness::{has, spec, Harness};
use crate::core::{
    Action, Command, Config, ErrorCode, Event, ExitCause, ExitStatus, Input, LastEnd, Lifecycle,
    OnBusy, Restart, RestartPolicy, SessionSnapshot, SessionState, Spec, StopReason, StopStage,
    WaitFor,
};
use crate::store::session_codec::{decode_session, encode_session};

fn on_failure() -> Spec {
    let mut s = spec();
    s.restart = RestartPolicy {
        mode: Restart::OnFailure,
        initial: Duration::from_millis(100),
        max: Duration::from_millis(1000),
        reset_after: Duration::from_secs(10),
        max_restarts: Some(3),
    };
    s
}

/// Runs `gen` to an exit with `status`, through its report and reap.
fn end(h: &mut Harness, gen: u64, status: ExitStatus) {
    h.exit(gen, status);
    h.eof(gen);
    h.group_empty(gen);
}

/// What a client sees of a session that a restart must keep (times are the new daemon's).
fn seen(s: &SessionSnapshot) -> (SessionState, Option<u64>, u32, Option<LastEnd>, Vec<u64>) {
    let gens = s.generations.iter().map(|g| g.gen).collect();
    (s.state, s.current, s.restarts, s.last_end.clone(), gens)
}

fn exits_of(h: &Harness, gen: u64) -> Vec<Event> {
    h.events_of(gen)
        .into_iter()
        .filter(Event::is_terminal)
        .collect()
}

#[test]
fn a_round_trip_keeps_what_list_get_and_wait_answer() {
    let mut h = Harness::new();
    let run = h.spawn("run");
    h.started(run);
    let done = h.spawn("done");
    h.started(done);
    end(&mut h, done, ExitStatus::Code(0));
    let bad = h.spawn("bad");
    h.started(bad);
    end(&mut h, bad, ExitStatus::Code(3));
    let held = h.spawn("held");
    h.started(held);
    h.stop("held", None).unwrap();
    end(&mut h, held, ExitStatus::Signal(15));
    let before: Vec<_> = h.core.list().iter().map(seen).collect();

    // Through the session file's bytes, as the next daemon reads them.
    let records: Vec<_> = h
        .records()
        .iter()
        .map(|r| decode_session(&encode_session(r).unwrap()).unwrap())
        .collect();
    assert_eq!(records, h.records());
    let (mut n, problems) = h.reborn(records, 5);
    assert_eq!(problems, vec![]);
    assert!(n.adopt(run, "run"));
    let actions = n.resume();
    assert!(!has(&actions, |a| matches!(
        a,
        Action::Spawn { .. } | Action::Signal { .. }
    )));
    let after: Vec<_> = n.core.list().iter().map(seen).collect();
    assert_eq!(after, before);
    assert_eq!(n.get("run").generations[0].lifecycle, Lifecycle::Running);
    for (name, gen) in [("done", done), ("bad", bad), ("held", held)] {
        let old = h.core.wait_for(name, None).unwrap();
        assert!(matches!(old, WaitFor::Ended(_)));
        assert_eq!(n.core.wait_for(name, None), Ok(old.clone()));
        assert_eq!(n.core.wait_for(name, Some(gen)), Ok(old));
    }
    assert_eq!(n.core.wait_for("run", None), Ok(WaitFor::Live(run)));
    // The adopted generation ends once, with its own code, and is then forgotten.
    end(&mut n, run, ExitStatus::Code(7));
    let ends = exits_of(&n, run);
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                code: Some(7),
                cause: ExitCause::Exited,
                ..
            }]
        ),
        "{ends:?}"
    );
    n.settle();
}

#[test]
fn a_failed_session_stays_failed() {
    let mut h = Harness::new();
    let g = h.spawn_with("s", on_failure(), OnBusy::Replace).unwrap();
    h.started(g);
    for _ in 0..4 {
        let g = h.get("s").current.unwrap_or_else(|| {
            h.advance(1000);
            h.get("s").current.expect("restarted")
        });
        if h.core.gens[&g].pid().is_none() {
            h.started(g);
        }
        end(&mut h, g, ExitStatus::Code(1));
    }
    assert_eq!(h.get("s").state, SessionState::Failed);
    let (mut n, _) = h.reborn(h.records(), 60_000);
    n.resume();
    assert_eq!(n.get("s").state, SessionState::Failed);
    let next = n.core.next_generation();
    n.advance(60_000);
    assert_eq!(
        n.core.next_generation(),
        next,
        "a failed session never restarts by itself"
    );
    n.settle();
}

#[test]
fn a_pending_backoff_keeps_the_time_it_had_left() {
    let mut h = Harness::new();
    let g = h.spawn_with("s", on_failure(), OnBusy::Replace).unwrap();
    h.started(g);
    end(&mut h, g, ExitStatus::Code(1));
    assert_eq!(h.get("s").state, SessionState::Backoff);
    h.advance(10); // 90 ms of the 100 ms backoff left
    let (mut n, _) = h.reborn(h.records(), 30); // the new daemon starts 30 ms later
    n.resume();
    let s = n.get("s");
    // Counted once it happens.
    assert_eq!((s.state, s.restarts), (SessionState::Backoff, 0));
    assert_eq!(s.restart_at.map(|t| t.as_millis()), Some(60));
    n.advance(59);
    assert_eq!(n.get("s").current, None);
    let actions = n.advance(1);
    assert_eq!(n.get("s").restarts, 1);
    let first = h.core.next_generation();
    assert!(has(
        &actions,
        |a| matches!(a, Action::Spawn { gen, .. } if *gen == first)
    ));
    n.settle();
}

#[test]
fn a_running_session_nobody_adopted_is_lost_then_restarted_per_its_policy() {
    for mode in [Restart::OnFailure, Restart::Never] {
        let mut h = Harness::new();
        let mut spec = on_failure();
        spec.restart.mode = mode;
        let g = h.spawn_with("s", spec, OnBusy::Replace).unwrap();
        h.started(g);
        let (mut n, _) = h.reborn(h.records(), 5);
        let actions = n.resume();
        let lost = Event::Exited {
            session: "s".into(),
            gen: g,
            code: None,
            signal: None,
            cause: ExitCause::Lost,
            discarded: 0,
            truncated: false,
        };
        assert!(has(&actions, |a| *a == Action::Emit(lost.clone())));
        assert_eq!(n.core.wait_for("s", Some(g)), Ok(WaitFor::Ended(lost)));
        let s = n.get("s");
        match mode {
            Restart::Never => assert_eq!(s.state, SessionState::Failed),
            _ => {
                assert_eq!((s.state, s.restarts), (SessionState::Backoff, 0));
                n.advance(100);
                assert!(n.get("s").current.is_some_and(|c| c > g));
                assert_eq!(n.get("s").restarts, 1);
            }
        }
        n.settle();
        assert_eq!(exits_of(&n, g).len(), 1);
    }
}

#[test]
fn an_adopted_generation_ends_once_with_the_right_cause() {
    // stop, lost after adoption, mismatch (adopt then lost at once), signalled exit.
    for case in 0..4 {
        let mut h = Harness::new();
        let g = h.spawn("s");
        h.started(g);
        let (mut n, _) = h.reborn(h.records(), 5);
        assert!(n.adopt(g, "s"));
        if case == 2 {
            let actions = n.input(Input::Lost { gen: g });
            assert!(!has(&actions, |a| matches!(a, Action::Signal { .. })));
        }
        n.resume();
        let expected = match case {
            0 => {
                let stop = n.stop("s", Some(g)).unwrap();
                assert_eq!(stop, crate::core::Response::Gen(g));
                assert!(has(
                    &n.log,
                    |a| matches!(a, Action::Signal { gen, .. } if *gen == g)
                ));
                end(&mut n, g, ExitStatus::Signal(15));
                (Some(143), ExitCause::Stopped)
            }
            1 | 2 => {
                n.input(Input::Lost { gen: g });
                (None, ExitCause::Lost)
            }
            _ => {
                end(&mut n, g, ExitStatus::Signal(9));
                (Some(137), ExitCause::Signaled)
            }
        };
        let ends = exits_of(&n, g);
        match &ends[..] {
            [Event::Exited { code, cause, .. }] => assert_eq!((*code, *cause), expected),
            other => panic!("case {case}: {other:?}"),
        }
        // Not our child: its group id is not pinned, so no group signal after its exit.
        assert!(!has(&n.log, |a| matches!(
            a,
            Action::Signal {
                scope: crate::core::Scope::Tree,
                ..
            }
        )));
        n.settle();
        assert_eq!(exits_of(&n, g).len(), 1, "case {case}");
    }
}

/// A process taken back (`on_recover: keep`), running under a reborn core.
fn taken_back() -> (Harness, u64) {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    let (mut n, _) = h.reborn(h.records(), 5);
    assert!(n.adopt(g, "s"));
    n.resume();
    (n, g)
}

fn signals_of(actions: &[Action], g: u64) -> Vec<i32> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal { gen, signal, .. } if *gen == g => Some(*signal),
            _ => None,
        })
        .collect()
}

fn unkillable(actions: &[Action]) -> bool {
    has(actions, |a| {
        matches!(a, Action::Emit(Event::Unkillable { .. }))
    })
}

/// A stopped process taken back dies of the SIGTERM, but its status comes only once its
/// real parent reaps it: from `LeaderGone` on, the stop escalates no further — no SIGKILL,
/// no `unkillable` however long the status takes — and the end, when its status comes, is
/// reported once, as stopped.
#[test]
fn a_leader_gone_while_stopping_is_not_escalated_while_its_status_waits() {
    let (mut n, g) = taken_back();
    n.stop("s", Some(g)).unwrap();
    assert_eq!(
        signals_of(&n.log, g),
        vec![15, crate::core::signal::SIGCONT]
    );
    let actions = n.input(Input::LeaderGone { gen: g });
    assert!(actions
        .iter()
        .all(|a| matches!(a, Action::Emit(Event::State { .. }))));
    assert_eq!(n.core.next_deadline(), None, "nothing left to escalate");
    assert!(n.core.awaits_exit(g), "its status is still awaited");
    let later = n.advance(10_000);
    assert!(
        signals_of(&later, g).is_empty() && !unkillable(&later),
        "{later:?}"
    );
    // A second stop (a shorter grace, a shutdown) changes nothing either.
    n.cmd(Command::Stop {
        session: "s".into(),
        if_gen: Some(g),
        grace: Some(Duration::ZERO),
    })
    .unwrap();
    let later = n.advance(10_000);
    assert!(signals_of(&n.log, g) == vec![15, crate::core::signal::SIGCONT] && !unkillable(&later));
    n.exit(g, ExitStatus::Signal(15));
    let ends = exits_of(&n, g);
    match &ends[..] {
        [Event::Exited { code, cause, .. }] => {
            assert_eq!((*code, *cause), (Some(143), ExitCause::Stopped))
        }
        other => panic!("{other:?}"),
    }
    assert!(!unkillable(&n.log));
    n.settle();
}

/// The same when the status never comes (a parent that does not reap): `lost`, once, and
/// nothing signalled after the leader was gone.
#[test]
fn a_leader_gone_whose_status_never_comes_is_lost_once() {
    let (mut n, g) = taken_back();
    n.stop("s", Some(g)).unwrap();
    // After the SIGKILL: the kill grace no longer ends in `unkillable`.
    let a = n.advance(100);
    assert_eq!(signals_of(&a, g), vec![9]);
    n.input(Input::LeaderGone { gen: g });
    let sent = signals_of(&n.log, g).len();
    let later = n.advance(5_000);
    assert!(!unkillable(&later), "{later:?}");
    let a = n.input(Input::Lost { gen: g });
    assert!(signals_of(&a, g).is_empty());
    assert_eq!(signals_of(&n.log, g).len(), sent);
    match &exits_of(&n, g)[..] {
        [Event::Exited { code, cause, .. }] => {
            assert_eq!((*code, *cause), (None, ExitCause::Lost))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(n.get("s").generations, vec![]);
    n.settle();
    assert_eq!(exits_of(&n, g).len(), 1);
}

/// A leader that ended by itself, its status awaited: a stop then changes nothing (it
/// ended on its own: its own cause), and commands for its process answer `not_running`.
#[test]
fn a_leader_gone_by_itself_keeps_its_own_cause_and_takes_no_commands() {
    let (mut n, g) = taken_back();
    n.input(Input::LeaderGone { gen: g });
    let signal = Command::Signal {
        session: "s".into(),
        if_gen: Some(g),
        signal: 15,
        scope: crate::core::Scope::Leader,
    };
    let refused = n.cmd(signal).unwrap_err();
    assert_eq!(refused.code, crate::core::ErrorCode::NotRunning);
    assert_eq!(n.stop("s", Some(g)), Ok(crate::core::Response::Gen(g)));
    assert!(signals_of(&n.log, g).is_empty());
    assert_eq!(n.core.next_deadline(), None);
    n.exit(g, ExitStatus::Code(7));
    match &exits_of(&n, g)[..] {
        [Event::Exited { code, cause, .. }] => {
            assert_eq!((*code, *cause), (Some(7), ExitCause::Exited))
        }
        other => panic!("{other:?}"),
    }
    // The stop still holds: no restart.
    assert_eq!(n.get("s").state, SessionState::Stopped);
    n.settle();
}

/// `LeaderGone` is about a running leader only: once its exit is reported, for a
/// generation that is not there, or twice, it changes nothing; and a generation already
/// reported unkillable still ends once.
#[test]
fn a_late_or_spare_leader_gone_changes_nothing() {
    let (mut n, g) = taken_back();
    n.stop("s", Some(g)).unwrap();
    n.advance(100);
    let a = n.advance(200);
    assert!(unkillable(&a), "{a:?}");
    for gen in [g, g, g + 1, 0] {
        let a = n.input(Input::LeaderGone { gen });
        assert!(a.is_empty(), "{a:?}");
    }
    n.exit(g, ExitStatus::Signal(9));
    assert!(matches!(
        exits_of(&n, g)[..],
        [Event::Exited {
            cause: ExitCause::Killed,
            ..
        }]
    ));
    for gen in [g, g + 1] {
        assert!(n.input(Input::LeaderGone { gen }).is_empty());
    }
    n.settle();
}

/// `gen`, taken back while its stop as superseded was under way, goes on with it: its
/// TERM is not sent again, and it is listed stopping as superseded.
fn stop_carried_on(n: &Harness, actions: &[Action], gen: u64) {
    assert!(
        !has(
            actions,
            |a| matches!(a, Action::Signal { gen: g, .. } if *g == gen)
        ),
        "{actions:?}"
    );
    let s = n.get(&n.core.session_of(gen).expect("tracked"));
    let g = s.generations.iter().find(|g| g.gen == gen).expect("listed");
    assert_eq!(g.lifecycle, Lifecycle::Stopping(StopStage::Graceful));
    assert_eq!(g.stop, Some(StopReason::Superseded));
}

#[test]
fn a_superseded_generation_still_alive_is_stopped_as_superseded() {
    let mut h = Harness::new();
    let old = h.spawn("s");
    h.started(old);
    let new = h.spawn_with("s", spec(), OnBusy::Overlap).unwrap();
    h.started(new);
    let (mut n, _) = h.reborn(h.records(), 5);
    assert!(n.adopt(old, "s"));
    assert!(n.adopt(new, "s"));
    let actions = n.resume();
    // Its stop (the overlapping spawn superseded it) was under way: it goes on, its
    // TERM not sent again.
    stop_carried_on(&n, &actions, old);
    assert!(!has(
        &actions,
        |a| matches!(a, Action::Signal { gen, .. } if *gen == new)
    ));
    end(&mut n, old, ExitStatus::Signal(15));
    assert!(matches!(
        exits_of(&n, old)[..],
        [Event::Exited {
            cause: ExitCause::Superseded,
            ..
        }]
    ));
    assert_eq!(n.get("s").current, Some(new));
    n.settle();
}

#[test]
fn generation_numbers_never_repeat_across_restarts() {
    let mut h = Harness::new();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let g = h.spawn("s");
        h.started(g);
        seen.push(g);
        // A number this daemon may still allocate is never adopted.
        let next = h.core.next_generation();
        let (mut n, problems) = h.reborn(h.records(), 1);
        assert_eq!(problems, vec![]);
        assert!(
            !n.adopt(next, "s"),
            "adopted a number the core will allocate"
        );
        assert!(n.adopt(g, "s"));
        n.resume();
        let g2 = n.spawn("s");
        assert!(g2 >= next && !seen.contains(&g2));
        seen.push(g2);
        n.started(g2);
        h = n;
    }
    h.settle();
}

#[test]
fn bad_records_are_refused_one_by_one() {
    let mut h = Harness::new();
    let a = h.spawn("a");
    h.started(a);
    h.spawn("b");
    let mut records = h.records();
    records[1].spec.argv.clear();
    let mut future = records[0].clone();
    future.name = "c".into();
    future.current = Some(h.core.next_generation() + 5);
    records.push(future);
    let (mut n, problems) = h.reborn(records, 1);
    let refused: Vec<_> = problems.iter().map(|p| &*p.session).collect();
    assert_eq!(refused, ["b", "c"]);
    assert!(n.adopt(a, "a"));
    assert!(!n.adopt(a + 1, "b"), "no session b to adopt into");
    n.resume();
    assert_eq!(n.core.list().len(), 1);
    n.settle();
}

/// Records the protocol would refuse are refused at restore too: one depending on
/// itself, the one that closes a dependency cycle, and one whose current generation is
/// another session's (a damaged or copied record), which would report one generation's
/// end under two sessions.
#[test]
fn records_with_impossible_dependencies_or_generations_are_refused() {
    let mut h = Harness::new();
    let a = h.spawn("a");
    h.started(a);
    h.spawn("b");
    let mut records = h.records();
    let base = records[0].clone();
    let with = |name: &str, deps: &[&str], current: Option<u64>| {
        let mut r = base.clone();
        r.name = name.into();
        r.current = current;
        r.last_gen = current;
        r.spec.depends_on = deps
            .iter()
            .map(|d| (d.to_string(), crate::core::DependOn::Started))
            .collect();
        r
    };
    records.push(with("self", &["self"], None));
    records.push(with("cyc1", &["cyc2"], None));
    records.push(with("cyc2", &["cyc1"], None));
    records.push(with("thief", &[], Some(a)));
    let (mut n, problems) = h.reborn(records, 1);
    let refused: Vec<_> = problems.iter().map(|p| &*p.session).collect();
    assert_eq!(refused, ["self", "cyc2", "thief"]);
    assert!(n.adopt(a, "a"));
    n.resume();
    let listed: Vec<_> = n.core.list().iter().map(|s| s.name.to_string()).collect();
    assert_eq!(listed, ["a", "b", "cyc1"]);
    n.settle();
}

#[test]
fn dirty_sessions_name_what_changed_and_what_went() {
    let mut h = Harness::new();
    assert_eq!(
        h.core.take_dirty_sessions(),
        Vec::<std::sync::Arc<str>>::new()
    );
    let g = h.spawn("s");
    h.spawn("t");
    assert_eq!(h.core.take_dirty_sessions(), ["s".into(), "t".into()]);
    h.started(g);
    h.output(g, 10);
    assert!(
        h.core.take_dirty_sessions().is_empty(),
        "running and output change no record"
    );
    h.cmd(Command::Remove {
        session: "s".into(),
    })
    .unwrap();
    end(&mut h, g, ExitStatus::Signal(15));
    assert_eq!(h.core.take_dirty_sessions(), ["s".into()]);
    assert!(h.core.get("s").is_none());
    assert_eq!(
        h.core.session_record("s", h.wall(0)),
        None,
        "gone: remove its file"
    );
    h.settle();
}

#[test]
fn a_session_being_removed_goes_once_its_adopted_generation_ends() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.cmd(Command::Remove {
        session: "s".into(),
    })
    .unwrap();
    let (mut n, _) = h.reborn(h.records(), 1);
    assert!(n.adopt(g, "s"));
    n.resume();
    assert_eq!(n.get("s").state, SessionState::Removing);
    end(&mut n, g, ExitStatus::Signal(15));
    assert!(n.core.get("s").is_none());
    assert!(matches!(
        exits_of(&n, g)[..],
        [Event::Exited {
            cause: ExitCause::Stopped,
            ..
        }]
    ));
    n.settle();
}

/// By default a process found still running after a restart is stopped (its input and
/// output are not recovered), then the restart policy applies.
#[test]
fn by_default_a_process_still_running_is_stopped_after_a_restart() {
    let mut h = Harness::new();
    let mut default = spec();
    default.on_recover = crate::core::OnRecover::Stop;
    let g = h
        .spawn_with("s", default, crate::core::OnBusy::Replace)
        .unwrap();
    h.started(g);
    let (mut n, _) = h.reborn(h.records(), 5);
    assert!(n.adopt(g, "s"));
    let actions = n.resume();
    assert!(
        has(
            &actions,
            |a| matches!(a, Action::Signal { gen, signal: 15, .. } if *gen == g)
        ),
        "{actions:?}"
    );
}

/// The stop a restarted daemon makes for a process whose input and output died with its
/// predecessor was asked for by no one: the restart policy follows its end (`always` and
/// `on-failure` start the session again; `never` leaves it stopped, not failed), unless a
/// client stops the session meanwhile.
#[test]
fn a_process_stopped_because_its_io_was_lost_is_restarted_per_its_policy() {
    use crate::core::{Restart, RestartPolicy};
    let cases = [
        (Restart::Always, false, SessionState::Backoff),
        (Restart::OnFailure, false, SessionState::Backoff),
        (Restart::Never, false, SessionState::Stopped),
        (Restart::Always, true, SessionState::Stopped),
    ];
    for (mode, client_stops, state) in cases {
        let mut h = Harness::new();
        let mut s = spec();
        s.on_recover = crate::core::OnRecover::Stop;
        s.restart = RestartPolicy {
            mode,
            ..RestartPolicy::default()
        };
        let g = h.spawn_with("s", s, crate::core::OnBusy::Replace).unwrap();
        h.started(g);
        let (mut n, _) = h.reborn(h.records(), 5);
        assert!(n.adopt(g, "s"));
        let actions = n.resume();
        assert_eq!(
            signals_to(&actions, g),
            vec![15, crate::core::signal::SIGCONT],
            "{mode:?}"
        );
        if client_stops {
            assert_eq!(n.stop("s", Some(g)), Ok(crate::core::Response::Gen(g)));
        }
        end(&mut n, g, ExitStatus::Signal(15));
        let after = n.get("s");
        assert_eq!(after.state, state, "{mode:?}, client stops: {client_stops}");
        assert!(matches!(
            exits_of(&n, g)[..],
            [Event::Exited {
                cause: ExitCause::Stopped,
                ..
            }]
        ));
        n.settle();
    }
}

/// A session running `gen` in a daemon that then died, and the next daemon that took
/// `gen` back with its identity unverified.
fn reborn_unverified() -> (Harness, u64) {
    let mut h = Harness::new();
    let gen = h.spawn("s");
    h.started(gen);
    let (mut n, problems) = h.reborn(h.records(), 5);
    assert_eq!(problems, vec![]);
    assert!(n.adopt_as(gen, "s", false));
    let actions = n.resume();
    assert!(!has(&actions, |a| matches!(a, Action::Signal { .. })));
    (n, gen)
}

fn signals_to(actions: &[Action], gen: u64) -> Vec<i32> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal { gen: g, signal, .. } if *g == gen => Some(*signal),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unverified_generation_is_listed_as_such_and_never_signalled() {
    let (mut n, gen) = reborn_unverified();
    let g = &n.get("s").generations[0];
    assert_eq!((g.gen, g.lifecycle), (gen, Lifecycle::Running));
    assert_eq!(g.adopted.map(|a| a.verified), Some(false));
    assert_eq!(n.get("s").state, SessionState::Running);
    // Nothing addresses its process: not a signal, not input.
    let signal = n.cmd(Command::Signal {
        session: "s".into(),
        if_gen: None,
        signal: 15,
        scope: crate::core::Scope::Leader,
    });
    assert_eq!(signal.unwrap_err().code, crate::core::ErrorCode::NotRunning);
    // A stop is taken and noted, and sends nothing, however long it waits; nothing about
    // its process is taken in either.
    let before = n.log.len();
    assert_eq!(n.stop("s", Some(gen)), Ok(crate::core::Response::Gen(gen)));
    assert_eq!(n.get("s").state, SessionState::Stopping);
    n.exit(gen, ExitStatus::Code(0));
    n.input(Input::LeaderGone { gen });
    n.advance(60_000);
    assert!(signals_to(&n.log[before..], gen).is_empty());
    assert!(exits_of(&n, gen).is_empty());
    let g = &n.get("s").generations[0];
    assert_eq!(g.lifecycle, Lifecycle::Running);
    assert_eq!(g.stop, Some(crate::core::StopReason::Requested));
    n.settle();
}

#[test]
fn a_stop_asked_while_unverified_begins_once_verified() {
    let (mut n, gen) = reborn_unverified();
    n.stop("s", None).unwrap();
    n.advance(1000);
    let actions = n.input(Input::Verified { gen });
    assert_eq!(
        signals_to(&actions, gen),
        vec![15, crate::core::signal::SIGCONT]
    );
    let g = &n.get("s").generations[0];
    assert_eq!(g.adopted.map(|a| a.verified), Some(true));
    assert_eq!(
        g.lifecycle,
        Lifecycle::Stopping(crate::core::StopStage::Graceful)
    );
    // A second `Verified` is a spare report.
    assert!(signals_to(&n.input(Input::Verified { gen }), gen).is_empty());
    n.exit(gen, ExitStatus::Signal(15));
    let ends = exits_of(&n, gen);
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                cause: ExitCause::Stopped,
                ..
            }]
        ),
        "{ends:?}"
    );
    n.settle();
}

#[test]
fn a_verified_generation_is_one_like_any_other() {
    let (mut n, gen) = reborn_unverified();
    assert!(n
        .input(Input::Verified { gen })
        .iter()
        .all(|a| !matches!(a, Action::Signal { .. })));
    assert_eq!(n.get("s").state, SessionState::Running);
    let signal = n.cmd(Command::Signal {
        session: "s".into(),
        if_gen: Some(gen),
        signal: 1,
        scope: crate::core::Scope::Leader,
    });
    assert_eq!(signal, Ok(crate::core::Response::Gen(gen)));
    end(&mut n, gen, ExitStatus::Code(3));
    let ends = exits_of(&n, gen);
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                code: Some(3),
                cause: ExitCause::Exited,
                ..
            }]
        ),
        "{ends:?}"
    );
    n.settle();
}

#[test]
fn an_unverified_generation_found_mismatched_is_lost_once() {
    let (mut n, gen) = reborn_unverified();
    n.stop("s", None).unwrap();
    let actions = n.input(Input::Lost { gen });
    assert!(signals_to(&actions, gen).is_empty());
    assert!(has(
        &actions,
        |a| matches!(a, Action::Release { gen: g } if *g == gen)
    ));
    let ends = exits_of(&n, gen);
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                code: None,
                cause: ExitCause::Lost,
                ..
            }]
        ),
        "{ends:?}"
    );
    assert!(n.get("s").generations.is_empty());
    n.settle();
}

#[test]
fn a_shutdown_does_not_wait_for_an_unverified_generation() {
    let (mut n, gen) = reborn_unverified();
    n.cmd(Command::Shutdown).unwrap();
    let actions = n.cmd(Command::Shutdown);
    assert!(actions.is_ok());
    assert!(signals_to(&n.log, gen).is_empty());
    assert!(n.core.is_shut_down());
    assert_eq!(n.core.generation_count(), 1);
    n.settle();
}

/// Three generations started by `start` (given 0, 1, 2; it returns the session and the
/// number) under a limit of 3 running, and a new daemon under a limit of 1 that took them
/// all back; with their numbers.
fn taken_back_under_a_lower_limit(
    start: impl Fn(&mut Harness, usize) -> (&'static str, u64),
) -> (Harness, Vec<u64>) {
    let limit = |max_generations| Config {
        max_generations,
        ..Config::default()
    };
    let mut h = Harness::with(limit(3), 1);
    let started: Vec<(&str, u64)> = (0..3)
        .map(|i| {
            let (name, gen) = start(&mut h, i);
            h.started(gen);
            (name, gen)
        })
        .collect();
    let (mut n, problems) = h.reborn_with(limit(1), h.records(), 5);
    assert_eq!(problems, vec![]);
    for (name, gen) in &started {
        assert!(n.adopt(*gen, name), "{name} gen {gen} taken back");
    }
    (n, started.into_iter().map(|(_, gen)| gen).collect())
}

/// A restart with a lower `--max-running` than what runs takes every process back (none is
/// reported lost while it runs, none is left unsupervised); new starts wait until what
/// runs is below the limit, and a replacement still takes its predecessor's place.
#[test]
fn a_lowered_running_limit_takes_back_what_runs_and_holds_new_starts() {
    let names = ["a", "b", "c"];
    let (mut n, gens) = taken_back_under_a_lower_limit(|h, i| (names[i], h.spawn(names[i])));
    let actions = n.resume();
    assert!(!has(&actions, |a| matches!(
        a,
        Action::Spawn { .. } | Action::Signal { .. }
    )));
    for (name, gen) in names.iter().zip(&gens) {
        let s = n.get(name);
        assert_eq!(s.state, SessionState::Running, "{name}");
        assert_eq!(s.current, Some(*gen));
        assert!(exits_of(&n, *gen).is_empty(), "{name} reported ended");
    }
    let new_session = |n: &mut Harness| n.spawn_with("d", spec(), OnBusy::Replace);
    assert_eq!(new_session(&mut n).unwrap_err().code, ErrorCode::Limit);
    let refused = n.core.export_image().unwrap_err();
    assert!(refused.message().contains("once 2 more"), "{refused:?}");
    // A reload that starts nothing is not refused (nor one that only replaces); one that
    // would start more is.
    n.reload(vec![]).unwrap();
    let config = |name: &str| crate::core::ConfigSession {
        name: name.into(),
        spec: spec(),
        on_busy: OnBusy::Replace,
    };
    let refused = n.reload(vec![config("d")]).unwrap_err();
    assert_eq!(refused.code, ErrorCode::Limit);
    // A replacement of one taken back waits for it, and starts in its place.
    let next = n.spawn_with("a", spec(), OnBusy::Replace).unwrap();
    assert_eq!(n.get("a").current, Some(next));
    assert!(n.all_actions().iter().all(|a| !matches!(
        a,
        Action::Spawn { gen, .. } if *gen == next
    )));
    end(&mut n, gens[0], ExitStatus::Signal(15));
    assert!(has(n.all_actions(), |a| matches!(
        a,
        Action::Spawn { gen, .. } if *gen == next
    )));
    n.started(next);
    // Three run, then two, then one: still at the limit, new starts are refused.
    end(&mut n, gens[1], ExitStatus::Code(0));
    assert_eq!(new_session(&mut n).unwrap_err().code, ErrorCode::Limit);
    end(&mut n, gens[2], ExitStatus::Code(0));
    assert_eq!(new_session(&mut n).unwrap_err().code, ErrorCode::Limit);
    end(&mut n, next, ExitStatus::Code(0));
    new_session(&mut n).unwrap();
}

/// An upgrade image holds what the new program accepts: while processes taken back beyond
/// a lowered limit keep the table above it, the image is refused (the upgrade with it),
/// and this daemon carries on; once enough have ended, it is taken.
#[test]
fn an_image_is_refused_while_what_was_taken_back_exceeds_the_limit() {
    let (mut n, gens) = taken_back_under_a_lower_limit(|h, _| {
        ("a", h.spawn_with("a", spec(), OnBusy::Overlap).unwrap())
    });
    n.resume();
    let refused = n.core.export_image().unwrap_err();
    assert!(refused.message().contains("--max-running"), "{refused:?}");
    end(&mut n, gens[0], ExitStatus::Code(0));
    let refused = n.core.export_image().unwrap_err();
    assert!(refused.message().contains("once 1 more"), "{refused:?}");
    end(&mut n, gens[1], ExitStatus::Code(0));
    assert!(n.core.export_image().is_ok());
}

/// A replacement that was waiting for the generation it replaces when the daemon crashed
/// is not dropped: the lost one is reported `lost`, and a new generation takes its place,
/// starting once the old process (taken back, and stopped as superseded) is gone.
#[test]
fn a_replacement_waiting_at_a_crash_is_started_again_after_it() {
    let mut h = Harness::new();
    let old = h.spawn("a");
    h.started(old);
    let waiting = h.spawn_with("a", on_failure(), OnBusy::Replace).unwrap();
    assert_eq!(h.get("a").generations.len(), 2);
    let (mut n, _) = h.reborn(h.records(), 5);
    assert!(n.adopt(old, "a"));
    let actions = n.resume();
    stop_carried_on(&n, &actions, old);
    let ends = exits_of(&n, waiting);
    assert!(
        matches!(
            ends[..],
            [Event::Exited {
                cause: ExitCause::Lost,
                ..
            }]
        ),
        "{ends:?}"
    );
    let s = n.get("a");
    let next = s.current.expect("a replacement is current again");
    assert!(next > waiting);
    assert_eq!(s.restarts, 0);
    assert!(!has(n.all_actions(), |a| matches!(a, Action::Spawn { .. })));
    end(&mut n, old, ExitStatus::Signal(15));
    assert!(has(n.all_actions(), |a| matches!(
        a,
        Action::Spawn { gen, .. } if *gen == next
    )));
    n.started(next);
    assert_eq!(n.get("a").state, SessionState::Running);
}

/// A generation spawned with `on_busy: overlap` that a crash caught in its start comes
/// back as it was asked for: its successor starts at once, beside the older generation
/// taken back (which is stopped as superseded), not after it.
#[test]
fn an_overlapping_start_caught_by_a_crash_overlaps_again() {
    let mut h = Harness::new();
    let old = h.spawn("a");
    h.started(old);
    let lost = h.spawn_with("a", on_failure(), OnBusy::Overlap).unwrap();
    let records = h.records();
    assert!(records
        .iter()
        .any(|r| r.current == Some(lost) && r.current_overlaps));
    let (mut n, _) = h.reborn(records, 5);
    assert!(n.adopt(old, "a"));
    let actions = n.resume();
    let next = n.get("a").current.expect("a successor is current");
    assert!(next > lost);
    assert!(has(&actions, |a| matches!(
        a,
        Action::Spawn { gen, .. } if *gen == next
    )));
    stop_carried_on(&n, &actions, old);
    n.started(next);
    assert_eq!(n.get("a").state, SessionState::Running);
    assert_eq!(n.get("a").restarts, 0);
}

/// The same when the generation it replaced ended while no daemon ran (found gone at the
/// restart, reported `lost`): the new generation starts at once, uncounted.
#[test]
fn a_replacement_waiting_at_a_crash_starts_at_once_when_its_predecessor_is_gone() {
    let mut h = Harness::new();
    let old = h.spawn("a");
    h.started(old);
    let waiting = h.spawn_with("a", on_failure(), OnBusy::Replace).unwrap();
    let (mut n, _) = h.reborn(h.records(), 5);
    assert!(n.adopt(old, "a"));
    n.input(Input::Lost { gen: old });
    n.resume();
    for gen in [old, waiting] {
        let ends = exits_of(&n, gen);
        let lost = matches!(
            ends[..],
            [Event::Exited {
                cause: ExitCause::Lost,
                ..
            }]
        );
        assert!(lost, "gen {gen}: {ends:?}");
    }
    let s = n.get("a");
    let next = s.current.expect("a replacement is current again");
    assert_eq!(s.restarts, 0);
    assert!(has(n.all_actions(), |a| matches!(
        a,
        Action::Spawn { gen, .. } if *gen == next
    )));
}

/// A restart with a lower `--max-sessions` than the sessions on disk takes every one back
/// (none is left out with its processes unsupervised); new sessions are refused until
/// there are fewer, and an upgrade image until they fit.
#[test]
fn a_lowered_session_limit_takes_back_every_session() {
    let mut h = Harness::new();
    let run = h.spawn("run");
    h.started(run);
    for name in ["a", "b"] {
        let gen = h.spawn(name);
        h.started(gen);
        end(&mut h, gen, ExitStatus::Code(0));
    }
    let tight = Config {
        max_sessions: 1,
        ..Config::default()
    };
    let (mut n, problems) = h.reborn_with(tight, h.records(), 5);
    assert_eq!(problems, vec![]);
    assert!(n.adopt(run, "run"));
    n.resume();
    assert_eq!(n.core.list().len(), 3);
    assert_eq!(n.get("run").current, Some(run));
    let refused = n.spawn_with("c", spec(), OnBusy::Replace).unwrap_err();
    assert_eq!(refused.code, ErrorCode::Limit);
    assert!(n.core.export_image().is_err());
    // An existing session still takes a new start.
    n.spawn_with("a", spec(), OnBusy::Replace).unwrap();
    for name in ["a", "b"] {
        n.cmd(Command::Remove {
            session: name.into(),
        })
        .unwrap();
    }
    n.settle();
    assert!(n.core.export_image().is_ok());
}

/// A generation whose session did not come back (its record was moved aside) is not
/// taken: the driver asks first, and leaves the process to the sweep.
#[test]
fn no_adoption_without_its_session() {
    let mut h = Harness::new();
    let a = h.spawn("a");
    h.started(a);
    let (mut n, _) = h.reborn(vec![], 5);
    assert!(!n.core.would_adopt(a, "a"));
    assert!(!n.adopt(a, "a"));
}
