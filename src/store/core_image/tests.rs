use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::core::{
    Containment, CoreImage, Event, ExitCause, ExitStatus, GenerationImage, GroupImage, IoMode,
    LastEnd, PhaseImage, RestState, SessionImage, SessionState, ShutdownImage, SpawnError,
    SpawnErrorKind, StopReason, StopStage, Time,
};

fn spec(argv0: &str) -> Arc<Spec> {
    let mut spec = Spec::new(vec![
        argv0.as_bytes().to_vec(),
        "é \"x\"".as_bytes().to_vec(),
    ]);
    spec.io = IoMode::Pty {
        rows: 30,
        cols: 100,
    };
    spec.grace = Duration::from_micros(1500);
    // The upgraded daemon restarts a session as the user its spec names.
    spec.run_as.user = Some("daemon".into());
    spec.run_as.umask = Some(0);
    spec.run_as.rlimits = vec![(
        crate::core::Rlimit::Core,
        crate::core::RlimitValue {
            soft: crate::core::RlimitBound::Infinity,
            hard: crate::core::RlimitBound::Infinity,
        },
    )];
    Arc::new(spec)
}

fn generation(
    gen: u64,
    session: &Arc<str>,
    spec: &Arc<Spec>,
    phase: PhaseImage,
) -> GenerationImage {
    GenerationImage {
        gen,
        session: session.clone(),
        spec: spec.clone(),
        phase,
        since: Time::from_millis(gen * 10),
        started: Some(Time::from_millis(gen)),
        stop: Some(StopReason::Superseded),
        grace: Some(Duration::new(3, 999_999_999)),
        sent_kill: true,
        cancel_at: None,
        containment: Some(Containment::Cgroup),
        offsets: [1, u64::MAX, 0],
        eof: [true, false, true],
        discarded: 12,
        group: GroupImage::Term {
            until: Time::from_millis(u64::MAX),
        },
        pending_input: 64,
        input_closed: true,
        exit: Some((ExitStatus::Signal(9), ExitCause::Killed)),
        exited_at: Time::from_millis(7),
        adopted: Some(Time::ZERO),
        io_kept: false,
        started_unix_ms: None,
        unverified: true,
        leader_gone: false,
        // Every readiness shape by generation number, and a liveness schedule on some.
        readiness: match gen % 4 {
            0 => crate::core::Readiness::Unstarted,
            1 => crate::core::Readiness::Ready,
            2 => crate::core::Readiness::Failed("timed out after 60s".into()),
            _ => crate::core::Readiness::Waiting {
                deadline: Time::from_millis(60_000),
                next_probe: None,
                probe: Some((3, Time::from_millis(2_000))),
                probes: 4,
            },
        },
        liveness: if gen % 2 == 0 {
            crate::core::Liveness {
                next: Some(Time::from_millis(10_000)),
                probe: None,
                probes: 7,
                failures: 2,
                tripped: false,
            }
        } else {
            crate::core::Liveness::default()
        },
        overlap: gen % 3 == 0,
    }
}

/// Every shape a member can take: each phase and group kind, both exit statuses, a
/// nanosecond grace, both kinds of end, absent values.
fn image() -> CoreImage {
    let web: Arc<str> = Arc::from("web");
    let db: Arc<str> = Arc::from("db");
    let (old, new) = (spec("old"), spec("new"));
    let phases = [
        PhaseImage::Pending,
        PhaseImage::Starting,
        PhaseImage::Running { pid: u32::MAX },
        PhaseImage::Stopping {
            pid: 1,
            stage: StopStage::Graceful,
            until: Some(Time::from_millis(5)),
        },
        PhaseImage::Stopping {
            pid: 1,
            stage: StopStage::Kill,
            until: None,
        },
        PhaseImage::Stopping {
            pid: 1,
            stage: StopStage::Unkillable,
            until: None,
        },
        PhaseImage::Draining {
            pid: 2,
            until: None,
        },
        PhaseImage::Draining {
            pid: 2,
            until: Some(Time::from_millis(9)),
        },
        PhaseImage::Reported { pid: 3 },
        PhaseImage::Gone,
    ];
    let mut generations: Vec<GenerationImage> = phases
        .iter()
        .enumerate()
        .map(|(i, p)| generation(i as u64 + 1, &web, if i % 2 == 0 { &old } else { &new }, *p))
        .collect();
    let bare = &mut generations[0];
    bare.started = None;
    bare.stop = None;
    bare.grace = None;
    bare.containment = None;
    bare.group = GroupImage::Alive;
    bare.exit = None;
    bare.adopted = None;
    generations[1].group = GroupImage::Done;
    generations[1].exit = Some((ExitStatus::Code(-3), ExitCause::Exited));
    generations[2].stop = Some(StopReason::Requested);
    let ends = vec![
        Event::SpawnFailed {
            session: web.clone(),
            gen: 11,
            error: SpawnError::new(SpawnErrorKind::NotFound, 2).with_message("exec \"x\""),
        },
        Event::Exited {
            session: web.clone(),
            gen: 12,
            code: None,
            signal: None,
            cause: ExitCause::Lost,
            discarded: 0,
            truncated: true,
        },
        Event::Exited {
            session: web.clone(),
            gen: 13,
            code: Some(143),
            signal: Some(15),
            cause: ExitCause::Stopped,
            discarded: 5,
            truncated: false,
        },
    ];
    CoreImage {
        now: Time::from_millis(123_456),
        next_gen: 20,
        shutdown: ShutdownImage::Killing,
        sessions: vec![
            SessionImage {
                name: db.clone(),
                spec: new.clone(),
                origin: crate::core::Origin::Client,
                current: None,
                last_gen: None,
                want_up: false,
                removing: true,
                recovery_stop: None,
                stopped_by_shutdown: false,
                restarts: u32::MAX,
                restart_at: None,
                restart_uncounted: false,
                rest: RestState::Failed,
                last_end: Some(LastEnd::SpawnFailed {
                    gen: 4,
                    error: SpawnError::new(SpawnErrorKind::Cancelled, 0),
                }),
                recent_ends: Vec::new(),
                announced: None,
            },
            SessionImage {
                name: web.clone(),
                spec: old,
                origin: crate::core::Origin::Config,
                current: Some(1),
                last_gen: Some(13),
                want_up: true,
                removing: false,
                recovery_stop: Some(1),
                stopped_by_shutdown: true,
                restarts: 2,
                restart_at: Some(Time::from_millis(99)),
                restart_uncounted: true,
                rest: RestState::Exited,
                last_end: Some(LastEnd::Exited {
                    gen: 13,
                    code: Some(143),
                    signal: Some(15),
                    cause: ExitCause::Stopped,
                }),
                recent_ends: ends,
                announced: Some(SessionState::Backoff),
            },
        ],
        generations,
        dirty: vec![db, web],
    }
}

#[test]
fn every_shape_round_trips() {
    let image = image();
    let bytes = encode_core_image(&image).expect("encodes");
    assert_eq!(decode_core_image(&bytes), Ok(image.clone()));
    // Each distinct spec is written once, however many name it.
    let text = String::from_utf8(bytes).expect("UTF-8");
    assert_eq!(text.matches("\"argv\"").count(), 2, "{text}");
    let empty = CoreImage {
        sessions: Vec::new(),
        generations: Vec::new(),
        dirty: Vec::new(),
        ..image
    };
    let bytes = encode_core_image(&empty).expect("encodes");
    assert_eq!(decode_core_image(&bytes), Ok(empty));
}

#[test]
fn a_spec_the_wire_cannot_carry_is_refused_naming_it() {
    let mut image = image();
    let mut spec = (*image.generations[3].spec).clone();
    spec.argv.push(b"\xff".to_vec());
    let arg = spec.argv.len() - 1;
    image.generations[3].spec = Arc::new(spec);
    let e = encode_core_image(&image).expect_err("an argument that is not UTF-8");
    assert_eq!(e.field, format!("generations[3].spec.argv[{arg}]"));
}

/// Replaces the first `from` in the encoding with `to`, which must change it.
fn edited(from: &str, to: &str) -> Vec<u8> {
    let text = String::from_utf8(encode_core_image(&image()).expect("encodes")).expect("UTF-8");
    assert!(text.contains(from), "{from} is not in {text}");
    text.replacen(from, to, 1).into_bytes()
}

#[test]
fn what_is_wrong_is_refused_naming_the_member() {
    let cases = [
        (
            edited("{\"now\"", "{\"extra\":1,\"now\""),
            "unknown field `extra`",
        ),
        (edited("\"now\":123456,", ""), "field `now`: missing"),
        (
            edited("\"shutdown\":\"killing\"", "\"shutdown\":\"dead\""),
            "`dead` is not one of",
        ),
        (
            edited("\"restarts\":4294967295", "\"restarts\":4294967296"),
            "sessions[0].restarts",
        ),
        (
            edited("\"want_up\":false", "\"want_up\":0"),
            "sessions[0].want_up",
        ),
        (
            edited("\"name\":\"db\",\"spec\":0", "\"name\":\"db\",\"spec\":9"),
            "sessions[0].spec",
        ),
        (
            edited("\"pid\":4294967295", "\"pid\":4294967296"),
            "generations[2].phase.pid",
        ),
        (
            edited("\"kind\":\"starting\"", "\"kind\":\"starting\",\"pid\":1"),
            "generations[1].phase",
        ),
        (
            edited("\"kind\":\"running\",", "\"kind\":\"sleeping\","),
            "`sleeping` is not one of",
        ),
        (
            edited("\"kind\":\"alive\"", "\"kind\":\"alive\",\"until\":1"),
            "generations[0].group",
        ),
        (
            edited("[3,999999999]", "[3,1000000000]"),
            "generations[1].grace",
        ),
        (
            edited("[1,18446744073709551615,0]", "[1,2]"),
            "generations[0].offsets",
        ),
        (
            edited("[true,false,true]", "[true,false,1]"),
            "generations[0].eof",
        ),
        (
            edited("{\"signal\":9,", "{\"signal\":9,\"code\":1,"),
            "generations[2].exit",
        ),
        (
            edited("{\"code\":-3,", "{\"code\":-2147483649,"),
            "generations[1].exit.code",
        ),
        (
            edited("\"cause\":\"killed\"", "\"cause\":\"eaten\""),
            "generations[2].exit.cause",
        ),
        (
            edited("\"truncated\":true", "\"truncated\":true,\"pos\":3"),
            "sessions[1].recent_ends[1].pos",
        ),
        (
            edited("\"errno\":2,", "\"errno\":2,\"path\":\"x\","),
            "recent_ends[0].error.path",
        ),
        (
            edited(
                "\"session\":\"web\",\"gen\":12",
                "\"session\":\"db\",\"gen\":12",
            ),
            "about another session",
        ),
        (
            edited("\"announced\":\"backoff\"", "\"announced\":\"asleep\""),
            "sessions[1].announced",
        ),
        (edited("\"dirty\":[\"db\",", "\"dirty\":[1,"), "dirty[0]"),
        (
            edited("\"argv\":[\"new\"", "\"argv\":[\"new\"],\"colour\":[\"x\""),
            "specs[0]",
        ),
        (
            edited("\"specs\":[", "\"specs\":[{\"argv\":[\"x\"]},"),
            "`specs[2]`: named by nothing",
        ),
    ];
    for (bytes, says) in cases {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match decode_core_image(&bytes) {
            Ok(_) => panic!("accepted what should say {says:?}: {text}"),
            Err(e) => assert!(e.to_string().contains(says), "{e} does not say {says:?}"),
        }
    }
    assert!(matches!(
        decode_core_image(b"[]"),
        Err(CoreImageError::Field(_))
    ));
    assert!(matches!(
        decode_core_image(b"{\"now\":1"),
        Err(CoreImageError::Json(_))
    ));
}
