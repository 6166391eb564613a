//! The keeper's record in the state directory: who holds the daemon's child descriptors
//! across a crash, and where to reach it.
//!
//! ```text
//! <state dir>/
//!   keeper        {"pid": .., "identity": "linux1:..", "since_unix_ms": ..}
//!   keeper.sock   its listening socket (SOCK_SEQPACKET), for the next daemon
//! ```
//!
//! Written atomically by the keeper once it listens; removed by the keeper when it exits
//! (only while the record still names it), and by a daemon that finds a record it cannot
//! trust. A record is only a claim: the daemon believes it only once the process on the
//! other end of the socket is that pid (`SO_PEERCRED`), of our uid, and its identity token
//! matches the record's.

use super::dir::Dir;
use super::format::{self, FormatError, Kind};
use super::strict_read::ReadError;
use crate::proto::json::{FieldError, Limits};
use crate::sys::identity;

/// The record's file name.
pub const KEEPER_FILE: &str = "keeper";

/// The keeper's socket's file name.
pub const KEEPER_SOCKET: &str = "keeper.sock";

const MAX_FILE: usize = 1024;

const LIMITS: Limits = Limits {
    max_len: MAX_FILE,
    max_depth: 1,
    max_string_len: identity::MAX_TOKEN_LEN,
    max_elements: 8,
};

/// What a keeper says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperRecord {
    /// Its pid.
    pub pid: u32,
    /// Its identity token.
    pub identity: String,
    /// When it started, Unix milliseconds.
    pub since_unix_ms: u64,
}

/// The record's bytes.
pub fn encode_keeper(r: &KeeperRecord) -> Vec<u8> {
    format::encode(Kind::Keeper, |w| {
        w.u64("pid", r.pid.into())
            .str("identity", &r.identity)
            .u64("since_unix_ms", r.since_unix_ms);
    })
}

/// Decodes a record, strictly: every member present, known and well-formed.
pub fn decode_keeper(bytes: &[u8]) -> Result<KeeperRecord, FormatError> {
    let o = format::decode(bytes, Kind::Keeper, &LIMITS)?;
    o.check_fields(&["pid", "identity", "since_unix_ms"])?;
    let pid = o.req_u64("pid")?;
    let pid = u32::try_from(pid)
        .ok()
        .filter(|&p| p > 0 && p <= i32::MAX as u32)
        .ok_or_else(|| FieldError::invalid("pid", format!("{pid} is not a pid")))?;
    let identity = o.req_str("identity")?;
    if identity::parse(identity).is_none() {
        return Err(FieldError::invalid("identity", "not an identity token").into());
    }
    Ok(KeeperRecord {
        pid,
        identity: identity.to_owned(),
        since_unix_ms: o.req_u64("since_unix_ms")?,
    })
}

/// Why no keeper record could be read.
#[derive(Debug)]
pub enum KeeperFileError {
    /// There is none.
    Missing,
    /// There is one, and it cannot be trusted (why).
    Bad(String),
}

/// Reads the keeper record in `dir`.
pub fn read_keeper(dir: &Dir) -> Result<KeeperRecord, KeeperFileError> {
    let mut buf = Vec::new();
    match dir.read_strict(KEEPER_FILE, MAX_FILE, &mut buf) {
        Ok(()) => {}
        Err(ReadError::Missing) => return Err(KeeperFileError::Missing),
        Err(e) => return Err(KeeperFileError::Bad(e.to_string())),
    }
    decode_keeper(&buf).map_err(|e| KeeperFileError::Bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_bad_one_is_refused() {
        let r = KeeperRecord {
            pid: 42,
            identity: "linux1:0e6d6a9c-1f0e-4a53-9d1e-9a4c1d7a2b10:0:12345".into(),
            since_unix_ms: 1_700_000_000_000,
        };
        let bytes = encode_keeper(&r);
        assert_eq!(decode_keeper(&bytes).unwrap(), r);
        let text = String::from_utf8(bytes).unwrap();
        for bad in [
            text.replace("\"pid\":42", "\"pid\":0"),
            text.replace("linux1:", "nope:"),
            text.replace("keeper", "lease"),
            text[..text.len() - 1].to_owned(),
        ] {
            assert!(decode_keeper(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
