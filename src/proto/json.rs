//! A strict, bounded JSON (RFC 8259) codec: the [`Value`] tree, a parser with limits and
//! byte-precise errors, a writer, and typed field accessors for request decoding.
//!
//! Why our own: the daemon reads lines from any local client and must never panic, grow
//! without bound or accept ambiguous input, and the crate keeps its runtime dependencies
//! to a fixed list. The parser is stricter than RFC 8259 requires in exactly these
//! documented ways (each one an error with a byte offset, never a silent change):
//!
//! - input longer than [`Limits::max_len`], nesting deeper than [`Limits::max_depth`],
//!   a string longer than [`Limits::max_string_len`] (decoded bytes), more values than
//!   [`Limits::max_elements`] in one document;
//! - an integer (no fraction, no exponent) outside `i64::MIN..=u64::MAX` (integers are
//!   kept exact, never rounded through `f64`); a number whose value overflows `f64`;
//! - duplicate keys in one object;
//! - escapes that decode to a lone UTF-16 surrogate (they name no Unicode scalar value).
//!
//! Integers are exact: a number written without fraction or exponent becomes
//! [`Number::U64`] (non-negative, including `-0`) or [`Number::I64`] (negative). Only a
//! number with a fraction or an exponent becomes [`Number::F64`].

mod access;
mod parse;
mod write;

pub use access::{FieldError, FieldProblem};
pub use parse::{parse, parse_with, parse_with_spans, ParseError, ParseErrorKind, Span, Spans};
pub(crate) use write::write_u64;
pub use write::{write_array, write_str, write_value, ObjWriter};

/// Bounds applied by the parser. Every field is a hard limit whose excess is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted input in bytes (default 1 MiB, the protocol's line limit).
    pub max_len: usize,
    /// Deepest accepted nesting of arrays and objects (default 32). A scalar document has
    /// depth 0, `[]` depth 1. Values above [`MAX_DEPTH_CAP`] are treated as the cap, since
    /// the parser recurses once per level.
    pub max_depth: usize,
    /// Longest accepted string (keys included), in bytes after unescaping (default 1 MiB).
    pub max_string_len: usize,
    /// Most values (scalars, arrays and objects, keys not counted) in one document
    /// (default 65,536), which bounds the memory of the parsed tree.
    pub max_elements: usize,
}

/// The deepest nesting the parser will ever follow, whatever [`Limits::max_depth`] says.
pub const MAX_DEPTH_CAP: usize = 512;

impl Limits {
    /// The protocol defaults: 1 MiB input, depth 32, 1 MiB strings, 65,536 values.
    pub const DEFAULT: Limits = Limits {
        max_len: 1 << 20,
        max_depth: 32,
        max_string_len: 1 << 20,
        max_elements: 1 << 16,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A JSON number, kept exact when it is an integer.
///
/// Invariant (upheld by the parser and by [`Number::from`]): `I64` holds only negative
/// values and `F64` is finite, so derived equality is value equality for integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// A non-negative integer.
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// A number written with a fraction or an exponent; always finite.
    F64(f64),
}

impl Number {
    /// The value as `u64`, if it is a non-negative integer.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Number::U64(n) => Some(n),
            _ => None,
        }
    }

    /// The value as `i64`, if it is an integer in `i64` range.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Number::U64(n) => i64::try_from(n).ok(),
            Number::I64(n) => Some(n),
            Number::F64(_) => None,
        }
    }

    /// The value as `f64` (integers beyond 2^53 are rounded).
    pub fn as_f64(self) -> f64 {
        match self {
            Number::U64(n) => n as f64,
            Number::I64(n) => n as f64,
            Number::F64(f) => f,
        }
    }
}

impl From<u64> for Number {
    fn from(n: u64) -> Self {
        Number::U64(n)
    }
}

impl From<i64> for Number {
    fn from(n: i64) -> Self {
        if n >= 0 {
            Number::U64(n as u64)
        } else {
            Number::I64(n)
        }
    }
}

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// A number; see [`Number`].
    Number(Number),
    /// A string (always valid UTF-8: lone surrogates are rejected).
    Str(String),
    /// An array.
    Array(Vec<Value>),
    /// An object; keys are unique and keep their order.
    Object(Object),
}

impl Value {
    /// The name used for this value's type in error messages ("string", "integer", ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(Number::U64(_)) => "integer",
            Value::Number(Number::I64(_)) => "negative integer",
            Value::Number(Number::F64(_)) => "non-integer number",
            Value::Str(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value as `u64`, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// Serializes the value compactly (no whitespace) into a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(self, &mut out);
        out
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Number(Number::U64(n))
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Number(Number::from(n))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// A JSON object: members in input order, keys unique.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    members: Vec<(String, Value)>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Object::default()
    }

    /// The value under `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets `key` to `value`, replacing (in place) an existing member of that key.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        match self.members.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.members.push((key, value)),
        }
    }

    /// Removes and returns the value under `key`.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let at = self.members.iter().position(|(k, _)| k == key)?;
        Some(self.members.remove(at).1)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Members in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Builds an object from members the caller knows to have unique keys (the parser
    /// checks this itself).
    pub(crate) fn from_unique(members: Vec<(String, Value)>) -> Self {
        Object { members }
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests;
