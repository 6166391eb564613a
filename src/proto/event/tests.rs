//! Every event the daemon can emit goes through the encoder and back through the client's
//! decoder unchanged; the bytes are the documented ones; bad lines name the field.

use std::sync::Arc;

use super::*;
use crate::core::SpawnError;
use crate::proto::framing::{FrameDecoder, Message};
use crate::proto::json::parse;

fn s(name: &str) -> Cow<'static, str> {
    Cow::Owned(name.to_owned())
}

/// One of each shape, with the edge values: a lost exit (`code: null`), a signalled one,
/// spawn failures with and without an errno, a state with no generation, a drop, and
/// output that is not UTF-8 (and output that looks like a frame header).
fn every_event() -> Vec<WireEvent<'static>> {
    let frame = |gen, stream, data: &[u8]| {
        WireEvent::Output(OutputFrame {
            session: s("web"),
            gen,
            stream,
            offset: 5,
            pos: 1 << 40,
            t: None,
            data: Cow::Owned(data.to_vec()),
        })
    };
    vec![
        WireEvent::Spawned {
            session: s("web"),
            gen: 1,
            pid: u32::MAX,
        },
        WireEvent::SpawnFailed {
            session: s("web"),
            gen: 2,
            error: SpawnError::new(SpawnErrorKind::NotFound, libc::ENOENT).into(),
        },
        WireEvent::SpawnFailed {
            session: s("web"),
            gen: 3,
            error: SpawnError::new(SpawnErrorKind::Cancelled, 0).into(),
        },
        frame(4, Stream::Stdout, b"\xff\xfe\0\n{\"event\":\"output\"}\n"),
        frame(4, Stream::Stderr, b""),
        frame(5, Stream::Pty, b"\x1b[1m\xc3"),
        WireEvent::Exited {
            session: s("web"),
            gen: 4,
            code: Some(143),
            signal: Some(libc::SIGTERM),
            cause: ExitCause::Superseded,
            discarded: 7,
            truncated: true,
        },
        WireEvent::Exited {
            session: s("web"),
            gen: 5,
            code: None,
            signal: None,
            cause: ExitCause::Lost,
            discarded: 0,
            truncated: false,
        },
        WireEvent::Exited {
            session: s("web"),
            gen: 6,
            code: Some(-1),
            signal: None,
            cause: ExitCause::Exited,
            discarded: 0,
            truncated: false,
        },
        WireEvent::State {
            session: s("web"),
            gen: None,
            state: SessionState::Stopped,
        },
        WireEvent::State {
            session: s("web"),
            gen: Some(u64::MAX),
            state: SessionState::Removed,
        },
        WireEvent::Unkillable {
            session: s("web"),
            gen: 7,
        },
        WireEvent::InputClosed {
            session: s("web"),
            gen: 8,
        },
        WireEvent::Dropped {
            session: s("web"),
            from: 10,
            to: 4096,
        },
        WireEvent::Demoted {
            session: s("web"),
            pos: 1 << 33,
            reason: super::Demotion::Stalled,
        },
        WireEvent::Demoted {
            session: s("web"),
            pos: 7,
            reason: super::Demotion::Removing,
        },
    ]
}

#[test]
fn every_event_round_trips_through_the_frame_decoder() {
    let events = every_event();
    let mut bytes = Vec::new();
    for ev in &events {
        ev.write(&mut bytes);
    }
    let mut d = FrameDecoder::new();
    let mut got = Vec::new();
    // Byte by byte: the worst chunking a socket can produce.
    for b in bytes.chunks(1) {
        d.feed(b);
        while let Some(m) = d.next_message() {
            match m.expect("the daemon's own events decode") {
                Message::Event(ev) => got.push(ev),
                Message::Response(r) => panic!("an event read as a response: {r:?}"),
            }
        }
    }
    assert_eq!(got, events);
    assert_eq!(d.buffered(), 0);
}

#[test]
fn every_terminal_event_reads_back_as_its_end() {
    for ev in every_event() {
        let Some(end) = ev.end() else { continue };
        assert_eq!(Some(end.gen()), ev.gen());
        let mut out = Vec::new();
        end.write(&mut out);
        let v = parse(&out).unwrap();
        assert_eq!(End::decode(v.as_object().unwrap()), Ok(end));
    }
}

/// The lines are byte for byte what the protocol documents and the daemon always sent.
#[test]
fn core_events_become_the_documented_lines() {
    let session: Arc<str> = Arc::from("web");
    let cases = [
        (
            Event::Spawned {
                session: session.clone(),
                gen: 3,
                pid: 77,
            },
            r#"{"event":"spawned","session":"web","gen":3,"pid":77}"#,
        ),
        (
            Event::SpawnFailed {
                session: session.clone(),
                gen: 4,
                error: SpawnError::new(SpawnErrorKind::PermissionDenied, libc::EACCES),
            },
            r#"{"event":"spawn_failed","session":"web","gen":4,"error":{"kind":"permission_denied","errno":13,"message":"Permission denied (os error 13)"}}"#,
        ),
        (
            Event::Exited {
                session: session.clone(),
                gen: 5,
                code: Some(143),
                signal: Some(libc::SIGTERM),
                cause: ExitCause::Stopped,
                discarded: 0,
                truncated: false,
            },
            r#"{"event":"exited","session":"web","gen":5,"code":143,"signal":"SIGTERM","cause":"stopped","discarded":0,"truncated":false}"#,
        ),
        (
            Event::Exited {
                session: session.clone(),
                gen: 6,
                code: None,
                signal: None,
                cause: ExitCause::Lost,
                discarded: 2,
                truncated: true,
            },
            r#"{"event":"exited","session":"web","gen":6,"code":null,"signal":null,"cause":"lost","discarded":2,"truncated":true}"#,
        ),
        (
            Event::State {
                session: session.clone(),
                gen: None,
                state: SessionState::Starting,
            },
            r#"{"event":"state","session":"web","gen":null,"state":"starting"}"#,
        ),
        (
            Event::Unkillable {
                session: session.clone(),
                gen: 7,
            },
            r#"{"event":"unkillable","session":"web","gen":7}"#,
        ),
        (
            Event::InputClosed {
                session: session.clone(),
                gen: 8,
            },
            r#"{"event":"input_closed","session":"web","gen":8}"#,
        ),
    ];
    for (ev, line) in cases {
        let mut out = Vec::new();
        WireEvent::from_core(&ev).write(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), format!("{line}\n"));
    }
    let mut out = Vec::new();
    WireEvent::Dropped {
        session: "web".into(),
        from: 1,
        to: 9,
    }
    .write(&mut out);
    assert_eq!(
        out,
        b"{\"event\":\"dropped\",\"session\":\"web\",\"from\":1,\"to\":9}\n"
    );
}

#[test]
fn demoted_is_the_documented_line() {
    let mut out = Vec::new();
    crate::proto::encode::demoted("web", 77, super::Demotion::Stalled, &mut out);
    assert_eq!(
        out,
        b"{\"event\":\"demoted\",\"session\":\"web\",\"pos\":77,\"reason\":\"stalled\"}\n"
    );
    assert!(decode(r#"{"event":"demoted","session":"web"}"#)
        .unwrap_err()
        .contains("pos"));
}

fn decode(line: &str) -> Result<WireEvent<'static>, String> {
    let v = parse(line.as_bytes()).unwrap();
    WireEvent::decode(v.as_object().unwrap()).map_err(|e| e.to_string())
}

#[test]
fn bad_events_are_refused_naming_the_field() {
    let exited = |members: &str| {
        decode(&format!(
            r#"{{"event":"exited","session":"a","gen":1,{members}}}"#
        ))
    };
    let rest = r#""cause":"exited","discarded":0,"truncated":false"#;
    assert_eq!(
        exited(&format!(r#""signal":null,{rest}"#)).unwrap_err(),
        "`exited` event: field `code`: missing"
    );
    assert_eq!(
        exited(&format!(r#""code":"1","signal":null,{rest}"#)).unwrap_err(),
        "`exited` event: field `code`: expected integer, got string"
    );
    assert_eq!(
        exited(&format!(r#""code":4294967296,"signal":null,{rest}"#)).unwrap_err(),
        "`exited` event: field `code`: 4294967296 is not an exit code"
    );
    assert!(exited(&format!(r#""code":1,"signal":"SIGNOPE",{rest}"#))
        .unwrap_err()
        .starts_with("`exited` event: field `signal`: unknown signal `SIGNOPE`"));
    assert_eq!(
        exited(r#""code":1,"signal":null,"cause":"crashed","discarded":0,"truncated":false"#)
            .unwrap_err(),
        "`exited` event: field `cause`: `crashed` is not one of exited, signaled, stopped, killed, superseded, lost"
    );
    assert_eq!(
        decode(r#"{"event":"spawn_failed","session":"a","gen":1,"error":{"kind":"nope","errno":0}}"#)
            .unwrap_err(),
        "`spawn_failed` event: field `error.kind`: `nope` is not one of not_found, permission_denied, other, cancelled"
    );
    assert_eq!(
        decode(r#"{"event":"state","session":"a","state":"running"}"#).unwrap_err(),
        "`state` event: field `gen`: missing"
    );
    assert_eq!(
        decode(r#"{"event":"spawned","session":"a","gen":1,"pid":4294967296}"#).unwrap_err(),
        "`spawned` event: field `pid`: 4294967296 is not a pid"
    );
    assert_eq!(
        decode(r#"{"event":"later"}"#).unwrap_err(),
        "unknown event `later`"
    );
    assert_eq!(
        decode(r#"{"event":1}"#).unwrap_err(),
        "not an event: field `event`: expected string, got integer"
    );
    assert!(decode(r#"{"event":"output","session":"a","gen":1}"#)
        .unwrap_err()
        .contains("frame decoder"));
}

#[test]
fn members_a_newer_daemon_adds_are_ignored() {
    assert_eq!(
        decode(r#"{"event":"unkillable","session":"a","gen":2,"since_unix_ms":5}"#),
        Ok(WireEvent::Unkillable {
            session: s("a"),
            gen: 2
        })
    );
}

/// The wire adds the system's text for an errno when the daemon had no message of its
/// own; reading it back drops exactly that, and keeps a message of the daemon's own.
#[test]
fn spawn_errors_read_back_as_the_core_wrote_them() {
    let plain = SpawnError::new(SpawnErrorKind::NotFound, libc::ENOENT);
    let wire = WireSpawnError::from(plain.clone());
    assert!(wire.message.is_some(), "the system's text is on the wire");
    assert_eq!(SpawnError::from(wire), plain);

    let own = SpawnError::new(SpawnErrorKind::NotFound, libc::ENOENT)
        .with_message("exec \"/x/prog\": no such file or directory");
    assert_eq!(SpawnError::from(WireSpawnError::from(own.clone())), own);

    let none = SpawnError::new(SpawnErrorKind::Other, 0).with_message("cancelled");
    assert_eq!(SpawnError::from(WireSpawnError::from(none.clone())), none);
}

/// Only the two end events turn back into the core's ends, about the given session.
#[test]
fn only_ends_convert_to_core_ends() {
    let session: Arc<str> = Arc::from("web");
    for event in every_event() {
        let name = event.name();
        let end = event.into_end(&session);
        match name {
            "exited" | "spawn_failed" => {
                let end = end.expect("an end");
                assert!(matches!(
                    end,
                    Event::Exited { .. } | Event::SpawnFailed { .. }
                ));
                assert_eq!(&**end.session(), "web");
            }
            _ => assert!(end.is_none(), "{name} is not an end"),
        }
    }
}
