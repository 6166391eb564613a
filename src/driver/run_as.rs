//! A spec's `user`, `group`, `groups`, `umask`, `env_file` and `rlimits` made into what
//! the child applies: names resolved to ids and the environment file read here, in the
//! daemon, before the start (the child may only make raw system calls).
//!
//! Resolved twice: when a `spawn` is requested, so an unknown name or an identity the
//! daemon may not take is refused to the client at once (`bad_request`,
//! `permission_denied`); and before every start, restarts included, since the databases
//! may have changed meanwhile (then a `spawn_failed`).
//!
//! The lookups go through the C library, so through NSS: with local files they take
//! microseconds; a remote source (LDAP, say) that hangs would hold the loop while it does,
//! which is why nothing is looked up for a spec without these options.

use std::ffi::OsString;
use std::path::Path;

use crate::core::{Rlimit, RlimitBound, RunAs};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::sys::spawn::{Credentials, ResourceLimit, SpawnRequest, RLIM_INFINITY};
use crate::sys::users;

/// The identity a spec asks for, as numbers (`None` when it keeps the daemon's), with the
/// user's entry when `user` names one.
fn resolve(r: &RunAs) -> Result<(Option<Credentials>, Option<users::User>), ProtoError> {
    if r.user.is_none() && r.group.is_none() && r.groups.is_none() {
        return Ok((None, None));
    }
    let user = match &r.user {
        None => None,
        Some(u) => Some(user(u)?),
    };
    let gid = match (&r.group, &user) {
        (Some(g), _) => group(g, "group")?,
        (None, Some(u)) if u.name.is_empty() => {
            return Err(ProtoError::new(
                ErrorCode::BadRequest,
                format!(
                "user: uid {} has no entry in the user database, so no primary group: give `group`",
                u.uid
            ),
            ))
        }
        (None, Some(u)) => u.gid,
        // SAFETY: getegid cannot fail.
        (None, None) => unsafe { libc::getegid() },
    };
    let groups = match (&r.groups, &user) {
        (Some(names), _) => names
            .iter()
            .enumerate()
            .map(|(i, g)| group(g, &format!("groups[{i}]")))
            .collect::<Result<Vec<_>, _>>()?,
        // A user without an entry (a bare uid) has no memberships to look up.
        (None, Some(u)) if u.name.is_empty() => Vec::new(),
        (None, Some(u)) => {
            users::groups_of(&u.name, gid).map_err(|e| lookup_failed("groups", e))?
        }
        (None, None) => users::own_groups().map_err(|e| lookup_failed("groups", e))?,
    };
    // SAFETY: geteuid cannot fail.
    let uid = user
        .as_ref()
        .map_or_else(|| unsafe { libc::geteuid() }, |u| u.uid);
    let wanted = Credentials { uid, gid, groups };
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Ok((Some(wanted), user));
    }
    // Unprivileged, the daemon can only run children as itself: what it is, it need not
    // change; anything else the kernel would refuse in the child, so refuse it here.
    // SAFETY: getegid cannot fail.
    let (my_uid, my_gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mine = users::own_groups().map_err(|e| lookup_failed("groups", e))?;
    let same_groups = r.groups.is_none() || {
        let (mut a, mut b) = (wanted.groups.clone(), mine);
        a.sort_unstable();
        b.sort_unstable();
        a.dedup();
        b.dedup();
        a == b
    };
    if wanted.uid != my_uid || wanted.gid != my_gid || !same_groups {
        return Err(ProtoError::new(
            ErrorCode::PermissionDenied,
            format!(
                "the daemon runs as uid {my_uid}, not root: it cannot start a process as uid {} gid {}{}",
                wanted.uid,
                wanted.gid,
                if same_groups { "" } else { " with other groups" }
            ),
        ));
    }
    Ok((None, user))
}

fn lookup_failed(field: &str, e: std::io::Error) -> ProtoError {
    ProtoError::new(
        ErrorCode::BadRequest,
        format!("{field}: the user database could not be read: {e}"),
    )
}

/// A user by name or uid. A uid without an entry is allowed (containers often have none)
/// when `group` says which group it runs in; its name is then empty.
fn user(u: &str) -> Result<users::User, ProtoError> {
    if let Ok(uid) = u.parse::<u32>() {
        return match users::user_by_uid(uid).map_err(|e| lookup_failed("user", e))? {
            Some(entry) => Ok(entry),
            // Its gid is never used: `group` is required for a bare uid (see `resolve`).
            None => Ok(users::User {
                name: String::new(),
                home: String::new(),
                shell: String::new(),
                uid,
                gid: u32::MAX,
            }),
        };
    }
    users::user_by_name(u)
        .map_err(|e| lookup_failed("user", e))?
        .ok_or_else(|| ProtoError::new(ErrorCode::BadRequest, format!("user: no user named `{u}`")))
}

fn group(g: &str, field: &str) -> Result<u32, ProtoError> {
    if let Ok(gid) = g.parse::<u32>() {
        return Ok(gid);
    }
    users::group_by_name(g)
        .map_err(|e| lookup_failed(field, e))?
        .ok_or_else(|| {
            ProtoError::new(
                ErrorCode::BadRequest,
                format!("{field}: no group named `{g}`"),
            )
        })
}

/// Checks a spec's identity as a request arrives: names exist, the daemon may take it.
pub fn check(r: &RunAs) -> Result<(), ProtoError> {
    resolve(r).map(drop)
}

/// Whether `name` is among the variables to remove.
fn is_unset(unset: &[OsString], name: &str) -> bool {
    unset.iter().any(|u| u.as_os_str() == name)
}

/// `setrlimit`'s resource number of `r`; `None` for one this system does not have.
fn resource(r: Rlimit) -> Option<i32> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let linux_only = match r {
        Rlimit::Locks => Some(libc::RLIMIT_LOCKS),
        Rlimit::Msgqueue => Some(libc::RLIMIT_MSGQUEUE),
        Rlimit::Nice => Some(libc::RLIMIT_NICE),
        Rlimit::Rtprio => Some(libc::RLIMIT_RTPRIO),
        Rlimit::Rttime => Some(libc::RLIMIT_RTTIME),
        Rlimit::Sigpending => Some(libc::RLIMIT_SIGPENDING),
        _ => None,
    };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let linux_only = None;
    let n = match r {
        Rlimit::As => libc::RLIMIT_AS,
        Rlimit::Core => libc::RLIMIT_CORE,
        Rlimit::Cpu => libc::RLIMIT_CPU,
        Rlimit::Data => libc::RLIMIT_DATA,
        Rlimit::Fsize => libc::RLIMIT_FSIZE,
        Rlimit::Memlock => libc::RLIMIT_MEMLOCK,
        Rlimit::Nofile => libc::RLIMIT_NOFILE,
        Rlimit::Nproc => libc::RLIMIT_NPROC,
        Rlimit::Rss => libc::RLIMIT_RSS,
        Rlimit::Stack => libc::RLIMIT_STACK,
        _ => linux_only?,
    };
    #[allow(clippy::unnecessary_cast)]
    Some(n as i32)
}

fn bound(b: RlimitBound) -> u64 {
    match b {
        RlimitBound::Finite(n) => n,
        RlimitBound::Infinity => RLIM_INFINITY,
    }
}

/// Completes `req` with what `r` asks: identity, umask, limits, and the environment file's
/// variables under the spec's own (`req.env.set` wins: the file's are put first, and a
/// later `set` of the same name replaces an earlier one in the child).
///
/// A `user` with an entry also gives the child `USER`, `LOGNAME`, `HOME` and `SHELL` from
/// it, as `login` and systemd's `User=` do: the daemon's own (root's home, say) would be
/// wrong for it and often unwritable. The environment file and the spec's `env` win, and
/// `unset_env` removes them.
pub fn apply(r: &RunAs, req: &mut SpawnRequest) -> Result<(), String> {
    let (credentials, user) = resolve(r).map_err(|e| e.message)?;
    req.credentials = credentials;
    let mut first: Vec<(OsString, OsString)> = Vec::new();
    if let Some(u) = user.filter(|u| !u.name.is_empty()) {
        for (k, v) in [
            ("USER", &u.name),
            ("LOGNAME", &u.name),
            ("HOME", &u.home),
            ("SHELL", &u.shell),
        ] {
            // A spec that removes one of them means it.
            let unset = is_unset(&req.env.unset, k);
            if !v.is_empty() && !unset {
                first.push((k.into(), v.into()));
            }
        }
    }
    req.umask = r.umask;
    req.rlimits = r
        .rlimits
        .iter()
        .map(|(res, v)| {
            Ok(ResourceLimit {
                resource: resource(*res).ok_or_else(|| {
                    format!("rlimits.{}: this system has no such limit", res.name())
                })?,
                soft: bound(v.soft),
                hard: bound(v.hard),
            })
        })
        .collect::<Result<_, String>>()?;
    if let Some(path) = &r.env_file {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        let vars = crate::env_file::read_env_file(path).map_err(|why| {
            // Parse errors already name the file and line; open and read errors do not.
            if why.starts_with(&path.display().to_string()) {
                format!("env_file {why}")
            } else {
                format!("env_file {}: {why}", path.display())
            }
        })?;
        first.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    }
    // Later entries win: the user's variables, then the file's, then the spec's, one of
    // each name, where its first setting was.
    let mut set: Vec<(OsString, OsString)> = Vec::with_capacity(first.len() + req.env.set.len());
    let mut at: std::collections::HashMap<OsString, usize> = std::collections::HashMap::new();
    for (k, v) in first.into_iter().chain(req.env.set.drain(..)) {
        match at.get(&k) {
            Some(&i) => set[i].1 = v,
            None => {
                at.insert(k.clone(), set.len());
                set.push((k, v));
            }
        }
    }
    req.env.set = set;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn every_resource_has_its_number_here() {
        for r in Rlimit::ALL {
            assert!(resource(r).is_some(), "{r:?}");
        }
        assert_eq!(resource(Rlimit::Nofile), Some(libc::RLIMIT_NOFILE as i32));
    }

    #[test]
    fn the_spec_env_wins_over_the_file_and_the_user() {
        let dir = crate::testkit::scratch::ScratchDir::new("run-as-env");
        let file = dir.join("a.env");
        std::fs::write(&file, "A=file\nB=file\nA=file2\n").unwrap();
        let r = RunAs {
            env_file: Some(file.to_str().unwrap().as_bytes().to_vec()),
            ..RunAs::default()
        };
        let mut req = SpawnRequest::default();
        req.env.set = vec![("B".into(), "spec".into())];
        apply(&r, &mut req).unwrap();
        let set: Vec<(String, String)> = req
            .env
            .set
            .iter()
            .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
            .collect();
        assert_eq!(
            set,
            [("A".into(), "file2".into()), ("B".into(), "spec".into())]
        );
    }
}
