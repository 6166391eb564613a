//! The state directory's identity: a random id made once per directory, kept in `id`.
//!
//! Every descriptor carries it (a descriptor copied from another directory is refused),
//! and every child gets it in its environment as `GENWARD_GEN=<id>:<gen>`, so a sweep of
//! the processes after a crash can find a child that was started but not yet described,
//! and tell it from the children of another daemon on another directory.
//!
//! The `id` file's header also carries the directory's format version: a newer genward
//! writes its version here before anything else, so an older one refuses the whole
//! directory from this one file.

use std::fmt;
use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use super::format::{self, FormatError, Kind};
use crate::proto::json::Limits;

/// The file holding the id.
pub const ID_FILE: &str = "id";

/// The environment variable every child gets: `<id>:<gen>`.
pub const GEN_ENV: &str = "GENWARD_GEN";

/// Largest `id` file read.
pub(crate) const MAX_ID_FILE: usize = 512;

const LIMITS: Limits = Limits {
    max_len: MAX_ID_FILE,
    max_depth: 1,
    max_string_len: 64,
    max_elements: 8,
};

/// Hex digits in an id (128 random bits).
const ID_HEX: usize = 32;

/// A state directory's id: 32 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DirId(String);

impl DirId {
    /// The id of `text`, if it is 32 lowercase hex digits.
    pub fn parse(text: &str) -> Option<DirId> {
        (text.len() == ID_HEX && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| DirId(text.to_owned()))
    }

    /// A new random id: from the system's random source where it can be read, otherwise
    /// from the time, the pid and the standard library's per-process random hash keys
    /// (the id must be unique, not secret).
    pub fn generate() -> DirId {
        let mut bytes = [0u8; ID_HEX / 2];
        let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if random.is_err() {
            bytes = fallback_bytes();
        }
        let mut text = String::with_capacity(ID_HEX);
        for b in bytes {
            text.push_str(&format!("{b:02x}"));
        }
        DirId(text)
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DirId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn fallback_bytes() -> [u8; ID_HEX / 2] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut out = [0u8; ID_HEX / 2];
    for (i, half) in out.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// The value of [`GEN_ENV`] for generation `gen` of the directory `id`.
pub fn gen_marker(id: &DirId, gen: u64) -> String {
    format!("{id}:{gen}")
}

/// Reads a [`GEN_ENV`] value back: the directory's id and the generation.
pub fn parse_gen_marker(value: &str) -> Option<(DirId, u64)> {
    let (id, gen) = value.split_once(':')?;
    let gen = crate::store::names::parse_decimal(gen)?;
    Some((DirId::parse(id)?, gen))
}

/// The `id` file for `id`, made at `created_unix_ms`.
pub fn encode_id(id: &DirId, created_unix_ms: u64) -> Vec<u8> {
    format::encode(Kind::Id, |w| {
        w.str("id", id.as_str())
            .u64("created_unix_ms", created_unix_ms);
    })
}

/// Decodes an `id` file: the id and when it was made.
pub fn decode_id(bytes: &[u8]) -> Result<(DirId, u64), FormatError> {
    let o = format::decode(bytes, Kind::Id, &LIMITS)?;
    o.check_fields(&["id", "created_unix_ms"])?;
    let text = o.req_str("id")?;
    let id = DirId::parse(text).ok_or_else(|| {
        crate::proto::json::FieldError::invalid("id", "not 32 lowercase hex digits")
    })?;
    Ok((id, o.req_u64("created_unix_ms")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_hex_and_round_trip() {
        let (a, b) = (DirId::generate(), DirId::generate());
        assert_ne!(a, b);
        assert_eq!(DirId::parse(a.as_str()), Some(a.clone()));
        assert_eq!(decode_id(&encode_id(&a, 5)).unwrap(), (a.clone(), 5));
        let marker = gen_marker(&a, 42);
        assert_eq!(parse_gen_marker(&marker), Some((a, 42)));
        assert_ne!(fallback_bytes(), fallback_bytes());
    }

    #[test]
    fn malformed_ids_and_markers_are_refused() {
        assert_eq!(DirId::parse("ABCDEF0123456789abcdef0123456789"), None);
        assert_eq!(DirId::parse("abc"), None);
        let id = "0123456789abcdef0123456789abcdef";
        assert!(parse_gen_marker(&format!("{id}:7")).is_some());
        for bad in [
            format!("{id}:"),
            format!("{id}:07"),
            format!("{id}:+7"),
            format!("{id}:7:8"),
            format!("{id}7"),
            "x:7".to_owned(),
        ] {
            assert_eq!(parse_gen_marker(&bad), None, "{bad}");
        }
    }
}
