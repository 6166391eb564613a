//! Reloading a configuration: the plan (start, stop, replace, busy, unchanged) as a pure
//! function of config and table, carried out by the core; client sessions untouched; a
//! refused config changing nothing; a restarted daemon reconciling as a reload does.

use std::sync::Arc;

use super::harness::{has, spec, Harness};
use crate::core::{
    ConfigSession, Error, ErrorCode, ExitStatus, OnBusy, Origin, Plan, SessionState, Spec,
};

fn entry(name: &str, spec: Spec) -> ConfigSession {
    ConfigSession {
        name: Arc::from(name),
        spec,
        on_busy: OnBusy::Replace,
    }
}

fn names(list: &[Arc<str>]) -> Vec<&str> {
    list.iter().map(|n| &**n).collect()
}

/// A spec depending on session `on` being started.
fn with_dep(on: &str) -> Spec {
    let mut s = spec();
    s.depends_on
        .insert(on.to_owned(), crate::core::DependOn::Started);
    s
}

/// Whether `actions` signal generation `gen` (its stop begins).
fn stopped(actions: &[crate::core::Action], gen: u64) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, crate::core::Action::Signal { gen: g, .. } if *g == gen))
}

fn other_spec() -> Spec {
    let mut s = spec();
    s.argv.push(b"--verbose".to_vec());
    s
}

fn reload(h: &mut Harness, config: Vec<ConfigSession>) -> Result<Plan, Error> {
    h.reload(config)
}

/// The current generation of `name`, started.
fn run(h: &mut Harness, name: &str) -> u64 {
    let gen = h.get(name).current.expect("a current generation");
    h.started(gen);
    gen
}

#[test]
fn a_first_reload_starts_every_session_of_the_config() {
    let mut h = Harness::new();
    let plan = reload(&mut h, vec![entry("web", spec()), entry("db", spec())]).unwrap();
    assert_eq!(names(&plan.start), ["db", "web"]);
    assert!(plan.stop.is_empty() && plan.replace.is_empty() && plan.unchanged.is_empty());
    let web = run(&mut h, "web");
    assert_eq!(h.get("web").state, SessionState::Running);
    assert_eq!(h.core.sessions["web"].origin, Origin::Config);
    assert!(web > 0);
}

#[test]
fn a_reload_adds_removes_replaces_and_leaves_the_rest_alone() {
    let mut h = Harness::new();
    let config = vec![entry("a", spec()), entry("b", spec()), entry("c", spec())];
    reload(&mut h, config).unwrap();
    let (a, b, c) = (run(&mut h, "a"), run(&mut h, "b"), run(&mut h, "c"));
    let dry = vec![
        entry("a", spec()),
        entry("b", other_spec()),
        entry("d", spec()),
    ];
    let planned = h.core.plan_reload(&dry).unwrap();
    let plan = reload(&mut h, dry).unwrap();
    assert_eq!(planned, plan, "a dry run plans what the reload does");
    assert_eq!(names(&plan.start), ["d"]);
    assert_eq!(names(&plan.stop), ["c"]);
    assert_eq!(names(&plan.replace), ["b"]);
    assert_eq!(names(&plan.unchanged), ["a"]);
    // Unchanged: same generation, untouched.
    let snap = h.get("a");
    assert_eq!(snap.current, Some(a));
    assert_eq!(snap.state, SessionState::Running);
    assert!(h.events_of(a).iter().all(|e| !e.is_terminal()));
    // Replaced: a new generation, the old one superseded.
    assert_ne!(h.get("b").current, Some(b));
    assert_eq!(*h.core.sessions["b"].spec, other_spec());
    // Removed: stopping, then gone once its generation ended.
    assert_eq!(h.get("c").state, SessionState::Removing);
    h.ends(c, ExitStatus::Signal(15));
    assert!(!h.core.has_session("c"));
    h.settle();
}

#[test]
fn a_dry_run_changes_nothing() {
    let mut h = Harness::new();
    reload(&mut h, vec![entry("a", spec())]).unwrap();
    let a = run(&mut h, "a");
    let before = h.records();
    let queued = h.core.queued_actions();
    let plan = h
        .core
        .plan_reload(&[entry("a", other_spec()), entry("z", spec())])
        .unwrap();
    assert_eq!(names(&plan.replace), ["a"]);
    assert_eq!(names(&plan.start), ["z"]);
    assert_eq!(h.records(), before);
    assert_eq!(h.core.queued_actions(), queued);
    assert_eq!(h.get("a").current, Some(a));
}

#[test]
fn client_sessions_are_never_touched_and_cannot_be_claimed() {
    let mut h = Harness::new();
    let mine = h.spawn("mine");
    h.started(mine);
    // Not in the config: not stopped.
    let plan = reload(&mut h, vec![entry("web", spec())]).unwrap();
    assert!(plan.stop.is_empty());
    assert_eq!(h.get("mine").current, Some(mine));
    // In the config: refused, naming it, and nothing changes (web is not removed either).
    let before = h.records();
    let e = reload(&mut h, vec![entry("mine", spec())]).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadConfig);
    assert!(
        e.message.contains("\"mine\" was started by a client"),
        "{e}"
    );
    assert_eq!(h.records(), before);
}

#[test]
fn an_invalid_entry_refuses_the_whole_config() {
    let mut h = Harness::new();
    reload(&mut h, vec![entry("a", spec())]).unwrap();
    let before = h.records();
    let bad = Spec::new(Vec::new());
    let e = reload(&mut h, vec![entry("b", spec()), entry("c", bad)]).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadConfig);
    assert!(e.message.starts_with("c: "), "{e}");
    let e = reload(&mut h, vec![entry("b", spec()), entry("b", spec())]).unwrap_err();
    assert!(e.message.contains("configured twice"), "{e}");
    assert_eq!(h.records(), before);
    assert!(!h.core.has_session("b"));
}

#[test]
fn reject_leaves_a_changed_running_session_as_it_runs() {
    let mut h = Harness::new();
    reload(&mut h, vec![entry("a", spec())]).unwrap();
    let a = run(&mut h, "a");
    let mut changed = entry("a", other_spec());
    changed.on_busy = OnBusy::Reject;
    let plan = reload(&mut h, vec![changed]).unwrap();
    assert_eq!(names(&plan.busy), ["a"]);
    assert_eq!(h.get("a").current, Some(a));
}

/// The spec a busy session was left running with is not what it starts next: its next
/// start (here its restart policy's) runs the config's new spec, and a later reload finds
/// it unchanged instead of busy again.
#[test]
fn a_busy_session_starts_the_new_spec_next() {
    use crate::core::{Action, Restart};
    let mut h = Harness::new();
    let mut old = spec();
    old.restart.mode = Restart::Always;
    let mut new = other_spec();
    new.restart.mode = Restart::Always;
    reload(&mut h, vec![entry("a", old)]).unwrap();
    let a = run(&mut h, "a");
    let mut changed = entry("a", new.clone());
    changed.on_busy = OnBusy::Reject;
    let plan = reload(&mut h, vec![changed.clone()]).unwrap();
    assert_eq!(names(&plan.busy), ["a"]);
    let again = reload(&mut h, vec![changed]).unwrap();
    assert_eq!(names(&again.unchanged), ["a"], "{again:?}");
    h.ends(a, ExitStatus::Code(1));
    h.advance(60_000);
    let next = h.get("a").current.expect("restarted");
    assert!(next > a);
    let spawned = h.all_actions().iter().find_map(|x| match x {
        Action::Spawn { gen, spec, .. } if *gen == next => Some(spec.clone()),
        _ => None,
    });
    assert_eq!(spawned.as_deref(), Some(&new));
    h.settle();
}

#[test]
fn a_removed_config_session_comes_back_when_configured_again() {
    let mut h = Harness::new();
    reload(&mut h, vec![entry("a", spec())]).unwrap();
    let a = run(&mut h, "a");
    reload(&mut h, vec![]).unwrap();
    assert_eq!(h.get("a").state, SessionState::Removing);
    let plan = reload(&mut h, vec![entry("a", spec())]).unwrap();
    assert_eq!(names(&plan.start), ["a"]);
    assert_ne!(h.get("a").current, Some(a));
    h.settle();
}

#[test]
fn a_restarted_daemon_keeps_config_sessions_whose_spec_is_unchanged() {
    let mut h = Harness::new();
    reload(&mut h, vec![entry("a", spec()), entry("b", spec())]).unwrap();
    let a = run(&mut h, "a");
    let b = run(&mut h, "b");
    let (mut next, problems) = h.reborn(h.records(), 10);
    assert!(problems.is_empty());
    assert_eq!(next.core.sessions["a"].origin, Origin::Config);
    assert!(next.adopt(a, "a"));
    assert!(next.adopt(b, "b"));
    next.resume();
    let plan = reload(
        &mut next,
        vec![entry("a", spec()), entry("b", other_spec())],
    )
    .unwrap();
    assert_eq!(names(&plan.unchanged), ["a"]);
    assert_eq!(names(&plan.replace), ["b"]);
    assert_eq!(next.get("a").current, Some(a));
    assert_eq!(next.get("a").state, SessionState::Running);
}

#[test]
fn shutting_down_refuses_a_reload() {
    let mut h = Harness::new();
    h.cmd(crate::core::Command::Shutdown).unwrap();
    let e = reload(&mut h, vec![entry("a", spec())]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Busy);
}

#[test]
fn a_config_with_reject_brings_back_a_session_still_stopping() {
    let mut h = Harness::new();
    let mut a = entry("a", spec());
    a.on_busy = OnBusy::Reject;
    reload(&mut h, vec![a.clone()]).unwrap();
    let first = run(&mut h, "a");
    reload(&mut h, vec![]).unwrap();
    // Its generation still stops: the new one waits for it, as with `replace`.
    let plan = reload(&mut h, vec![a]).unwrap();
    assert_eq!(names(&plan.start), ["a"]);
    let next = h.get("a").current.unwrap();
    assert!(next > first);
    assert_eq!(h.get("a").state, SessionState::Starting);
    h.settle();
}

/// A session brought back while its last generation still stops starts as its `on_busy`
/// says: `replace` waits for the old generation to end, `overlap` starts at once.
#[test]
fn a_session_brought_back_while_stopping_starts_per_its_on_busy() {
    use crate::core::Action;
    for (on_busy, at_once) in [(OnBusy::Replace, false), (OnBusy::Overlap, true)] {
        let mut h = Harness::new();
        let mut a = entry("a", spec());
        a.on_busy = on_busy;
        reload(&mut h, vec![a.clone()]).unwrap();
        let first = run(&mut h, "a");
        reload(&mut h, vec![]).unwrap();
        reload(&mut h, vec![a]).unwrap();
        let next = h.get("a").current.unwrap();
        assert!(next > first);
        let spawned = |h: &Harness| {
            has(
                h.all_actions(),
                |x| matches!(x, Action::Spawn { gen, .. } if *gen == next),
            )
        };
        assert_eq!(spawned(&h), at_once, "{on_busy:?}");
        h.ends(first, ExitStatus::Signal(15));
        assert!(spawned(&h), "{on_busy:?}: started once the old one is gone");
        h.settle();
    }
}

#[test]
fn a_client_session_being_removed_can_be_taken_over_by_the_config() {
    let mut h = Harness::new();
    let mine = h.spawn("mine");
    h.started(mine);
    h.cmd(crate::core::Command::Remove {
        session: "mine".into(),
    })
    .unwrap();
    let plan = reload(&mut h, vec![entry("mine", spec())]).unwrap();
    assert_eq!(names(&plan.start), ["mine"]);
    assert_eq!(h.core.sessions["mine"].origin, Origin::Config);
    assert_ne!(h.get("mine").current, Some(mine));
    h.settle();
}

/// The other way round: a config session a reload is removing, spawned or restarted by a
/// client while it stops, is the client's from then on, and the next reload leaves it alone.
#[test]
fn a_config_session_being_removed_can_be_taken_over_by_a_client() {
    for restart in [false, true] {
        let mut h = Harness::new();
        reload(&mut h, vec![entry("theirs", spec())]).unwrap();
        run(&mut h, "theirs");
        let plan = reload(&mut h, vec![]).unwrap();
        assert_eq!(names(&plan.stop), ["theirs"]);
        let mine = if restart {
            let session = "theirs".into();
            match h.cmd(crate::core::Command::Restart {
                session,
                if_gen: None,
            }) {
                Ok(crate::core::Response::Gen(g)) => g,
                other => panic!("{other:?}"),
            }
        } else {
            h.spawn("theirs")
        };
        assert_eq!(h.core.sessions["theirs"].origin, Origin::Client);
        let plan = reload(&mut h, vec![]).unwrap();
        assert!(plan.stop.is_empty(), "{plan:?}");
        assert_eq!(h.get("theirs").current, Some(mine));
        h.settle();
    }
}

#[test]
fn a_config_closing_a_dependency_cycle_is_refused_whole_and_starts_nothing() {
    use crate::core::DependOn;
    let with_dep = |on: &str| {
        let mut s = spec();
        s.depends_on.insert(on.to_owned(), DependOn::Ready);
        s
    };
    let mut h = Harness::new();
    reload(&mut h, vec![entry("a", spec())]).unwrap();
    run(&mut h, "a");
    // `c` alone would start (it depends on `a`); `a` changed to depend on `c` closes the
    // cycle: neither may happen.
    let e = reload(
        &mut h,
        vec![entry("a", with_dep("c")), entry("c", with_dep("a"))],
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadConfig);
    assert!(e.message.contains("dependency cycle"), "{}", e.message);
    assert!(!h.core.sessions.contains_key("c"));
    assert!(h.core.sessions["a"].spec.depends_on.is_empty());
}

/// A config that reverses a dependency (`c` on `b` becomes `b` on `c`) closes no cycle as
/// a whole: it is applied whole, not refused half applied (checked one session at a time
/// against the others' old specs, `b` on `c` looked like a cycle after `z` had gone).
#[test]
fn a_config_reversing_a_dependency_is_applied_whole() {
    let mut h = Harness::new();
    let before = vec![
        entry("b", spec()),
        entry("c", with_dep("b")),
        entry("z", spec()),
    ];
    reload(&mut h, before).unwrap();
    for name in ["b", "c", "z"] {
        run(&mut h, name);
    }
    let after = vec![entry("b", with_dep("c")), entry("c", spec())];
    let plan = reload(&mut h, after).unwrap();
    assert_eq!(names(&plan.replace), ["b", "c"]);
    assert_eq!(names(&plan.stop), ["z"]);
    assert!(h.core.sessions["b"].spec.depends_on.contains_key("c"));
    assert!(h.core.sessions["c"].spec.depends_on.is_empty());
    h.settle();
}

/// At `--max-running`, a config that replaces one session before (in its order) adding
/// another is applied as planned: the start takes the room the plan counted, and the
/// replacement waits beyond the limit — not the replacement first, the start then refused
/// with the config half applied.
#[test]
fn a_replacement_listed_before_a_start_does_not_take_its_room() {
    let config = crate::core::Config {
        max_generations: 4,
        ..crate::core::Config::default()
    };
    let mut h = Harness::with(config, 1);
    let before = vec![entry("a", spec()), entry("b", spec()), entry("d", spec())];
    reload(&mut h, before).unwrap();
    for name in ["a", "b", "d"] {
        run(&mut h, name);
    }
    let after = vec![
        entry("a", other_spec()),
        entry("b", spec()),
        entry("c", spec()),
    ];
    let planned = h.core.plan_reload(&after).unwrap();
    let plan = reload(&mut h, after).unwrap();
    assert_eq!(plan, planned);
    assert_eq!(names(&plan.start), ["c"]);
    assert_eq!(names(&plan.replace), ["a"]);
    assert_eq!(h.core.sessions["a"].spec.argv, other_spec().argv);
    assert!(h.core.sessions.contains_key("c"));
    h.settle();
}

/// `on_busy: reject` leaves a *running* generation as it runs; one still waiting for its
/// dependencies never ran, and is replaced — not kept `busy`, waiting forever on a
/// dependency the new config dropped.
#[test]
fn reject_replaces_a_generation_still_waiting_for_its_dependencies() {
    use crate::core::{DependOn, ExitStatus};
    let mut h = Harness::new();
    let mut waits = spec();
    waits
        .depends_on
        .insert("db".to_owned(), DependOn::Completed);
    let web = |spec: Spec| ConfigSession {
        name: Arc::from("web"),
        spec,
        on_busy: OnBusy::Reject,
    };
    reload(&mut h, vec![entry("db", spec()), web(waits)]).unwrap();
    let db = run(&mut h, "db");
    h.ends(db, ExitStatus::Code(3));
    let waiting = h.get("web").current.expect("web waits for db");
    let plan = reload(&mut h, vec![web(spec())]).unwrap();
    assert_eq!(names(&plan.replace), ["web"]);
    assert!(plan.busy.is_empty(), "{plan:?}");
    let now = h.get("web").current.expect("web is current");
    assert_ne!(now, waiting);
    h.started(now);
    h.settle();
}

#[test]
fn removed_sessions_stop_dependents_first_and_one_that_stays_holds_nothing_up() {
    let mut h = Harness::new();
    reload(
        &mut h,
        vec![entry("db", spec()), entry("web", with_dep("db"))],
    )
    .unwrap();
    let db = run(&mut h, "db");
    let web = run(&mut h, "web");
    // A client's session depending on db too: it stays, and does not keep db running.
    let client = h
        .spawn_with("report", with_dep("db"), OnBusy::Replace)
        .unwrap();
    h.started(client);
    let before = h.all_actions().len();
    reload(&mut h, vec![]).unwrap();
    let after = h.all_actions()[before..].to_vec();
    assert!(stopped(&after, web), "web is stopped at once: {after:?}");
    assert!(!stopped(&after, db), "db waits for web: {after:?}");
    let seen = h.ends(web, ExitStatus::Signal(15));
    assert!(
        stopped(&seen, db),
        "db is stopped once web has ended: {seen:?}"
    );
}

/// A session configured again while its removal waits for dependents to stop keeps that
/// order: its old generation is replaced, but still ends only after the dependents (as
/// superseded), and the new one starts after it — whether the reload or a client takes it
/// back, with its dependent or without, and across an upgrade while it waits.
#[test]
fn a_session_taken_back_from_its_removal_still_stops_after_its_dependents() {
    use crate::core::{Event, ExitCause, StopReason};
    let cases = [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (false, false, true),
    ];
    for (by_client, upgraded, with_web) in cases {
        let mut h = Harness::new();
        let both = vec![entry("db", spec()), entry("web", with_dep("db"))];
        reload(&mut h, both).unwrap();
        let db = run(&mut h, "db");
        let web = run(&mut h, "web");
        reload(&mut h, vec![]).unwrap();
        let before = h.all_actions().len();
        if by_client {
            h.spawn("db");
        } else {
            let mut config = vec![entry("db", other_spec())];
            // The old web, still stopping, depends on db all the same.
            if with_web {
                config.push(entry("web", with_dep("db")));
            }
            let plan = reload(&mut h, config).unwrap();
            assert_eq!(names(&plan.start)[0], "db");
        }
        if upgraded {
            h.core = super::image::through_bytes(&h.core, crate::core::Config::default());
        }
        let after = h.all_actions()[before..].to_vec();
        assert!(!stopped(&after, db), "db still waits for web: {after:?}");
        assert_ne!(h.get("db").current, Some(db));
        let seen = h.ends(web, ExitStatus::Signal(15));
        assert!(
            stopped(&seen, db),
            "db is stopped once web has ended: {seen:?}"
        );
        let old = h.get("db").generations.into_iter().find(|g| g.gen == db);
        assert_eq!(old.and_then(|g| g.stop), Some(StopReason::Superseded));
        h.ends(db, ExitStatus::Signal(15));
        let ends = h.events_of(db);
        let superseded = |e: &Event| {
            matches!(
                e,
                Event::Exited {
                    cause: ExitCause::Superseded,
                    ..
                }
            )
        };
        assert!(ends.iter().any(superseded), "{ends:?}");
        let new = h.get("db").current.unwrap();
        h.started(new);
        h.settle();
    }
}

/// Stop order follows what each generation runs: a dependency a running generation's
/// spec names (kept by `on_busy: reject` after the config dropped it) still waits for it
/// at the shutdown. And generations whose specs depend on each other's sessions (no
/// session's spec closes the cycle) are all stopped, not each left waiting for the other.
#[test]
fn stops_wait_for_the_dependencies_each_generation_runs_with_and_no_cycle_hangs() {
    use crate::core::Command;
    let shutdown = |h: &mut Harness| {
        let before = h.all_actions().len();
        h.cmd(Command::Shutdown).unwrap();
        h.all_actions()[before..].to_vec()
    };
    // web keeps running on its old spec (depending on db) under `reject`.
    let mut h = Harness::new();
    let reject = |name: &str, spec: Spec| ConfigSession {
        on_busy: OnBusy::Reject,
        ..entry(name, spec)
    };
    reload(
        &mut h,
        vec![entry("db", spec()), reject("web", with_dep("db"))],
    )
    .unwrap();
    let db = run(&mut h, "db");
    let web = run(&mut h, "web");
    let plan = reload(&mut h, vec![entry("db", spec()), reject("web", spec())]).unwrap();
    assert_eq!(names(&plan.busy), ["web"]);
    let actions = shutdown(&mut h);
    assert!(stopped(&actions, web), "{actions:?}");
    assert!(
        !stopped(&actions, db),
        "db waits for the web that runs: {actions:?}"
    );
    let seen = h.ends(web, ExitStatus::Signal(15));
    assert!(stopped(&seen, db), "{seen:?}");
    h.settle();

    // a runs on depending on b; b's new generation depends on a.
    let mut h = Harness::new();
    reload(&mut h, vec![reject("a", with_dep("b")), entry("b", spec())]).unwrap();
    let b = run(&mut h, "b");
    let a = run(&mut h, "a");
    reload(&mut h, vec![reject("a", spec()), entry("b", spec())]).unwrap();
    reload(&mut h, vec![reject("a", spec()), entry("b", with_dep("a"))]).unwrap();
    h.ends(b, ExitStatus::Signal(15));
    let b2 = h.get("b").current.unwrap();
    h.started(b2);
    let actions = shutdown(&mut h);
    assert!(stopped(&actions, a) && stopped(&actions, b2), "{actions:?}");
    h.settle();
}

/// A reload that would give a session more generations than one session tracks is
/// refused whole, before anything of it is done.
#[test]
fn a_reload_refuses_a_session_with_no_room_for_another_generation() {
    use crate::core::session::MAX_LIVE_GENERATIONS;
    let mut h = Harness::new();
    let mut slow = spec();
    slow.grace = std::time::Duration::from_secs(3600);
    reload(&mut h, vec![entry("a", slow.clone())]).unwrap();
    run(&mut h, "a");
    for _ in 1..MAX_LIVE_GENERATIONS {
        let g = h.spawn_with("a", slow.clone(), OnBusy::Overlap).unwrap();
        h.started(g);
    }
    let before = h.core.list();
    // A session that would start comes first: nothing of the config may be done.
    let config = vec![
        entry("0", spec()),
        entry("a", other_spec()),
        entry("b", spec()),
    ];
    let e = reload(&mut h, config).unwrap_err();
    assert_eq!(e.code, ErrorCode::Limit, "{e}");
    assert_eq!(
        h.core.list(),
        before,
        "nothing of the refused reload was done"
    );
}

/// A service manager's restart: the daemon shuts down (stopping everything) and the next
/// one starts on the same records. The config's sessions run again, as at a first start;
/// one a client had stopped stays stopped, and a client's own session is left alone.
#[test]
fn a_clean_restart_runs_the_configured_sessions_again() {
    let mut h = Harness::new();
    let config = vec![entry("a", spec()), entry("b", spec())];
    reload(&mut h, config.clone()).unwrap();
    let (a, b) = (run(&mut h, "a"), run(&mut h, "b"));
    h.stop("b", None).unwrap();
    h.ends(b, ExitStatus::Signal(15));
    let mine = h.spawn("mine");
    h.started(mine);
    // Told twice (a second SIGTERM brings every SIGKILL forward): the same sessions.
    h.cmd(crate::core::Command::Shutdown).unwrap();
    h.cmd(crate::core::Command::Shutdown).unwrap();
    for gen in [a, mine] {
        h.ends(gen, ExitStatus::Signal(15));
    }
    let (mut next, problems) = h.reborn(h.records(), 10);
    assert!(problems.is_empty(), "{problems:?}");
    next.resume();
    let plan = reload(&mut next, config).unwrap();
    assert_eq!(names(&plan.start), ["a"]);
    assert_eq!(names(&plan.unchanged), ["b"]);
    assert!(next.get("a").current.is_some());
    assert_eq!(next.get("b").state, SessionState::Stopped);
    assert_eq!(next.get("mine").state, SessionState::Stopped);
    // Started once: the next reload finds it unchanged.
    let again = reload(&mut next, vec![entry("a", spec()), entry("b", spec())]).unwrap();
    assert_eq!(names(&again.unchanged), ["a", "b"]);
}

/// A container's PID 1 killed (`docker kill`, an OOM kill): the next daemon finds the
/// config's processes gone. Those the crash left down with no restart due run again at
/// the config's first load, as after a clean restart: one never described (lost), one
/// taken back and found gone at once. One with a restart policy restarts by that policy,
/// one still running is kept, one a client had stopped stays stopped.
#[test]
fn a_crash_that_lost_the_configured_processes_runs_them_again() {
    let mut h = Harness::new();
    let mut restarting = spec();
    restarting.restart.mode = crate::core::Restart::OnFailure;
    let mut keep = spec();
    keep.on_recover = crate::core::OnRecover::Keep;
    let config = vec![
        entry("lost", spec()),
        entry("gone", spec()),
        entry("kept", keep),
        entry("policy", restarting),
        entry("stopped", spec()),
    ];
    reload(&mut h, config.clone()).unwrap();
    let gen: std::collections::BTreeMap<&str, u64> = ["lost", "gone", "kept", "policy", "stopped"]
        .into_iter()
        .map(|n| (n, run(&mut h, n)))
        .collect();
    h.stop("stopped", None).unwrap();
    h.ends(gen["stopped"], ExitStatus::Signal(15));
    // The daemon dies with them: no shutdown, no ends seen.
    let (mut next, problems) = h.reborn(h.records(), 10);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(next.adopt(gen["gone"], "gone"));
    next.input(crate::core::Input::Lost { gen: gen["gone"] });
    assert!(next.adopt(gen["kept"], "kept"));
    next.resume();
    let plan = reload(&mut next, config).unwrap();
    assert_eq!(names(&plan.start), ["gone", "lost"]);
    assert_eq!(names(&plan.unchanged), ["kept", "policy", "stopped"]);
    for name in ["gone", "lost"] {
        let new = next.get(name).current.expect("started again");
        assert!(new > gen[name]);
        assert_eq!(
            next.get(name).restarts,
            0,
            "{name}: not counted as a restart"
        );
    }
    assert_eq!(next.get("stopped").state, SessionState::Stopped);
    assert_eq!(next.get("kept").current, Some(gen["kept"]));
    assert_eq!(next.get("kept").state, SessionState::Running);
    // Started once: the next reload finds them unchanged.
    let again = reload(
        &mut next,
        vec![entry("gone", spec()), entry("lost", spec())],
    )
    .unwrap();
    assert_eq!(names(&again.unchanged), ["gone", "lost"]);
}
