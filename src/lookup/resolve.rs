//! The lookups themselves: names to ids through the C library (so through NSS, which may
//! ask a remote directory and wait for it) and the environment file read from its
//! filesystem (which may be a dead mount). Run by the helper process; the daemon runs
//! [`identity`] itself only for a [`Query`] that names nothing (see [`Query::of`]): then it
//! parses numbers and asks the kernel (`getegid`, `getgroups`), and looks nothing up.

use std::path::Path;

use super::answer::{Account, Answer, Failure, Found};
use super::Query;
use crate::sys::spawn::Credentials;
use crate::sys::users;

fn unreadable(field: &str, e: std::io::Error) -> String {
    format!("{field}: the user database could not be read: {e}")
}

/// A user by name or uid; `None` for a uid without an entry (containers often have none),
/// which may run only in a group named by `group`.
fn user(u: &str) -> Result<(u32, Option<users::User>), String> {
    if let Ok(uid) = u.parse::<u32>() {
        let entry = users::user_by_uid(uid).map_err(|e| unreadable("user", e))?;
        return Ok((uid, entry.filter(|e| !e.name.is_empty())));
    }
    match users::user_by_name(u).map_err(|e| unreadable("user", e))? {
        Some(entry) => Ok((entry.uid, Some(entry))),
        None => Err(format!("user: no user named `{u}`")),
    }
}

fn group(g: &str, field: &str) -> Result<u32, String> {
    if let Ok(gid) = g.parse::<u32>() {
        return Ok(gid);
    }
    users::group_by_name(g)
        .map_err(|e| unreadable(field, e))?
        .ok_or_else(|| format!("{field}: no group named `{g}`"))
}

/// The identity `q` asks for, as numbers (`None` when it keeps ours), and the user's entry
/// when `user` has one. Absent parts default as a login would: the user's primary group and
/// its memberships in the group database, or, without a user, our own.
pub fn identity(q: &Query) -> Result<(Option<Credentials>, Option<Account>), String> {
    if q.user.is_none() && q.group.is_none() && q.groups.is_none() {
        return Ok((None, None));
    }
    let user = q.user.as_deref().map(user).transpose()?;
    let entry = user.as_ref().and_then(|(_, e)| e.as_ref());
    let gid = match (&q.group, &user) {
        (Some(g), _) => group(g, "group")?,
        (None, Some((_, Some(e)))) => e.gid,
        (None, Some((uid, None))) => {
            return Err(format!(
            "user: uid {uid} has no entry in the user database, so no primary group: give `group`"
        ))
        }
        (None, None) => rustix::process::getegid().as_raw(),
    };
    let groups = match (&q.groups, entry) {
        (Some(names), _) => names
            .iter()
            .enumerate()
            .map(|(i, g)| group(g, &format!("groups[{i}]")))
            .collect::<Result<Vec<_>, _>>()?,
        (None, Some(e)) => users::groups_of(&e.name, gid).map_err(|e| unreadable("groups", e))?,
        // A user without an entry (a bare uid) has no memberships to look up.
        (None, None) if user.is_some() => Vec::new(),
        (None, None) => users::own_groups().map_err(|e| unreadable("groups", e))?,
    };
    let uid = user
        .as_ref()
        .map_or_else(|| rustix::process::geteuid().as_raw(), |(uid, _)| *uid);
    let account = entry.map(|e| Account {
        name: e.name.clone(),
        home: e.home.clone(),
        shell: e.shell.clone(),
    });
    Ok((Some(Credentials { uid, gid, groups }), account))
}

/// The variables of the environment file at `path`; an error names the file (and the
/// line, for a line that is not `KEY=VALUE`), and carries the errno of an open or read
/// that failed.
pub fn env_file(path: &Path) -> Result<Vec<(String, String)>, Failure> {
    crate::env_file::read_env_file(path).map_err(|e| {
        // Parse errors already name the file and line; open and read errors do not.
        let why = &e.message;
        let message = if why.starts_with(&path.display().to_string()) {
            format!("env_file {why}")
        } else {
            format!("env_file {}: {why}", path.display())
        };
        Failure {
            message,
            errno: e.errno,
        }
    })
}

/// Everything `q` asks, looked up.
pub fn answer(q: &Query) -> Answer {
    let (credentials, account) = identity(q)?;
    let env = match &q.env_file {
        Some(path) => env_file(path)?,
        None => Vec::new(),
    };
    Ok(Found {
        credentials,
        account,
        env,
    })
}
