//! Whom a session's process runs as and under which per-process limits: pure data, as the
//! spec was written. Names are kept as names (not resolved uids) so that a spec reads back
//! as it was given and follows a user database that changes between generations; they are
//! resolved before each start, off the daemon's loop (see `crate::lookup`), and the child
//! applies plain numbers between fork and exec.

use super::error::Error;

/// The credentials, umask, environment file and resource limits of a spec. All default to
/// "as the daemon": nothing changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunAs {
    /// A user name, or a uid in decimal.
    pub user: Option<String>,
    /// A group name, or a gid in decimal; `None` is the user's primary group.
    pub group: Option<String>,
    /// Supplementary groups (names or gids); `None` is the user's groups from the group
    /// database when `user` is given, else the daemon's own.
    pub groups: Option<Vec<String>>,
    /// The file mode creation mask, `0..=0o777`.
    pub umask: Option<u32>,
    /// An absolute path of `KEY=VALUE` lines read at each start (by the lookup helper); the
    /// spec's own `env` wins over it.
    pub env_file: Option<Vec<u8>>,
    /// Per-process limits, one per resource, in [`Rlimit::ALL`] order.
    pub rlimits: Vec<(Rlimit, RlimitValue)>,
}

/// Most supplementary groups a spec may name (Linux allows 65536; nobody needs that many
/// written out, and the list is copied into every start).
pub const MAX_GROUPS: usize = 256;

/// Longest user or group name (or number) accepted.
pub const MAX_ID_NAME: usize = 256;

/// The resources a spec may limit, with `setrlimit`'s meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rlimit {
    /// Address space, bytes.
    As,
    /// Core file size, bytes.
    Core,
    /// CPU time, seconds.
    Cpu,
    /// Data segment, bytes.
    Data,
    /// File size, bytes.
    Fsize,
    /// File locks.
    Locks,
    /// Locked memory, bytes.
    Memlock,
    /// POSIX message queue bytes.
    Msgqueue,
    /// Ceiling of the nice value (20 - nice).
    Nice,
    /// Open descriptors.
    Nofile,
    /// Processes of the user.
    Nproc,
    /// Resident set, bytes (ignored by current Linux).
    Rss,
    /// Real-time priority ceiling.
    Rtprio,
    /// Real-time CPU time without blocking, microseconds.
    Rttime,
    /// Queued signals.
    Sigpending,
    /// Main thread's stack, bytes.
    Stack,
}

impl Rlimit {
    /// Every resource, in the order specs keep them.
    pub const ALL: [Rlimit; 16] = [
        Rlimit::As,
        Rlimit::Core,
        Rlimit::Cpu,
        Rlimit::Data,
        Rlimit::Fsize,
        Rlimit::Locks,
        Rlimit::Memlock,
        Rlimit::Msgqueue,
        Rlimit::Nice,
        Rlimit::Nofile,
        Rlimit::Nproc,
        Rlimit::Rss,
        Rlimit::Rtprio,
        Rlimit::Rttime,
        Rlimit::Sigpending,
        Rlimit::Stack,
    ];

    /// The wire spelling, `setrlimit`'s name in lower case without `RLIMIT_`.
    pub const fn name(self) -> &'static str {
        match self {
            Rlimit::As => "as",
            Rlimit::Core => "core",
            Rlimit::Cpu => "cpu",
            Rlimit::Data => "data",
            Rlimit::Fsize => "fsize",
            Rlimit::Locks => "locks",
            Rlimit::Memlock => "memlock",
            Rlimit::Msgqueue => "msgqueue",
            Rlimit::Nice => "nice",
            Rlimit::Nofile => "nofile",
            Rlimit::Nproc => "nproc",
            Rlimit::Rss => "rss",
            Rlimit::Rtprio => "rtprio",
            Rlimit::Rttime => "rttime",
            Rlimit::Sigpending => "sigpending",
            Rlimit::Stack => "stack",
        }
    }

    /// The resource of a wire name.
    pub fn from_name(name: &str) -> Option<Rlimit> {
        Rlimit::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// One bound of a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RlimitBound {
    /// At most this much.
    Finite(u64),
    /// No limit (`RLIM_INFINITY`).
    Infinity,
}

impl RlimitBound {
    fn at_most(self, other: RlimitBound) -> bool {
        match (self, other) {
            (_, RlimitBound::Infinity) => true,
            (RlimitBound::Infinity, RlimitBound::Finite(_)) => false,
            (RlimitBound::Finite(a), RlimitBound::Finite(b)) => a <= b,
        }
    }
}

/// A soft and a hard limit. A single value on the wire sets both, as `LimitNOFILE=` and
/// `docker --ulimit` do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RlimitValue {
    /// What the process gets.
    pub soft: RlimitBound,
    /// How far the (unprivileged) process may raise `soft`.
    pub hard: RlimitBound,
}

impl RunAs {
    /// Whether nothing is changed.
    pub fn is_empty(&self) -> bool {
        *self == RunAs::default()
    }

    /// Bytes of text it holds, for the spec's size limit.
    pub(super) fn byte_size(&self) -> usize {
        let names = self.user.as_ref().map_or(0, String::len)
            + self.group.as_ref().map_or(0, String::len)
            + self
                .groups
                .as_ref()
                .map_or(0, |g| g.iter().map(String::len).sum());
        names + self.env_file.as_ref().map_or(0, Vec::len) + self.rlimits.len() * 16
    }

    /// Checks every member, naming it (`user`, `groups[2]`, `rlimits.nofile`): the
    /// daemon's rule, which the command line applies too before it sends a spec, to name
    /// the option at fault.
    pub fn validate(&self) -> Result<(), Error> {
        for (field, name) in [("user", &self.user), ("group", &self.group)] {
            if let Some(name) = name {
                check_id_name(field, name)?;
            }
        }
        if let Some(groups) = &self.groups {
            if groups.len() > MAX_GROUPS {
                return Err(Error::bad(format!(
                    "groups: {} entries, limit {MAX_GROUPS}",
                    groups.len()
                )));
            }
            for (i, g) in groups.iter().enumerate() {
                check_id_name(&format!("groups[{i}]"), g)?;
            }
        }
        if self.umask.is_some_and(|m| m > 0o777) {
            return Err(Error::bad("umask: above 0777"));
        }
        if let Some(path) = &self.env_file {
            if path.first() != Some(&b'/') || path.contains(&0) {
                return Err(Error::bad(
                    "env_file: not an absolute path, or contains a NUL byte",
                ));
            }
        }
        let mut last = None;
        for (r, v) in &self.rlimits {
            if last.is_some_and(|l| l >= *r) {
                return Err(Error::bad(format!(
                    "rlimits.{}: given twice or out of order",
                    r.name()
                )));
            }
            last = Some(*r);
            if !v.soft.at_most(v.hard) {
                return Err(Error::bad(format!(
                    "rlimits.{}: soft limit above the hard limit",
                    r.name()
                )));
            }
        }
        Ok(())
    }
}

/// A user or group as a spec may name it: a name as `useradd` accepts (no `:`, no
/// whitespace, no leading `-`), or a decimal id.
pub fn check_id_name(field: &str, name: &str) -> Result<(), Error> {
    let bad = |why: &str| Err(Error::bad(format!("{field}: `{name}` {why}")));
    if name.is_empty() || name.len() > MAX_ID_NAME {
        return bad(&format!("must be 1 to {MAX_ID_NAME} bytes"));
    }
    if name.starts_with('-') {
        return bad("starts with `-`");
    }
    if name
        .chars()
        .any(|c| c == ':' || c == ',' || c.is_whitespace() || c.is_control())
    {
        return bad("contains `:`, `,`, whitespace or a control character");
    }
    if name.bytes().all(|b| b.is_ascii_digit())
        && name.parse::<u32>().map_or(true, |n| n == u32::MAX)
    {
        return bad("is not a valid id");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        for ok in ["nobody", "www-data", "0", "65534", "svc_1$"] {
            check_id_name("user", ok).unwrap();
        }
        for bad in ["", "-x", "a:b", "a b", "4294967295", "99999999999"] {
            assert!(check_id_name("user", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation() {
        let ok = RunAs {
            user: Some("nobody".into()),
            umask: Some(0o027),
            env_file: Some(b"/etc/app.env".to_vec()),
            rlimits: vec![
                (
                    Rlimit::Core,
                    RlimitValue {
                        soft: RlimitBound::Finite(0),
                        hard: RlimitBound::Infinity,
                    },
                ),
                (
                    Rlimit::Nofile,
                    RlimitValue {
                        soft: RlimitBound::Finite(1024),
                        hard: RlimitBound::Finite(4096),
                    },
                ),
            ],
            ..RunAs::default()
        };
        ok.validate().unwrap();
        let mut r = ok.clone();
        r.umask = Some(0o1000);
        assert!(r.validate().unwrap_err().message.contains("umask"));
        let mut r = ok.clone();
        r.env_file = Some(b"relative.env".to_vec());
        assert!(r.validate().unwrap_err().message.contains("env_file"));
        let mut r = ok.clone();
        r.rlimits[1].1.soft = RlimitBound::Infinity;
        assert!(r.validate().unwrap_err().message.contains("rlimits.nofile"));
        let mut r = ok;
        r.rlimits.swap(0, 1);
        assert!(r.validate().unwrap_err().message.contains("order"));
    }
}
