//! Everything the child needs, built before it starts: C strings, pointer arrays, candidate
//! paths. The child only reads these.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use super::{Env, SpawnError, SpawnRequest};

/// Used when neither the child's environment nor ours has `PATH`.
const DEFAULT_PATH: &[u8] = b"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Limits on what a request may ask for, so a request cannot make us allocate without
/// bound.
pub const MAX_ARGS: usize = 64 * 1024;
/// Maximum bytes across argv and environment, like the kernel's `ARG_MAX` order.
pub const MAX_ARG_BYTES: usize = 4 * 1024 * 1024;

/// The prepared, fork-safe form of a request.
pub(crate) struct Prepared {
    /// Programs to try in order (the argv[0] itself when it has a `/`, else PATH entries).
    pub candidates: Vec<CString>,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    pub cwd: Option<CString>,
}

/// Null-terminated pointer arrays into a [`Prepared`]; valid while it lives.
pub(crate) struct Pointers {
    pub argv: Vec<*const libc::c_char>,
    pub env: Vec<*const libc::c_char>,
}

impl Prepared {
    pub fn pointers(&self) -> Pointers {
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(ptr::null()))
                .collect()
        };
        Pointers {
            argv: ptrs(&self.argv),
            env: ptrs(&self.env),
        }
    }
}

fn cstring(bytes: Vec<u8>, what: &str) -> Result<CString, SpawnError> {
    CString::new(bytes).map_err(|_| SpawnError::Invalid(format!("{what} contains a NUL byte")))
}

fn check_env_name(name: &OsStr) -> Result<(), SpawnError> {
    let b = name.as_bytes();
    if b.is_empty() || b.contains(&b'=') || b.contains(&0) {
        return Err(SpawnError::Invalid(format!(
            "invalid environment variable name {:?}",
            name
        )));
    }
    Ok(())
}

/// The child's environment as `NAME=value` entries: the base (ours or empty), then `TERM`
/// for a PTY, then `unset`, then `set` (later entries win).
fn environment(env: &Env, term: Option<&OsStr>) -> Result<Vec<(OsString, OsString)>, SpawnError> {
    for name in env.unset.iter().chain(env.set.iter().map(|(k, _)| k)) {
        check_env_name(name)?;
    }
    let mut vars: Vec<(OsString, OsString)> = if env.inherit {
        std::env::vars_os().collect()
    } else {
        Vec::new()
    };
    let put = |vars: &mut Vec<(OsString, OsString)>, k: &OsStr, v: &OsStr| {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_owned(), v.to_owned()));
    };
    if let Some(term) = term {
        put(&mut vars, OsStr::new("TERM"), term);
    }
    vars.retain(|(name, _)| !env.unset.iter().any(|u| u == name));
    for (k, v) in &env.set {
        put(&mut vars, k, v);
    }
    Ok(vars)
}

/// Validates a request and builds everything the child will use.
pub(crate) fn prepare(req: &SpawnRequest, term: Option<&OsStr>) -> Result<Prepared, SpawnError> {
    let Some(program) = req.argv.first() else {
        return Err(SpawnError::Invalid("argv is empty".to_owned()));
    };
    if program.is_empty() {
        return Err(SpawnError::Invalid("argv[0] is empty".to_owned()));
    }
    if req.argv.len() > MAX_ARGS {
        return Err(SpawnError::Invalid(format!(
            "more than {MAX_ARGS} arguments"
        )));
    }
    if let Some(c) = &req.credentials {
        // -1 means "leave unchanged" to the set*id calls: the child would keep our identity
        // while the caller believes it changed.
        if c.uid == u32::MAX || c.gid == u32::MAX || c.groups.contains(&u32::MAX) {
            return Err(SpawnError::Invalid("uid or gid 4294967295 (-1)".to_owned()));
        }
        if c.groups.len() > 65536 {
            return Err(SpawnError::Invalid("more than 65536 groups".to_owned()));
        }
    }
    if req.umask.is_some_and(|m| m > 0o777) {
        return Err(SpawnError::Invalid("umask above 0777".to_owned()));
    }
    let vars = environment(&req.env, term)?;
    let bytes: usize = req.argv.iter().map(|a| a.len() + 1).sum::<usize>()
        + vars
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>();
    if bytes > MAX_ARG_BYTES || vars.len() > MAX_ARGS {
        return Err(SpawnError::Invalid(format!(
            "argv and environment exceed {MAX_ARG_BYTES} bytes"
        )));
    }
    let argv = req
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes().to_vec(), "an argument"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut path_var = None;
    let mut env = Vec::with_capacity(vars.len());
    for (k, v) in &vars {
        if k == "PATH" {
            path_var = Some(v.clone());
        }
        let mut entry = k.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(v.as_bytes());
        env.push(cstring(entry, "an environment value")?);
    }
    let cwd = match &req.cwd {
        Some(dir) if dir.as_os_str().is_empty() => {
            return Err(SpawnError::Invalid("cwd is empty".to_owned()))
        }
        Some(dir) => Some(cstring(dir.as_os_str().as_bytes().to_vec(), "cwd")?),
        None => None,
    };
    let candidates = candidates(program.as_bytes(), path_var.as_deref())?;
    Ok(Prepared {
        candidates,
        argv,
        env,
        cwd,
    })
}

/// `argv[0]` itself if it contains a `/`; otherwise `dir/argv[0]` for each entry of the
/// child's `PATH` (an empty entry meaning the working directory, as `execvp` does), in
/// order. The child tries them after `chdir`, so relative entries resolve as the program
/// would see them.
fn candidates(program: &[u8], path: Option<&OsStr>) -> Result<Vec<CString>, SpawnError> {
    if program.contains(&b'/') {
        return Ok(vec![cstring(program.to_vec(), "argv[0]")?]);
    }
    let path = path.map(OsStr::as_bytes).unwrap_or(DEFAULT_PATH);
    path.split(|&b| b == b':')
        .map(|dir| {
            let mut full = if dir.is_empty() {
                b".".to_vec()
            } else {
                dir.to_vec()
            };
            full.push(b'/');
            full.extend_from_slice(program);
            cstring(full, "a PATH entry")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_search_order_and_empty_entry() {
        let c = candidates(b"ls", Some(OsStr::new("/a::/b"))).unwrap();
        let c: Vec<_> = c.iter().map(|s| s.to_str().unwrap().to_owned()).collect();
        assert_eq!(c, ["/a/ls", "./ls", "/b/ls"]);
        let c = candidates(b"./x", Some(OsStr::new("/a"))).unwrap();
        assert_eq!(c[0].to_str().unwrap(), "./x");
    }

    #[test]
    fn environment_order_set_wins_over_unset_and_term() {
        let env = Env {
            inherit: false,
            set: vec![("A".into(), "1".into()), ("TERM".into(), "dumb".into())],
            unset: vec!["A".into()],
        };
        let vars = environment(&env, Some(OsStr::new("xterm"))).unwrap();
        assert!(vars.contains(&("A".into(), "1".into())));
        assert!(vars.contains(&("TERM".into(), "dumb".into())));
        assert_eq!(vars.len(), 2);
        let bad = Env {
            inherit: false,
            set: vec![("A=B".into(), "1".into())],
            unset: vec![],
        };
        assert!(matches!(
            environment(&bad, None),
            Err(SpawnError::Invalid(_))
        ));
    }
}
