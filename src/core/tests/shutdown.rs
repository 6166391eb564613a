//! Stopping everything at once (the daemon's shutdown) and bringing a running stop's
//! SIGKILL forward.

use std::time::Duration;

use super::harness::{has, spec, Harness};
use crate::core::{Action, Command, Event, OnBusy, Response, Scope, SessionState};

const SIGKILL: i32 = 9;

fn kill_sent(actions: &[Action], gen: u64) -> bool {
    has(
        actions,
        |a| matches!(a, Action::Signal { gen: g, signal: SIGKILL, scope: Scope::Leader } if *g == gen),
    )
}

/// Whether `actions` hold SIGKILL to `gen`'s whole tree (what a second shutdown sends).
fn tree_killed(actions: &[Action], gen: u64) -> bool {
    has(
        actions,
        |a| matches!(a, Action::Signal { gen: g, signal: SIGKILL, scope: Scope::Tree } if *g == gen),
    )
}

/// Every action taken from log position `from` on.
fn since(h: &Harness, from: usize) -> Vec<Action> {
    h.all_actions()[from..].to_vec()
}

#[test]
fn a_shorter_second_grace_brings_the_kill_forward_and_a_longer_one_never_delays_it() {
    let mut h = Harness::new();
    let mut s = spec();
    s.grace = Duration::from_secs(60);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    h.stop("a", None).unwrap();
    // A longer grace is ignored: nothing at 59 s, kill at 60 s... unless shortened.
    h.cmd(Command::Stop {
        session: "a".into(),
        if_gen: None,
        grace: Some(Duration::from_secs(3600)),
    })
    .unwrap();
    assert!(!kill_sent(&h.advance(1_000), gen));
    h.cmd(Command::Stop {
        session: "a".into(),
        if_gen: None,
        grace: Some(Duration::ZERO),
    })
    .unwrap();
    assert!(
        kill_sent(&h.advance(0), gen),
        "grace 0 kills at the next timeout"
    );
    h.settle();
}

#[test]
fn shutdown_reaches_superseded_generations_and_cancels_restarts() {
    let mut h = Harness::new();
    let mut stubborn = spec();
    stubborn.grace = Duration::from_secs(60);
    let old = h
        .spawn_with("a", stubborn.clone(), OnBusy::Replace)
        .unwrap();
    h.started(old);
    // Overlap: `old` is superseded and stopping on its 60 s grace; `new` runs.
    let new = h.spawn_with("a", stubborn, OnBusy::Overlap).unwrap();
    h.started(new);
    let mut restarting = spec();
    restarting.restart.mode = crate::core::Restart::Always;
    let r = h.spawn_with("b", restarting, OnBusy::Replace).unwrap();
    h.started(r);
    h.exit(r, crate::core::ExitStatus::Code(1));
    h.eof(r);
    h.group_empty(r);
    assert_eq!(h.get("b").state, SessionState::Backoff);

    // Asked twice: the second kills at once.
    assert_eq!(h.cmd(Command::Shutdown), Ok(Response::Ok));
    let from = h.all_actions().len();
    let reply = h.cmd(Command::Shutdown);
    assert_eq!(reply, Ok(Response::Ok));
    let actions = since(&h, from);
    assert!(
        tree_killed(&actions, old),
        "the superseded generation is killed too"
    );
    assert!(tree_killed(&actions, new));
    assert_ne!(
        h.get("b").state,
        SessionState::Backoff,
        "the restart was cancelled"
    );
    let next = h.core.next_generation();
    h.advance(60_000);
    assert_eq!(
        h.core.next_generation(),
        next,
        "no restart after a shutdown"
    );
    h.settle();
    assert_eq!(h.core.generation_count(), 0);
}

#[test]
fn the_shortest_grace_wins_even_before_the_process_runs() {
    let mut h = Harness::new();
    let gen = h.spawn("a");
    for grace in [Duration::from_secs(100), Duration::ZERO] {
        h.cmd(Command::Stop {
            session: "a".into(),
            if_gen: None,
            grace: Some(grace),
        })
        .unwrap();
    }
    h.started(gen);
    assert!(kill_sent(&h.advance(1), gen));
    h.settle();
}

#[test]
fn a_sub_millisecond_grace_is_not_zero() {
    use crate::core::Time;
    assert_eq!(
        Time::ZERO.saturating_add(Duration::from_micros(900)),
        Time::from_millis(1)
    );
    assert_eq!(
        Time::ZERO.saturating_add(Duration::from_millis(5)),
        Time::from_millis(5)
    );
}

#[test]
fn a_second_shutdown_kills_the_rest_of_a_group_at_once() {
    let mut h = Harness::new();
    let mut s = spec();
    s.kill_grace = Duration::from_secs(60);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    // The leader exits; its group got SIGTERM and has 60 s before SIGKILL.
    h.exit(gen, crate::core::ExitStatus::Code(0));
    assert!(!has(&h.advance(1_000), |a| matches!(
        a,
        Action::Signal {
            scope: Scope::Tree,
            signal: SIGKILL,
            ..
        }
    )));
    h.cmd(Command::Shutdown).unwrap();
    let from = h.all_actions().len();
    h.cmd(Command::Shutdown).unwrap();
    assert!(tree_killed(&since(&h, from), gen));
    h.settle();
}

/// A second shutdown kills every process of every generation at once, whatever stage its
/// stop reached: a leader still in its grace (its whole tree, not its leader alone), a
/// leader dead whose group is in its TERM's grace, a leader dead whose status is still
/// to come (its group the moment it comes), one still starting (the moment it runs) —
/// and nothing is left to wait out a grace or `kill_grace`.
#[test]
fn a_second_shutdown_kills_every_tree_at_once_whatever_its_stage() {
    let mut h = Harness::new();
    let mut s = spec();
    s.grace = Duration::from_secs(3600);
    s.kill_grace = Duration::from_secs(3600);
    let in_grace = h.spawn_with("grace", s.clone(), OnBusy::Replace).unwrap();
    h.started(in_grace);
    let group_term = h.spawn_with("group", s.clone(), OnBusy::Replace).unwrap();
    h.started(group_term);
    let awaited = h.spawn_with("awaited", s.clone(), OnBusy::Replace).unwrap();
    h.started(awaited);
    let starting = h.spawn_with("starting", s, OnBusy::Replace).unwrap();

    h.cmd(Command::Shutdown).unwrap();
    // Each in its stage: `in_grace`'s leader ignores its TERM; `group_term`'s leader
    // ended, its group got TERM and has `kill_grace`; `awaited`'s leader is known gone,
    // its status not seen yet; `starting` has not run yet.
    h.exit(group_term, crate::core::ExitStatus::Signal(15));
    h.eof(group_term);
    h.input(crate::core::Input::LeaderGone { gen: awaited });
    h.advance(1_000);
    assert!(
        !has(h.all_actions(), |a| matches!(
            a,
            Action::Signal {
                signal: SIGKILL,
                ..
            }
        )),
        "nothing killed before the second shutdown"
    );

    let from = h.all_actions().len();
    h.cmd(Command::Shutdown).unwrap();
    let now = since(&h, from);
    assert!(
        tree_killed(&now, in_grace),
        "the whole tree, not the leader alone"
    );
    assert!(
        tree_killed(&now, group_term),
        "the group, without waiting out kill_grace"
    );
    assert!(
        !kill_sent(&now, in_grace),
        "the tree's kill includes its leader"
    );

    // The rest the moment it can be: the awaited one's group at its status, the starting
    // one once it runs.
    let at_exit = h.exit(awaited, crate::core::ExitStatus::Code(0));
    assert!(tree_killed(&at_exit, awaited));
    let at_start = h.started(starting);
    assert!(tree_killed(&at_start, starting));

    // Their leaders die of it; no deadline is left to wait for.
    for gen in [in_grace, starting] {
        h.exit(gen, crate::core::ExitStatus::Signal(SIGKILL));
    }
    for gen in [in_grace, awaited, starting] {
        h.eof(gen);
    }
    // Their trees, sent SIGKILL, are seen empty: nothing is left to wait for.
    h.advance(0);
    for gen in [in_grace, group_term, awaited, starting] {
        h.group_empty(gen);
    }
    assert!(h.core.is_shut_down(), "everything is reaped: nothing waits");
    assert_eq!(h.core.generation_count(), 0);
    let killed = h.events_of(in_grace).into_iter().any(|e| {
        matches!(
            e,
            Event::Exited {
                cause: crate::core::ExitCause::Killed,
                ..
            }
        )
    });
    assert!(killed, "its end says it was killed");
    h.settle();
}

/// A process that survives SIGKILL cannot hold the daemon's shutdown forever: once every
/// generation left is `unkillable`, the shutdown is complete.
#[test]
fn a_shutdown_completes_when_only_unkillable_processes_are_left() {
    let mut h = Harness::new();
    let stuck = h.spawn("stuck");
    h.started(stuck);
    let fine = h.spawn("fine");
    h.started(fine);
    h.cmd(Command::Shutdown).unwrap();
    assert!(!h.core.is_shut_down());
    h.exit(fine, crate::core::ExitStatus::Signal(15));
    h.eof(fine);
    h.group_empty(fine);
    assert!(!h.core.is_shut_down(), "stuck is still being stopped");
    // A second shutdown: SIGKILL now; it survives kill_grace.
    h.cmd(Command::Shutdown).unwrap();
    h.advance(0);
    assert!(!h.core.is_shut_down());
    let a = h.advance(200);
    assert!(has(
        &a,
        |a| matches!(a, Action::Emit(Event::Unkillable { gen, .. }) if *gen == stuck)
    ));
    assert!(h.core.is_shut_down());
    assert_eq!(
        h.core.generation_count(),
        1,
        "still tracked, just not waited for"
    );
    h.settle();
}

/// `stop` with a grace bounds the leader's whole tree: once the leader is gone, what it
/// left behind gets SIGKILL after that grace, not after the spec's `kill_grace`.
#[test]
fn a_stop_grace_bounds_what_the_leader_leaves() {
    let mut h = Harness::new();
    let mut s = spec();
    s.kill_grace = Duration::from_secs(60);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    h.cmd(Command::Stop {
        session: "a".into(),
        if_gen: None,
        grace: Some(Duration::ZERO),
    })
    .unwrap();
    h.advance(0);
    h.exit(gen, crate::core::ExitStatus::Signal(SIGKILL));
    let actions = h.advance(0);
    assert!(has(&actions, |a| matches!(
        a,
        Action::Signal { gen: g, scope: Scope::Tree, signal: SIGKILL } if *g == gen
    )));
    h.settle();
}

/// A stop that arrives after the leader is known gone still bounds its tree.
#[test]
fn a_stop_after_the_leader_died_still_bounds_its_tree() {
    let mut h = Harness::new();
    let mut s = spec();
    s.kill_grace = Duration::from_secs(60);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    h.exit(gen, crate::core::ExitStatus::Code(0));
    h.advance(1_000);
    h.cmd(Command::Stop {
        session: "a".into(),
        if_gen: None,
        grace: Some(Duration::from_millis(500)),
    })
    .ok();
    let actions = h.advance(500);
    assert!(has(&actions, |a| matches!(
        a,
        Action::Signal { gen: g, scope: Scope::Tree, signal: SIGKILL } if *g == gen
    )));
    h.settle();
}

/// A `stop` with `grace` for session "a".
fn stop_with(h: &mut Harness, grace: Duration) {
    h.cmd(Command::Stop {
        session: "a".into(),
        if_gen: None,
        grace: Some(grace),
    })
    .unwrap();
}

/// A generation of "a" running, with an hour for its grace and its `kill_grace`: nothing
/// it runs is killed within a test unless a stop brings it forward.
fn running_for_an_hour(h: &mut Harness) -> u64 {
    let mut s = spec();
    s.grace = Duration::from_secs(3600);
    s.kill_grace = Duration::from_secs(3600);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    gen
}

/// The leader of `gen` dies of its SIGKILL: its group gets TERM, then — its stop's
/// shortest grace being 0 — SIGKILL at once; its output then ends and the exit is
/// reported whole.
fn leader_dies_and_its_tree_is_killed_at_once(h: &mut Harness, gen: u64) {
    let mut actions = h.exit(gen, crate::core::ExitStatus::Signal(SIGKILL));
    actions.extend(h.advance(0));
    assert!(
        tree_killed(&actions, gen),
        "what the leader left is killed at once, not after kill_grace"
    );
    h.eof(gen);
    let truncated = h.events_of(gen).into_iter().find_map(|e| match e {
        Event::Exited { truncated, .. } => Some(truncated),
        _ => None,
    });
    assert_eq!(truncated, Some(false), "reported once its output ended");
    h.settle();
}

/// `stop` with a long grace, then `stop` with grace 0 while the leader still runs its
/// grace: the leader is killed at once, and so is what it leaves once it ends — the
/// second grace bounds the whole tree, not only the leader.
#[test]
fn a_shorter_second_grace_reaches_the_tree_of_a_leader_in_its_grace() {
    let mut h = Harness::new();
    let gen = running_for_an_hour(&mut h);
    stop_with(&mut h, Duration::from_secs(3600));
    assert!(!kill_sent(&h.advance(1_000), gen));
    stop_with(&mut h, Duration::ZERO);
    assert!(
        kill_sent(&h.advance(0), gen),
        "the leader's kill comes forward"
    );
    leader_dies_and_its_tree_is_killed_at_once(&mut h, gen);
}

/// A stop whose leader already got its SIGKILL (its grace ran out) and has not died yet:
/// a second stop with grace 0 has nothing left to bring forward for the leader, but it
/// still bounds what the leader leaves.
#[test]
fn a_shorter_second_grace_reaches_the_tree_of_a_leader_already_killed() {
    let mut h = Harness::new();
    let mut s = spec();
    s.kill_grace = Duration::from_secs(3600);
    let gen = h.spawn_with("a", s, OnBusy::Replace).unwrap();
    h.started(gen);
    h.stop("a", None).unwrap();
    assert!(kill_sent(&h.advance(100), gen), "the spec's grace ran out");
    stop_with(&mut h, Duration::ZERO);
    leader_dies_and_its_tree_is_killed_at_once(&mut h, gen);
}

/// The leader is known gone (its status still to come) when the second stop arrives:
/// its group gets its KILL as soon as the status comes.
#[test]
fn a_shorter_second_grace_reaches_the_tree_of_a_leader_known_gone() {
    let mut h = Harness::new();
    let gen = running_for_an_hour(&mut h);
    stop_with(&mut h, Duration::from_secs(3600));
    h.input(crate::core::Input::LeaderGone { gen });
    stop_with(&mut h, Duration::ZERO);
    leader_dies_and_its_tree_is_killed_at_once(&mut h, gen);
}

/// The leader ended in its long grace and its group got TERM with an hour to go: a
/// second stop with grace 0 kills the group at once.
#[test]
fn a_shorter_second_grace_reaches_the_group_a_leader_left() {
    let mut h = Harness::new();
    let gen = running_for_an_hour(&mut h);
    stop_with(&mut h, Duration::from_secs(3600));
    h.exit(gen, crate::core::ExitStatus::Signal(15));
    assert!(!tree_killed(&h.advance(1_000), gen));
    stop_with(&mut h, Duration::ZERO);
    assert!(
        tree_killed(&h.advance(0), gen),
        "the group's kill comes forward"
    );
    h.eof(gen);
    h.settle();
}
