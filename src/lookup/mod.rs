//! Lookups the daemon must not wait for: a spec's `user`, `group` and `groups` names
//! resolved through the C library (NSS may ask LDAP or sssd over the network, and hang),
//! and its `env_file` read (it may sit on a dead mount). A short-lived helper process does
//! them — the daemon's own binary, `genward __lookup ...` — and writes its [`answer`] on
//! its stdout, which the daemon reads as readiness like any child's output.
//!
//! So a hung lookup hangs only the helper: the daemon's loop, every client and every other
//! session carry on; the generation stays `starting`, and a `stop` or `remove` gives it up
//! (the helper is killed) as it gives up a spawn hung in `chdir`. Started through the same
//! asynchronous spawn as any child (`clone` and `execve` watched through a status pipe),
//! the helper costs one process per start of a spec that names someone or an environment
//! file, nothing for the others.
//!
//! A spec that names no one and no file, only numeric `group` and `groups`, needs no
//! helper: [`resolve::identity`] then looks nothing up (see [`Query::of`]).

pub mod answer;
pub mod resolve;

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::core::RunAs;

/// The hidden subcommand that runs a lookup helper.
pub const SUBCOMMAND: &str = "__lookup";

/// What a start needs looked up: the run-as options that name something.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// A user name or uid.
    pub user: Option<String>,
    /// A group name or gid.
    pub group: Option<String>,
    /// Supplementary group names or gids.
    pub groups: Option<Vec<String>>,
    /// An environment file to read.
    pub env_file: Option<PathBuf>,
}

fn is_number(name: &str) -> bool {
    name.parse::<u32>().is_ok()
}

impl Query {
    /// The query of a spec's options, and whether it needs the helper: `false` when it
    /// names no user (even a uid: its entry gives `HOME` and the memberships), no group
    /// by name and no environment file, so that answering it asks only the kernel.
    pub fn of(r: &RunAs) -> (Query, bool) {
        let q = Query {
            user: r.user.clone(),
            group: r.group.clone(),
            groups: r.groups.clone(),
            env_file: r
                .env_file
                .as_ref()
                .map(|p| PathBuf::from(OsString::from_vec(p.clone()))),
        };
        let named = |g: &Option<String>| g.as_deref().is_some_and(|g| !is_number(g));
        let helper = q.user.is_some()
            || q.env_file.is_some()
            || named(&q.group)
            || q.groups.iter().flatten().any(|g| !is_number(g));
        (q, helper)
    }

    /// The helper's arguments: the subcommand, then `--user U`, `--group G`,
    /// `--groups A,B` (empty: none), `--env-file PATH`, each when given.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![SUBCOMMAND.into()];
        if let Some(u) = &self.user {
            args.extend(["--user".into(), u.into()]);
        }
        if let Some(g) = &self.group {
            args.extend(["--group".into(), g.into()]);
        }
        if let Some(gs) = &self.groups {
            // Names cannot hold a comma (see `check_id_name`).
            args.extend(["--groups".into(), gs.join(",").into()]);
        }
        if let Some(p) = &self.env_file {
            args.extend(["--env-file".into(), p.clone().into()]);
        }
        args
    }

    /// Parses the arguments after the subcommand, strictly.
    pub fn parse(args: &[OsString]) -> Result<Query, String> {
        let mut q = Query::default();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| format!("{}: missing its value", flag.to_string_lossy()))?;
            let text = || {
                value
                    .to_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{}: not UTF-8", flag.to_string_lossy()))
            };
            let slot_taken = match flag.as_bytes() {
                b"--user" => q.user.replace(text()?).is_some(),
                b"--group" => q.group.replace(text()?).is_some(),
                b"--groups" => {
                    let list = text()?;
                    let groups = match list.as_str() {
                        "" => Vec::new(),
                        l => l.split(',').map(str::to_owned).collect(),
                    };
                    q.groups.replace(groups).is_some()
                }
                b"--env-file" if value.as_bytes().first() == Some(&b'/') => {
                    q.env_file.replace(PathBuf::from(value)).is_some()
                }
                b"--env-file" => return Err("--env-file: not an absolute path".into()),
                _ => return Err(format!("unknown argument {}", flag.to_string_lossy())),
            };
            if slot_taken {
                return Err(format!("{} given twice", flag.to_string_lossy()));
            }
        }
        Ok(q)
    }
}

/// Dies with the daemon: a helper hung in a lookup would otherwise outlive a daemon that
/// crashed, with nobody left to want its answer.
fn die_with_parent() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
}

/// `genward __lookup ...`: answers one query on stdout and exits. Never returns to the
/// daemon's code.
pub fn main(args: &[OsString]) -> ExitCode {
    die_with_parent();
    let answer = Query::parse(args)
        .map_err(|e| format!("the lookup helper: {e}").into())
        .and_then(|q| resolve::answer(&q));
    let mut out = std::io::stdout().lock();
    match out
        .write_all(&answer::encode(&answer))
        .and_then(|()| out.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        // Nobody is reading any more (the start was given up): nothing else to do.
        Err(_) => ExitCode::from(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_travel_as_arguments() {
        let q = Query {
            user: Some("nobody".into()),
            group: Some("42".into()),
            groups: Some(vec!["adm".into(), "7".into()]),
            env_file: Some("/etc/app.env".into()),
        };
        let args = q.to_args();
        assert_eq!(args[0], SUBCOMMAND);
        assert_eq!(Query::parse(&args[1..]), Ok(q));
        let none = Query {
            groups: Some(Vec::new()),
            ..Query::default()
        };
        assert_eq!(Query::parse(&none.to_args()[1..]), Ok(none));
        for bad in [
            &["--user"][..],
            &["--user", "a", "--user", "b"],
            &["--env-file", "rel.env"],
            &["--shell", "x"],
        ] {
            let bad: Vec<OsString> = bad.iter().map(OsString::from).collect();
            assert!(Query::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_names_and_files_need_the_helper() {
        let needs = |r: RunAs| Query::of(&r).1;
        assert!(!needs(RunAs::default()));
        assert!(!needs(RunAs {
            group: Some("42".into()),
            groups: Some(vec!["7".into()]),
            umask: Some(0o22),
            ..RunAs::default()
        }));
        assert!(needs(RunAs {
            user: Some("0".into()),
            ..RunAs::default()
        }));
        assert!(needs(RunAs {
            groups: Some(vec!["7".into(), "adm".into()]),
            ..RunAs::default()
        }));
        assert!(needs(RunAs {
            env_file: Some(b"/x.env".to_vec()),
            ..RunAs::default()
        }));
    }

    #[test]
    fn numbers_alone_are_answered_without_a_lookup() {
        let q = Query {
            group: Some("4242".into()),
            groups: Some(vec!["4243".into()]),
            ..Query::default()
        };
        let (c, account) = resolve::identity(&q).unwrap();
        let c = c.unwrap();
        assert_eq!((c.gid, c.groups), (4242, vec![4243]));
        assert_eq!(c.uid, rustix::process::geteuid().as_raw());
        assert_eq!(account, None);
    }
}
