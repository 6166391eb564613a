//! A config file's bytes → its sessions, every error located (`line:column`, field).
//! Pure: reading files is [`super::read`]'s.

use std::path::Path;
use std::sync::Arc;

use super::locate::{line_col, offset_of};
use super::{ConfigError, Entry};
use crate::core::{check_session_name, ConfigSession};
use crate::proto::error::ProtoError;
use crate::proto::json::{parse_with_spans, Limits, Object, Spans, Value};
use crate::proto::request::decode_config_entry;

/// As strict as a request (its nesting too), with room for a file of many sessions.
const LIMITS: Limits = Limits {
    max_len: super::MAX_FILE_BYTES,
    max_depth: Limits::DEFAULT.max_depth,
    max_string_len: 1 << 20,
    max_elements: 1 << 16,
};

/// A parsed file and what locates its errors.
struct Doc<'a> {
    file: &'a Path,
    text: &'a [u8],
    spans: Spans,
}

impl Doc<'_> {
    fn parse<'a>(file: &'a Path, text: &'a [u8]) -> Result<(Doc<'a>, Value), ConfigError> {
        let (value, spans) = parse_with_spans(text, &LIMITS).map_err(|e| ConfigError {
            file: file.to_owned(),
            at: Some(line_col(text, e.offset)),
            field: None,
            problem: format!("invalid JSON: {}", e.kind),
        })?;
        Ok((Doc { file, text, spans }, value))
    }

    /// An error about `field` of the object at `prefix`; `key`: point at the member's key.
    fn error(&self, prefix: &str, field: &str, key: bool, problem: String) -> ConfigError {
        let offset = offset_of(&self.spans, self.text, prefix, field, key);
        let shown = match (prefix.is_empty(), field.is_empty()) {
            (_, true) => (!prefix.is_empty()).then(|| prefix.to_owned()),
            (true, false) => Some(field.to_owned()),
            (false, false) => Some(format!("{prefix}.{field}")),
        };
        ConfigError {
            file: self.file.to_owned(),
            at: Some(line_col(self.text, offset)),
            field: shown,
            problem,
        }
    }

    /// The session `name` configured by the object at `prefix`.
    fn session(&self, prefix: &str, name: &str, obj: &Object) -> Result<Entry, ConfigError> {
        let (spec, on_busy) = decode_config_entry(obj).map_err(|e| self.spec_error(prefix, &e))?;
        Ok(Entry {
            session: ConfigSession {
                name: Arc::from(name),
                spec,
                on_busy,
            },
            file: self.file.to_owned(),
        })
    }

    /// The decoder's error, at the field it names (or at the session's object).
    fn spec_error(&self, prefix: &str, e: &ProtoError) -> ConfigError {
        match e.field_problem() {
            Some((field, problem)) => {
                let key = problem == "unknown field";
                self.error(prefix, field, key, problem)
            }
            None => self.error(prefix, "", false, e.message.clone()),
        }
    }
}

fn type_problem(v: &Value) -> String {
    format!("expected an object, got {}", v.type_name())
}

/// Decodes the file form: `{"sessions": {"NAME": {spawn members}, ...}}`.
pub fn decode_file(file: &Path, text: &[u8]) -> Result<Vec<Entry>, ConfigError> {
    let (doc, value) = Doc::parse(file, text)?;
    let Value::Object(top) = &value else {
        return Err(doc.error("", "", false, type_problem(&value)));
    };
    if let Some((k, _)) = top.iter().find(|(k, _)| *k != "sessions") {
        let why = "unknown field (the file holds `sessions` only)".to_owned();
        return Err(doc.error("", k, true, why));
    }
    let sessions = match top.get("sessions") {
        Some(Value::Object(o)) => o,
        Some(v) => return Err(doc.error("", "sessions", false, type_problem(v))),
        None => {
            let why = "missing (the file is {\"sessions\": {\"NAME\": {...}}})".to_owned();
            return Err(doc.error("", "sessions", false, why));
        }
    };
    if sessions.len() > super::MAX_SESSIONS {
        let why = format!("more than {} sessions", super::MAX_SESSIONS);
        return Err(doc.error("", "sessions", false, why));
    }
    let mut entries = Vec::with_capacity(sessions.len());
    for (name, v) in sessions.iter() {
        let prefix = format!("sessions.{name}");
        check_session_name(name).map_err(|why| doc.error(&prefix, "", true, why))?;
        let Value::Object(obj) = v else {
            return Err(doc.error(&prefix, "", false, type_problem(v)));
        };
        entries.push(doc.session(&prefix, name, obj)?);
    }
    Ok(entries)
}

/// Decodes one file of the directory form: session `name`'s `spawn` object.
pub fn decode_dir_entry(file: &Path, name: &str, text: &[u8]) -> Result<Entry, ConfigError> {
    let (doc, value) = Doc::parse(file, text)?;
    let Value::Object(obj) = &value else {
        return Err(doc.error("", "", false, type_problem(&value)));
    };
    doc.session("", name, obj)
}
