//! The JSON writer: compact output appended to a `Vec<u8>`, strings escaped per RFC 8259.
//!
//! [`ObjWriter`] writes an object member by member without building a [`Value`], which is
//! how the daemon writes responses and event headers on its hot path.

use std::io::Write as _;

use super::{Number, Value};

/// A JSON array of `items`, each written by `each`.
pub fn write_array<T>(
    items: impl IntoIterator<Item = T>,
    out: &mut Vec<u8>,
    mut each: impl FnMut(T, &mut Vec<u8>),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(item, out);
    }
    out.push(b']');
}

/// Appends `value` compactly (no insignificant whitespace).
///
/// Output always parses back to an equal value: floats are written in their shortest
/// round-trip form and always with a `.` or an exponent, so they stay floats. A
/// non-finite `F64` (which the parser never produces) is written as `null`.
pub fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(*n, out),
        Value::Str(s) => write_str(s, out),
        Value::Array(items) => write_array(items, out, write_value),
        Value::Object(obj) => {
            out.push(b'{');
            for (i, (k, v)) in obj.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write_value(v, out);
            }
            out.push(b'}');
        }
    }
}

fn write_number(n: Number, out: &mut Vec<u8>) {
    match n {
        Number::U64(n) => write_u64(n, out),
        Number::I64(n) => write_i64(n, out),
        // `{:?}` is the shortest representation that round-trips, and always contains a
        // `.` or an `e` (`1.0`, `1e300`), so the number is read back as a float.
        Number::F64(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        Number::F64(_) => out.extend_from_slice(b"null"),
    }
}

/// Appends the decimal digits of `n`.
pub(crate) fn write_u64(mut n: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn write_i64(n: i64, out: &mut Vec<u8>) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(n.unsigned_abs(), out);
}

/// Appends `s` as a quoted JSON string, escaping `"`, `\` and control characters
/// (the common ones as `\n`, `\t`, ..., the others as `\u00XX`). Everything else,
/// including non-ASCII text, is written as UTF-8.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: u8 = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x08 => b'b',
            0x0c => b'f',
            0..=0x1f => 0,
            _ => continue,
        };
        out.extend_from_slice(&bytes[run_start..i]);
        run_start = i + 1;
        if short != 0 {
            out.extend_from_slice(&[b'\\', short]);
        } else {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]);
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// Writes one JSON object member by member, straight into a buffer.
///
/// Keys are escaped like any string. The object is closed by [`ObjWriter::finish`]; a
/// writer dropped without it leaves an unterminated object in the buffer.
///
/// # Examples
///
/// ```
/// use genward::proto::json::ObjWriter;
///
/// let mut out = Vec::new();
/// let mut w = ObjWriter::new(&mut out);
/// w.str("event", "exited").u64("gen", 3).bool("ok", true);
/// w.finish();
/// assert_eq!(out, br#"{"event":"exited","gen":3,"ok":true}"#);
/// ```
#[derive(Debug)]
pub struct ObjWriter<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> ObjWriter<'a> {
    /// Starts an object (writes `{`).
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        ObjWriter { out, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(key, self.out);
        self.out.push(b':');
    }

    /// Adds a string member.
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        write_str(value, self.out);
        self
    }

    /// Adds an unsigned integer member.
    pub fn u64(&mut self, key: &str, value: u64) -> &mut Self {
        self.key(key);
        write_u64(value, self.out);
        self
    }

    /// Adds a signed integer member.
    pub fn i64(&mut self, key: &str, value: i64) -> &mut Self {
        self.key(key);
        write_i64(value, self.out);
        self
    }

    /// Adds a boolean member.
    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key);
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    /// Adds a `null` member.
    pub fn null(&mut self, key: &str) -> &mut Self {
        self.key(key);
        self.out.extend_from_slice(b"null");
        self
    }

    /// Adds a member holding any value.
    pub fn value(&mut self, key: &str, value: &Value) -> &mut Self {
        self.key(key);
        write_value(value, self.out);
        self
    }

    /// Adds a member and lets `f` write its value, e.g. a nested [`ObjWriter`]. The
    /// closure must write exactly one valid JSON value.
    pub fn with(&mut self, key: &str, f: impl FnOnce(&mut Vec<u8>)) -> &mut Self {
        self.key(key);
        f(self.out);
        self
    }

    /// Closes the object (writes `}`).
    pub fn finish(self) {
        self.out.push(b'}');
    }
}
