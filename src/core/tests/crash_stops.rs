//! A crash in the middle of a stop, or while a generation's tree is being emptied: the
//! next daemon carries on from its records where the stop was — its own grace and
//! deadlines, nothing sent twice, the cause of a SIGKILL it sent — and keeps a tree
//! still in its cgroup tracked until it is gone (see `StopRecord`).

use std::time::Duration;

use super::harness::{has, spec, Harness};
use crate::core::{
    Action, Command, Containment, Event, ExitCause, ExitStatus, Input, Lifecycle, OnBusy, Scope,
    SessionRecord, StopStage,
};

const TERM: i32 = 15;
const KILL: i32 = 9;
/// Sent behind a stop signal, so a stopped leader runs its handler.
const CONT: i32 = crate::core::signal::SIGCONT;

/// The signals `actions` send to `gen`, with their scope.
fn signals(actions: &[Action], gen: u64) -> Vec<(i32, Scope)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal {
                gen: g,
                signal,
                scope,
            } if *g == gen => Some((*signal, *scope)),
            _ => None,
        })
        .collect()
}

fn exits(h: &Harness, gen: u64) -> Vec<Event> {
    h.events_of(gen)
        .into_iter()
        .filter(Event::is_terminal)
        .collect()
}

fn lifecycle(h: &Harness, session: &str, gen: u64) -> Option<Lifecycle> {
    let s = h.core.get(session)?;
    let g = s.generations.iter().find(|g| g.gen == gen)?;
    Some(g.lifecycle)
}

/// Spawns `s` with a 2 s grace (its spec's), started.
fn running(h: &mut Harness) -> u64 {
    let mut sp = spec();
    sp.grace = Duration::from_secs(2);
    let g = h.spawn_with("s", sp, OnBusy::Replace).unwrap();
    h.started(g);
    g
}

/// Takes `gen` of `s` back in a daemon started `later_ms` after `h`'s crash, from
/// `records`, adopted in `containment`; returns it with the actions of the resume.
fn take_back(
    h: &Harness,
    records: Vec<SessionRecord>,
    later_ms: u64,
    gen: u64,
    containment: Containment,
) -> (Harness, Vec<Action>) {
    let (mut n, problems) = h.reborn(records, later_ms);
    assert!(problems.is_empty(), "{problems:?}");
    n.input(Input::Adopt {
        gen,
        session: "s".into(),
        pid: 1000 + gen as u32,
        containment,
        verified: true,
        io: None,
        started_unix_ms: 1_600_000_000_000,
    });
    assert!(n.core.awaits_exit(gen));
    let actions = n.resume();
    (n, actions)
}

/// A client's `stop` with its own 30 s grace (the spec's is 2 s), 10 s before a crash:
/// the next daemon sends no second TERM, and its SIGKILL comes 30 s after the stop
/// began — 20 s after the restart — not the spec's 2 s after it.
#[test]
fn a_stop_under_way_keeps_its_own_grace_and_deadline_and_is_not_signalled_again() {
    let mut h = Harness::new();
    let g = running(&mut h);
    let a = h.input(Input::Command {
        request: 1,
        command: Command::Stop {
            session: "s".into(),
            if_gen: None,
            grace: Some(Duration::from_secs(30)),
        },
    });
    assert_eq!(
        signals(&a, g),
        [(TERM, Scope::Leader), (CONT, Scope::Leader)]
    );
    h.advance(4_000);
    // It crashes at 4 s; the next daemon starts 6 s later.
    let (mut n, resumed) = take_back(&h, h.records(), 6_000, g, Containment::Session);
    assert!(signals(&resumed, g).is_empty(), "{resumed:?}");
    assert_eq!(
        lifecycle(&n, "s", g),
        Some(Lifecycle::Stopping(StopStage::Graceful))
    );
    assert!(signals(&n.advance(19_999), g).is_empty());
    assert_eq!(signals(&n.advance(1), g), [(KILL, Scope::Leader)]);
    // Its SIGKILL ends it: `killed`, as without the crash.
    n.ends(g, ExitStatus::Signal(KILL));
    assert!(matches!(
        exits(&n, g)[..],
        [Event::Exited {
            cause: ExitCause::Killed,
            ..
        }]
    ));
    n.settle();
}

/// A generation replaced by a spawn whose spec has a 2 s grace keeps its own 30 s one
/// across a crash: nothing is sent to it until its own deadline, and it may end on its
/// own meanwhile, `superseded`.
#[test]
fn a_replaced_generation_keeps_its_own_specs_grace() {
    let mut h = Harness::new();
    let mut long = spec();
    long.grace = Duration::from_secs(30);
    let old = h.spawn_with("s", long, OnBusy::Replace).unwrap();
    h.started(old);
    let mut short = spec();
    short.grace = Duration::from_secs(2);
    let new = h.spawn_with("s", short, OnBusy::Replace).unwrap();
    assert_eq!(
        signals(h.all_actions(), old),
        [(TERM, Scope::Leader), (CONT, Scope::Leader)]
    );
    let (mut n, resumed) = take_back(&h, h.records(), 1_000, old, Containment::Session);
    assert!(signals(&resumed, old).is_empty(), "{resumed:?}");
    // Past the new spec's grace: nothing.
    assert!(signals(&n.advance(5_000), old).is_empty());
    n.ends(old, ExitStatus::Code(5));
    assert!(matches!(
        exits(&n, old)[..],
        [Event::Exited {
            code: Some(5),
            cause: ExitCause::Superseded,
            ..
        }]
    ));
    // The replacement the crash caught waiting takes its place.
    assert!(n.get("s").current.is_some_and(|c| c > new));
    n.settle();
}

/// The stop's SIGKILL was sent before the crash and the leader dies only after it (a
/// process frozen, or not reaped yet): the end is `killed`, not `stopped`; the SIGKILL
/// is sent once more (harmless) and `unkillable` stays due when it was.
#[test]
fn a_leader_sigkilled_before_the_crash_ends_killed_after_it() {
    let mut h = Harness::new();
    let g = running(&mut h);
    h.stop("s", None).unwrap();
    let a = h.advance(2_000);
    assert_eq!(signals(&a, g), [(KILL, Scope::Leader)]);
    let (mut n, resumed) = take_back(&h, h.records(), 50, g, Containment::Session);
    assert_eq!(signals(&resumed, g), [(KILL, Scope::Leader)]);
    assert_eq!(
        lifecycle(&n, "s", g),
        Some(Lifecycle::Stopping(StopStage::Kill))
    );
    n.ends(g, ExitStatus::Signal(KILL));
    assert!(matches!(
        exits(&n, g)[..],
        [Event::Exited {
            cause: ExitCause::Killed,
            ..
        }]
    ));
    n.settle();
}

/// A record of an earlier daemon (no `stops`) behaves as before: the stop begins again.
#[test]
fn a_record_without_stops_begins_the_stop_again() {
    let mut h = Harness::new();
    let g = running(&mut h);
    h.stop("s", None).unwrap();
    let mut records = h.records();
    assert!(!records[0].stops.is_empty());
    records[0].stops.clear();
    let (_, resumed) = take_back(&h, records, 50, g, Containment::Session);
    assert_eq!(
        signals(&resumed, g),
        [(TERM, Scope::Leader), (CONT, Scope::Leader)]
    );
}

/// Stopped, its leader gone and its end reported, its tree waiting out `kill_grace` in
/// its cgroup when the daemon crashes: the next daemon takes the tree back, kills it
/// whole at once, lists the generation until the cgroup is empty, and only then
/// releases it.
#[test]
fn a_tree_being_emptied_at_a_crash_is_killed_whole_and_released_once_empty() {
    let mut h = Harness::new();
    let g = running(&mut h);
    h.stop("s", None).unwrap();
    h.exit(g, ExitStatus::Signal(TERM));
    h.eof(g);
    assert_eq!(exits(&h, g).len(), 1);
    let records = h.records();
    assert!(records[0]
        .stops
        .iter()
        .any(|s| s.gen == g && s.tree.is_some()));
    let (mut n, _) = h.reborn(records, 50);
    assert!(n.core.would_adopt_tree(g, "s"));
    n.input(Input::AdoptTree {
        gen: g,
        session: "s".into(),
        pid: 1000 + g as u32,
    });
    let a = n.resume();
    assert_eq!(signals(&a, g), [(KILL, Scope::Tree)]);
    assert_eq!(lifecycle(&n, "s", g), Some(Lifecycle::Reported));
    assert!(n.core.groups_awaited().any(|(gen, _)| gen == g));
    // Not released before the tree is seen empty, however long that takes...
    let a = n.advance(10_000);
    assert!(has(
        &a,
        |a| matches!(a, Action::Emit(Event::Unkillable { gen, .. }) if *gen == g)
    ));
    assert!(!has(&a, |a| matches!(a, Action::Release { .. })));
    assert_eq!(lifecycle(&n, "s", g), Some(Lifecycle::TreeUnkillable));
    // ... and then released, its end not reported a second time.
    let a = n.group_empty(g);
    assert!(has(
        &a,
        |a| matches!(a, Action::Release { gen } if *gen == g)
    ));
    assert!(exits(&n, g).is_empty());
    assert_eq!(lifecycle(&n, "s", g), None);
}

/// A tree member that survived SIGKILL (`unkillable`) at the crash stays listed so after
/// it, and the generation is released once the member is gone.
#[test]
fn an_unkillable_tree_member_stays_listed_across_a_crash() {
    let mut h = Harness::new();
    let g = running(&mut h);
    h.stop("s", None).unwrap();
    h.exit(g, ExitStatus::Signal(TERM));
    h.eof(g);
    // Its TERM's grace, then its SIGKILL's `kill_grace`.
    h.advance(10_000);
    h.advance(10_000);
    assert_eq!(lifecycle(&h, "s", g), Some(Lifecycle::TreeUnkillable));
    let (mut n, _) = h.reborn(h.records(), 50);
    n.input(Input::AdoptTree {
        gen: g,
        session: "s".into(),
        pid: 1000 + g as u32,
    });
    n.resume();
    assert_eq!(lifecycle(&n, "s", g), Some(Lifecycle::TreeUnkillable));
    let a = n.group_empty(g);
    assert!(has(
        &a,
        |a| matches!(a, Action::Release { gen } if *gen == g)
    ));
}

/// A leader in its cgroup that died while no daemon ran (its status lost): its end is
/// reported `lost`, and its tree is killed whole and awaited before it is released.
#[test]
fn a_lost_leader_in_its_cgroup_has_its_tree_killed_and_awaited() {
    let mut h = Harness::new();
    let g = running(&mut h);
    let (mut n, _) = h.reborn(h.records(), 50);
    n.input(Input::Adopt {
        gen: g,
        session: "s".into(),
        pid: 1000 + g as u32,
        containment: Containment::Cgroup,
        verified: true,
        io: None,
        started_unix_ms: 1_600_000_000_000,
    });
    let a = n.input(Input::Lost { gen: g });
    assert_eq!(signals(&a, g), [(KILL, Scope::Tree)]);
    assert!(!has(&a, |a| matches!(a, Action::Release { .. })));
    assert!(matches!(
        exits(&n, g)[..],
        [Event::Exited {
            cause: ExitCause::Lost,
            ..
        }]
    ));
    let a = n.group_empty(g);
    assert!(has(
        &a,
        |a| matches!(a, Action::Release { gen } if *gen == g)
    ));
}
