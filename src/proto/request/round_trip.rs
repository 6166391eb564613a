//! Encoding tests: every operation, written by [`encode`] and read back by the daemon's
//! own path (envelope, then [`decode`]), is the operation that was written.

use std::time::Duration;

use super::{decode, encode, Lossless, Op, Replay, Target};
use crate::core::{
    Command, Env, IoMode, OnBusy, OnExit, Restart, RestartPolicy, Rlimit, RlimitBound, RlimitValue,
    Spec, Stderr,
};
use crate::proto::envelope::{Request, RequestId};
use crate::proto::json::Limits;

fn line(id: &RequestId, op: &Op) -> Vec<u8> {
    let mut out = Vec::new();
    encode(id, op, &mut out).unwrap_or_else(|e| panic!("{op:?}: {e}"));
    assert_eq!(out.pop(), Some(b'\n'));
    assert!(!out.contains(&b'\n'));
    out
}

/// Encodes `op`, decodes it as the daemon does, and checks nothing changed.
fn round_trip(op: &Op) {
    for id in [
        RequestId::U64(u64::MAX),
        RequestId::Str("a-1".into()),
        RequestId::Null,
    ] {
        let line = line(&id, op);
        let text = String::from_utf8_lossy(&line).into_owned();
        let req =
            Request::decode(&line, &Limits::DEFAULT).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(req.id, id, "{text}");
        assert_eq!(req.op, op.name(), "{text}");
        let back = decode(&req.op, &req.args).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(&back, op, "{text}");
    }
}

fn spawn(spec: Spec, on_busy: OnBusy) -> Op {
    Op::Core(Command::Spawn {
        session: "web".into(),
        if_gen: None,
        spec: Box::new(spec),
        on_busy,
    })
}

fn every_option() -> Spec {
    Spec {
        argv: vec![b"sh".to_vec(), b"-c".to_vec(), "echo \"\u{e9}\"\n\t".into()],
        cwd: Some(b"/srv/app dir".to_vec()),
        env: Env {
            inherit: false,
            set: vec![
                (b"PORT".to_vec(), b"8080".to_vec()),
                (b"EMPTY".to_vec(), Vec::new()),
            ],
            unset: vec![b"HOME".to_vec(), b"LANG".to_vec()],
        },
        io: IoMode::Pty {
            rows: 50,
            cols: 132,
        },
        stop_signal: libc::SIGINT,
        grace: Duration::from_millis(1500),
        kill_grace: Duration::new(2, 1),
        drain: Duration::ZERO,
        on_exit: OnExit::Leave,
        restart: RestartPolicy {
            mode: Restart::OnFailure,
            initial: Duration::from_micros(250),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(600),
            max_restarts: Some(0),
        },
        buffer_bytes: 65536,
        limits: crate::core::ResourceLimits {
            memory_max: Some(1 << 30),
            pids_max: Some(64),
            cpu_max: Some(crate::core::CpuQuota {
                quota_us: 50_000,
                period_us: 100_000,
            }),
        },
        ready: Some(crate::core::ReadyCheck {
            how: crate::core::ReadyHow::Command(vec![b"pg_isready".to_vec(), b"-q".to_vec()]),
            timeout: Duration::from_secs(90),
            interval: Duration::from_millis(250),
        }),
        depends_on: [
            ("db".to_string(), crate::core::DependOn::Ready),
            ("migrate".to_string(), crate::core::DependOn::Completed),
        ]
        .into_iter()
        .collect(),
        live: Some(crate::core::LiveCheck {
            how: crate::core::ReadyHow::Tcp("127.0.0.1:8080".into()),
            interval: Duration::from_secs(5),
            failures: 2,
        }),
        on_recover: crate::core::OnRecover::Keep,
        run_as: crate::core::RunAs {
            user: Some("www-data".into()),
            group: Some("33".into()),
            groups: Some(vec!["ssl-cert".into(), "44".into()]),
            umask: Some(0o027),
            env_file: Some(b"/etc/app dir/.env".to_vec()),
            rlimits: vec![
                (
                    Rlimit::Core,
                    RlimitValue {
                        soft: RlimitBound::Finite(0),
                        hard: RlimitBound::Infinity,
                    },
                ),
                (
                    Rlimit::Nofile,
                    RlimitValue {
                        soft: RlimitBound::Finite(4096),
                        hard: RlimitBound::Finite(4096),
                    },
                ),
                (
                    Rlimit::Stack,
                    RlimitValue {
                        soft: RlimitBound::Infinity,
                        hard: RlimitBound::Infinity,
                    },
                ),
            ],
        },
        log: Some(crate::core::LogFile {
            path: b"/var/log/app dir/web.log".to_vec(),
            max_size: 65536,
            keep: 0,
        }),
    }
}

#[test]
fn every_operation_round_trips() {
    let session = || "web".to_string();
    let mut ops = vec![
        Op::Hello,
        Op::Core(Command::Shutdown),
        Op::Core(Command::List),
        Op::Core(Command::Get { session: session() }),
        Op::Core(Command::Remove { session: session() }),
        Op::Core(Command::Restart {
            session: session(),
            if_gen: Some(3),
        }),
        Op::Core(Command::CloseInput {
            session: session(),
            if_gen: None,
        }),
        Op::Core(Command::Resize {
            session: session(),
            if_gen: Some(0),
            rows: 1,
            cols: u16::MAX,
        }),
        Op::Core(Command::Signal {
            session: session(),
            if_gen: None,
            signal: libc::SIGRTMIN() + 2,
            scope: crate::core::Scope::Leader,
        }),
        Op::Core(Command::Signal {
            session: session(),
            if_gen: Some(4),
            signal: libc::SIGINT,
            scope: crate::core::Scope::Foreground,
        }),
        Op::Core(Command::Signal {
            session: session(),
            if_gen: None,
            signal: libc::SIGKILL,
            scope: crate::core::Scope::Tree,
        }),
        Op::Core(Command::Stop {
            session: session(),
            if_gen: Some(9),
            grace: Some(Duration::from_nanos(1)),
        }),
        Op::Core(Command::Stop {
            session: session(),
            if_gen: None,
            grace: None,
        }),
        Op::Unsubscribe {
            target: Target::All,
        },
        Op::Wait {
            session: session(),
            gen: Some(u64::MAX),
        },
        Op::Wait {
            session: session(),
            gen: None,
        },
        Op::WaitReady {
            session: session(),
            gen: Some(7),
        },
        Op::WaitReady {
            session: session(),
            gen: None,
        },
        Op::Upgrade { binary: None },
        Op::Reload { dry_run: false },
        Op::Reload { dry_run: true },
        Op::Upgrade {
            binary: Some("/usr/local/bin/genward".into()),
        },
        Op::ListPage {
            after: None,
            limit: 1,
        },
        Op::ListPage {
            after: Some(session()),
            limit: crate::proto::list::PAGE_MAX,
        },
    ];
    for bytes in [
        &b"hello\n"[..],
        b"",
        b"\x00\x01\x02\x1b",
        b"\xff\xfe",
        "\u{e9}t\u{e9}".as_bytes(),
    ] {
        ops.push(Op::Core(Command::Write {
            session: session(),
            if_gen: Some(4),
            bytes: bytes.to_vec(),
        }));
        ops.push(Op::QuietWrite(Command::Write {
            session: session(),
            if_gen: None,
            bytes: bytes.to_vec(),
        }));
    }
    ops.push(Op::AttachedResize(Command::Resize {
        session: session(),
        if_gen: Some(3),
        rows: 40,
        cols: 120,
    }));
    for replay in [
        Replay::Now,
        Replay::Tail(100),
        Replay::Pos(1 << 40),
        Replay::Gen(7),
        Replay::Start,
    ] {
        let lossless = [
            None,
            Some(Lossless::default()),
            Some(Lossless {
                demote_after: Duration::from_millis(250),
            }),
        ];
        for target in [Target::All, Target::Session(session())] {
            if target == Target::All && matches!(replay, Replay::Pos(_)) {
                continue; // refused: positions belong to one session
            }
            for lossless in lossless {
                ops.push(Op::Subscribe {
                    target: target.clone(),
                    replay,
                    lossless,
                });
            }
        }
    }
    ops.push(spawn(Spec::new(vec![b"true".to_vec()]), OnBusy::Replace));
    ops.push(spawn(every_option(), OnBusy::Overlap));
    for if_gen in [0, 7, u64::MAX] {
        ops.push(Op::Core(Command::Spawn {
            session: session(),
            if_gen: Some(if_gen),
            spec: Box::new(Spec::new(vec![b"true".to_vec()])),
            on_busy: OnBusy::Reject,
        }));
    }
    for (io, on_busy) in [
        (IoMode::Pty { rows: 24, cols: 80 }, OnBusy::Reject),
        (
            IoMode::Pipes {
                stderr: Stderr::Merge,
            },
            OnBusy::Replace,
        ),
        (
            IoMode::Pipes {
                stderr: Stderr::Null,
            },
            OnBusy::Replace,
        ),
    ] {
        let spec = Spec {
            io,
            restart: RestartPolicy {
                mode: Restart::Always,
                ..RestartPolicy::default()
            },
            ..Spec::new(vec![b"x".to_vec()])
        };
        ops.push(spawn(spec, on_busy));
    }
    for op in &ops {
        round_trip(op);
    }
}

#[test]
fn defaults_are_left_out_and_members_come_in_a_fixed_order() {
    let text = |op: &Op| String::from_utf8(line(&RequestId::U64(1), op)).unwrap();
    assert_eq!(
        text(&spawn(Spec::new(vec![b"true".to_vec()]), OnBusy::Replace)),
        r#"{"id":1,"op":"spawn","session":"web","argv":["true"]}"#
    );
    assert_eq!(
        text(&spawn(every_option(), OnBusy::Overlap)),
        concat!(
            r#"{"id":1,"op":"spawn","session":"web","argv":["sh","-c","echo \"é\"\n\t"],"#,
            r#""cwd":"/srv/app dir","env":{"PORT":"8080","EMPTY":""},"clear_env":true,"#,
            r#""unset_env":["HOME","LANG"],"pty":{"rows":50,"cols":132},"on_busy":"overlap","#,
            r#""restart":{"mode":"on-failure","initial":"250000ns","max":30000,"reset_after":600000,"max_restarts":0},"#,
            r#""stop_signal":2,"grace":1500,"kill_grace":"2s1ns","drain":0,"on_exit":"leave","buffer":65536,"#,
            r#""limits":{"memory_max":1073741824,"pids_max":64,"cpu_max":{"quota_us":50000,"period_us":100000}},"#,
            r#""on_recover":"keep","#,
            r#""ready":{"command":["pg_isready","-q"],"timeout":90000,"interval":250},"depends_on":{"db":"ready","migrate":"completed"},"live":{"tcp":"127.0.0.1:8080","interval":5000,"failures":2},"user":"www-data","group":"33","groups":["ssl-cert","44"],"#,
            r#""umask":"027","env_file":"/etc/app dir/.env","#,
            r#""rlimits":{"core":{"soft":0,"hard":"infinity"},"nofile":4096,"stack":"infinity"},"#,
            r#""log":{"path":"/var/log/app dir/web.log","max_size":65536,"keep":0}}"#
        )
    );
    assert_eq!(
        text(&Op::Core(Command::Write {
            session: "a".into(),
            if_gen: Some(2),
            bytes: b"ls\r".to_vec(),
        })),
        r#"{"id":1,"op":"write","session":"a","if_gen":2,"data":"ls\r"}"#
    );
    assert_eq!(
        text(&Op::Core(Command::Write {
            session: "a".into(),
            if_gen: None,
            bytes: b"\x01\x02\x03".to_vec(),
        })),
        r#"{"id":1,"op":"write","session":"a","data_b64":"AQID"}"#
    );
    assert_eq!(
        text(&Op::QuietWrite(Command::Write {
            session: "a".into(),
            if_gen: Some(2),
            bytes: b"l".to_vec(),
        })),
        r#"{"id":1,"op":"write","session":"a","if_gen":2,"data":"l","quiet":true}"#
    );
    assert_eq!(
        text(&Op::AttachedResize(Command::Resize {
            session: "a".into(),
            if_gen: Some(2),
            rows: 24,
            cols: 80,
        })),
        r#"{"id":1,"op":"resize","session":"a","if_gen":2,"rows":24,"cols":80,"attached":true}"#
    );
    assert_eq!(
        text(&Op::Core(Command::Spawn {
            session: "a".into(),
            if_gen: Some(2),
            spec: Box::new(Spec::new(vec![b"true".to_vec()])),
            on_busy: OnBusy::Replace,
        })),
        r#"{"id":1,"op":"spawn","session":"a","if_gen":2,"argv":["true"]}"#
    );
}

#[test]
fn what_the_wire_cannot_carry_is_refused_naming_the_field() {
    let err = |op: &Op| {
        let mut out = b"kept".to_vec();
        let e = encode(&RequestId::Null, op, &mut out).unwrap_err();
        assert_eq!(out, b"kept", "nothing appended on error");
        e.to_string()
    };
    let mut spec = Spec::new(vec![b"sh".to_vec(), b"\xff".to_vec()]);
    assert_eq!(
        err(&spawn(spec.clone(), OnBusy::Replace)),
        "field `argv[1]`: not valid UTF-8, which a request cannot carry"
    );
    spec.argv.pop();
    spec.env.set = vec![
        (b"A".to_vec(), b"1".to_vec()),
        (b"A".to_vec(), b"2".to_vec()),
    ];
    assert_eq!(
        err(&spawn(spec.clone(), OnBusy::Replace)),
        "field `env.A`: set twice"
    );
}

/// Restarts without a bound (`max_restarts: None`) are `"infinity"` on the wire, both
/// ways; another string is refused naming the field, and `null` is the default (5).
#[test]
fn unbounded_restarts_round_trip_as_infinity() {
    let mut spec = Spec::new(vec![b"true".to_vec()]);
    spec.restart.mode = Restart::Always;
    spec.restart.max_restarts = None;
    let op = spawn(spec, OnBusy::Replace);
    round_trip(&op);
    assert_eq!(
        String::from_utf8(line(&RequestId::U64(1), &op)).unwrap(),
        r#"{"id":1,"op":"spawn","session":"web","argv":["true"],"restart":{"mode":"always","max_restarts":"infinity"}}"#
    );
    let policy = |members: &str| {
        let line =
            format!(r#"{{"id":1,"op":"spawn","session":"a","argv":["x"],"restart":{members}}}"#);
        let req = Request::decode(line.as_bytes(), &Limits::DEFAULT).unwrap();
        match decode(&req.op, &req.args) {
            Ok(Op::Core(Command::Spawn { spec, .. })) => Ok(spec.restart.max_restarts),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        }
    };
    assert_eq!(policy(r#"{"max_restarts":"infinity"}"#), Ok(None));
    assert_eq!(policy(r#"{"max_restarts":null}"#), Ok(Some(5)));
    assert_eq!(policy(r#"{"max_restarts":7}"#), Ok(Some(7)));
    let e = policy(r#"{"max_restarts":"forever"}"#).unwrap_err();
    assert!(
        e.contains("restart.max_restarts") && e.contains("infinity"),
        "{e}"
    );
}

#[test]
fn a_spec_object_round_trips_and_refuses_request_members() {
    use super::{decode_spec_object, write_spec_object};
    use crate::proto::json::parse;
    for spec in [Spec::new(vec![b"true".to_vec()]), every_option()] {
        let mut out = b"x".to_vec();
        write_spec_object(&spec, &mut out).unwrap();
        let value = parse(&out[1..]).unwrap();
        let back = decode_spec_object(value.as_object().unwrap()).unwrap();
        assert_eq!(back, spec);
    }
    let value = parse(br#"{"argv":["true"],"session":"web"}"#).unwrap();
    let e = decode_spec_object(value.as_object().unwrap()).unwrap_err();
    assert!(e.message.contains("session"), "{e}");
    // `if_gen` is a `spawn` request's precondition, not a member of a spec: neither a
    // stored spec nor a configured session has one.
    let value = parse(br#"{"argv":["true"],"if_gen":1}"#).unwrap();
    let e = decode_spec_object(value.as_object().unwrap()).unwrap_err();
    assert!(e.message.contains("if_gen"), "{e}");
    let e = super::decode_config_entry(value.as_object().unwrap()).unwrap_err();
    assert!(e.message.contains("if_gen"), "{e}");
    let mut spec = Spec::new(vec![b"\xff".to_vec()]);
    let mut out = b"x".to_vec();
    assert!(write_spec_object(&spec, &mut out).is_err());
    spec.argv = vec![b"ok".to_vec(), b"\xfe".to_vec()];
    assert!(write_spec_object(&spec, &mut out).is_err());
    assert_eq!(
        out, b"x",
        "nothing is written for a spec the wire cannot carry"
    );
}
