//! One session of a core image, both ways.

use std::sync::Arc;

use super::{one_of, opt_u64_member, req_num, within};
use crate::core::{Origin, RestState, SessionImage, SessionState, Spec, Time};
use crate::proto::event::End;
use crate::proto::json::{FieldError, ObjWriter, Object, Value};
use crate::proto::names::read_name;
use crate::store::session_codec::{last_end, recent_ends, write_ends};

const FIELDS: &[&str] = &[
    "name",
    "spec",
    "current",
    "last_gen",
    "want_up",
    "removing",
    "restarts",
    "restart_at",
    "rest",
    "last_end",
    "recent_ends",
    "announced",
];

/// Members of a recent end, by event: the event decoder ignores members it does not
/// know (as clients must); an image refuses them.
const EXITED_FIELDS: &[&str] = &[
    "event",
    "session",
    "gen",
    "code",
    "signal",
    "cause",
    "discarded",
    "truncated",
];
const SPAWN_FAILED_FIELDS: &[&str] = &["event", "session", "gen", "error"];
const ERROR_FIELDS: &[&str] = &["kind", "errno", "message"];

/// Members an image of an older daemon may lack, with what their absence means.
/// `origin`: absent, the session is a client's (no daemon before it had a config).
/// `recovery_stop`: absent, no generation is being stopped for the I/O it lost.
/// `stopped_by_shutdown`: absent, nothing the daemon's end did leaves it down (written only
/// when set; older daemons did not carry it across an upgrade).
/// `restart_uncounted`: absent, a pending restart counts when it happens (written only
/// when it retries a start the daemon was short of resources for).
const OPTIONAL_FIELDS: &[&str] = &[
    "origin",
    "recovery_stop",
    "stopped_by_shutdown",
    "restart_uncounted",
];

const REST: &[(&str, RestState)] = &[
    ("stopped", RestState::Stopped),
    ("exited", RestState::Exited),
    ("failed", RestState::Failed),
];

pub(super) fn encode(s: &SessionImage, spec: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ObjWriter::new(&mut out);
    w.str("name", &s.name).u64("spec", spec as u64);
    if s.origin != Origin::Client {
        w.str("origin", s.origin.as_str());
    }
    opt_u64_member(&mut w, "current", s.current);
    opt_u64_member(&mut w, "last_gen", s.last_gen);
    w.bool("want_up", s.want_up)
        .bool("removing", s.removing)
        .u64("restarts", s.restarts.into());
    if let Some(gen) = s.recovery_stop {
        w.u64("recovery_stop", gen);
    }
    if s.stopped_by_shutdown {
        w.bool("stopped_by_shutdown", true);
    }
    opt_u64_member(&mut w, "restart_at", s.restart_at.map(Time::as_millis));
    if s.restart_uncounted {
        w.bool("restart_uncounted", true);
    }
    w.str("rest", rest_name(s.rest));
    match &s.last_end {
        Some(end) => w.with("last_end", |out| End::from(end).write(out)),
        None => w.null("last_end"),
    };
    w.with("recent_ends", |out| write_ends(&s.recent_ends, out));
    match s.announced {
        Some(state) => w.str("announced", state.as_str()),
        None => w.null("announced"),
    };
    w.finish();
    out
}

pub(super) fn decode(
    o: &Object,
    i: usize,
    spec_at: &mut impl FnMut(Option<u64>, &str) -> Result<Arc<Spec>, FieldError>,
) -> Result<SessionImage, FieldError> {
    let prefix = format!("sessions[{i}]");
    let named = within(&prefix);
    let known: Vec<&str> = FIELDS.iter().chain(OPTIONAL_FIELDS).copied().collect();
    o.check_fields(&known).map_err(&named)?;
    if let Some(k) = FIELDS.iter().find(|k| o.get(k).is_none()) {
        return Err(named(FieldError::invalid(*k, "missing")));
    }
    let origin = match o.opt_str("origin").map_err(&named)? {
        None => Origin::Client,
        Some(s) => Origin::from_name(s)
            .ok_or_else(|| named(FieldError::invalid("origin", "not one of client, config")))?,
    };
    let name: Arc<str> = Arc::from(o.req_str("name").map_err(&named)?);
    let ends = o.req_array("recent_ends").map_err(&named)?;
    strict_ends(ends).map_err(&named)?;
    Ok(SessionImage {
        spec: spec_at(
            o.opt_u64("spec").map_err(&named)?,
            &format!("{prefix}.spec"),
        )?,
        origin,
        current: o.opt_u64("current").map_err(&named)?,
        last_gen: o.opt_u64("last_gen").map_err(&named)?,
        want_up: o.req_bool("want_up").map_err(&named)?,
        removing: o.req_bool("removing").map_err(&named)?,
        recovery_stop: o.opt_u64("recovery_stop").map_err(&named)?,
        stopped_by_shutdown: o
            .opt_bool("stopped_by_shutdown")
            .map_err(&named)?
            .unwrap_or(false),
        restarts: req_num(o, "restarts").map_err(&named)?,
        restart_at: o
            .opt_u64("restart_at")
            .map_err(&named)?
            .map(Time::from_millis),
        restart_uncounted: o
            .opt_bool("restart_uncounted")
            .map_err(&named)?
            .unwrap_or(false),
        rest: one_of(o.req_str("rest").map_err(&named)?, "rest", REST).map_err(&named)?,
        last_end: match o.opt_object("last_end").map_err(&named)? {
            None => None,
            Some(end) => Some(last_end(end).map_err(&named)?),
        },
        recent_ends: recent_ends(ends, &name).map_err(&named)?,
        announced: match o.opt_str("announced").map_err(&named)? {
            None => None,
            Some(_) => Some(read_name::<SessionState>(o, "announced").map_err(&named)?),
        },
        name,
    })
}

/// Refuses a member of a recent end that its event does not have.
fn strict_ends(ends: &[Value]) -> Result<(), FieldError> {
    for (i, end) in ends.iter().enumerate() {
        let Some(o) = end.as_object() else {
            continue; // the event decoder says what is wrong with it
        };
        let fields = match o.get("event").and_then(Value::as_str) {
            Some("exited") => EXITED_FIELDS,
            Some("spawn_failed") => SPAWN_FAILED_FIELDS,
            _ => continue,
        };
        let field = |e: FieldError| FieldError {
            field: format!("recent_ends[{i}].{}", e.field),
            ..e
        };
        o.check_fields(fields).map_err(field)?;
        if let Some(error) = o.get("error").and_then(Value::as_object) {
            error
                .check_fields(ERROR_FIELDS)
                .map_err(|e| field(within("error")(e)))?;
        }
    }
    Ok(())
}

fn rest_name(r: RestState) -> &'static str {
    match r {
        RestState::Stopped => "stopped",
        RestState::Exited => "exited",
        RestState::Failed => "failed",
    }
}
