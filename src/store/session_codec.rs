//! A session's file, both ways: [`SessionRecord`] ↔ bytes.
//!
//! Everything that has a wire spelling keeps it, through the protocol's own encoders and
//! decoders: the spec is a `spawn` request's members, the last end a snapshot's
//! `last_end`, the recent ends `exited` / `spawn_failed` event objects. So the spec's
//! format has one home, and a new spawn option is saved the day it can be requested.
//!
//! ```text
//! {"genward_state":1,"kind":"session"}
//! {"name":"web","desired":"up","rest":"stopped","restarts":0,"restart_at_unix_ms":null,
//!  "current":12,"last_gen":11,"last_end":{...},"recent_ends":[{...}],"spec":{"argv":[...]}}
//! ```
//! (one line in the file).

use std::sync::Arc;

use super::format::{self, FormatError, Kind};
use crate::core::{
    check_session_name, Desired, Event, LastEnd, Origin, RestState, SessionRecord, RECENT_ENDS,
};
use crate::proto::event::{End, WireEvent};
use crate::proto::json::{write_array, FieldError, Limits, Object, Value};
use crate::proto::request::{decode_spec_object, write_spec_object};

/// Largest session file read: a spec as large as a request may carry (1 MiB), written
/// with durations and signals spelled out, plus its recent ends.
pub const MAX_SESSION_FILE: usize = 2 << 20;

/// As strict as a request line, with room for the spec's spelled-out durations.
pub const SESSION_LIMITS: Limits = Limits {
    max_len: MAX_SESSION_FILE,
    max_depth: 8,
    max_string_len: 1 << 20,
    max_elements: 1 << 16,
};

const FIELDS: &[&str] = &[
    "name",
    "desired",
    "rest",
    "restarts",
    "restart_at_unix_ms",
    "current",
    "last_gen",
    "last_end",
    "recent_ends",
    "spec",
];

/// Members a file of an older daemon may lack. `origin`: absent, the session is a
/// client's (no daemon before it had a config).
/// `current_overlaps`: absent, the current generation was not spawned with `on_busy:
/// overlap` (written only when it was).
/// `stopped_by_shutdown`: absent, a client stopped it, or nothing did (written only when
/// the daemon's shutdown stopped a session of its config).
/// `stops`: absent, no generation of it was being stopped (written only when one was;
/// an older daemon's record has none, and its stops begin again after a crash).
/// `restart_uncounted`: absent, a pending restart counts when it happens (written only
/// when it retries a start the daemon was short of resources for).
const OPTIONAL_FIELDS: &[&str] = &[
    "origin",
    "current_overlaps",
    "stopped_by_shutdown",
    "stops",
    "restart_uncounted",
];

/// The session file for `record`. Fails, naming the field, for a spec the format cannot
/// carry (the wire's limits: text that is not UTF-8, unlimited restarts), or for recent
/// ends that are not terminal events of this session.
pub fn encode_session(record: &SessionRecord) -> Result<Vec<u8>, FieldError> {
    let mut spec = Vec::new();
    write_spec_object(&record.spec, &mut spec).map_err(|e| FieldError {
        field: format!("spec.{}", e.field),
        ..e
    })?;
    for (i, event) in record.recent_ends.iter().enumerate() {
        if !event.is_terminal() || **event.session() != *record.name {
            return Err(FieldError::invalid(
                format!("recent_ends[{i}]"),
                "not a terminal event of this session",
            ));
        }
    }
    let mut ends = Vec::new();
    write_ends(&record.recent_ends, &mut ends);
    Ok(format::encode(Kind::Session, |w| {
        w.str("name", &record.name);
        if record.origin != Origin::Client {
            w.str("origin", record.origin.as_str());
        }
        w.str("desired", desired_name(record.desired))
            .str("rest", rest_name(record.rest))
            .u64("restarts", record.restarts.into());
        opt_u64(w, "restart_at_unix_ms", record.restart_at_unix_ms);
        if record.restart_uncounted {
            w.bool("restart_uncounted", true);
        }
        opt_u64(w, "current", record.current);
        if record.current_overlaps {
            w.bool("current_overlaps", true);
        }
        if record.stopped_by_shutdown {
            w.bool("stopped_by_shutdown", true);
        }
        opt_u64(w, "last_gen", record.last_gen);
        match &record.last_end {
            Some(end) => w.with("last_end", |out| End::from(end).write(out)),
            None => w.null("last_end"),
        };
        w.with("recent_ends", |out| out.extend_from_slice(&ends));
        if !record.stops.is_empty() {
            w.with("stops", |out| {
                super::stop_codec::write_stops(&record.stops, out)
            });
        }
        w.with("spec", |out| out.extend_from_slice(&spec));
    }))
}

/// Appends terminal events as an array of event objects, as subscribers receive them.
pub(super) fn write_ends(ends: &[Event], out: &mut Vec<u8>) {
    write_array(ends, out, |event, out| {
        WireEvent::from_core(event).write(out);
        // The event encoder ends its line.
        out.pop();
    });
}

fn opt_u64(w: &mut crate::proto::json::ObjWriter<'_>, key: &str, v: Option<u64>) {
    match v {
        Some(v) => w.u64(key, v),
        None => w.null(key),
    };
}

/// Decodes a session file. Every member is required (`null` where it may be absent),
/// none may be unknown, the spec is decoded as strictly as a request's.
pub fn decode_session(bytes: &[u8]) -> Result<SessionRecord, FormatError> {
    let o = format::decode(bytes, Kind::Session, &SESSION_LIMITS)?;
    let known: Vec<&str> = FIELDS.iter().chain(OPTIONAL_FIELDS).copied().collect();
    o.check_fields(&known)?;
    for key in FIELDS {
        if o.get(key).is_none() {
            return Err(FieldError::invalid(*key, "missing").into());
        }
    }
    let name = o.req_str("name")?;
    check_session_name(name).map_err(|why| FieldError::invalid("name", why))?;
    let name: Arc<str> = Arc::from(name);
    let restarts = o.req_u64("restarts")?;
    let spec = decode_spec_object(o.req_object("spec")?)
        .map_err(|e| FieldError::invalid("spec", e.message))?;
    let origin = match o.opt_str("origin")? {
        None => Origin::Client,
        Some(s) => Origin::from_name(s)
            .ok_or_else(|| FieldError::invalid("origin", "not one of client, config"))?,
    };
    Ok(SessionRecord {
        origin,
        desired: desired(o.req_str("desired")?)?,
        rest: rest(o.req_str("rest")?)?,
        restarts: u32::try_from(restarts)
            .map_err(|_| FieldError::invalid("restarts", "above 4294967295"))?,
        restart_at_unix_ms: o.opt_u64("restart_at_unix_ms")?,
        restart_uncounted: o.opt_bool("restart_uncounted")?.unwrap_or(false),
        current: o.opt_u64("current")?,
        current_overlaps: o.opt_bool("current_overlaps")?.unwrap_or(false),
        stopped_by_shutdown: o.opt_bool("stopped_by_shutdown")?.unwrap_or(false),
        last_gen: o.opt_u64("last_gen")?,
        last_end: match o.opt_object("last_end")? {
            None => None,
            Some(end) => Some(last_end(end)?),
        },
        recent_ends: recent_ends(o.req_array("recent_ends")?, &name)?,
        stops: match o.opt_array("stops")? {
            Some(items) => super::stop_codec::read_stops(items)?,
            None => Vec::new(),
        },
        spec,
        name,
    })
}

fn desired_name(d: Desired) -> &'static str {
    match d {
        Desired::Up => "up",
        Desired::Down => "down",
        Desired::Removing => "removing",
    }
}

fn desired(text: &str) -> Result<Desired, FieldError> {
    match text {
        "up" => Ok(Desired::Up),
        "down" => Ok(Desired::Down),
        "removing" => Ok(Desired::Removing),
        other => Err(FieldError::invalid(
            "desired",
            format!(
                "`{}` is not one of up, down, removing",
                other.escape_debug()
            ),
        )),
    }
}

fn rest_name(r: RestState) -> &'static str {
    match r {
        RestState::Stopped => "stopped",
        RestState::Exited => "exited",
        RestState::Failed => "failed",
    }
}

fn rest(text: &str) -> Result<RestState, FieldError> {
    match text {
        "stopped" => Ok(RestState::Stopped),
        "exited" => Ok(RestState::Exited),
        "failed" => Ok(RestState::Failed),
        other => Err(FieldError::invalid(
            "rest",
            format!(
                "`{}` is not one of stopped, exited, failed",
                other.escape_debug()
            ),
        )),
    }
}

/// Decodes a `last_end` object, refusing unknown members.
pub(super) fn last_end(o: &Object) -> Result<LastEnd, FieldError> {
    let nested = |e: FieldError| FieldError {
        field: format!("last_end.{}", e.field),
        ..e
    };
    o.check_fields(&["gen", "code", "signal", "cause", "error"])
        .map_err(nested)?;
    Ok(End::decode(o).map_err(nested)?.into())
}

/// Decodes `session`'s recent ends: at most [`RECENT_ENDS`] terminal events about it, one
/// per generation.
pub(super) fn recent_ends(items: &[Value], session: &Arc<str>) -> Result<Vec<Event>, FieldError> {
    if items.len() > RECENT_ENDS {
        return Err(FieldError::invalid(
            "recent_ends",
            format!("{} entries, at most {RECENT_ENDS}", items.len()),
        ));
    }
    let mut ends: Vec<Event> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("recent_ends[{i}]");
        let invalid = |why: String| FieldError::invalid(field.clone(), why);
        let o = item
            .as_object()
            .ok_or_else(|| invalid("not an object".into()))?;
        let event = WireEvent::decode(o).map_err(|e| invalid(e.to_string()))?;
        if event.session() != &**session {
            return Err(invalid("about another session".into()));
        }
        let name = event.name();
        let event = event
            .into_end(session)
            .ok_or_else(|| invalid(format!("a `{name}` event is not an end")))?;
        if ends.iter().any(|e| e.gen() == event.gen()) {
            return Err(invalid("a second end of one generation".into()));
        }
        ends.push(event);
    }
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{
        ExitCause, LeaderStop, Restart, SpawnError, SpawnErrorKind, Spec, StopReason, StopRecord,
        StopStage, TreeStop,
    };

    fn record() -> SessionRecord {
        let name: Arc<str> = Arc::from("web");
        let mut spec = Spec::new(vec![b"sh".to_vec(), b"-c".to_vec(), b"exit 3".to_vec()]);
        spec.restart.mode = Restart::OnFailure;
        // Whom it runs as travels with the spec, so a restarted daemon starts the session's
        // next generation as the same user, with the same limits.
        spec.run_as = crate::core::RunAs {
            user: Some("nobody".into()),
            group: Some("65534".into()),
            groups: Some(Vec::new()),
            umask: Some(0o077),
            env_file: Some(b"/etc/web.env".to_vec()),
            rlimits: vec![(
                crate::core::Rlimit::Nofile,
                crate::core::RlimitValue {
                    soft: crate::core::RlimitBound::Finite(1024),
                    hard: crate::core::RlimitBound::Infinity,
                },
            )],
        };
        SessionRecord {
            name: name.clone(),
            spec,
            origin: crate::core::Origin::Config,
            desired: Desired::Up,
            rest: RestState::Failed,
            restarts: 3,
            restart_at_unix_ms: Some(1_700_000_000_000),
            restart_uncounted: true,
            current: None,
            current_overlaps: false,
            stopped_by_shutdown: false,
            last_gen: Some(9),
            last_end: Some(LastEnd::Exited {
                gen: 9,
                code: Some(143),
                signal: Some(15),
                cause: ExitCause::Signaled,
            }),
            recent_ends: vec![
                Event::SpawnFailed {
                    session: name.clone(),
                    gen: 8,
                    error: SpawnError::new(SpawnErrorKind::NotFound, 2),
                },
                Event::Exited {
                    session: name,
                    gen: 9,
                    code: Some(143),
                    signal: Some(15),
                    cause: ExitCause::Signaled,
                    discarded: 12,
                    truncated: true,
                },
            ],
            stops: vec![
                StopRecord {
                    gen: 7,
                    reason: Some(StopReason::Superseded),
                    grace: Some(std::time::Duration::from_secs(30)),
                    leader: Some(LeaderStop {
                        stage: StopStage::Graceful,
                        until_unix_ms: Some(1_700_000_030_000),
                    }),
                    sent_kill: false,
                    tree: None,
                },
                StopRecord {
                    gen: 9,
                    reason: Some(StopReason::Requested),
                    grace: None,
                    leader: None,
                    sent_kill: true,
                    tree: Some(TreeStop::Killed {
                        until_unix_ms: 1_700_000_005_000,
                    }),
                },
                StopRecord {
                    gen: 10,
                    reason: None,
                    grace: None,
                    leader: None,
                    sent_kill: false,
                    tree: Some(TreeStop::Unkillable),
                },
            ],
        }
    }

    #[test]
    fn a_session_round_trips() {
        let r = record();
        let bytes = encode_session(&r).unwrap();
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 2);
        assert_eq!(decode_session(&bytes).unwrap(), r);
        let bare = SessionRecord {
            current: Some(10),
            current_overlaps: true,
            stopped_by_shutdown: true,
            last_end: Some(LastEnd::SpawnFailed {
                gen: 8,
                error: SpawnError::new(SpawnErrorKind::Cancelled, 0),
            }),
            recent_ends: Vec::new(),
            restart_at_unix_ms: None,
            stops: Vec::new(),
            restart_uncounted: false,
            ..r
        };
        // Without stops, the file is as an earlier daemon wrote it: no `stops` member.
        assert!(!String::from_utf8(encode_session(&bare).unwrap())
            .unwrap()
            .contains("stops"));
        assert_eq!(
            decode_session(&encode_session(&bare).unwrap()).unwrap(),
            bare
        );
    }

    #[test]
    fn what_the_format_cannot_carry_is_refused() {
        let mut r = record();
        r.spec.argv.push(b"\xff".to_vec());
        let e = encode_session(&r).unwrap_err();
        assert_eq!(e.field, "spec.argv[3]");
        let mut r = record();
        r.recent_ends[0] = Event::Spawned {
            session: r.name.clone(),
            gen: 1,
            pid: 1,
        };
        assert_eq!(encode_session(&r).unwrap_err().field, "recent_ends[0]");
    }

    #[test]
    fn inconsistent_files_are_refused() {
        let good = String::from_utf8(encode_session(&record()).unwrap()).unwrap();
        let cases = [
            good.replace(r#""name":"web""#, r#""name":".web""#),
            good.replace(r#""desired":"up""#, r#""desired":"sideways""#),
            good.replace(r#""restarts":3"#, r#""restarts":4294967296"#),
            good.replace(r#""restarts":3,"#, ""),
            good.replace(r#""restarts":3"#, r#""restarts":3,"extra":1"#),
            good.replace(r#""session":"web","gen":8"#, r#""session":"api","gen":8"#),
            good.replace(r#""gen":8"#, r#""gen":9"#),
            good.replace(r#""argv":["#, r#""session":"web","argv":["#),
            good.replace(r#""event":"spawn_failed""#, r#""event":"spawned""#),
            good.replace(r#""reason":"superseded""#, r#""reason":"bored""#),
            good.replace(r#""stage":"graceful""#, r#""stage":"gentle""#),
            good.replace(r#","until_unix_ms":1700000030000"#, ""),
            good.replace(r#","tree_until_unix_ms":1700000005000"#, ""),
            good.replace(r#""tree":"unkillable""#, r#""tree":"term""#),
            good.replace(r#""gen":10,"tree""#, r#""gen":9,"tree""#),
            good.replace(r#""gen":10,"tree""#, r#""gen":10,"x":1,"tree""#),
            good.replace(r#""reason":"superseded","#, ""),
        ];
        for (i, bad) in cases.iter().enumerate() {
            assert_ne!(bad, &good, "case {i} changed nothing");
            let e = decode_session(bad.as_bytes());
            assert!(e.is_err(), "case {i} accepted: {bad}");
        }
        let mut many = record();
        many.recent_ends = (0..RECENT_ENDS as u64 + 1)
            .map(|gen| Event::SpawnFailed {
                session: many.name.clone(),
                gen,
                error: SpawnError::new(SpawnErrorKind::Other, 0),
            })
            .collect();
        let bytes = encode_session(&many).unwrap();
        assert!(decode_session(&bytes).is_err());
    }
}
