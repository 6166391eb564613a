//! The answer to `reload`: what the daemon did (or, for a dry run, would do) to bring its
//! sessions in line with its configuration. One encoder for the daemon, one decoder for
//! clients.
//!
//! `{"id":..,"ok":true,"dry_run":false,"start":["db"],"stop":[],"replace":["web"],
//! "busy":[],"unchanged":["cache"]}`: lists of session names, each in name order.

use std::sync::Arc;

use super::envelope::{begin_ok_response, RequestId};
use super::json::{write_array, write_str, FieldError, Object, Value};
use crate::core::Plan;

/// The plan's lists with their wire names, in the order written.
fn lists(plan: &Plan) -> [(&'static str, &Vec<Arc<str>>); 5] {
    [
        ("start", &plan.start),
        ("stop", &plan.stop),
        ("replace", &plan.replace),
        ("busy", &plan.busy),
        ("unchanged", &plan.unchanged),
    ]
}

/// Appends the response line to a `reload` that succeeded.
pub fn write_plan_response(id: &RequestId, plan: &Plan, dry_run: bool, out: &mut Vec<u8>) {
    let mut w = begin_ok_response(id, out);
    w.bool("dry_run", dry_run);
    for (key, names) in lists(plan) {
        w.with(key, |out| {
            write_array(names, out, |n, out| write_str(n, out))
        });
    }
    w.finish();
    out.push(b'\n');
}

/// Reads a `reload` answer's members: the plan, and whether it was a dry run.
pub fn read_plan(o: &Object) -> Result<(Plan, bool), FieldError> {
    let dry_run = o.opt_bool("dry_run")?.unwrap_or(false);
    let mut plan = Plan::default();
    let read = |key: &str| -> Result<Vec<Arc<str>>, FieldError> {
        let Some(items) = o.opt_array(key)? else {
            return Ok(Vec::new());
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Str(s) => Ok(Arc::from(s.as_str())),
                other => Err(FieldError::invalid(
                    format!("{key}[{i}]"),
                    format!("expected string, got {}", other.type_name()),
                )),
            })
            .collect()
    };
    plan.start = read("start")?;
    plan.stop = read("stop")?;
    plan.replace = read("replace")?;
    plan.busy = read("busy")?;
    plan.unchanged = read("unchanged")?;
    Ok((plan, dry_run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    #[test]
    fn a_plan_round_trips() {
        let plan = Plan {
            start: vec!["db".into()],
            stop: vec!["old".into(), "older".into()],
            replace: vec!["web".into()],
            busy: Vec::new(),
            unchanged: vec!["cache".into()],
        };
        let mut line = Vec::new();
        write_plan_response(&RequestId::U64(3), &plan, true, &mut line);
        assert_eq!(
            line,
            b"{\"id\":3,\"ok\":true,\"dry_run\":true,\"start\":[\"db\"],\"stop\":[\"old\",\"older\"],\
              \"replace\":[\"web\"],\"busy\":[],\"unchanged\":[\"cache\"]}\n"
        );
        let value = parse(&line[..line.len() - 1]).unwrap();
        let o = value.as_object().unwrap();
        assert_eq!(read_plan(o).unwrap(), (plan, true));
    }
}
