//! A session record's `stops` member, both ways: each generation's stop under way (or
//! tree being emptied) as [`StopRecord`]s, so that a daemon taking it back after a crash
//! carries on where it was (see docs/operations.md, *After a crash*).
//!
//! ```text
//! "stops":[{"gen":12,"reason":"requested","grace_ms":30000,"stage":"graceful",
//!           "until_unix_ms":1700000030000,"sent_kill":false}]
//! ```
//!
//! Every member but `gen` may be absent (or `null`); none may be unknown; a `stage`
//! other than `unkillable` comes with its `until_unix_ms`, a `tree` other than
//! `unkillable` with its `tree_until_unix_ms`.

use std::time::Duration;

use crate::core::{LeaderStop, StopReason, StopRecord, StopStage, TreeStop};
use crate::proto::json::{write_array, FieldError, ObjWriter, Object, Value};

const FIELDS: &[&str] = &[
    "gen",
    "reason",
    "grace_ms",
    "stage",
    "until_unix_ms",
    "sent_kill",
    "tree",
    "tree_until_unix_ms",
];

/// Most entries: a session tracks at most this many generations.
const MAX_STOPS: usize = crate::core::MAX_LIVE_GENERATIONS;

/// Appends `stops` as an array of objects.
pub fn write_stops(stops: &[StopRecord], out: &mut Vec<u8>) {
    write_array(stops, out, |s, out| {
        let mut w = ObjWriter::new(out);
        w.u64("gen", s.gen);
        if let Some(reason) = s.reason {
            w.str("reason", reason_name(reason));
        }
        if let Some(grace) = s.grace {
            w.u64(
                "grace_ms",
                u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            );
        }
        if let Some(l) = s.leader {
            w.str("stage", stage_name(l.stage));
            if let Some(ms) = l.until_unix_ms {
                w.u64("until_unix_ms", ms);
            }
        }
        if s.sent_kill {
            w.bool("sent_kill", true);
        }
        match s.tree {
            Some(TreeStop::Term { until_unix_ms }) => {
                w.str("tree", "term")
                    .u64("tree_until_unix_ms", until_unix_ms);
            }
            Some(TreeStop::Killed { until_unix_ms }) => {
                w.str("tree", "killed")
                    .u64("tree_until_unix_ms", until_unix_ms);
            }
            Some(TreeStop::Unkillable) => {
                w.str("tree", "unkillable");
            }
            None => {}
        }
        w.finish();
    });
}

/// Decodes a `stops` array: at most one entry per generation, each as strict as the rest
/// of the file.
pub fn read_stops(items: &[Value]) -> Result<Vec<StopRecord>, FieldError> {
    if items.len() > MAX_STOPS {
        return Err(FieldError::invalid(
            "stops",
            format!("{} entries, at most {MAX_STOPS}", items.len()),
        ));
    }
    let mut stops: Vec<StopRecord> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let nested = |e: FieldError| FieldError {
            field: format!("stops[{i}].{}", e.field),
            ..e
        };
        let o = item
            .as_object()
            .ok_or_else(|| FieldError::invalid(format!("stops[{i}]"), "not an object"))?;
        let stop = read_stop(o).map_err(nested)?;
        if stops.iter().any(|s| s.gen == stop.gen) {
            return Err(FieldError::invalid(
                format!("stops[{i}]"),
                "a second entry for one generation",
            ));
        }
        stops.push(stop);
    }
    Ok(stops)
}

fn read_stop(o: &Object) -> Result<StopRecord, FieldError> {
    o.check_fields(FIELDS)?;
    let reason = match o.opt_str("reason")? {
        None => None,
        Some("requested") => Some(StopReason::Requested),
        Some("superseded") => Some(StopReason::Superseded),
        Some(_) => {
            return Err(FieldError::invalid(
                "reason",
                "not one of requested, superseded",
            ))
        }
    };
    let until = o.opt_u64("until_unix_ms")?;
    let leader = match o.opt_str("stage")? {
        None if until.is_some() => {
            return Err(FieldError::invalid("until_unix_ms", "without a stage"))
        }
        None => None,
        Some("unkillable") if until.is_none() => Some(LeaderStop {
            stage: StopStage::Unkillable,
            until_unix_ms: None,
        }),
        Some(stage @ ("graceful" | "kill")) => Some(LeaderStop {
            stage: if stage == "kill" {
                StopStage::Kill
            } else {
                StopStage::Graceful
            },
            until_unix_ms: Some(
                until.ok_or_else(|| FieldError::invalid("until_unix_ms", "missing"))?,
            ),
        }),
        Some(_) => {
            return Err(FieldError::invalid(
                "stage",
                "not one of graceful, kill, unkillable (which has no until_unix_ms)",
            ))
        }
    };
    let tree_until = o.opt_u64("tree_until_unix_ms")?;
    let tree = match (o.opt_str("tree")?, tree_until) {
        (None, None) => None,
        (Some("term"), Some(until_unix_ms)) => Some(TreeStop::Term { until_unix_ms }),
        (Some("killed"), Some(until_unix_ms)) => Some(TreeStop::Killed { until_unix_ms }),
        (Some("unkillable"), None) => Some(TreeStop::Unkillable),
        _ => {
            return Err(FieldError::invalid(
                "tree",
                "not one of term, killed (each with tree_until_unix_ms), unkillable",
            ))
        }
    };
    if reason.is_none() && leader.is_some() {
        return Err(FieldError::invalid("stage", "a stage without a reason"));
    }
    Ok(StopRecord {
        gen: o.req_u64("gen")?,
        reason,
        grace: o.opt_u64("grace_ms")?.map(Duration::from_millis),
        leader,
        sent_kill: o.opt_bool("sent_kill")?.unwrap_or(false),
        tree,
    })
}

fn reason_name(r: StopReason) -> &'static str {
    match r {
        StopReason::Requested => "requested",
        StopReason::Superseded => "superseded",
    }
}

fn stage_name(s: StopStage) -> &'static str {
    match s {
        StopStage::Graceful => "graceful",
        StopStage::Kill => "kill",
        StopStage::Unkillable => "unkillable",
    }
}
