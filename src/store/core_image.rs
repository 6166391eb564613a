//! The core's image for an upgrade by re-exec, both ways: [`CoreImage`] ↔ the bytes of a
//! JSON object.
//!
//! Only the body: the caller wraps it in its own versioned envelope (with the driver's
//! state) and writes it to the memfd the new binary reads. Everything with a wire or
//! file spelling keeps it, through the same encoders: a spec is a `spawn` request's
//! members ([`write_spec_object`] / [`decode_spec_object`]), recent ends are `exited` /
//! `spawn_failed` event objects and a last end a snapshot's `last_end`, exactly as a
//! session file holds them. Specs are written once each in a table that sessions and
//! generations name by index, so thousands of generations of one session cost one spec.
//!
//! ```text
//! {"now":5000,"next_gen":13,"shutdown":"running","dirty":["web"],
//!  "specs":[{"argv":["sh"]}],
//!  "sessions":[{"name":"web","spec":0,"current":12,...,"announced":"running"}],
//!  "generations":[{"gen":12,"session":"web","spec":0,"phase":{"kind":"running","pid":4242},...}]}
//! ```
//!
//! Decoding is strict: every member is required (`null` where a value may be absent),
//! none may be unknown, every number is range-checked, and nothing is taken on trust
//! about the state itself: [`Core::import_image`](crate::core::Core::import_image) checks
//! that next.
//!
//! Exact, with the session file's two limits, both of values no driver produces: a spawn
//! error whose message is word for word the system's text for its errno comes back
//! without a message (the wire shows that same text either way), and an end's signal
//! must be a signal of this system.

mod generation;
mod session;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::core::{CoreImage, ShutdownImage, Spec};
use crate::proto::json::{
    parse_with, write_array, write_str, FieldError, Limits, ObjWriter, Object, ParseError, Value,
};
use crate::proto::request::{decode_spec_object, write_spec_object};

/// Largest image read. The daemon's tables (4096 sessions, 8192 generations) with
/// ordinary specs take a few MiB; a spec may be 1 MiB, so a table of large distinct specs
/// could in principle take more than any bound worth holding in memory: an image beyond
/// this is refused (and the upgrade with it), never read in part.
pub const MAX_CORE_IMAGE: usize = 256 << 20;

/// Bounds for [`decode_core_image`]: the length above; nesting as deep as an event's
/// `error` inside a session's recent ends (6) with room to spare; a string as long as a
/// request may carry; 16 Mi values, enough for a full table (about 40 values per session
/// or generation) whose specs hold some 1300 argv and env entries each on average, and
/// few enough that the parsed tree stays under a GiB however the bytes are arranged.
pub const CORE_IMAGE_LIMITS: Limits = Limits {
    max_len: MAX_CORE_IMAGE,
    max_depth: 8,
    max_string_len: 1 << 20,
    max_elements: 1 << 24,
};

const FIELDS: &[&str] = &[
    "now",
    "next_gen",
    "shutdown",
    "dirty",
    "specs",
    "sessions",
    "generations",
];

/// Why an image could not be read: not JSON within [`CORE_IMAGE_LIMITS`], or a member
/// missing, unknown, of the wrong type or out of range (named as `sessions[2].restarts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreImageError {
    /// Not a JSON document within the limits.
    Json(ParseError),
    /// A member that is wrong.
    Field(FieldError),
}

impl fmt::Display for CoreImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreImageError::Json(e) => write!(f, "core image is not valid JSON: {e}"),
            CoreImageError::Field(e) => write!(f, "core image: {e}"),
        }
    }
}

impl std::error::Error for CoreImageError {}

impl From<FieldError> for CoreImageError {
    fn from(e: FieldError) -> Self {
        CoreImageError::Field(e)
    }
}

/// The image as one JSON object. Fails, naming the field, only for a spec the wire cannot
/// carry (see [`write_spec_object`]: text that is not UTF-8, unlimited restarts), which
/// no client can have asked for.
pub fn encode_core_image(image: &CoreImage) -> Result<Vec<u8>, FieldError> {
    let mut specs = SpecTable::default();
    let sessions = image
        .sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let at = specs.index(&s.spec, || format!("sessions[{i}].spec"))?;
            Ok(session::encode(s, at))
        })
        .collect::<Result<Vec<_>, FieldError>>()?;
    let generations = image
        .generations
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let at = specs.index(&g.spec, || format!("generations[{i}].spec"))?;
            Ok(generation::encode(g, at))
        })
        .collect::<Result<Vec<_>, FieldError>>()?;
    let mut out = Vec::new();
    let mut w = ObjWriter::new(&mut out);
    w.u64("now", image.now.as_millis())
        .u64("next_gen", image.next_gen)
        .str("shutdown", shutdown_name(image.shutdown))
        .with("dirty", |out| {
            write_array(&image.dirty, out, |n, out| write_str(n, out))
        })
        .with("specs", |out| {
            write_array(specs.written.iter().map(Vec::as_slice), out, joined)
        })
        .with("sessions", |out| {
            write_array(sessions.iter().map(Vec::as_slice), out, joined)
        })
        .with("generations", |out| {
            write_array(generations.iter().map(Vec::as_slice), out, joined)
        });
    w.finish();
    Ok(out)
}

fn joined(item: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(item);
}

/// Specs written once each, by identity: what the core shares is written once.
#[derive(Default)]
struct SpecTable {
    by_ptr: HashMap<*const Spec, usize>,
    written: Vec<Vec<u8>>,
}

impl SpecTable {
    fn index(&mut self, spec: &Arc<Spec>, field: impl Fn() -> String) -> Result<usize, FieldError> {
        if let Some(&at) = self.by_ptr.get(&Arc::as_ptr(spec)) {
            return Ok(at);
        }
        let mut bytes = Vec::new();
        write_spec_object(spec, &mut bytes).map_err(|e| FieldError {
            field: format!("{}.{}", field(), e.field),
            ..e
        })?;
        let at = self.written.len();
        self.by_ptr.insert(Arc::as_ptr(spec), at);
        self.written.push(bytes);
        Ok(at)
    }
}

/// Reads an image written by [`encode_core_image`]. It is not checked as a state here:
/// hand it to [`Core::import_image`](crate::core::Core::import_image).
pub fn decode_core_image(bytes: &[u8]) -> Result<CoreImage, CoreImageError> {
    let value = parse_with(bytes, &CORE_IMAGE_LIMITS).map_err(CoreImageError::Json)?;
    let o = value
        .as_object()
        .ok_or_else(|| FieldError::invalid("(image)", "not a JSON object"))?;
    require(o, FIELDS)?;
    let specs = o
        .req_array("specs")?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let field = format!("specs[{i}]");
            let spec = v
                .as_object()
                .ok_or_else(|| FieldError::invalid(&field, "not an object"))?;
            decode_spec_object(spec)
                .map(Arc::new)
                .map_err(|e| FieldError::invalid(field, e.message))
        })
        .collect::<Result<Vec<_>, FieldError>>()?;
    let mut used = vec![false; specs.len()];
    let mut spec_at = |v: Option<u64>, field: &str| -> Result<Arc<Spec>, FieldError> {
        let i = v
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < specs.len())
            .ok_or_else(|| FieldError::invalid(field, "not an index into specs"))?;
        used[i] = true;
        Ok(specs[i].clone())
    };
    let sessions = items(o, "sessions", |i, s| session::decode(s, i, &mut spec_at))?;
    let generations = items(o, "generations", |i, g| {
        generation::decode(g, i, &mut spec_at)
    })?;
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(FieldError::invalid(format!("specs[{i}]"), "named by nothing").into());
    }
    let dirty = o
        .req_array_of_str("dirty")?
        .into_iter()
        .map(Arc::from)
        .collect();
    Ok(CoreImage {
        now: crate::core::Time::from_millis(o.req_u64("now")?),
        next_gen: o.req_u64("next_gen")?,
        shutdown: shutdown(o.req_str("shutdown")?)?,
        sessions,
        generations,
        dirty,
    })
}

/// Decodes each object of array `key` with `f(index, object)`.
fn items<T>(
    o: &Object,
    key: &str,
    mut f: impl FnMut(usize, &Object) -> Result<T, FieldError>,
) -> Result<Vec<T>, FieldError> {
    o.req_array(key)?
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Object(item) => f(i, item),
            other => Err(FieldError::invalid(
                format!("{key}[{i}]"),
                format!("expected object, got {}", other.type_name()),
            )),
        })
        .collect()
}

/// Every member of `fields` present (`null` allowed), and no other.
fn require(o: &Object, fields: &[&str]) -> Result<(), FieldError> {
    o.check_fields(fields)?;
    match fields.iter().find(|k| o.get(k).is_none()) {
        Some(k) => Err(FieldError::invalid(*k, "missing")),
        None => Ok(()),
    }
}

/// A field error inside `prefix` (`sessions[2]`), named in full.
fn within(prefix: &str) -> impl Fn(FieldError) -> FieldError + '_ {
    move |e| FieldError {
        field: format!("{prefix}.{}", e.field),
        ..e
    }
}

/// One of `names`' spellings, as its value.
fn one_of<T: Copy>(text: &str, field: &str, names: &[(&str, T)]) -> Result<T, FieldError> {
    names
        .iter()
        .find(|(n, _)| *n == text)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let known: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
            FieldError::invalid(
                field,
                format!(
                    "`{}` is not one of {}",
                    text.escape_debug(),
                    known.join(", ")
                ),
            )
        })
}

const SHUTDOWN: &[(&str, ShutdownImage)] = &[
    ("running", ShutdownImage::Running),
    ("stopping", ShutdownImage::Stopping),
    ("killing", ShutdownImage::Killing),
];

fn shutdown_name(s: ShutdownImage) -> &'static str {
    match s {
        ShutdownImage::Running => "running",
        ShutdownImage::Stopping => "stopping",
        ShutdownImage::Killing => "killing",
    }
}

fn shutdown(text: &str) -> Result<ShutdownImage, FieldError> {
    one_of(text, "shutdown", SHUTDOWN)
}

/// An optional unsigned member that must fit `T` (`u32`, `usize`, ...).
fn opt_num<T: TryFrom<u64>>(o: &Object, key: &str) -> Result<Option<T>, FieldError> {
    match o.opt_u64(key)? {
        None => Ok(None),
        Some(n) => T::try_from(n)
            .map(Some)
            .map_err(|_| FieldError::invalid(key, format!("{n} is out of range"))),
    }
}

/// A required unsigned member that must fit `T`.
fn req_num<T: TryFrom<u64>>(o: &Object, key: &str) -> Result<T, FieldError> {
    opt_num(o, key)?.ok_or_else(|| FieldError::invalid(key, "missing"))
}

fn opt_u64_member(w: &mut ObjWriter<'_>, key: &str, v: Option<u64>) {
    match v {
        Some(v) => w.u64(key, v),
        None => w.null(key),
    };
}

#[cfg(test)]
mod tests;
