//! The one envelope of every file in the state directory: a header line naming the format
//! version and the kind of file, then the body, one JSON object on one line.
//!
//! ```text
//! {"genward_state":1,"kind":"session"}
//! {"name":"web","spec":{...},...}
//! ```
//!
//! The header is read first, on its own, with tiny limits: a file from a newer genward is
//! recognised as such before a byte of its body is interpreted, whatever that body looks
//! like, so it is refused and never misread. The header's shape is the one thing every
//! version keeps: a JSON object on the first line, at most 256 bytes, whose
//! `genward_state` member is the version. The final newline marks a complete file: a
//! body cut short at any byte is refused. Bodies are parsed by the protocol's own JSON
//! codec under limits as strict as a request's, and decoded with unknown members refused
//! (a version that adds members is a new version).

use std::fmt;

use crate::proto::json::{self, FieldError, Limits, ObjWriter, Object, ParseError, Value};

/// The format version this build writes and the newest it reads. Any change to any kind
/// of file is a new version, and a daemon that writes a newer version also writes it in
/// the directory's `id` file, so an older daemon refuses the whole directory up front.
pub const FORMAT_VERSION: u64 = 1;

/// The header member naming the version; also what tells our files from others.
const MAGIC: &str = "genward_state";

/// The longest header line, newline excluded. Ours is under 50 bytes; the room (and the
/// nesting allowed) is for a newer version's header, which must still be recognised as
/// newer.
const MAX_HEADER: usize = 256;

const HEADER_LIMITS: Limits = Limits {
    max_len: MAX_HEADER,
    max_depth: 4,
    max_string_len: 64,
    max_elements: 32,
};

/// What a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `id`: the directory's random id and format version.
    Id,
    /// `highwater`: the generation ceiling.
    HighWater,
    /// `lease`: the daemon holding the directory.
    Lease,
    /// `sessions/<name>.json`: one session.
    Session,
    /// `gens/<gen>.json`: one live generation.
    Descriptor,
    /// `output/<n>.seg`: retained output (a header line, then binary records).
    Output,
    /// `keeper`: the process holding the daemon's child descriptors across a crash.
    Keeper,
    /// `output/positions`: output position ceilings (a header line, then binary slots).
    Positions,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::Id,
        Kind::HighWater,
        Kind::Lease,
        Kind::Session,
        Kind::Descriptor,
        Kind::Output,
        Kind::Keeper,
        Kind::Positions,
    ];

    /// The header's spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Id => "id",
            Kind::HighWater => "highwater",
            Kind::Lease => "lease",
            Kind::Session => "session",
            Kind::Descriptor => "generation",
            Kind::Output => "output",
            Kind::Keeper => "keeper",
            Kind::Positions => "positions",
        }
    }
}

/// Why a file's contents were refused.
#[derive(Debug, Clone, PartialEq)]
pub enum FormatError {
    /// The first line is not a genward state header: not one of our files.
    NotOurs,
    /// The header is ours but malformed.
    Header(String),
    /// Written by a newer genward, in a format this build does not know.
    Newer {
        /// The file's version.
        version: u64,
    },
    /// A header of another kind of file.
    WrongKind {
        /// What it says it is.
        found: String,
        /// What was expected.
        expected: Kind,
    },
    /// The body does not end with its newline: the file was cut short.
    Truncated,
    /// The body is not valid JSON, or exceeds a limit.
    Json(ParseError),
    /// The body lacks a member, has an unknown one, or one of the wrong type or value.
    Field(FieldError),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::NotOurs => f.write_str("not a genward state file"),
            FormatError::Header(why) => write!(f, "bad header: {why}"),
            FormatError::Newer { version } => write!(
                f,
                "written by a newer genward (state format {version}; this build reads up to {FORMAT_VERSION})"
            ),
            FormatError::WrongKind { found, expected } => write!(
                f,
                "a `{found}` file where a `{}` file belongs",
                expected.as_str()
            ),
            FormatError::Truncated => f.write_str("truncated (no final newline)"),
            FormatError::Json(e) => write!(f, "body: {e}"),
            FormatError::Field(e) => write!(f, "body: {e}"),
        }
    }
}

impl std::error::Error for FormatError {}

impl From<FieldError> for FormatError {
    fn from(e: FieldError) -> Self {
        FormatError::Field(e)
    }
}

/// A whole file of `kind`: the header line, then the body `write_body` writes as
/// members of one object, then the final newline.
pub fn encode(kind: Kind, write_body: impl FnOnce(&mut ObjWriter<'_>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_header(kind, &mut out);
    let mut body = ObjWriter::new(&mut out);
    write_body(&mut body);
    body.finish();
    out.push(b'\n');
    out
}

/// The header line alone (with its newline), for a file whose body is not JSON.
pub fn header_line(kind: Kind) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    write_header(kind, &mut out);
    out
}

fn write_header(kind: Kind, out: &mut Vec<u8>) {
    let mut header = ObjWriter::new(out);
    header.u64(MAGIC, FORMAT_VERSION).str("kind", kind.as_str());
    header.finish();
    out.push(b'\n');
}

/// Reads just the header of `bytes`: the version and kind, checked. Ours and of this
/// version or older, of the `expected` kind, or an error.
pub fn check_header(bytes: &[u8], expected: Kind) -> Result<u64, FormatError> {
    let line = match bytes.iter().take(MAX_HEADER + 1).position(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None if bytes.starts_with(b"{\"genward_state\":") => {
            return Err(FormatError::Header("no end of line".into()))
        }
        None => return Err(FormatError::NotOurs),
    };
    let value = json::parse_with(line, &HEADER_LIMITS).map_err(|_| not_ours_or_bad(line))?;
    let header = value.as_object().ok_or(FormatError::NotOurs)?;
    let version = match header.get(MAGIC) {
        None => return Err(FormatError::NotOurs),
        Some(v) => v
            .as_u64()
            .filter(|&v| v > 0)
            .ok_or_else(|| FormatError::Header(format!("`{MAGIC}` is not a version")))?,
    };
    // The version first: a newer header may hold anything else.
    if version > FORMAT_VERSION {
        return Err(FormatError::Newer { version });
    }
    header
        .check_fields(&[MAGIC, "kind"])
        .map_err(|e| FormatError::Header(e.to_string()))?;
    let kind = header
        .req_str("kind")
        .map_err(|e| FormatError::Header(e.to_string()))?;
    if kind != expected.as_str() {
        return Err(match Kind::ALL.iter().find(|k| k.as_str() == kind) {
            Some(_) => FormatError::WrongKind {
                found: kind.to_owned(),
                expected,
            },
            None => FormatError::Header(format!("unknown kind `{}`", kind.escape_debug())),
        });
    }
    Ok(version)
}

/// A header line that does not parse: ours if it starts like ours.
fn not_ours_or_bad(line: &[u8]) -> FormatError {
    if line.starts_with(b"{\"genward_state\":") {
        FormatError::Header("not valid JSON".into())
    } else {
        FormatError::NotOurs
    }
}

/// Decodes a file of `kind`: checks the header, then parses the body under `limits` into
/// its object.
pub fn decode(bytes: &[u8], kind: Kind, limits: &Limits) -> Result<Object, FormatError> {
    check_header(bytes, kind)?;
    let start = bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| i + 1);
    let body = match bytes[start..].split_last() {
        Some((b'\n', body)) => body,
        _ => return Err(FormatError::Truncated),
    };
    match json::parse_with(body, limits).map_err(FormatError::Json)? {
        Value::Object(o) => Ok(o),
        other => Err(FormatError::Field(FieldError::invalid(
            "body",
            format!("expected an object, got {}", other.type_name()),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        max_len: 1024,
        max_depth: 4,
        max_string_len: 64,
        max_elements: 64,
    };

    #[test]
    fn a_file_round_trips() {
        let bytes = encode(Kind::HighWater, |w| {
            w.u64("ceiling", 7);
        });
        assert_eq!(
            bytes,
            b"{\"genward_state\":1,\"kind\":\"highwater\"}\n{\"ceiling\":7}\n"
        );
        let o = decode(&bytes, Kind::HighWater, &SMALL).unwrap();
        assert_eq!(o.req_u64("ceiling").unwrap(), 7);
    }

    #[test]
    fn every_prefix_is_refused() {
        let bytes = encode(Kind::Id, |w| {
            w.str("id", "abc");
        });
        for end in 0..bytes.len() {
            assert!(decode(&bytes[..end], Kind::Id, &SMALL).is_err(), "{end}");
        }
    }

    #[test]
    fn a_newer_version_is_named_whatever_follows() {
        let e = decode(
            b"{\"genward_state\":2,\"kind\":\"whatever\",\"more\":[1]}\n\x00\xff",
            Kind::Session,
            &SMALL,
        )
        .unwrap_err();
        assert_eq!(e, FormatError::Newer { version: 2 });
        assert!(
            e.to_string().contains("newer genward (state format 2"),
            "{e}"
        );
    }

    #[test]
    fn foreign_and_malformed_headers_are_told_apart() {
        let e = |b: &[u8]| decode(b, Kind::Session, &SMALL).unwrap_err();
        assert_eq!(e(b""), FormatError::NotOurs);
        assert_eq!(e(b"1234\n"), FormatError::NotOurs);
        assert_eq!(e(b"{\"a\":1}\n{}\n"), FormatError::NotOurs);
        assert!(matches!(
            e(b"{\"genward_state\":0,\"kind\":\"session\"}\n{}\n"),
            FormatError::Header(_)
        ));
        assert!(matches!(
            e(b"{\"genward_state\":1,\"kind\":\"session\",\"x\":1}\n{}\n"),
            FormatError::Header(_)
        ));
        assert_eq!(
            e(b"{\"genward_state\":1,\"kind\":\"lease\"}\n{}\n"),
            FormatError::WrongKind {
                found: "lease".into(),
                expected: Kind::Session
            }
        );
        assert!(matches!(
            e(b"{\"genward_state\":1,\"kind\":\"session\"}\n[]\n"),
            FormatError::Field(_)
        ));
        assert!(matches!(
            e(b"{\"genward_state\":1,\"kind\":\"session\"}\n{}"),
            FormatError::Truncated
        ));
        let long = [b"{\"genward_state\":1,\"kind\":\"".as_slice(), &[b'x'; 200]].concat();
        assert!(matches!(e(&long), FormatError::Header(_)));
    }
}
