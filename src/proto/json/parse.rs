//! The strict JSON parser: RFC 8259 grammar, [`Limits`], byte-precise [`ParseError`]s.
//!
//! One pass over a byte slice, recursing once per nesting level (bounded by
//! [`Limits::max_depth`], itself capped by [`MAX_DEPTH_CAP`]). Input outside strings must
//! be ASCII; inside strings UTF-8 is validated run by run between escapes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

use super::{Limits, Number, Object, Value, MAX_DEPTH_CAP};

/// What went wrong; see [`ParseError`] for where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The input is longer than [`Limits::max_len`].
    TooLong {
        /// The limit in force.
        limit: usize,
    },
    /// The input ended inside a value (or was empty).
    UnexpectedEnd,
    /// A byte that cannot start a value.
    ExpectedValue,
    /// An object member's key is not followed by `:`.
    ExpectedColon,
    /// An array element is followed by something other than `,` or `]`.
    ExpectedCommaOrBracket,
    /// An object member is followed by something other than `,` or `}`.
    ExpectedCommaOrBrace,
    /// An object member does not start with a string key.
    ExpectedKey,
    /// Something other than whitespace follows the document.
    TrailingCharacters,
    /// A misspelled `true`, `false` or `null`.
    InvalidLiteral,
    /// A number that does not follow the grammar (leading zero, missing digits, ...).
    InvalidNumber,
    /// An integer outside `i64::MIN..=u64::MAX`.
    IntegerOutOfRange,
    /// A number too large for `f64`.
    NumberOutOfRange,
    /// A backslash followed by something that is not an escape.
    InvalidEscape,
    /// `\u` not followed by four hex digits.
    InvalidUnicodeEscape,
    /// A `\u` escape naming a UTF-16 surrogate without its pair.
    LoneSurrogate,
    /// A raw control character (below U+0020) inside a string.
    ControlCharacter,
    /// Bytes inside a string that are not UTF-8.
    InvalidUtf8,
    /// A key that already occurs in the same object.
    DuplicateKey,
    /// Nesting deeper than [`Limits::max_depth`].
    TooDeep {
        /// The limit in force.
        limit: usize,
    },
    /// A string longer than [`Limits::max_string_len`] once unescaped.
    StringTooLong {
        /// The limit in force.
        limit: usize,
    },
    /// More values than [`Limits::max_elements`].
    TooManyElements {
        /// The limit in force.
        limit: usize,
    },
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::TooLong { limit } => write!(f, "input longer than {limit} bytes"),
            ParseErrorKind::UnexpectedEnd => f.write_str("unexpected end of input"),
            ParseErrorKind::ExpectedValue => f.write_str("expected a value"),
            ParseErrorKind::ExpectedColon => f.write_str("expected `:`"),
            ParseErrorKind::ExpectedCommaOrBracket => f.write_str("expected `,` or `]`"),
            ParseErrorKind::ExpectedCommaOrBrace => f.write_str("expected `,` or `}`"),
            ParseErrorKind::ExpectedKey => f.write_str("expected a string key"),
            ParseErrorKind::TrailingCharacters => f.write_str("trailing characters"),
            ParseErrorKind::InvalidLiteral => f.write_str("invalid literal"),
            ParseErrorKind::InvalidNumber => f.write_str("invalid number"),
            ParseErrorKind::IntegerOutOfRange => f.write_str("integer out of range"),
            ParseErrorKind::NumberOutOfRange => f.write_str("number out of range"),
            ParseErrorKind::InvalidEscape => f.write_str("invalid escape"),
            ParseErrorKind::InvalidUnicodeEscape => f.write_str("invalid \\u escape"),
            ParseErrorKind::LoneSurrogate => f.write_str("lone surrogate in \\u escape"),
            ParseErrorKind::ControlCharacter => f.write_str("control character in string"),
            ParseErrorKind::InvalidUtf8 => f.write_str("invalid UTF-8 in string"),
            ParseErrorKind::DuplicateKey => f.write_str("duplicate key"),
            ParseErrorKind::TooDeep { limit } => write!(f, "nesting deeper than {limit}"),
            ParseErrorKind::StringTooLong { limit } => {
                write!(f, "string longer than {limit} bytes")
            }
            ParseErrorKind::TooManyElements { limit } => {
                write!(f, "more than {limit} values")
            }
        }
    }
}

/// A parse failure: its kind and the byte offset where it was detected.
///
/// Displays as e.g. `invalid escape at byte 17`. For [`ParseErrorKind::DuplicateKey`],
/// [`ParseErrorKind::StringTooLong`], [`ParseErrorKind::IntegerOutOfRange`] and
/// [`ParseErrorKind::InvalidLiteral`] the offset is where the offending token starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    /// What went wrong.
    pub kind: ParseErrorKind,
    /// Byte offset into the input.
    pub offset: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.kind, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// Parses one JSON document with [`Limits::DEFAULT`].
pub fn parse(input: &[u8]) -> Result<Value, ParseError> {
    parse_with(input, &Limits::DEFAULT)
}

/// Parses one JSON document (surrounding whitespace allowed, nothing else) under `limits`.
pub fn parse_with(input: &[u8], limits: &Limits) -> Result<Value, ParseError> {
    run(input, limits, None)
}

/// Where one object member or array element sits in the input: byte offsets of its key
/// (of the element itself, for an array element) and of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Offset of the member's key (its opening quote), or of the element's value.
    pub key: usize,
    /// Offset of the first byte of the value.
    pub value: usize,
}

/// Positions of every member and element of a document, by path: object members as
/// `a.b`, array elements as `a[2]` (the names request decoders give fields in their
/// errors). Filled only by [`parse_with_spans`], for files a person wrote (where an error
/// should say line and column); the protocol's own parse never pays for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spans(BTreeMap<String, Span>);

impl Spans {
    /// The position of the member or element at `path`, if the document has it.
    pub fn get(&self, path: &str) -> Option<Span> {
        self.0.get(path).copied()
    }
}

/// [`parse_with`], also giving the position of every member and element ([`Spans`]).
pub fn parse_with_spans(input: &[u8], limits: &Limits) -> Result<(Value, Spans), ParseError> {
    let mut spans = Recorder {
        path: String::new(),
        spans: Spans::default(),
    };
    let value = run(input, limits, Some(&mut spans))?;
    Ok((value, spans.spans))
}

/// What [`parse_with_spans`] keeps while parsing: the path of the value being parsed.
struct Recorder {
    path: String,
    spans: Spans,
}

fn run(input: &[u8], limits: &Limits, spans: Option<&mut Recorder>) -> Result<Value, ParseError> {
    if input.len() > limits.max_len {
        return Err(ParseError {
            kind: ParseErrorKind::TooLong {
                limit: limits.max_len,
            },
            offset: limits.max_len,
        });
    }
    let mut p = Parser {
        input,
        pos: 0,
        limits: *limits,
        max_depth: limits.max_depth.min(MAX_DEPTH_CAP),
        elements: 0,
        spans,
    };
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != input.len() {
        return Err(p.err(ParseErrorKind::TrailingCharacters));
    }
    Ok(value)
}

/// Objects with at least this many members check duplicates with a hash set.
const LINEAR_KEY_CHECK: usize = 16;

struct Parser<'a, 'r> {
    input: &'a [u8],
    pos: usize,
    limits: Limits,
    max_depth: usize,
    elements: usize,
    /// Only for [`parse_with_spans`].
    spans: Option<&'r mut Recorder>,
}

type PResult<T> = Result<T, ParseError>;

impl<'a> Parser<'a, '_> {
    /// With spans recorded: enters the member or element `segment` (`.key` or `[i]`)
    /// whose key starts at `key`, returning the length of the path to go back to.
    fn enter(&mut self, segment: std::fmt::Arguments<'_>, key: usize) -> Option<usize> {
        let rec = self.spans.as_deref_mut()?;
        let back = rec.path.len();
        use std::fmt::Write as _;
        let _ = rec.path.write_fmt(segment);
        let path = rec.path.strip_prefix('.').unwrap_or(&rec.path).to_owned();
        let value = key;
        rec.spans.0.insert(path, Span { key, value });
        Some(back)
    }

    /// With spans recorded: notes where the value just entered starts.
    fn value_at(&mut self, at: usize) {
        if let Some(rec) = self.spans.as_deref_mut() {
            let path = rec.path.strip_prefix('.').unwrap_or(&rec.path);
            if let Some(span) = rec.spans.0.get_mut(path) {
                span.value = at;
            }
        }
    }

    /// Leaves what [`enter`](Self::enter) entered.
    fn leave(&mut self, back: Option<usize>) {
        if let (Some(rec), Some(back)) = (self.spans.as_deref_mut(), back) {
            rec.path.truncate(back);
        }
    }

    fn err(&self, kind: ParseErrorKind) -> ParseError {
        self.err_at(kind, self.pos)
    }

    fn err_at(&self, kind: ParseErrorKind, offset: usize) -> ParseError {
        ParseError { kind, offset }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Parses a value at `depth` enclosing containers, after optional whitespace.
    fn value(&mut self, depth: usize) -> PResult<Value> {
        self.skip_ws();
        let start = self.pos;
        let Some(b) = self.peek() else {
            return Err(self.err(ParseErrorKind::UnexpectedEnd));
        };
        self.elements += 1;
        if self.elements > self.limits.max_elements {
            return Err(self.err(ParseErrorKind::TooManyElements {
                limit: self.limits.max_elements,
            }));
        }
        match b {
            b'{' | b'[' if depth + 1 > self.max_depth => Err(self.err(ParseErrorKind::TooDeep {
                limit: self.max_depth,
            })),
            b'{' => self.object(depth + 1).map(Value::Object),
            b'[' => self.array(depth + 1).map(Value::Array),
            b'"' => self.string().map(Value::Str),
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.number().map(Value::Number),
            _ => Err(self.err_at(ParseErrorKind::ExpectedValue, start)),
        }
    }

    fn literal(&mut self, word: &[u8], value: Value) -> PResult<Value> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.err(ParseErrorKind::InvalidLiteral))
        }
    }

    fn array(&mut self, depth: usize) -> PResult<Vec<Value>> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            let back = if self.spans.is_some() {
                self.skip_ws();
                let at = self.pos;
                self.enter(format_args!("[{}]", items.len()), at)
            } else {
                None
            };
            items.push(self.value(depth)?);
            self.leave(back);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(items);
                }
                Some(_) => return Err(self.err(ParseErrorKind::ExpectedCommaOrBracket)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
        }
    }

    fn object(&mut self, depth: usize) -> PResult<Object> {
        self.pos += 1; // '{'
        let mut members: Vec<(String, Value)> = Vec::new();
        // Keys of large objects; a key without escapes borrows its bytes from the input.
        let mut seen: Option<HashSet<Cow<'a, str>>> = None;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Object::from_unique(members));
        }
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'"') => {}
                Some(_) => return Err(self.err(ParseErrorKind::ExpectedKey)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_raw = &self.input[key_start + 1..self.pos - 1];
            self.skip_ws();
            match self.peek() {
                Some(b':') => self.pos += 1,
                Some(_) => return Err(self.err(ParseErrorKind::ExpectedColon)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
            let back = if self.spans.is_some() {
                let back = self.enter(format_args!(".{key}"), key_start);
                self.skip_ws();
                let at = self.pos;
                self.value_at(at);
                back
            } else {
                None
            };
            let value = self.value(depth)?;
            self.leave(back);
            let duplicate = match &mut seen {
                Some(set) => {
                    // Every escape is longer than what it stands for, so equal lengths
                    // mean the raw bytes are the key itself.
                    let entry = match std::str::from_utf8(key_raw) {
                        Ok(raw) if raw.len() == key.len() => Cow::Borrowed(raw),
                        _ => Cow::Owned(key.clone()),
                    };
                    !set.insert(entry)
                }
                None => {
                    let dup = members.iter().any(|(k, _)| *k == key);
                    if !dup && members.len() + 1 >= LINEAR_KEY_CHECK {
                        let mut set: HashSet<Cow<'a, str>> =
                            members.iter().map(|(k, _)| Cow::Owned(k.clone())).collect();
                        set.insert(Cow::Owned(key.clone()));
                        seen = Some(set);
                    }
                    dup
                }
            };
            if duplicate {
                return Err(self.err_at(ParseErrorKind::DuplicateKey, key_start));
            }
            members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Object::from_unique(members));
                }
                Some(_) => return Err(self.err(ParseErrorKind::ExpectedCommaOrBrace)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
        }
    }

    fn number(&mut self) -> PResult<Number> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.err(ParseErrorKind::InvalidNumber));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            Some(_) => return Err(self.err(ParseErrorKind::InvalidNumber)),
            None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
        }
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            self.require_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            is_float = true;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.require_digits()?;
        }
        if is_float {
            return self.float(start);
        }
        let digits_start = if negative { start + 1 } else { start };
        let mut magnitude: u64 = 0;
        for &d in &self.input[digits_start..int_end] {
            magnitude = magnitude
                .checked_mul(10)
                .and_then(|m| m.checked_add(u64::from(d - b'0')))
                .ok_or_else(|| self.err_at(ParseErrorKind::IntegerOutOfRange, start))?;
        }
        if !negative || magnitude == 0 {
            return Ok(Number::U64(magnitude));
        }
        if magnitude > 1u64 << 63 {
            return Err(self.err_at(ParseErrorKind::IntegerOutOfRange, start));
        }
        // 2^63 wraps to i64::MIN, which is exactly its negation.
        Ok(Number::I64((magnitude as i64).wrapping_neg()))
    }

    fn float(&self, start: usize) -> PResult<Number> {
        let text = std::str::from_utf8(&self.input[start..self.pos])
            .map_err(|_| self.err_at(ParseErrorKind::InvalidNumber, start))?;
        let f: f64 = text
            .parse()
            .map_err(|_| self.err_at(ParseErrorKind::InvalidNumber, start))?;
        if !f.is_finite() {
            return Err(self.err_at(ParseErrorKind::NumberOutOfRange, start));
        }
        Ok(Number::F64(f))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn require_digits(&mut self) -> PResult<()> {
        match self.peek() {
            Some(b'0'..=b'9') => {
                self.digits();
                Ok(())
            }
            Some(_) => Err(self.err(ParseErrorKind::InvalidNumber)),
            None => Err(self.err(ParseErrorKind::UnexpectedEnd)),
        }
    }

    fn string(&mut self) -> PResult<String> {
        let start = self.pos;
        self.pos += 1; // '"'
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.input.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = &self.input[run_start..self.pos];
            match std::str::from_utf8(run) {
                Ok(s) => out.push_str(s),
                Err(e) => {
                    return Err(
                        self.err_at(ParseErrorKind::InvalidUtf8, run_start + e.valid_up_to())
                    )
                }
            }
            self.check_string_len(&out, start)?;
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.escape(&mut out)?;
                    self.check_string_len(&out, start)?;
                }
                Some(_) => return Err(self.err(ParseErrorKind::ControlCharacter)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
        }
    }

    fn check_string_len(&self, s: &str, start: usize) -> PResult<()> {
        if s.len() > self.limits.max_string_len {
            return Err(self.err_at(
                ParseErrorKind::StringTooLong {
                    limit: self.limits.max_string_len,
                },
                start,
            ));
        }
        Ok(())
    }

    /// Decodes the escape at `self.pos` (a backslash) into `out`.
    fn escape(&mut self, out: &mut String) -> PResult<()> {
        let at = self.pos;
        let Some(&c) = self.input.get(at + 1) else {
            self.pos = self.input.len();
            return Err(self.err(ParseErrorKind::UnexpectedEnd));
        };
        let simple = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let ch = self.unicode_escape(at)?;
                out.push(ch);
                return Ok(());
            }
            _ => return Err(self.err_at(ParseErrorKind::InvalidEscape, at)),
        };
        out.push(simple);
        self.pos = at + 2;
        Ok(())
    }

    /// Decodes `\uXXXX` (and its low-surrogate partner, if it is a high surrogate)
    /// starting at the backslash `at`.
    fn unicode_escape(&mut self, at: usize) -> PResult<char> {
        let hi = self.hex4(at)?;
        self.pos = at + 6;
        let code = match hi {
            0xD800..=0xDBFF => {
                if self.input.get(self.pos) != Some(&b'\\')
                    || self.input.get(self.pos + 1) != Some(&b'u')
                {
                    return Err(self.err_at(ParseErrorKind::LoneSurrogate, at));
                }
                let lo = self.hex4(self.pos)?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return Err(self.err_at(ParseErrorKind::LoneSurrogate, at));
                }
                self.pos += 6;
                0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.err_at(ParseErrorKind::LoneSurrogate, at)),
            _ => u32::from(hi),
        };
        char::from_u32(code).ok_or_else(|| self.err_at(ParseErrorKind::LoneSurrogate, at))
    }

    /// Reads the four hex digits of the `\u` escape whose backslash is at `at`.
    fn hex4(&mut self, at: usize) -> PResult<u16> {
        let mut code: u16 = 0;
        for i in 0..4 {
            let Some(&b) = self.input.get(at + 2 + i) else {
                self.pos = self.input.len();
                return Err(self.err(ParseErrorKind::UnexpectedEnd));
            };
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(self.err_at(ParseErrorKind::InvalidUnicodeEscape, at)),
            };
            code = code << 4 | u16::from(digit);
        }
        Ok(code)
    }
}
