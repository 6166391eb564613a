//! The `spawn` options of whom a process runs as and under which limits (`user`, `group`,
//! `groups`, `umask`, `env_file`, `rlimits`), both ways, beside the rest of the spec.
//!
//! ```text
//! "user": "www-data" | 33, "group": "www-data" | 33, "groups": ["ssl-cert", 44],
//! "umask": "027", "env_file": "/etc/app.env",
//! "rlimits": {"nofile": 4096, "core": {"soft": 0, "hard": "infinity"}}
//! ```

use super::fields::{bad, Result};
use crate::core::{check_id_name, Rlimit, RlimitBound, RlimitValue, RunAs};
use crate::proto::json::{write_array, write_str, FieldError, ObjWriter, Object, Value};

fn invalid(field: impl Into<String>, why: impl Into<String>) -> crate::proto::error::ProtoError {
    bad(FieldError::invalid(field, why))
}

/// Decodes the run-as members of a spawn request; absent ones keep the daemon's.
pub(super) fn decode(args: &Object) -> Result<RunAs> {
    let mut r = RunAs {
        user: opt_id(args.get("user"), "user")?,
        group: opt_id(args.get("group"), "group")?,
        ..RunAs::default()
    };
    match args.get("groups") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            let groups = items
                .iter()
                .enumerate()
                .map(|(i, v)| id(v, &format!("groups[{i}]")))
                .collect::<Result<Vec<_>>>()?;
            r.groups = Some(groups);
        }
        Some(v) => {
            return Err(invalid(
                "groups",
                format!("expected an array of names or ids, got {}", v.type_name()),
            ))
        }
    }
    r.umask = match args.opt_str("umask").map_err(|_| {
        invalid(
            "umask",
            "expected a string of octal digits like \"027\" (a number would be ambiguous)",
        )
    })? {
        None => None,
        Some(s) => Some(umask(s)?),
    };
    r.env_file =
        match args.opt_str("env_file").map_err(bad)? {
            None => None,
            Some(p) if p.starts_with('/') && !p.contains('\0') => Some(p.as_bytes().to_vec()),
            Some(_) => return Err(invalid(
                "env_file",
                "expected an absolute path (the daemon's working directory is not the caller's)",
            )),
        };
    if let Some(o) = args.opt_object("rlimits").map_err(bad)? {
        r.rlimits = rlimits(o)?;
    }
    Ok(r)
}

/// A user or group: a name, or a non-negative integer id (kept as its decimal text).
fn id(v: &Value, field: &str) -> Result<String> {
    let text = match v {
        Value::Str(s) => s.clone(),
        other => match other.as_u64() {
            Some(n) => n.to_string(),
            None => {
                return Err(invalid(
                    field,
                    format!("expected a name or an id, got {}", other.type_name()),
                ))
            }
        },
    };
    check_id_name(field, &text).map_err(|e| invalid(field, e.message))?;
    Ok(text)
}

fn opt_id(v: Option<&Value>, field: &str) -> Result<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => id(v, field).map(Some),
    }
}

/// `"027"`, `"0027"`, `"7"`: one to four octal digits, at most 0777.
pub(super) fn umask(s: &str) -> Result<u32> {
    let octal = !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| (b'0'..=b'7').contains(&b));
    match u32::from_str_radix(s, 8) {
        Ok(m) if octal && m <= 0o777 => Ok(m),
        _ => Err(invalid(
            "umask",
            format!("`{s}` is not an octal mode from \"000\" to \"777\""),
        )),
    }
}

fn rlimits(o: &Object) -> Result<Vec<(Rlimit, RlimitValue)>> {
    let mut out = Vec::with_capacity(o.len());
    for (name, v) in o.iter() {
        let field = format!("rlimits.{name}");
        let Some(r) = Rlimit::from_name(name) else {
            let known: Vec<&str> = Rlimit::ALL.iter().map(|r| r.name()).collect();
            return Err(invalid(
                field,
                format!("unknown resource; one of {}", known.join(", ")),
            ));
        };
        let value = match v {
            Value::Object(pair) => {
                pair.check_fields(&["soft", "hard"])
                    .map_err(|e| invalid(format!("{field}.{}", e.field), "unknown field"))?;
                let need = |k: &str| match pair.get(k) {
                    Some(v) => bound(v, &format!("{field}.{k}")),
                    None => Err(invalid(format!("{field}.{k}"), "missing")),
                };
                RlimitValue {
                    soft: need("soft")?,
                    hard: need("hard")?,
                }
            }
            v => {
                let b = bound(v, &field)?;
                RlimitValue { soft: b, hard: b }
            }
        };
        if let (RlimitBound::Finite(s), RlimitBound::Finite(h)) = (value.soft, value.hard) {
            if s > h {
                return Err(invalid(
                    field,
                    format!("soft limit {s} above hard limit {h}"),
                ));
            }
        } else if value.soft == RlimitBound::Infinity && value.hard != RlimitBound::Infinity {
            return Err(invalid(
                field,
                "soft limit infinity above a finite hard limit",
            ));
        }
        out.push((r, value));
    }
    out.sort_by_key(|(r, _)| *r);
    Ok(out)
}

/// A limit's bound: a non-negative integer, or `"infinity"` (also `"unlimited"`, as
/// `ulimit` says).
fn bound(v: &Value, field: &str) -> Result<RlimitBound> {
    match v {
        Value::Str(s) if s == "infinity" || s == "unlimited" => Ok(RlimitBound::Infinity),
        v => match v.as_u64() {
            // The kernel's own spelling of "no limit" is infinity, not a number.
            Some(u64::MAX) => Err(invalid(
                field,
                format!(
                    "{} is what the kernel calls no limit: say \"infinity\"",
                    u64::MAX
                ),
            )),
            None => Err(invalid(
                field,
                format!(
                    "expected a non-negative integer or \"infinity\", got {}",
                    match v {
                        Value::Str(s) => format!("`{s}`"),
                        v => v.type_name().to_string(),
                    }
                ),
            )),
            Some(n) => Ok(RlimitBound::Finite(n)),
        },
    }
}

/// Appends the run-as members that differ from the daemon's.
pub(super) fn write(w: &mut ObjWriter<'_>, r: &RunAs) -> std::result::Result<(), FieldError> {
    if let Some(u) = &r.user {
        w.str("user", u);
    }
    if let Some(g) = &r.group {
        w.str("group", g);
    }
    if let Some(groups) = &r.groups {
        w.with("groups", |out| {
            write_array(groups, out, |g, out| write_str(g, out))
        });
    }
    if let Some(m) = r.umask {
        w.str("umask", &format!("{m:03o}"));
    }
    if let Some(p) = &r.env_file {
        let p = std::str::from_utf8(p).map_err(|_| {
            FieldError::invalid("env_file", "not valid UTF-8, which a request cannot carry")
        })?;
        w.str("env_file", p);
    }
    if !r.rlimits.is_empty() {
        w.with("rlimits", |out| {
            let mut o = ObjWriter::new(out);
            for (res, v) in &r.rlimits {
                if v.soft == v.hard {
                    write_bound(&mut o, res.name(), v.soft);
                } else {
                    o.with(res.name(), |out| {
                        let mut pair = ObjWriter::new(out);
                        write_bound(&mut pair, "soft", v.soft);
                        write_bound(&mut pair, "hard", v.hard);
                        pair.finish();
                    });
                }
            }
            o.finish();
        });
    }
    Ok(())
}

fn write_bound(o: &mut ObjWriter<'_>, key: &str, b: RlimitBound) {
    match b {
        RlimitBound::Finite(n) => o.u64(key, n),
        RlimitBound::Infinity => o.str(key, "infinity"),
    };
}
