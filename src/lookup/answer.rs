//! What a lookup helper answers, and how it travels on the helper's stdout: NUL-terminated
//! fields, a record's tag first, the whole closed by `end` so that a helper killed half-way
//! can never pass for one that found less.
//!
//! ```text
//! genward-lookup 1 \0
//! id \0 UID \0 GID \0 N \0 GROUP_1 \0 ... GROUP_N \0      (when the identity changes)
//! user \0 NAME \0 HOME \0 SHELL \0                       (when `user` has an entry)
//! var \0 KEY \0 VALUE \0                                 (one per environment file line)
//! errno \0 N \0                                          (with `error`, when an OS error caused it)
//! error \0 MESSAGE \0                                    (instead of the above)
//! end \0
//! ```
//!
//! No field can hold a NUL (C strings from the databases; the environment file refuses
//! them), so none needs escaping. Only the daemon reads this, only from its own helper; the
//! decoder is strict and bounded all the same.

use crate::sys::spawn::Credentials;

/// The largest answer read: an environment file of at most
/// [`ENV_FILE_MAX`](crate::env_file::ENV_FILE_MAX) bytes, the most groups Linux allows in
/// decimal, and room for the user's entry.
pub const MAX_ANSWER: usize = 4 * 1024 * 1024;

const MAGIC: &str = "genward-lookup 1";

/// Most supplementary groups an answer may carry (Linux's `NGROUPS_MAX`).
const MAX_GROUPS: usize = 65536;

/// The user entry's fields a child's environment gets (`USER`, `LOGNAME`, `HOME`,
/// `SHELL`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Account {
    /// The login name.
    pub name: String,
    /// The home directory (may be empty).
    pub home: String,
    /// The login shell (may be empty).
    pub shell: String,
}

/// What was found for a start: the identity as numbers, the user's entry, the environment
/// file's variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Whom the child becomes; `None` keeps the daemon's identity.
    pub credentials: Option<Credentials>,
    /// The entry of the spec's `user`, when it names one that has an entry.
    pub account: Option<Account>,
    /// The environment file's variables, in file order.
    pub env: Vec<(String, String)>,
}

/// Why a lookup found nothing to start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// For people, naming the field or the file.
    pub message: String,
    /// The OS error behind it, when there is one (the environment file's open: `ENOENT`
    /// for a missing file), so that the start's failure carries the real errno; `None`
    /// for an unknown name or a malformed file.
    pub errno: Option<i32>,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            errno: None,
        }
    }
}

/// A helper's answer: what it found, or why it could not.
pub type Answer = Result<Found, Failure>;

fn field(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(text.as_bytes());
    out.push(0);
}

/// The bytes a helper writes for `answer`.
pub fn encode(answer: &Answer) -> Vec<u8> {
    let mut out = Vec::new();
    field(&mut out, MAGIC);
    match answer {
        Err(failure) => {
            if let Some(errno) = failure.errno {
                field(&mut out, "errno");
                field(&mut out, &errno.to_string());
            }
            field(&mut out, "error");
            field(&mut out, &failure.message.replace('\0', " "));
        }
        Ok(found) => {
            if let Some(c) = &found.credentials {
                field(&mut out, "id");
                field(&mut out, &c.uid.to_string());
                field(&mut out, &c.gid.to_string());
                field(&mut out, &c.groups.len().to_string());
                for g in &c.groups {
                    field(&mut out, &g.to_string());
                }
            }
            if let Some(a) = &found.account {
                field(&mut out, "user");
                for text in [&a.name, &a.home, &a.shell] {
                    field(&mut out, &text.replace('\0', ""));
                }
            }
            for (k, v) in &found.env {
                field(&mut out, "var");
                field(&mut out, k);
                field(&mut out, v);
            }
        }
    }
    field(&mut out, "end");
    out
}

/// Reads fields off an answer.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn next(&mut self) -> Result<&'a str, String> {
        let at = self
            .rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("the answer ends without `end`")?;
        let (text, rest) = (&self.rest[..at], &self.rest[at + 1..]);
        self.rest = rest;
        std::str::from_utf8(text).map_err(|_| "a field is not UTF-8".to_string())
    }

    fn number<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, String> {
        let text = self.next()?;
        text.parse()
            .map_err(|_| format!("{what}: `{text}` is not a number"))
    }
}

/// The answer in `bytes`, all of what the helper wrote; `Err` when they are not one (cut
/// short, too long, or garbled).
pub fn decode(bytes: &[u8]) -> Result<Answer, String> {
    if bytes.len() > MAX_ANSWER {
        return Err(format!("longer than {MAX_ANSWER} bytes"));
    }
    let mut f = Fields { rest: bytes };
    if f.next()? != MAGIC {
        return Err("not a lookup answer".into());
    }
    let mut found = Found::default();
    let mut error = None;
    let mut errno = None;
    loop {
        match f.next()? {
            "end" if f.rest.is_empty() => break,
            "end" => return Err("bytes after `end`".into()),
            "error" if error.is_none() => error = Some(f.next()?.to_string()),
            "errno" if errno.is_none() => errno = Some(f.number("errno")?),
            "id" if found.credentials.is_none() => {
                let uid = f.number("uid")?;
                let gid = f.number("gid")?;
                let n: usize = f.number("group count")?;
                if n > MAX_GROUPS {
                    return Err(format!("{n} groups"));
                }
                let groups = (0..n)
                    .map(|_| f.number("group"))
                    .collect::<Result<Vec<u32>, _>>()?;
                found.credentials = Some(Credentials { uid, gid, groups });
            }
            "user" if found.account.is_none() => {
                let (name, home, shell) = (f.next()?, f.next()?, f.next()?);
                found.account = Some(Account {
                    name: name.into(),
                    home: home.into(),
                    shell: shell.into(),
                });
            }
            "var" => {
                let (k, v) = (f.next()?, f.next()?);
                found.env.push((k.into(), v.into()));
            }
            other => return Err(format!("unexpected record `{other}`")),
        }
    }
    match error {
        Some(message) if found == Found::default() => Ok(Err(Failure { message, errno })),
        Some(_) => Err("an error beside findings".into()),
        None if errno.is_some() => Err("an errno without an error".into()),
        None => Ok(Ok(found)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip() {
        let found = Found {
            credentials: Some(Credentials {
                uid: 65534,
                gid: 65534,
                groups: vec![65534, 4242],
            }),
            account: Some(Account {
                name: "nobody".into(),
                home: "/nonexistent".into(),
                shell: String::new(),
            }),
            env: vec![("A".into(), "x=y".into()), ("B".into(), String::new())],
        };
        for answer in [
            Ok(found),
            Ok(Found::default()),
            Err("user: no user named `x`".to_string().into()),
            Err(Failure {
                message: "env_file /x.env: cannot open: No such file or directory".into(),
                errno: Some(libc::ENOENT),
            }),
        ] {
            assert_eq!(decode(&encode(&answer)), Ok(answer.clone()));
        }
    }

    #[test]
    fn a_cut_or_garbled_answer_is_refused() {
        let whole = encode(&Ok(Found {
            env: vec![("A".into(), "1".into())],
            ..Found::default()
        }));
        for cut in 0..whole.len() {
            assert!(decode(&whole[..cut]).is_err(), "cut at {cut}");
        }
        let mut more = whole.clone();
        more.extend_from_slice(b"var\0");
        assert!(decode(&more).is_err());
        let bad = b"genward-lookup 1\0id\0x\0".to_vec();
        assert!(decode(&bad).is_err());
        let many = b"genward-lookup 1\0id\x000\x000\x0099999999\0end\0".to_vec();
        assert!(decode(&many).unwrap_err().contains("groups"));
        assert!(decode(b"something else\0end\0").is_err());
    }
}
