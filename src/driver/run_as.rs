//! A spec's `user`, `group`, `groups`, `umask`, `env_file` and `rlimits` made into what
//! the child applies, from what was looked up for it (see [`crate::lookup`]: names and the
//! environment file are resolved and read by a helper process, never in the loop).
//!
//! When a `spawn` is requested only what needs no lookup is checked ([`check_now`]): an
//! unprivileged daemon asked for another numeric uid or gid is refused at once
//! (`permission_denied`). Everything else surfaces at the start, restarts included, as a
//! `spawn_failed` event naming the field or the file: an unknown name, an unreadable
//! database or environment file, a name that resolves to an identity the daemon may not
//! take.

use std::ffi::OsString;

use crate::core::{Rlimit, RlimitBound, RunAs, SpawnError, SpawnErrorKind};
use crate::lookup::answer::Found;
use crate::lookup::{resolve, Query};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::sys::spawn::{Credentials, ResourceLimit, SpawnRequest, RLIM_INFINITY};
use crate::sys::users;

/// Our own identity: effective uid and gid.
fn own_ids() -> (u32, u32) {
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
}

fn denied(my_uid: u32, what: String) -> String {
    format!("the daemon runs as uid {my_uid}, not root: it cannot start a process as {what}")
}

/// Checks a spec's identity as a request arrives, with nothing looked up: an unprivileged
/// daemon cannot take another numeric uid, gid or set of gids. Names are resolved at the
/// start (by the lookup helper), and refused there.
pub fn check_now(r: &RunAs) -> Result<(), ProtoError> {
    let (my_uid, my_gid) = own_ids();
    if my_uid == 0 {
        return Ok(());
    }
    let number = |s: &Option<String>| s.as_deref().and_then(|s| s.parse::<u32>().ok());
    let refuse = |what: String| {
        Err(ProtoError::new(
            ErrorCode::PermissionDenied,
            denied(my_uid, what),
        ))
    };
    if let Some(uid) = number(&r.user).filter(|&u| u != my_uid) {
        return refuse(format!("uid {uid}"));
    }
    if let Some(gid) = number(&r.group).filter(|&g| g != my_gid) {
        return refuse(format!("gid {gid}"));
    }
    if let Some(groups) = &r.groups {
        let numbers: Option<Vec<u32>> = groups.iter().map(|g| g.parse().ok()).collect();
        if let (Some(wanted), Ok(mine)) = (numbers, users::own_groups()) {
            if !same_set(wanted, mine) {
                return refuse("other groups".into());
            }
        }
    }
    Ok(())
}

fn same_set(mut a: Vec<u32>, mut b: Vec<u32>) -> bool {
    a.sort_unstable();
    b.sort_unstable();
    a.dedup();
    b.dedup();
    a == b
}

/// What a start needs before its child can be started.
#[derive(Debug)]
pub enum Resolution {
    /// The helper must look these up.
    Lookup(Query),
    /// Nothing to look up (no run-as options, or numbers alone: the kernel was asked):
    /// what was found, at once.
    Known(Result<Found, String>),
}

/// What `r` needs looked up, if anything.
pub fn resolution(r: &RunAs) -> Resolution {
    let (query, helper) = Query::of(r);
    if helper {
        return Resolution::Lookup(query);
    }
    Resolution::Known(
        resolve::identity(&query).map(|(credentials, account)| Found {
            credentials,
            account,
            env: Vec::new(),
        }),
    )
}

/// The credentials the child gets: `None` when it keeps ours. An unprivileged daemon can
/// only run children as itself: what it is, it need not change; anything else the kernel
/// would refuse in the child, so it is refused here.
fn credentials(r: &RunAs, wanted: Option<Credentials>) -> Result<Option<Credentials>, String> {
    let Some(wanted) = wanted else {
        return Ok(None);
    };
    let (my_uid, my_gid) = own_ids();
    if my_uid == 0 {
        return Ok(Some(wanted));
    }
    let mine =
        users::own_groups().map_err(|e| format!("groups: our own could not be read: {e}"))?;
    let same_groups = r.groups.is_none() || same_set(wanted.groups.clone(), mine);
    if wanted.uid != my_uid || wanted.gid != my_gid || !same_groups {
        return Err(denied(
            my_uid,
            format!(
                "uid {} gid {}{}",
                wanted.uid,
                wanted.gid,
                if same_groups {
                    ""
                } else {
                    " with other groups"
                }
            ),
        ));
    }
    Ok(None)
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

/// Completes `req` with what `r` asks and what was `found` for it: identity, umask,
/// limits, and the environment file's variables under the spec's own (`req.env.set` wins:
/// the file's are put first, and a later `set` of the same name replaces an earlier one in
/// the child). The failure is the generation's `spawn_failed`.
///
/// A `user` with an entry also gives the child `USER`, `LOGNAME`, `HOME` and `SHELL` from
/// it, as `login` and systemd's `User=` do: the daemon's own (root's home, say) would be
/// wrong for it and often unwritable. The environment file and the spec's `env` win, and
/// `unset_env` removes them.
pub fn apply(r: &RunAs, found: Found, req: &mut SpawnRequest) -> Result<(), SpawnError> {
    fn fail<T>(kind: SpawnErrorKind, errno: i32, why: String) -> Result<T, SpawnError> {
        Err(SpawnError::new(kind, errno).with_message(why))
    }
    req.credentials = match credentials(r, found.credentials) {
        Ok(c) => c,
        Err(why) => return fail(SpawnErrorKind::PermissionDenied, libc::EPERM, why),
    };
    let mut first: Vec<(OsString, OsString)> = Vec::new();
    if let Some(u) = found.account {
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
                name: res.name(),
                soft: bound(v.soft),
                hard: bound(v.hard),
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .or_else(|why| fail(SpawnErrorKind::Other, libc::EINVAL, why))?;
    first.extend(found.env.into_iter().map(|(k, v)| (k.into(), v.into())));
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
        let Resolution::Lookup(query) = resolution(&r) else {
            panic!("an env_file needs the helper")
        };
        let found = crate::lookup::resolve::answer(&query).unwrap();
        let mut req = SpawnRequest::default();
        req.env.set = vec![("B".into(), "spec".into())];
        apply(&r, found, &mut req).unwrap();
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
