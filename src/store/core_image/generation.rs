//! One generation of a core image, both ways: its phase and process group as small
//! objects tagged by `kind`, each carrying exactly that variant's members.

use std::sync::Arc;
use std::time::Duration;

use super::{one_of, opt_u64_member, req_num, require, within};
use crate::core::{
    Containment, ExitCause, ExitStatus, GenerationImage, GroupImage, Liveness, PhaseImage,
    Readiness, Spec, StopReason, StopStage, Time,
};
use crate::proto::json::{write_array, FieldError, ObjWriter, Object, Value};
use crate::proto::names::read_name;

const FIELDS: &[&str] = &[
    "gen",
    "session",
    "spec",
    "phase",
    "since",
    "started",
    "stop",
    "grace",
    "sent_kill",
    "cancel_at",
    "containment",
    "offsets",
    "eof",
    "discarded",
    "group",
    "pending_input",
    "input_closed",
    "exit",
    "exited_at",
    "adopted",
    "io_kept",
    "unverified",
    "leader_gone",
];

/// Members written only when they differ from what an image without them means (older
/// images have none): readiness (`ready` once it ran, else not started) and liveness
/// (no schedule).
const OPTIONAL: &[&str] = &["readiness", "liveness", "overlap", "started_unix_ms"];

const STOP: &[(&str, StopReason)] = &[
    ("requested", StopReason::Requested),
    ("superseded", StopReason::Superseded),
];

const STAGE: &[(&str, StopStage)] = &[
    ("graceful", StopStage::Graceful),
    ("kill", StopStage::Kill),
    ("unkillable", StopStage::Unkillable),
];

const CONTAINMENT: &[(&str, Containment)] = &[
    ("cgroup", Containment::Cgroup),
    ("session", Containment::Session),
];

pub(super) fn encode(g: &GenerationImage, spec: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ObjWriter::new(&mut out);
    w.u64("gen", g.gen)
        .str("session", &g.session)
        .u64("spec", spec as u64)
        .with("phase", |out| write_phase(g.phase, out))
        .u64("since", g.since.as_millis());
    opt_u64_member(&mut w, "started", g.started.map(Time::as_millis));
    match g.stop {
        Some(StopReason::Requested) => w.str("stop", "requested"),
        Some(StopReason::Superseded) => w.str("stop", "superseded"),
        None => w.null("stop"),
    };
    match g.grace {
        // Exact to the nanosecond, whatever a client asked for.
        Some(d) => w.with("grace", |out| {
            write_array([d.as_secs(), d.subsec_nanos().into()], out, write_u64)
        }),
        None => w.null("grace"),
    };
    w.bool("sent_kill", g.sent_kill);
    opt_u64_member(&mut w, "cancel_at", g.cancel_at.map(Time::as_millis));
    match g.containment {
        Some(c) => w.str("containment", c.as_str()),
        None => w.null("containment"),
    };
    w.with("offsets", |out| write_array(g.offsets, out, write_u64))
        .with("eof", |out| {
            write_array(g.eof, out, |b, out| {
                out.extend_from_slice(if b { b"true" } else { b"false" })
            })
        })
        .u64("discarded", g.discarded)
        .with("group", |out| write_group(g.group, out))
        .u64("pending_input", g.pending_input as u64)
        .bool("input_closed", g.input_closed);
    match g.exit {
        Some((status, cause)) => w.with("exit", |out| write_exit(status, cause, out)),
        None => w.null("exit"),
    };
    w.u64("exited_at", g.exited_at.as_millis());
    opt_u64_member(&mut w, "adopted", g.adopted.map(Time::as_millis));
    w.bool("io_kept", g.io_kept)
        .bool("unverified", g.unverified)
        .bool("leader_gone", g.leader_gone);
    if g.readiness != default_readiness(&g.phase) {
        w.with("readiness", |out| write_readiness(&g.readiness, out));
    }
    if g.liveness != Liveness::default() {
        w.with("liveness", |out| write_liveness(&g.liveness, out));
    }
    if g.overlap {
        w.bool("overlap", true);
    }
    if let Some(ms) = g.started_unix_ms {
        w.u64("started_unix_ms", ms);
    }
    w.finish();
    out
}

/// What an image without `readiness` means: ready once it ran, else not started.
fn default_readiness(phase: &PhaseImage) -> Readiness {
    match phase {
        PhaseImage::Pending | PhaseImage::Starting | PhaseImage::Gone => Readiness::Unstarted,
        _ => Readiness::Ready,
    }
}

fn write_probe(w: &mut ObjWriter<'_>, probe: Option<(u64, Time)>) {
    match probe {
        Some((n, until)) => w.with("probe", |out| {
            write_array([n, until.as_millis()], out, write_u64)
        }),
        None => w.null("probe"),
    };
}

fn write_readiness(r: &Readiness, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    match r {
        Readiness::Unstarted => {
            w.str("kind", "unstarted");
        }
        Readiness::Ready => {
            w.str("kind", "ready");
        }
        Readiness::Failed(why) => {
            w.str("kind", "failed").str("reason", why);
        }
        Readiness::Waiting {
            deadline,
            next_probe,
            probe,
            probes,
        } => {
            w.str("kind", "waiting")
                .u64("deadline", deadline.as_millis());
            opt_u64_member(&mut w, "next_probe", next_probe.map(Time::as_millis));
            write_probe(&mut w, *probe);
            w.u64("probes", *probes);
        }
    }
    w.finish();
}

fn write_liveness(l: &Liveness, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    opt_u64_member(&mut w, "next", l.next.map(Time::as_millis));
    write_probe(&mut w, l.probe);
    w.u64("probes", l.probes)
        .u64("failures", l.failures.into())
        .bool("tripped", l.tripped);
    w.finish();
}

fn read_probe(o: &Object) -> Result<Option<(u64, Time)>, FieldError> {
    match o.get("probe") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => match a.as_slice() {
            [n, t] => match (n.as_u64(), t.as_u64()) {
                (Some(n), Some(t)) => Ok(Some((n, Time::from_millis(t)))),
                _ => Err(FieldError::invalid("probe", "expected [number, time]")),
            },
            _ => Err(FieldError::invalid("probe", "expected [number, time]")),
        },
        Some(_) => Err(FieldError::invalid(
            "probe",
            "expected [number, time] or null",
        )),
    }
}

fn readiness(o: &Object) -> Result<Readiness, FieldError> {
    let kind = o.req_str("kind")?;
    let fields: &[&str] = match kind {
        "unstarted" | "ready" => &["kind"],
        "failed" => &["kind", "reason"],
        "waiting" => &["kind", "deadline", "next_probe", "probe", "probes"],
        other => {
            return Err(FieldError::invalid(
                "kind",
                format!("`{other}` is not one of unstarted, waiting, ready, failed"),
            ))
        }
    };
    require(o, fields)?;
    Ok(match kind {
        "unstarted" => Readiness::Unstarted,
        "ready" => Readiness::Ready,
        "failed" => Readiness::Failed(Arc::from(o.req_str("reason")?)),
        _ => Readiness::Waiting {
            deadline: Time::from_millis(o.req_u64("deadline")?),
            next_probe: o.opt_u64("next_probe")?.map(Time::from_millis),
            probe: read_probe(o)?,
            probes: o.req_u64("probes")?,
        },
    })
}

fn liveness(o: &Object) -> Result<Liveness, FieldError> {
    require(o, &["next", "probe", "probes", "failures", "tripped"])?;
    Ok(Liveness {
        next: o.opt_u64("next")?.map(Time::from_millis),
        probe: read_probe(o)?,
        probes: o.req_u64("probes")?,
        failures: u32::try_from(o.req_u64("failures")?)
            .map_err(|_| FieldError::invalid("failures", "too large"))?,
        tripped: o.req_bool("tripped")?,
    })
}

fn write_u64(n: u64, out: &mut Vec<u8>) {
    crate::proto::json::write_u64(n, out);
}

fn write_phase(phase: PhaseImage, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    match phase {
        PhaseImage::Pending => {
            w.str("kind", "pending");
        }
        PhaseImage::Starting => {
            w.str("kind", "starting");
        }
        PhaseImage::Running { pid } => {
            w.str("kind", "running").u64("pid", pid.into());
        }
        PhaseImage::Stopping { pid, stage, until } => {
            let stage = match stage {
                StopStage::Graceful => "graceful",
                StopStage::Kill => "kill",
                StopStage::Unkillable => "unkillable",
            };
            w.str("kind", "stopping")
                .u64("pid", pid.into())
                .str("stage", stage);
            opt_u64_member(&mut w, "until", until.map(Time::as_millis));
        }
        PhaseImage::Draining { pid, until } => {
            w.str("kind", "draining").u64("pid", pid.into());
            opt_u64_member(&mut w, "until", until.map(Time::as_millis));
        }
        PhaseImage::Reported { pid } => {
            w.str("kind", "reported").u64("pid", pid.into());
        }
        PhaseImage::Gone => {
            w.str("kind", "gone");
        }
    }
    w.finish();
}

fn write_group(group: GroupImage, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    match group {
        GroupImage::Alive => w.str("kind", "alive"),
        GroupImage::Term { until } => w.str("kind", "term").u64("until", until.as_millis()),
        GroupImage::Killed { until } => w.str("kind", "killed").u64("until", until.as_millis()),
        GroupImage::Unkillable => w.str("kind", "unkillable"),
        GroupImage::Done => w.str("kind", "done"),
    };
    w.finish();
}

fn write_exit(status: ExitStatus, cause: ExitCause, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    match status {
        ExitStatus::Code(c) => w.i64("code", c.into()),
        ExitStatus::Signal(s) => w.i64("signal", s.into()),
    };
    w.str("cause", cause.as_str());
    w.finish();
}

pub(super) fn decode(
    o: &Object,
    i: usize,
    spec_at: &mut impl FnMut(Option<u64>, &str) -> Result<Arc<Spec>, FieldError>,
) -> Result<GenerationImage, FieldError> {
    let prefix = format!("generations[{i}]");
    let named = within(&prefix);
    let every: Vec<&str> = FIELDS.iter().chain(OPTIONAL).copied().collect();
    o.check_fields(&every).map_err(&named)?;
    if let Some(k) = FIELDS.iter().find(|k| o.get(k).is_none()) {
        return Err(named(FieldError::invalid(*k, "missing")));
    }
    let time = |key: &str| o.req_u64(key).map(Time::from_millis).map_err(&named);
    let opt_time = |key: &str| {
        o.opt_u64(key)
            .map(|t| t.map(Time::from_millis))
            .map_err(&named)
    };
    let flag = |key: &str| o.req_bool(key).map_err(&named);
    let part = |key: &str| o.req_object(key).map_err(&named);
    let phase = phase(part("phase")?).map_err(within(&format!("{prefix}.phase")))?;
    let ready = match o.opt_object("readiness").map_err(&named)? {
        None => default_readiness(&phase),
        Some(r) => readiness(r).map_err(within(&format!("{prefix}.readiness")))?,
    };
    let live = match o.opt_object("liveness").map_err(&named)? {
        None => Liveness::default(),
        Some(l) => liveness(l).map_err(within(&format!("{prefix}.liveness")))?,
    };
    Ok(GenerationImage {
        readiness: ready,
        liveness: live,
        overlap: o.opt_bool("overlap").map_err(&named)?.unwrap_or(false),
        started_unix_ms: o.opt_u64("started_unix_ms").map_err(&named)?,
        gen: o.req_u64("gen").map_err(&named)?,
        session: Arc::from(o.req_str("session").map_err(&named)?),
        spec: spec_at(
            o.opt_u64("spec").map_err(&named)?,
            &format!("{prefix}.spec"),
        )?,
        phase,
        since: time("since")?,
        started: opt_time("started")?,
        stop: match o.opt_str("stop").map_err(&named)? {
            None => None,
            Some(s) => Some(one_of(s, "stop", STOP).map_err(&named)?),
        },
        grace: grace(o).map_err(&named)?,
        sent_kill: flag("sent_kill")?,
        cancel_at: opt_time("cancel_at")?,
        containment: match o.opt_str("containment").map_err(&named)? {
            None => None,
            Some(c) => Some(one_of(c, "containment", CONTAINMENT).map_err(&named)?),
        },
        offsets: triple(o, "offsets", Value::as_u64).map_err(&named)?,
        eof: triple(o, "eof", |v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        })
        .map_err(&named)?,
        discarded: o.req_u64("discarded").map_err(&named)?,
        group: group(part("group")?).map_err(within(&format!("{prefix}.group")))?,
        pending_input: req_num(o, "pending_input").map_err(&named)?,
        input_closed: flag("input_closed")?,
        exit: match o.opt_object("exit").map_err(&named)? {
            None => None,
            Some(e) => Some(exit(e).map_err(within(&format!("{prefix}.exit")))?),
        },
        exited_at: time("exited_at")?,
        adopted: opt_time("adopted")?,
        io_kept: flag("io_kept")?,
        unverified: flag("unverified")?,
        leader_gone: flag("leader_gone")?,
    })
}

fn phase(o: &Object) -> Result<PhaseImage, FieldError> {
    let kind = o.req_str("kind")?;
    let fields: &[&str] = match kind {
        "pending" | "starting" | "gone" => &["kind"],
        "running" | "reported" => &["kind", "pid"],
        "stopping" => &["kind", "pid", "stage", "until"],
        "draining" => &["kind", "pid", "until"],
        other => {
            return Err(FieldError::invalid(
                "kind",
                format!(
                "`{}` is not one of pending, starting, running, stopping, draining, reported, gone",
                other.escape_debug()
            ),
            ))
        }
    };
    require(o, fields)?;
    let pid = || req_num::<u32>(o, "pid");
    let until = || o.opt_u64("until").map(|t| t.map(Time::from_millis));
    Ok(match kind {
        "pending" => PhaseImage::Pending,
        "starting" => PhaseImage::Starting,
        "running" => PhaseImage::Running { pid: pid()? },
        "stopping" => PhaseImage::Stopping {
            pid: pid()?,
            stage: one_of(o.req_str("stage")?, "stage", STAGE)?,
            until: until()?,
        },
        "draining" => PhaseImage::Draining {
            pid: pid()?,
            until: until()?,
        },
        "reported" => PhaseImage::Reported { pid: pid()? },
        _ => PhaseImage::Gone,
    })
}

fn group(o: &Object) -> Result<GroupImage, FieldError> {
    match o.req_str("kind")? {
        "alive" => require(o, &["kind"]).map(|_| GroupImage::Alive),
        "done" => require(o, &["kind"]).map(|_| GroupImage::Done),
        "unkillable" => require(o, &["kind"]).map(|_| GroupImage::Unkillable),
        "term" => {
            require(o, &["kind", "until"])?;
            Ok(GroupImage::Term {
                until: Time::from_millis(o.req_u64("until")?),
            })
        }
        "killed" => {
            require(o, &["kind", "until"])?;
            Ok(GroupImage::Killed {
                until: Time::from_millis(o.req_u64("until")?),
            })
        }
        other => Err(FieldError::invalid(
            "kind",
            format!(
                "`{}` is not one of alive, term, killed, unkillable, done",
                other.escape_debug()
            ),
        )),
    }
}

fn exit(o: &Object) -> Result<(ExitStatus, ExitCause), FieldError> {
    let status = match (o.get("code"), o.get("signal")) {
        (Some(_), None) => ExitStatus::Code(int(o, "code")?),
        (None, Some(_)) => ExitStatus::Signal(int(o, "signal")?),
        _ => return Err(FieldError::invalid("code", "give `code` or `signal`, once")),
    };
    o.check_fields(&["code", "signal", "cause"])?;
    Ok((status, read_name(o, "cause")?))
}

fn int(o: &Object, key: &str) -> Result<i32, FieldError> {
    let n = o.req_i64(key)?;
    i32::try_from(n).map_err(|_| FieldError::invalid(key, format!("{n} is out of range")))
}

fn grace(o: &Object) -> Result<Option<Duration>, FieldError> {
    let Some(parts) = o.opt_array("grace")? else {
        return Ok(None);
    };
    match parts {
        [secs, nanos] => {
            let secs = secs.as_u64();
            let nanos = nanos
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n < 1_000_000_000);
            match (secs, nanos) {
                (Some(s), Some(n)) => Ok(Some(Duration::new(s, n))),
                _ => Err(FieldError::invalid(
                    "grace",
                    "expected [seconds, nanoseconds below 10^9]",
                )),
            }
        }
        _ => Err(FieldError::invalid(
            "grace",
            "expected [seconds, nanoseconds]",
        )),
    }
}

/// Three values, one per stream (stdout, stderr, pty).
fn triple<T: Copy>(
    o: &Object,
    key: &str,
    read: impl Fn(&Value) -> Option<T>,
) -> Result<[T; 3], FieldError> {
    let bad = || FieldError::invalid(key, "expected three values: stdout, stderr, pty");
    match o.req_array(key)? {
        [a, b, c] => Ok([
            read(a).ok_or_else(bad)?,
            read(b).ok_or_else(bad)?,
            read(c).ok_or_else(bad)?,
        ]),
        _ => Err(bad()),
    }
}
