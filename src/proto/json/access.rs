//! Typed accessors on [`Object`] for decoding requests, with errors that name the field.
//!
//! `req_*` fail when the field is missing or `null`; `opt_*` treat a missing field and an
//! explicit `null` alike as absent (clients in languages with optional values send
//! either). A present field of the wrong type is always an error, never ignored.

use std::fmt;

use super::{Object, Value};

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldProblem {
    /// A required field is absent or `null`.
    Missing,
    /// The field holds a value of another type.
    WrongType {
        /// What the field must hold ("string", "unsigned integer", ...).
        expected: &'static str,
        /// What it holds, as [`Value::type_name`] names it.
        got: &'static str,
    },
    /// The field is not one the operation accepts.
    Unknown,
    /// The value has the right type but is not acceptable; the text says why.
    Invalid(String),
}

/// A request field that could not be decoded. Displays as e.g.
/// ``field `if_gen`: expected unsigned integer, got string``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name; array elements are named `argv[2]`.
    pub field: String,
    /// What is wrong with it.
    pub problem: FieldProblem,
}

impl FieldError {
    /// A field whose value is well-typed but unacceptable, e.g. an unknown signal name.
    pub fn invalid(field: impl Into<String>, why: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            problem: FieldProblem::Invalid(why.into()),
        }
    }

    fn wrong_type(field: impl Into<String>, expected: &'static str, got: &Value) -> Self {
        FieldError {
            field: field.into(),
            problem: FieldProblem::WrongType {
                expected,
                got: got.type_name(),
            },
        }
    }

    /// A required field that is absent (or `null`): ``field `op`: missing``, the one
    /// wording of every missing member.
    pub fn missing(field: &str) -> Self {
        FieldError {
            field: field.to_owned(),
            problem: FieldProblem::Missing,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            FieldProblem::Missing => write!(f, "field `{}`: missing", self.field),
            FieldProblem::WrongType { expected, got } => {
                write!(f, "field `{}`: expected {expected}, got {got}", self.field)
            }
            FieldProblem::Unknown => write!(f, "unknown field `{}`", self.field),
            FieldProblem::Invalid(why) => write!(f, "field `{}`: {why}", self.field),
        }
    }
}

impl std::error::Error for FieldError {}

type Result<T> = std::result::Result<T, FieldError>;

impl Object {
    /// The field's value, with `null` read as absent.
    fn present(&self, key: &str) -> Option<&Value> {
        self.get(key).filter(|v| !matches!(v, Value::Null))
    }

    fn req<'a, T>(
        &'a self,
        key: &str,
        get: impl FnOnce(&'a Object, &str) -> Result<Option<T>>,
    ) -> Result<T> {
        get(self, key)?.ok_or_else(|| FieldError::missing(key))
    }

    /// Fails with [`FieldProblem::Unknown`] for the first member not in `allowed`.
    pub fn check_fields(&self, allowed: &[&str]) -> Result<()> {
        match self.iter().find(|(k, _)| !allowed.contains(k)) {
            Some((k, _)) => Err(FieldError {
                field: k.to_owned(),
                problem: FieldProblem::Unknown,
            }),
            None => Ok(()),
        }
    }

    /// An optional string field.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(v) => Err(FieldError::wrong_type(key, "string", v)),
        }
    }

    /// A required string field.
    pub fn req_str(&self, key: &str) -> Result<&str> {
        self.req(key, Object::opt_str)
    }

    /// An optional non-negative integer field.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) => Ok(Some(n)),
                None => Err(FieldError::wrong_type(key, "unsigned integer", v)),
            },
        }
    }

    /// A required non-negative integer field.
    pub fn req_u64(&self, key: &str) -> Result<u64> {
        self.req(key, Object::opt_u64)
    }

    /// An optional integer field (`i64` range).
    pub fn opt_i64(&self, key: &str) -> Result<Option<i64>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
            Some(Value::Number(super::Number::U64(_))) => {
                Err(FieldError::invalid(key, "integer out of range"))
            }
            Some(v) => Err(FieldError::wrong_type(key, "integer", v)),
        }
    }

    /// A required integer field (`i64` range).
    pub fn req_i64(&self, key: &str) -> Result<i64> {
        self.req(key, Object::opt_i64)
    }

    /// An optional boolean field.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(FieldError::wrong_type(key, "boolean", v)),
        }
    }

    /// A required boolean field.
    pub fn req_bool(&self, key: &str) -> Result<bool> {
        self.req(key, Object::opt_bool)
    }

    /// An optional array field.
    pub fn opt_array(&self, key: &str) -> Result<Option<&[Value]>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(FieldError::wrong_type(key, "array", v)),
        }
    }

    /// A required array field.
    pub fn req_array(&self, key: &str) -> Result<&[Value]> {
        self.req(key, Object::opt_array)
    }

    /// An optional object field.
    pub fn opt_object(&self, key: &str) -> Result<Option<&Object>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(FieldError::wrong_type(key, "object", v)),
        }
    }

    /// A required object field.
    pub fn req_object(&self, key: &str) -> Result<&Object> {
        self.req(key, Object::opt_object)
    }

    /// An optional array-of-strings field; a bad element is reported as `key[i]`.
    pub fn opt_array_of_str(&self, key: &str) -> Result<Option<Vec<&str>>> {
        let Some(items) = self.opt_array(key)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Str(s) => Ok(s.as_str()),
                v => Err(FieldError::wrong_type(format!("{key}[{i}]"), "string", v)),
            })
            .collect::<Result<Vec<&str>>>()
            .map(Some)
    }

    /// A required array-of-strings field; a bad element is reported as `key[i]`.
    pub fn req_array_of_str(&self, key: &str) -> Result<Vec<&str>> {
        self.req(key, Object::opt_array_of_str)
    }
}
