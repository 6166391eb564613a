//! Order between sessions (`depends_on`): dependents wait Pending with a reason, start
//! when their dependencies are met (also after a failure and a recovery), cycles are
//! refused, and the shutdown stops dependents before what they depend on.

use std::time::Duration;

use super::harness::{has, spec, Harness};
use crate::core::{
    Action, Command, DependOn, ErrorCode, ExitStatus, Input, OnBusy, ReadyCheck, ReadyHow,
    ReadySignal, Restart, Scope, Spec,
};

fn depending(deps: &[(&str, DependOn)]) -> Spec {
    let mut s = spec();
    s.depends_on = deps.iter().map(|(n, w)| (n.to_string(), *w)).collect();
    s
}

fn with_fd_ready(mut s: Spec) -> Spec {
    s.ready = Some(ReadyCheck::new(ReadyHow::Fd(3)));
    s
}

fn spawned(actions: &[Action], gen: u64) -> bool {
    has(
        actions,
        |a| matches!(a, Action::Spawn { gen: g, .. } if *g == gen),
    )
}

fn waiting(h: &Harness, name: &str) -> Option<String> {
    h.get(name).waiting
}

/// Whether `actions` send generation `gen`'s leader a signal (its stop begins).
fn term(actions: &[Action], gen: u64) -> bool {
    has(
        actions,
        |a| matches!(a, Action::Signal { gen: g, scope: Scope::Leader, .. } if *g == gen),
    )
}

/// `db` running, and `web`, depending on it being started, running too.
fn db_and_web(h: &mut Harness) -> (u64, u64) {
    let db = h.spawn("db");
    h.started(db);
    let web = h
        .spawn_with(
            "web",
            depending(&[("db", DependOn::Started)]),
            OnBusy::Replace,
        )
        .unwrap();
    h.started(web);
    (db, web)
}

#[test]
fn a_dependent_starts_only_once_its_dependency_is_ready() {
    let mut h = Harness::new();
    let web = h
        .spawn_with(
            "web",
            depending(&[("db", DependOn::Ready)]),
            OnBusy::Replace,
        )
        .unwrap();
    assert!(!spawned(h.all_actions(), web));
    assert_eq!(waiting(&h, "web").as_deref(), Some("db: no such session"));
    let db = h
        .spawn_with("db", with_fd_ready(spec()), OnBusy::Replace)
        .unwrap();
    assert_eq!(
        waiting(&h, "web").as_deref(),
        Some("waiting for db to be ready")
    );
    let started = h.started(db);
    assert!(!spawned(&started, web), "started is not ready");
    let ready = h.input(Input::Readiness {
        gen: db,
        signal: ReadySignal::Ready,
    });
    assert!(spawned(&ready, web), "db's readiness starts web: {ready:?}");
    assert_eq!(waiting(&h, "web"), None);
    h.settle();
}

/// A dependency being stopped (here on request; as unhealthy alike) is on its way down:
/// a dependent's new generation waits for it to come back instead of starting against it.
#[test]
fn nothing_starts_against_a_dependency_being_stopped() {
    for want in [DependOn::Ready, DependOn::Started] {
        let mut h = Harness::new();
        let db = h
            .spawn_with("db", with_fd_ready(spec()), OnBusy::Replace)
            .unwrap();
        h.started(db);
        h.input(Input::Readiness {
            gen: db,
            signal: ReadySignal::Ready,
        });
        h.stop("db", None).unwrap();
        let web = h
            .spawn_with("web", depending(&[("db", want)]), OnBusy::Replace)
            .unwrap();
        assert!(
            !spawned(h.all_actions(), web),
            "{want:?}: started against it"
        );
        assert!(waiting(&h, "web").is_some(), "{want:?}");
        h.settle();
    }
}

#[test]
fn started_and_completed_are_told_apart() {
    let mut h = Harness::new();
    let migrate = h.spawn("migrate");
    let cache = h.spawn("cache");
    let web = h
        .spawn_with(
            "web",
            depending(&[
                ("cache", DependOn::Started),
                ("migrate", DependOn::Completed),
            ]),
            OnBusy::Replace,
        )
        .unwrap();
    h.started(cache);
    h.started(migrate);
    assert_eq!(
        waiting(&h, "web").as_deref(),
        Some("waiting for migrate to complete")
    );
    h.exit(migrate, ExitStatus::Code(0));
    let actions = h.eof(migrate);
    assert!(spawned(&actions, web), "{actions:?}");
    h.settle();
}

#[test]
fn a_failed_dependency_keeps_dependents_pending_until_it_recovers() {
    let mut h = Harness::new();
    let mut db_spec = with_fd_ready(spec());
    db_spec.restart.mode = Restart::OnFailure;
    db_spec.restart.initial = Duration::from_millis(500);
    let db = h.spawn_with("db", db_spec, OnBusy::Replace).unwrap();
    let web = h
        .spawn_with(
            "web",
            depending(&[("db", DependOn::Ready)]),
            OnBusy::Replace,
        )
        .unwrap();
    h.started(db);
    h.ends(db, ExitStatus::Code(3));
    let why = waiting(&h, "web").expect("still waiting");
    assert!(why.contains("db ended with code 3"), "{why}");
    assert!(!spawned(h.all_actions(), web));
    // The restart policy brings db back; once it is ready, web starts.
    let restart = h.advance(500);
    let db2 = h.get("db").current.expect("restarted");
    assert!(spawned(&restart, db2));
    h.started(db2);
    let actions = h.input(Input::Readiness {
        gen: db2,
        signal: ReadySignal::Ready,
    });
    assert!(spawned(&actions, web), "{actions:?}");
    h.settle();
}

#[test]
fn a_spawn_closing_a_cycle_is_refused_naming_it() {
    let mut h = Harness::new();
    h.spawn_with("a", depending(&[("b", DependOn::Started)]), OnBusy::Replace)
        .unwrap();
    h.spawn_with("b", depending(&[("c", DependOn::Started)]), OnBusy::Replace)
        .unwrap();
    let e = h
        .spawn_with("c", depending(&[("a", DependOn::Ready)]), OnBusy::Replace)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("c -> a -> b -> c"), "{}", e.message);
    assert!(!h.core.has_session("c"), "nothing changed");
    let e = h
        .spawn_with("d", depending(&[("d", DependOn::Ready)]), OnBusy::Replace)
        .unwrap_err();
    assert!(e.message.contains("itself"), "{}", e.message);
    h.settle();
}

#[test]
fn a_restart_taking_back_a_session_being_removed_may_not_close_a_cycle() {
    let mut h = Harness::new();
    let y = h.spawn("y");
    h.started(y);
    let x = h
        .spawn_with("x", depending(&[("y", DependOn::Started)]), OnBusy::Replace)
        .unwrap();
    h.started(x);
    h.cmd(Command::Remove {
        session: "x".into(),
    })
    .unwrap();
    // x is going: y may depend on it now.
    h.spawn_with("y", depending(&[("x", DependOn::Started)]), OnBusy::Overlap)
        .unwrap();
    // Taking x back brings its `y` dependency back: x -> y -> x.
    let e = h
        .cmd(Command::Restart {
            session: "x".into(),
            if_gen: None,
        })
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("x -> y -> x"), "{}", e.message);
    h.settle();
}

#[test]
fn a_removal_taken_back_after_a_crash_still_stops_dependents_first() {
    let mut h = Harness::new();
    let (db, web) = db_and_web(&mut h);
    // Both removed (a reload dropping them, say): web is stopped, db waits for it...
    for name in ["web", "db"] {
        h.cmd(Command::Remove {
            session: name.into(),
        })
        .unwrap();
    }
    // ... when the daemon dies.
    let (mut n, _) = h.reborn(h.records(), 5);
    assert!(n.adopt(db, "db"));
    assert!(n.adopt(web, "web"));
    let actions = n.resume();
    // The dependent's stop was under way: it goes on, its TERM not sent again.
    assert!(!term(&actions, web), "TERM sent twice: {actions:?}");
    let listed = &n.get("web").generations;
    assert!(
        matches!(listed[..], [ref g] if g.gen == web && g.stop.is_some()),
        "the dependent is being stopped: {listed:?}"
    );
    assert!(
        !term(&actions, db),
        "its dependency still waits for it: {actions:?}"
    );
    let all = n.ends(web, ExitStatus::Signal(15));
    assert!(term(&all, db), "db is stopped once web ended: {all:?}");
    n.settle();
}

#[test]
fn shutdown_stops_dependents_first() {
    let mut h = Harness::new();
    let (db, web) = db_and_web(&mut h);
    let actions = h.input(Input::Command {
        request: 99,
        command: Command::Shutdown,
    });
    assert!(term(&actions, web), "the dependent is stopped at once");
    assert!(!term(&actions, db), "its dependency waits for it");
    let all = h.ends(web, ExitStatus::Signal(15));
    assert!(term(&all, db), "db is stopped once web ended: {all:?}");
    h.settle();
}

/// A stop held back for dependents has sent nothing yet: a dependency whose leader dies
/// meanwhile of a SIGTERM genward did not send ends `signaled`, its own cause — however
/// its stop came to wait (its removal, a reload dropping it, the same taken back by a
/// client, the shutdown). Once its dependents ended and its stop began, the same SIGTERM
/// end reads `stopped`.
#[test]
fn an_end_while_its_stop_waits_for_dependents_keeps_its_own_cause() {
    use crate::core::{ConfigSession, Event, ExitCause};
    let config = |name: &str, spec: Spec| ConfigSession {
        name: name.into(),
        spec,
        on_busy: OnBusy::Replace,
    };
    let cases = [
        ("remove", ExitCause::Signaled),
        ("reload", ExitCause::Signaled),
        ("taken back", ExitCause::Signaled),
        ("shutdown", ExitCause::Signaled),
        ("begun", ExitCause::Stopped),
    ];
    for (how, want) in cases {
        let mut h = Harness::new();
        let (db, web) = if how == "reload" {
            let web = depending(&[("db", DependOn::Started)]);
            h.reload(vec![config("db", spec()), config("web", web)])
                .unwrap();
            let db = h.get("db").current.unwrap();
            h.started(db);
            let web = h.get("web").current.unwrap();
            h.started(web);
            (db, web)
        } else {
            db_and_web(&mut h)
        };
        let before = h.all_actions().len();
        match how {
            "reload" => drop(h.reload(vec![]).unwrap()),
            "shutdown" => drop(h.cmd(Command::Shutdown).unwrap()),
            _ => {
                // The dependent first: db's removal then waits for it.
                for name in ["web", "db"] {
                    h.cmd(Command::Remove {
                        session: name.into(),
                    })
                    .unwrap();
                }
            }
        }
        if how == "taken back" {
            h.spawn("db");
        }
        if how == "begun" {
            h.ends(web, ExitStatus::Signal(15));
        }
        let sent = h.all_actions()[before..].to_vec();
        assert_eq!(term(&sent, db), how == "begun", "{how}: {sent:?}");
        h.ends(db, ExitStatus::Signal(15));
        let causes: Vec<_> = h
            .events_of(db)
            .into_iter()
            .filter_map(|e| match e {
                Event::Exited { code, cause, .. } => Some((code, cause)),
                _ => None,
            })
            .collect();
        assert_eq!(causes, [(Some(143), want)], "{how}");
        h.settle();
    }
}

/// A stop asked before a replacement ends the replaced generation `superseded`, even
/// while it waits for dependents being removed: the replacement does not begin a stop
/// that waits, but one begun already — a client's `stop` sent its SIGTERM, or a
/// recovery's stop noted for a generation adopted unverified and sent once it is
/// verified — now ends a generation that is no longer its session's.
#[test]
fn a_stop_asked_while_it_waits_for_dependents_ends_superseded_once_replaced() {
    use crate::core::{Event, ExitCause, OnRecover};
    for recovered in [false, true] {
        let mut h = Harness::new();
        let mut db_spec = spec();
        db_spec.on_recover = OnRecover::Stop;
        let db = h.spawn_with("db", db_spec, OnBusy::Replace).unwrap();
        h.started(db);
        let web = depending(&[("db", DependOn::Started)]);
        let web = h.spawn_with("web", web, OnBusy::Replace).unwrap();
        h.started(web);
        if recovered {
            // The daemon died; the next one cannot tell db's identity yet: its recovery's
            // stop (no I/O kept) is noted, to be sent once it is verified.
            let (mut n, _) = h.reborn(h.records(), 5);
            assert!(n.adopt_as(db, "db", false));
            assert!(n.adopt(web, "web"));
            n.resume();
            h = n;
        }
        // Both removed, the dependent first: db's stop waits for web.
        for name in ["web", "db"] {
            h.cmd(Command::Remove {
                session: name.into(),
            })
            .unwrap();
        }
        if !recovered {
            let sent = h.stop("db", None).unwrap();
            assert_eq!(sent, crate::core::Response::Gen(db));
        }
        // A client takes db back while its old generation still waits for web.
        h.spawn("db");
        let sent = if recovered {
            h.input(Input::Verified { gen: db })
        } else {
            h.all_actions().to_vec()
        };
        assert!(term(&sent, db), "db's stop was sent: {sent:?}");
        h.ends(db, ExitStatus::Signal(15));
        let causes: Vec<_> = h
            .events_of(db)
            .into_iter()
            .filter_map(|e| match e {
                Event::Exited { cause, .. } => Some(cause),
                _ => None,
            })
            .collect();
        assert_eq!(causes, [ExitCause::Superseded], "recovered: {recovered}");
        h.settle();
    }
}
