//! Command validation: every refusal has a specific code and changes nothing.

use super::harness::{has, spec, Harness};
use crate::core::{Action, Command, Config, ErrorCode, IoMode, OnBusy, Response, Spec};

/// Runs `command` and asserts it fails with `code` and leaves every snapshot as it was.
fn refused(h: &mut Harness, command: Command, code: ErrorCode) {
    let before = h.core.list();
    let next = h.core.next_generation();
    let err = h.cmd(command).expect_err("refused");
    assert_eq!(err.code, code, "{err}");
    assert!(!err.message.is_empty());
    assert_eq!(h.core.list(), before, "a refused command changed state");
    assert_eq!(h.core.next_generation(), next);
}

fn running(h: &mut Harness, name: &str) -> u64 {
    let gen = h.spawn(name);
    h.started(gen);
    gen
}

#[test]
fn bad_names_and_specs_are_bad_requests() {
    let mut h = Harness::new();
    for name in ["", ".hidden", "a/b", "sp ace", &"x".repeat(65)] {
        let c = Command::Spawn {
            session: name.into(),
            if_gen: None,
            spec: Box::new(spec()),
            on_busy: OnBusy::Replace,
        };
        refused(&mut h, c, ErrorCode::BadRequest);
    }
    let mut bad = vec![
        Spec::new(vec![]),
        Spec::new(vec![vec![]]),
        Spec::new(vec![b"a\0b".to_vec()]),
    ];
    let mut pty = spec();
    pty.io = IoMode::Pty { rows: 0, cols: 80 };
    let mut sig = spec();
    sig.stop_signal = 0;
    let mut env = spec();
    env.env.set.push((b"A=B".to_vec(), b"c".to_vec()));
    let mut backoff = spec();
    backoff.restart.initial = backoff.restart.max * 2;
    bad.extend([pty, sig, env, backoff]);
    for s in bad {
        let c = Command::Spawn {
            session: "ok".into(),
            if_gen: None,
            spec: Box::new(s),
            on_busy: OnBusy::Replace,
        };
        refused(&mut h, c, ErrorCode::BadRequest);
    }
}

#[test]
fn unknown_sessions() {
    let mut h = Harness::new();
    refused(
        &mut h,
        Command::Get {
            session: "nope".into(),
        },
        ErrorCode::NoSuchSession,
    );
    refused(
        &mut h,
        Command::Stop {
            session: "nope".into(),
            if_gen: None,
            grace: None,
        },
        ErrorCode::NoSuchSession,
    );
    refused(
        &mut h,
        Command::Remove {
            session: "nope".into(),
        },
        ErrorCode::NoSuchSession,
    );
    assert_eq!(h.cmd(Command::List), Ok(Response::List(vec![])));
}

#[test]
fn reject_when_busy() {
    let mut h = Harness::new();
    running(&mut h, "s");
    let c = Command::Spawn {
        session: "s".into(),
        if_gen: None,
        spec: Box::new(spec()),
        on_busy: OnBusy::Reject,
    };
    refused(&mut h, c, ErrorCode::Busy);
}

#[test]
fn if_gen_mismatch_is_stale_and_changes_nothing() {
    let mut h = Harness::new();
    let g1 = running(&mut h, "s");
    let g2 = h.spawn_with("s", spec(), OnBusy::Overlap).unwrap();
    h.started(g2);
    let s = || "s".to_string();
    let old = Some(g1);
    refused(
        &mut h,
        Command::Write {
            session: s(),
            if_gen: old,
            bytes: b"hi".to_vec(),
        },
        ErrorCode::StaleGeneration,
    );
    refused(
        &mut h,
        Command::Signal {
            session: s(),
            if_gen: old,
            signal: 2,
            scope: crate::core::Scope::Leader,
        },
        ErrorCode::StaleGeneration,
    );
    refused(
        &mut h,
        Command::Stop {
            session: s(),
            if_gen: old,
            grace: None,
        },
        ErrorCode::StaleGeneration,
    );
    refused(
        &mut h,
        Command::Resize {
            session: s(),
            if_gen: old,
            rows: 1,
            cols: 1,
        },
        ErrorCode::StaleGeneration,
    );
    refused(
        &mut h,
        Command::Restart {
            session: s(),
            if_gen: old,
        },
        ErrorCode::StaleGeneration,
    );
    refused(
        &mut h,
        Command::CloseInput {
            session: s(),
            if_gen: old,
        },
        ErrorCode::StaleGeneration,
    );
    let ok = h.cmd(Command::Write {
        session: s(),
        if_gen: Some(g2),
        bytes: b"hi".to_vec(),
    });
    assert_eq!(ok, Ok(Response::Gen(g2)));
    assert!(h.log.contains(&Action::WriteInput {
        gen: g2,
        bytes: b"hi".to_vec()
    }));
}

#[test]
fn limits() {
    let config = Config {
        max_sessions: 1,
        max_generations: 2,
        max_pending_input: 4,
        ..Config::default()
    };
    let mut h = Harness::with(config, 1);
    let g1 = running(&mut h, "s");
    let c = Command::Spawn {
        session: "t".into(),
        if_gen: None,
        spec: Box::new(spec()),
        on_busy: OnBusy::Replace,
    };
    refused(&mut h, c, ErrorCode::Limit);
    h.spawn_with("s", spec(), OnBusy::Overlap).unwrap();
    let c = Command::Spawn {
        session: "s".into(),
        if_gen: None,
        spec: Box::new(spec()),
        on_busy: OnBusy::Overlap,
    };
    refused(&mut h, c, ErrorCode::Limit);
    let _ = g1;
    let g2 = h.get("s").current.unwrap();
    h.started(g2);
    let w = |n: usize| Command::Write {
        session: "s".into(),
        if_gen: None,
        bytes: vec![b'x'; n],
    };
    assert_eq!(h.cmd(w(3)), Ok(Response::Gen(g2)));
    refused(&mut h, w(2), ErrorCode::Limit);
    h.input(crate::core::Input::InputWritten { gen: g2, len: 3 });
    assert_eq!(h.cmd(w(4)), Ok(Response::Gen(g2)));
}

#[test]
fn input_and_signals_while_starting_and_input_closed() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    let w = || Command::Write {
        session: "s".into(),
        if_gen: None,
        bytes: b"x".to_vec(),
    };
    // Starting: input and signals are held for it until it runs.
    assert_eq!(h.cmd(w()), Ok(crate::core::Response::Gen(g)));
    let term = || Command::Signal {
        session: "s".into(),
        if_gen: None,
        signal: 15,
        scope: crate::core::Scope::Leader,
    };
    assert_eq!(h.cmd(term()), Ok(crate::core::Response::Gen(g)));
    h.started(g);
    h.input(crate::core::Input::InputWritten { gen: g, len: 1 });
    h.input(crate::core::Input::InputError { gen: g });
    refused(&mut h, w(), ErrorCode::InputClosed);
    refused(
        &mut h,
        Command::Signal {
            session: "s".into(),
            if_gen: None,
            signal: 0,
            scope: crate::core::Scope::Leader,
        },
        ErrorCode::BadRequest,
    );
    let resize = Command::Resize {
        session: "s".into(),
        if_gen: None,
        rows: 10,
        cols: 10,
    };
    refused(&mut h, resize, ErrorCode::BadRequest);
    h.settle();
}

#[test]
fn pty_resize_and_close_input() {
    let mut h = Harness::new();
    let mut pty = spec();
    pty.io = IoMode::Pty { rows: 24, cols: 80 };
    let g = h.spawn_with("t", pty, OnBusy::Replace).unwrap();
    h.started(g);
    assert_eq!(
        h.cmd(Command::Resize {
            session: "t".into(),
            if_gen: Some(g),
            rows: 50,
            cols: 120
        }),
        Ok(Response::Gen(g))
    );
    assert!(h.log.contains(&Action::Resize {
        gen: g,
        rows: 50,
        cols: 120
    }));
    h.cmd(Command::CloseInput {
        session: "t".into(),
        if_gen: None,
    })
    .unwrap();
    h.cmd(Command::CloseInput {
        session: "t".into(),
        if_gen: None,
    })
    .unwrap();
    assert_eq!(
        h.log
            .iter()
            .filter(|a| **a == Action::CloseInput { gen: g })
            .count(),
        1
    );
    h.settle();
}

#[test]
fn error_codes_are_stable_strings() {
    let all = [
        (ErrorCode::BadRequest, "bad_request"),
        (ErrorCode::NoSuchSession, "no_such_session"),
        (ErrorCode::Busy, "busy"),
        (ErrorCode::StaleGeneration, "stale_generation"),
        (ErrorCode::Limit, "limit"),
        (ErrorCode::NotRunning, "not_running"),
        (ErrorCode::InputClosed, "input_closed"),
    ];
    for (code, s) in all {
        assert_eq!(code.as_str(), s);
    }
}

/// One session tracks at most `MAX_LIVE_GENERATIONS` at once, however it was replaced
/// while its predecessors took long to stop: its `list` entry stays bounded. Beyond it a
/// spawn and a restart are refused with `limit`, changing nothing; once those still
/// ending are gone there is room again.
#[test]
fn a_session_tracks_a_bounded_number_of_generations() {
    use crate::core::session::MAX_LIVE_GENERATIONS;
    let mut h = Harness::new();
    let mut slow = spec();
    slow.grace = std::time::Duration::from_secs(3600);
    for _ in 0..MAX_LIVE_GENERATIONS {
        let g = h.spawn_with("s", slow.clone(), OnBusy::Overlap).unwrap();
        h.started(g);
    }
    assert_eq!(h.get("s").generations.len(), MAX_LIVE_GENERATIONS);
    for on_busy in [OnBusy::Overlap, OnBusy::Replace] {
        let c = Command::Spawn {
            session: "s".into(),
            if_gen: None,
            spec: Box::new(slow.clone()),
            on_busy,
        };
        refused(&mut h, c, ErrorCode::Limit);
    }
    let restart = Command::Restart {
        session: "s".into(),
        if_gen: None,
    };
    refused(&mut h, restart, ErrorCode::Limit);
    // Another session is not concerned.
    running(&mut h, "t");
    // A stop with a short grace ends them all; then the session has room again.
    let stop = Command::Stop {
        session: "s".into(),
        if_gen: None,
        grace: Some(std::time::Duration::ZERO),
    };
    h.cmd(stop).unwrap();
    let gens: Vec<u64> = h.get("s").generations.iter().map(|g| g.gen).collect();
    let kills = h.advance(1);
    for &g in &gens {
        assert!(
            kills.contains(&Action::Signal {
                gen: g,
                signal: 9,
                scope: crate::core::Scope::Leader
            }),
            "generation {g} is killed too"
        );
        h.exit(g, crate::core::ExitStatus::Signal(9));
        h.eof(g);
        h.group_empty(g);
    }
    h.settle();
    assert!(h.get("s").generations.is_empty());
    // Their ends say why each went: the superseded ones stay `superseded`.
    let first = h.events_of(gens[0]);
    assert!(
        first.iter().any(|e| matches!(
            e,
            crate::core::Event::Exited {
                cause: crate::core::ExitCause::Superseded,
                ..
            }
        )),
        "{first:?}"
    );
    assert!(h.spawn_with("s", spec(), OnBusy::Replace).is_ok());
}

/// At `--max-running`, a replacement is not refused: its generation waits, Pending, for
/// the one it replaces to be gone, so what runs never exceeds the limit; a start in
/// another session, or an overlapping one, still is.
#[test]
fn a_replacement_at_the_running_limit_waits_instead_of_being_refused() {
    let config = Config {
        max_generations: 1,
        ..Config::default()
    };
    let mut h = Harness::with(config, 1);
    let old = running(&mut h, "s");
    let new = h.spawn_with("s", spec(), OnBusy::Replace).unwrap();
    assert!(!has(
        h.all_actions(),
        |a| matches!(a, Action::Spawn { gen: g, .. } if *g == new)
    ));
    let c = |session: &str, on_busy| Command::Spawn {
        session: session.into(),
        if_gen: None,
        spec: Box::new(spec()),
        on_busy,
    };
    refused(&mut h, c("t", OnBusy::Replace), ErrorCode::Limit);
    refused(&mut h, c("s", OnBusy::Overlap), ErrorCode::Limit);
    // A restart replaces the Pending one, and still waits.
    let Ok(Response::Gen(newer)) = h.cmd(Command::Restart {
        session: "s".into(),
        if_gen: None,
    }) else {
        panic!("restart at the limit refused")
    };
    h.exit(old, crate::core::ExitStatus::Signal(15));
    h.eof(old);
    let started = h.group_empty(old);
    assert!(has(
        &started,
        |a| matches!(a, Action::Spawn { gen: g, .. } if *g == newer)
    ));
    assert!(!has(
        h.all_actions(),
        |a| matches!(a, Action::Spawn { gen: g, .. } if *g == new)
    ));
    h.started(newer);
    h.settle();
}

/// `superseded` says a newer generation replaced it: not merely that it is no longer
/// current, as a stopped one whose group is still being emptied is not.
#[test]
fn only_a_replaced_generation_is_listed_superseded() {
    use crate::core::{ExitStatus, Lifecycle};
    let listed = |h: &Harness, gen: u64| {
        let g = h.get("a").generations.into_iter().find(|g| g.gen == gen);
        g.expect("listed")
    };
    let mut h = Harness::new();
    let stopped = running(&mut h, "a");
    h.stop("a", None).unwrap();
    h.exit(stopped, ExitStatus::Signal(15));
    h.eof(stopped);
    let g = listed(&h, stopped);
    assert_eq!((g.lifecycle, g.superseded), (Lifecycle::Reported, false));
    let newer = h.spawn_with("a", spec(), OnBusy::Overlap).unwrap();
    assert!(listed(&h, stopped).superseded, "a newer one is current");
    h.started(newer);
    let overlapped = h.spawn_with("a", spec(), OnBusy::Overlap).unwrap();
    assert!(listed(&h, newer).superseded);
    assert!(!listed(&h, overlapped).superseded);
    h.settle();
}

/// `spawn` with `if_gen` is decided with the spawn, as `restart`'s is: a client that read
/// the session at generation `old` and then asks for a changed spec is refused once the
/// session moved on (here: its restart policy started another generation between the
/// client's read and its spawn), with nothing changed — no new generation, the spec as
/// it was, the newer generation left running.
#[test]
fn a_spawn_with_if_gen_is_refused_once_the_session_moved_on() {
    let mut h = Harness::new();
    let mut restarting = spec();
    restarting.restart.mode = crate::core::Restart::Always;
    restarting.restart.initial = std::time::Duration::from_millis(100);
    let old = h.spawn_with("s", restarting, OnBusy::Replace).unwrap();
    h.started(old);
    // The client's snapshot: current is `old`.
    assert_eq!(h.get("s").current, Some(old));
    // The session moves on before the client's spawn arrives.
    h.ends(old, crate::core::ExitStatus::Code(1));
    h.advance(100);
    let newer = h.get("s").current.expect("restarted");
    assert_ne!(newer, old);
    h.started(newer);
    let detail = |h: &mut Harness| {
        h.cmd(Command::Get {
            session: "s".into(),
        })
    };
    let before = detail(&mut h);
    let records = h.records();
    let log_len = h.log.len();
    let mut changed = spec();
    changed.argv = vec![b"other".to_vec()];
    let spawn = |if_gen, on_busy| Command::Spawn {
        session: "s".into(),
        if_gen,
        spec: Box::new(changed.clone()),
        on_busy,
    };
    for on_busy in [OnBusy::Replace, OnBusy::Overlap, OnBusy::Reject] {
        refused(
            &mut h,
            spawn(Some(old), on_busy),
            ErrorCode::StaleGeneration,
        );
    }
    assert_eq!(detail(&mut h), before, "the spec or the session changed");
    assert_eq!(h.records(), records);
    let acted: Vec<&Action> = h.log[log_len..]
        .iter()
        .filter(|a| !matches!(a, Action::Reply { .. }))
        .collect();
    assert!(acted.is_empty(), "a refused spawn acted: {acted:?}");
    // An unknown session is `no_such_session`, as for every other command with `if_gen`:
    // with one, a spawn never creates its session.
    refused(
        &mut h,
        Command::Spawn {
            session: "nope".into(),
            if_gen: Some(old),
            spec: Box::new(spec()),
            on_busy: OnBusy::Replace,
        },
        ErrorCode::NoSuchSession,
    );
    // The precondition holds: `on_busy` decides as without it.
    refused(&mut h, spawn(Some(newer), OnBusy::Reject), ErrorCode::Busy);
    let Ok(Response::Gen(next)) = h.cmd(spawn(Some(newer), OnBusy::Replace)) else {
        panic!("a spawn with the current generation was refused");
    };
    assert_eq!(h.get("s").current, Some(next));
    assert!(has(&h.log[log_len..], |a| matches!(
        a,
        Action::Signal { gen, .. } if *gen == newer
    )));
    let Ok(Response::Session(s)) = detail(&mut h) else {
        panic!("get")
    };
    assert_eq!(s.detail.expect("get has it").spec.argv, changed.argv);
}
