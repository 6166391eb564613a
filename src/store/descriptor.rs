//! A live generation's descriptor, both ways: what a restarted daemon needs to find its
//! process again and to tell it from a stranger on the same pid.
//!
//! ```text
//! {"genward_state":1,"kind":"generation"}
//! {"session":"web","gen":12,"pid":4242,"pgid":4242,"sid":4242,
//!  "identity":"linux1:<boot id>:<inode>:<starttime>","started_unix_ms":1700000000000,
//!  "io":"pty","dir_id":"<32 hex digits>","cgroup":"/genward-<id>-<pid>/gen-12"}
//! ```
//! (one line in the file). `cgroup` is there only for a generation started in a cgroup
//! of its own (absent from the files of earlier daemons).

use std::sync::Arc;

use super::dir_id::DirId;
use super::format::{self, FormatError, Kind};
use crate::core::check_session_name;
use crate::proto::json::{FieldError, Limits, Object};
use crate::sys::identity;

/// Largest descriptor file read.
pub const MAX_DESCRIPTOR_FILE: usize = 2048;

const LIMITS: Limits = Limits {
    max_len: MAX_DESCRIPTOR_FILE,
    max_depth: 1,
    // A cgroup's name may be longer than an identity token (which is checked on its own).
    max_string_len: 1024,
    max_elements: 16,
};

const FIELDS: &[&str] = &[
    "session",
    "gen",
    "pid",
    "pgid",
    "sid",
    "identity",
    "started_unix_ms",
    "io",
    "dir_id",
];

/// Members a file may lack: `cgroup` (session containment, or an earlier daemon's file).
const OPTIONAL_FIELDS: &[&str] = &["cgroup"];

/// One live generation's process, as recorded when it was spawned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Its session.
    pub session: Arc<str>,
    /// Its generation number.
    pub gen: u64,
    /// The leader's pid.
    pub pid: u32,
    /// Its process group (the leader's pid: every child is a group leader).
    pub pgid: u32,
    /// Its session id (likewise the leader's pid).
    pub sid: u32,
    /// The leader's identity token, `None` if it could not be read at spawn (the process
    /// can then never be verified, so never signalled, after a restart).
    pub identity: Option<String>,
    /// When it was spawned, Unix milliseconds.
    pub started_unix_ms: u64,
    /// How its standard streams were connected.
    pub io: IoKind,
    /// The id of the state directory it belongs to (and in its `GENWARD_GEN`).
    pub dir_id: DirId,
    /// The cgroup it was started in, as `/proc/<pid>/cgroup` names it (below the cgroup v2
    /// mount), under cgroup containment: how a successor finds its tree again once its
    /// leader is gone. `None` under session containment, and in earlier daemons' files.
    pub cgroup: Option<String>,
}

/// How a generation's standard streams were connected: what a restarted daemon can hope
/// to get back from a keeper (pipes or a PTY master).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// Pipes.
    Pipes,
    /// A pseudo-terminal.
    Pty,
}

impl IoKind {
    fn as_str(self) -> &'static str {
        match self {
            IoKind::Pipes => "pipes",
            IoKind::Pty => "pty",
        }
    }
}

impl From<&crate::core::IoMode> for IoKind {
    fn from(io: &crate::core::IoMode) -> IoKind {
        match io {
            crate::core::IoMode::Pipes { .. } => IoKind::Pipes,
            crate::core::IoMode::Pty { .. } => IoKind::Pty,
        }
    }
}

/// The descriptor file for `d`.
pub fn encode_descriptor(d: &Descriptor) -> Vec<u8> {
    format::encode(Kind::Descriptor, |w| {
        w.str("session", &d.session)
            .u64("gen", d.gen)
            .u64("pid", d.pid.into())
            .u64("pgid", d.pgid.into())
            .u64("sid", d.sid.into());
        match &d.identity {
            Some(token) => w.str("identity", token),
            None => w.null("identity"),
        };
        w.u64("started_unix_ms", d.started_unix_ms)
            .str("io", d.io.as_str())
            .str("dir_id", d.dir_id.as_str());
        if let Some(cgroup) = &d.cgroup {
            w.str("cgroup", cgroup);
        }
    })
}

/// Decodes a descriptor file: every member required (`identity` may be `null`), none
/// unknown; pids in `1..=i32::MAX`, a well-formed identity token, a valid session name.
pub fn decode_descriptor(bytes: &[u8]) -> Result<Descriptor, FormatError> {
    let o = format::decode(bytes, Kind::Descriptor, &LIMITS)?;
    let known: Vec<&str> = FIELDS.iter().chain(OPTIONAL_FIELDS).copied().collect();
    o.check_fields(&known)?;
    for key in FIELDS {
        if o.get(key).is_none() {
            return Err(FieldError::invalid(*key, "missing").into());
        }
    }
    let session = o.req_str("session")?;
    check_session_name(session).map_err(|why| FieldError::invalid("session", why))?;
    let identity = match o.opt_str("identity")? {
        None => None,
        Some(token) if identity::parse(token).is_some() => Some(token.to_owned()),
        Some(_) => return Err(FieldError::invalid("identity", "not an identity token").into()),
    };
    let io = match o.req_str("io")? {
        "pipes" => IoKind::Pipes,
        "pty" => IoKind::Pty,
        _ => return Err(FieldError::invalid("io", "not one of pipes, pty").into()),
    };
    let dir_id = DirId::parse(o.req_str("dir_id")?)
        .ok_or_else(|| FieldError::invalid("dir_id", "not 32 lowercase hex digits"))?;
    Ok(Descriptor {
        session: Arc::from(session),
        gen: o.req_u64("gen")?,
        pid: pid(&o, "pid")?,
        pgid: pid(&o, "pgid")?,
        sid: pid(&o, "sid")?,
        identity,
        started_unix_ms: o.req_u64("started_unix_ms")?,
        io,
        dir_id,
        cgroup: match o.opt_str("cgroup")? {
            None => None,
            Some(c) if c.starts_with('/') && !c.split('/').any(|p| p == "..") => Some(c.to_owned()),
            Some(_) => {
                return Err(FieldError::invalid("cgroup", "not a cgroup's absolute name").into())
            }
        },
    })
}

fn pid(o: &Object, key: &str) -> Result<u32, FieldError> {
    let n = o.req_u64(key)?;
    match u32::try_from(n) {
        Ok(p) if p > 0 && p <= i32::MAX as u32 => Ok(p),
        _ => Err(FieldError::invalid(key, format!("{n} is not a pid"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor() -> Descriptor {
        Descriptor {
            session: Arc::from("web"),
            gen: 12,
            pid: 4242,
            pgid: 4242,
            sid: 4242,
            identity: Some("linux1:0f1e-2d:77:12345".into()),
            started_unix_ms: 1_700_000_000_000,
            io: IoKind::Pty,
            dir_id: DirId::parse("0123456789abcdef0123456789abcdef").unwrap(),
            cgroup: Some("/genward-0123456789ab-77/gen-12".into()),
        }
    }

    #[test]
    fn a_descriptor_round_trips() {
        let d = descriptor();
        assert_eq!(decode_descriptor(&encode_descriptor(&d)).unwrap(), d);
        let unknown = Descriptor {
            identity: None,
            io: IoKind::Pipes,
            cgroup: None,
            ..d
        };
        assert_eq!(
            decode_descriptor(&encode_descriptor(&unknown)).unwrap(),
            unknown
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let good = String::from_utf8(encode_descriptor(&descriptor())).unwrap();
        for (from, to) in [
            (r#""pid":4242"#, r#""pid":0"#),
            (r#""pid":4242"#, r#""pid":2147483648"#),
            (r#""sid":4242"#, r#""sid":-1"#),
            (r#""identity":"linux1"#, r#""identity":"linux9"#),
            (r#""io":"pty""#, r#""io":"tty""#),
            (r#""session":"web""#, r#""session":"a/b""#),
            (r#""dir_id":"0"#, r#""dir_id":"X"#),
            (r#""gen":12,"#, ""),
            (r#""gen":12"#, r#""gen":12,"gen":13"#),
            (r#""cgroup":"/"#, r#""cgroup":""#),
            (r#"gen-12""#, r#"../gen-12""#),
        ] {
            let bad = good.replace(from, to);
            assert_ne!(bad, good);
            assert!(decode_descriptor(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
