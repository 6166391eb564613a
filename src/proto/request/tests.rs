//! Decoding tests: every option, precise refusals, subscriptions and waits.

use std::time::Duration;

use super::{decode, Lossless, Op, Replay, Target};
use crate::core::{Command, IoMode, OnBusy, OnExit, Restart};
use crate::proto::error::ProtoError;
use crate::proto::json::parse;

type Result<T> = std::result::Result<T, ProtoError>;

fn dec(json: &str) -> Result<Op> {
    let v = parse(json.as_bytes()).unwrap();
    let mut obj = v.as_object().unwrap().clone();
    let op = obj.remove("op").unwrap();
    decode(op.as_str().unwrap(), &obj)
}

fn err(json: &str) -> String {
    let e = dec(json).unwrap_err();
    format!("{}: {}", e.code.as_str(), e.message)
}

#[test]
fn spawn_with_every_option() {
    let op = dec(
        r#"{"op":"spawn","session":"web","argv":["sh","-c","x"],"cwd":"/tmp",
        "env":{"A":"1"},"unset_env":["B"],"clear_env":true,"pty":{"rows":30,"cols":100},
        "stop_signal":"INT","grace":"2s","kill_grace":1500,"drain":"100ms",
        "on_exit":"leave","on_busy":"overlap",
        "restart":{"mode":"on-failure","initial":"1s","max":"30s","max_restarts":3},
        "buffer":65536,"if_gen":3}"#,
    )
    .unwrap();
    let Op::Core(Command::Spawn {
        session,
        if_gen,
        spec,
        on_busy,
    }) = op
    else {
        panic!("{op:?}")
    };
    assert_eq!(session, "web");
    assert_eq!(if_gen, Some(3));
    assert_eq!(on_busy, OnBusy::Overlap);
    assert_eq!(
        spec.argv,
        vec![b"sh".to_vec(), b"-c".to_vec(), b"x".to_vec()]
    );
    assert_eq!(
        spec.io,
        IoMode::Pty {
            rows: 30,
            cols: 100
        }
    );
    assert_eq!(spec.stop_signal, libc::SIGINT);
    assert_eq!(spec.grace, Duration::from_secs(2));
    assert_eq!(spec.kill_grace, Duration::from_millis(1500));
    assert_eq!(spec.on_exit, OnExit::Leave);
    assert!(!spec.env.inherit);
    assert_eq!(spec.restart.mode, Restart::OnFailure);
    assert_eq!(spec.restart.max_restarts, Some(3));
    assert_eq!(spec.buffer_bytes, 65536);
}

#[test]
fn bad_session_names_are_refused_precisely() {
    for (name, why) in [
        ("../x", "start with `.`"),
        ("a/b", "contains '/'"),
        ("", "is empty"),
        (&"a".repeat(65), "limit 64"),
        ("a\u{0}b", "contains '\\0'"),
        (".hidden", "start with `.`"),
    ] {
        let req = format!(
            r#"{{"op":"get","session":{}}}"#,
            serde_json::to_string(name).unwrap()
        );
        let e = err(&req);
        assert!(e.starts_with("bad_request: field `session`"), "{e}");
        assert!(e.contains(why), "{name:?}: {e}");
    }
}

#[test]
fn type_and_field_errors_name_the_field() {
    assert!(err(r#"{"op":"write","session":"a","if_gen":"3","data":"x"}"#).contains("`if_gen`"));
    assert!(err(r#"{"op":"stop","session":"a","gracee":"3s"}"#).contains("gracee"));
    assert!(err(r#"{"op":"signal","session":"a","signal":"SIGNOPE"}"#).contains("signal"));
    assert!(err(r#"{"op":"signal","session":"a","signal":999}"#).contains("signal"));
    assert!(err(r#"{"op":"spawn","session":"a","argv":[1]}"#).contains("argv[0]"));
    assert!(err(r#"{"op":"resize","session":"a","rows":0,"cols":80}"#).contains("rows"));
    let spawn = |pty: &str| {
        err(&format!(
            r#"{{"op":"spawn","session":"a","argv":["sh"],"pty":{pty}}}"#
        ))
    };
    assert!(
        spawn(r#"{"rows":0}"#).contains("`pty.rows`"),
        "{}",
        spawn(r#"{"rows":0}"#)
    );
    assert!(
        spawn(r#"{"cols":"x"}"#).contains("`pty.cols`"),
        "{}",
        spawn(r#"{"cols":"x"}"#)
    );
    assert!(spawn(r#"true,"stderr":"null""#).contains("`stderr`"));
    let e = err(r#"{"op":"spawn","session":"a","argv":["sh"],"log":{"path":"/l","keep":"x"}}"#);
    assert!(
        e.contains("`log.keep`") && !e.contains("`keep`"),
        "named once: {e}"
    );
    assert!(err(r#"{"op":"frobnicate"}"#).starts_with("unknown_op"));
    assert!(
        err(r#"{"op":"subscribe","session":"a","tail":5,"from_pos":1}"#).contains("at most one")
    );
    assert!(err(r#"{"op":"write","session":"a"}"#).contains("data"));
    assert!(err(r#"{"op":"upgrade","binary":"genward"}"#).contains("absolute"));
    assert!(err(r#"{"op":"upgrade","binary":""}"#).contains("absolute"));
    assert!(err(r#"{"op":"upgrade","binary":3}"#).contains("binary"));
    assert!(err(r#"{"op":"upgrade","bin":"/x"}"#).contains("bin"));
}

#[test]
fn subscriptions_and_waits() {
    assert_eq!(
        dec(r#"{"op":"subscribe","all":true,"tail":100}"#).unwrap(),
        Op::Subscribe {
            target: Target::All,
            replay: Replay::Tail(100),
            lossless: None,
        }
    );
    assert_eq!(
        dec(r#"{"op":"subscribe","session":"s"}"#).unwrap(),
        Op::Subscribe {
            target: Target::Session("s".into()),
            replay: Replay::Now,
            lossless: None,
        }
    );
    assert_eq!(
        dec(r#"{"op":"wait","session":"s","gen":4}"#).unwrap(),
        Op::Wait {
            session: "s".into(),
            gen: Some(4)
        }
    );
    assert_eq!(
        dec(r#"{"op":"write","session":"s","data_b64":"AP8="}"#).unwrap(),
        Op::Core(Command::Write {
            session: "s".into(),
            if_gen: None,
            bytes: vec![0, 255]
        })
    );
}

#[test]
fn list_is_classic_without_after_and_limit_and_paged_with_either() {
    assert_eq!(dec(r#"{"op":"list"}"#).unwrap(), Op::Core(Command::List));
    assert_eq!(
        dec(r#"{"op":"list","after":null,"limit":null}"#).unwrap(),
        Op::Core(Command::List)
    );
    assert_eq!(
        dec(r#"{"op":"list","limit":50}"#).unwrap(),
        Op::ListPage {
            after: None,
            limit: 50
        }
    );
    assert_eq!(
        dec(r#"{"op":"list","after":"web"}"#).unwrap(),
        Op::ListPage {
            after: Some("web".into()),
            limit: crate::proto::list::PAGE_DEFAULT
        }
    );
    // Too large a page counts as the largest; an empty one is refused.
    assert_eq!(
        dec(r#"{"op":"list","after":"web","limit":1000000}"#).unwrap(),
        Op::ListPage {
            after: Some("web".into()),
            limit: crate::proto::list::PAGE_MAX
        }
    );
    assert!(err(r#"{"op":"list","limit":0}"#).contains("`limit`"));
    assert!(err(r#"{"op":"list","after":3}"#).contains("`after`"));
    for bad in [".x", "a/b", &"x".repeat(65)] {
        let e = err(&format!(r#"{{"op":"list","after":"{bad}"}}"#));
        assert!(e.contains("`after`"), "{bad}: {e}");
    }
    assert!(dec(r#"{"op":"list","after":""}"#).is_ok());
    assert!(err(r#"{"op":"list","size":3}"#).contains("size"));
}

#[test]
fn lossless_subscriptions() {
    let sub = |lossless| Op::Subscribe {
        target: Target::Session("s".into()),
        replay: Replay::Start,
        lossless,
    };
    assert_eq!(
        dec(r#"{"op":"subscribe","session":"s","from_start":true,"lossless":true}"#).unwrap(),
        sub(Some(Lossless::default()))
    );
    let quick = Lossless {
        demote_after: std::time::Duration::from_millis(1500),
    };
    for after in ["1500", r#""1.5s""#] {
        let line = format!(
            r#"{{"op":"subscribe","session":"s","from_start":true,"lossless":true,"demote_after":{after}}}"#
        );
        assert_eq!(dec(&line).unwrap(), sub(Some(quick)));
    }
    assert_eq!(
        dec(r#"{"op":"subscribe","session":"s","from_start":true,"lossless":false}"#).unwrap(),
        sub(None)
    );
    let e = err(r#"{"op":"subscribe","session":"s","demote_after":5}"#);
    assert!(e.contains("lossless"), "{e}");
    let e = err(r#"{"op":"subscribe","session":"s","lossless":true,"demote_after":0}"#);
    assert!(e.contains("demote_after"), "{e}");
    let e = err(r#"{"op":"subscribe","session":"s","lossless":"yes"}"#);
    assert!(e.contains("lossless"), "{e}");
    assert!(dec(r#"{"op":"subscribe","session":null,"all":true}"#).is_ok());
    let e = err(r#"{"op":"subscribe","all":true,"from_pos":10}"#);
    assert!(e.contains("from_pos") && e.contains("all"), "{e}");
}

/// A bare number is milliseconds on the wire; the same digits in a string are refused rather
/// than read as seconds, wherever a duration goes, and the error names the member.
#[test]
fn a_duration_string_without_a_unit_is_refused_naming_its_member() {
    for (members, field) in [
        (r#""grace":"5""#, "grace"),
        (r#""drain":"1.5""#, "drain"),
        (
            r#""restart":{"mode":"always","initial":"2"}"#,
            "restart.initial",
        ),
        (r#""ready":{"output":"up","timeout":"30"}"#, "ready.timeout"),
    ] {
        let e = spawn_err(members);
        assert!(e.contains(field) && e.contains("no unit"), "{members}: {e}");
    }
    let e = spawn_err(r#""grace":"1m30""#);
    assert!(e.contains("missing unit") && !e.contains("seconds"), "{e}");
    let e = err(r#"{"op":"subscribe","session":"s","lossless":true,"demote_after":"30"}"#);
    assert!(e.contains("demote_after") && e.contains("no unit"), "{e}");
    assert_eq!(
        spawn_spec(r#""grace":"5s""#).grace,
        std::time::Duration::from_secs(5)
    );
    assert_eq!(
        spawn_spec(r#""grace":5"#).grace,
        std::time::Duration::from_millis(5)
    );
}

/// Any duration up to 2^64−1 ms is taken, as a number or a string; a string saying more
/// is refused naming its member, as is one longer than 64 characters.
#[test]
fn a_duration_above_the_most_milliseconds_is_refused_naming_its_member() {
    let most = std::time::Duration::from_millis(u64::MAX);
    for members in [
        r#""grace":18446744073709551615"#,
        r#""grace":"18446744073709551615ms""#,
        r#""grace":"18446744073709551.615s""#,
    ] {
        assert_eq!(spawn_spec(members).grace, most, "{members}");
    }
    for (members, field) in [
        (r#""grace":"18446744073709551616ms""#, "grace"),
        (r#""kill_grace":"213503982334601d""#, "kill_grace"),
        (
            r#""restart":{"mode":"always","max":"18446744073709551615001us"}"#,
            "restart.max",
        ),
    ] {
        let e = spawn_err(members);
        assert!(
            e.starts_with(&format!("bad_request: field `{field}`"))
                && e.contains("too large; at most 18446744073709551615ms"),
            "{members}: {e}"
        );
    }
    let long = format!(r#""drain":"{}1s""#, "0".repeat(64));
    let e = spawn_err(&long);
    assert!(
        e.contains("`drain`") && e.contains("longer than 64 characters"),
        "{e}"
    );
}

/// A number out of a field's range is shown as sent, not as the most a spec can hold; a
/// nested member is named with its parent; every missing member is worded one way.
#[test]
fn refusals_show_the_number_sent_and_name_the_member_one_way() {
    let max = u64::MAX;
    for (members, want) in [
        (
            format!(r#""ready":{{"fd":{max}}}"#),
            format!("ready.fd: {max} must be 3..=1023"),
        ),
        (
            r#""ready":{"fd":1024}"#.to_string(),
            "ready.fd: 1024 must be 3..=1023".to_string(),
        ),
        (
            format!(r#""log":{{"path":"/l","keep":{max}}}"#),
            format!("log.keep: {max} is above 1000"),
        ),
        (
            format!(r#""stop_signal":{max}"#),
            format!("field `stop_signal`: signal number `{max}` is out of range"),
        ),
        (
            r#""stop_signal":-1"#.to_string(),
            "field `stop_signal`: signal number `-1` is out of range".to_string(),
        ),
        (
            r#""stop_signal":2.5"#.to_string(),
            "field `stop_signal`: expected a signal name or number, got non-integer number"
                .to_string(),
        ),
        (
            r#""restart":{"max_restarts":-1}"#.to_string(),
            "field `restart.max_restarts`: expected".to_string(),
        ),
        (
            r#""restart":{"mode":3}"#.to_string(),
            "field `restart.mode`: expected".to_string(),
        ),
    ] {
        let e = spawn_err(&members);
        assert!(e.contains(&want), "{members}: {e}");
        assert!(!e.contains("4294967295"), "{members}: {e}");
    }
    assert_eq!(
        spawn_spec(&format!(r#""restart":{{"max_restarts":{max}}}"#))
            .restart
            .max_restarts,
        Some(u32::MAX),
        "as good as unbounded"
    );
    for (request, field) in [
        (r#"{"op":"signal","session":"a"}"#, "signal"),
        (r#"{"op":"resize","session":"a","cols":80}"#, "rows"),
        (r#"{"op":"resize","session":"a","rows":24}"#, "cols"),
        (r#"{"op":"write","session":"a"}"#, "data"),
        (r#"{"op":"get"}"#, "session"),
    ] {
        let e = err(request);
        assert!(
            e.starts_with(&format!("bad_request: field `{field}`: missing")),
            "{request}: {e}"
        );
    }
    let e = err(r#"{"op":"signal","session":"a","signal":18446744073709551615}"#);
    assert!(e.contains("out of range"), "{e}");
}

fn spawn_spec(members: &str) -> crate::core::Spec {
    match dec(&format!(
        r#"{{"op":"spawn","session":"s","argv":["true"],{members}}}"#
    )) {
        Ok(Op::Core(Command::Spawn { spec, .. })) => *spec,
        other => panic!("{members}: {other:?}"),
    }
}

fn spawn_err(members: &str) -> String {
    err(&format!(
        r#"{{"op":"spawn","session":"s","argv":["true"],{members}}}"#
    ))
}

#[test]
fn spawn_run_as_options() {
    use crate::core::{Rlimit, RlimitBound, RlimitValue};
    let spec = spawn_spec(
        r#""user":"nobody","group":65534,"groups":["adm",4],"umask":"0027",
        "env_file":"/etc/app.env",
        "rlimits":{"nofile":{"soft":1024,"hard":4096},"core":0,"as":"infinity","cpu":"unlimited"}"#,
    );
    let r = &spec.run_as;
    assert_eq!(r.user.as_deref(), Some("nobody"));
    assert_eq!(r.group.as_deref(), Some("65534"));
    assert_eq!(r.groups, Some(vec!["adm".to_string(), "4".to_string()]));
    assert_eq!(r.umask, Some(0o027));
    assert_eq!(r.env_file.as_deref(), Some(&b"/etc/app.env"[..]));
    let both = |b| RlimitValue { soft: b, hard: b };
    // Kept in one order whatever the request's, so equal specs compare equal.
    assert_eq!(
        r.rlimits,
        vec![
            (Rlimit::As, both(RlimitBound::Infinity)),
            (Rlimit::Core, both(RlimitBound::Finite(0))),
            (Rlimit::Cpu, both(RlimitBound::Infinity)),
            (
                Rlimit::Nofile,
                RlimitValue {
                    soft: RlimitBound::Finite(1024),
                    hard: RlimitBound::Finite(4096)
                }
            ),
        ]
    );
    assert!(spawn_spec(r#""groups":[]"#).run_as.groups == Some(Vec::new()));
    assert!(spawn_spec(r#""user":null"#).run_as.is_empty());
}

#[test]
fn spawn_run_as_refusals_name_the_field() {
    for (members, want) in [
        (r#""user":"""#, "user"),
        (r#""user":"a:b""#, "user"),
        (r#""user":-1"#, "user"),
        (r#""user":true"#, "user"),
        (r#""user":4294967295"#, "user"),
        (r#""group":"-g""#, "group"),
        (r#""groups":"adm""#, "groups"),
        (r#""groups":["adm",""]"#, "groups[1]"),
        (r#""umask":27"#, "umask"),
        (r#""umask":"8""#, "umask"),
        (r#""umask":"1000""#, "umask"),
        (r#""umask":"""#, "umask"),
        (r#""umask":"0o22""#, "umask"),
        (r#""env_file":"app.env""#, "env_file"),
        (r#""env_file":3"#, "env_file"),
        (r#""rlimits":[]"#, "rlimits"),
        (r#""rlimits":{"files":3}"#, "rlimits.files"),
        (r#""rlimits":{"nofile":-1}"#, "rlimits.nofile"),
        (r#""rlimits":{"nofile":"lots"}"#, "rlimits.nofile"),
        (r#""rlimits":{"nofile":1.5}"#, "rlimits.nofile"),
        (
            r#""rlimits":{"nofile":18446744073709551615}"#,
            "what the kernel calls no limit",
        ),
        (r#""rlimits":{"nofile":{"soft":1}}"#, "rlimits.nofile.hard"),
        (
            r#""rlimits":{"nofile":{"soft":1,"hard":2,"x":3}}"#,
            "rlimits.nofile.x",
        ),
        (
            r#""rlimits":{"nofile":{"soft":5,"hard":2}}"#,
            "rlimits.nofile",
        ),
        (
            r#""rlimits":{"nofile":{"soft":"infinity","hard":2}}"#,
            "rlimits.nofile",
        ),
    ] {
        let e = spawn_err(members);
        assert!(e.starts_with("bad_request: "), "{members}: {e}");
        assert!(e.contains(want), "{members}: {e}");
    }
}
