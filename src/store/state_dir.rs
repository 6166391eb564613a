//! The state directory: where the socket and the lease live.
//!
//! Its privacy is what protects the socket, so we refuse a directory that is a symlink, is
//! not ours, or is open to group or others — rather than "fixing" a directory someone else
//! prepared.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{self, Mode, OFlags};

/// Why the state directory cannot be used.
#[derive(Debug)]
pub enum StateDirError {
    /// No default exists (not root and `XDG_RUNTIME_DIR` unset).
    NoDefault,
    /// The path exists but is not a directory.
    NotADirectory(PathBuf),
    /// The path is a symbolic link (to `target`): whoever may change the link could
    /// redirect the daemon's socket and state, so only the real directory is accepted.
    Symlink { path: PathBuf, target: PathBuf },
    /// Owned by another user.
    WrongOwner { path: PathBuf, owner: u32 },
    /// Readable, writable or searchable by group or others.
    OpenToOthers { path: PathBuf, mode: u32 },
    /// A system call failed.
    Io { path: PathBuf, err: io::Error },
}

impl fmt::Display for StateDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateDirError::NoDefault => write!(
                f,
                "no default state directory: XDG_RUNTIME_DIR is unset; pass --state-dir DIR or set GENWARD_STATE_DIR"
            ),
            StateDirError::NotADirectory(p) => {
                write!(f, "state directory {}: exists but is not a directory", p.display())
            }
            StateDirError::Symlink { path, target } => write!(
                f,
                "state directory {}: is a symbolic link to {}; refusing it (a link could be pointed elsewhere): give the directory itself",
                path.display(),
                target.display()
            ),
            StateDirError::WrongOwner { path, owner } => write!(
                f,
                "state directory {}: owned by uid {owner}, not by us ({}); refusing it",
                path.display(),
                fs_uid()
            ),
            StateDirError::OpenToOthers { path, mode } => write!(
                f,
                "state directory {}: mode {mode:04o} is open to other users; give the daemon a directory of its own (`/run/genward`, not `/run` itself), or, if only the daemon uses this one, run `chmod 700 {}`",
                path.display(),
                path.display()
            ),
            StateDirError::Io { path, err } => {
                write!(f, "state directory {}: {err}", path.display())
            }
        }
    }
}

impl std::error::Error for StateDirError {}

fn fs_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The default state directory: `/run/genward` as root, `$XDG_RUNTIME_DIR/genward`
/// otherwise.
pub fn default_state_dir() -> Result<PathBuf, StateDirError> {
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from("/run/genward"));
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => Ok(Path::new(&dir).join("genward")),
        _ => Err(StateDirError::NoDefault),
    }
}

/// The state directory and socket to use: explicit values first, then `GENWARD_STATE_DIR`
/// and `GENWARD_SOCKET`, then the defaults (the socket is `genward.sock` inside the state
/// directory).
pub fn resolve(
    state_dir: Option<PathBuf>,
    socket: Option<PathBuf>,
) -> Result<(PathBuf, PathBuf), StateDirError> {
    let from_env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let state_dir = match state_dir.or_else(|| from_env("GENWARD_STATE_DIR")) {
        Some(d) => d,
        None => default_state_dir()?,
    };
    let socket = socket
        .or_else(|| from_env("GENWARD_SOCKET"))
        .unwrap_or_else(|| state_dir.join("genward.sock"));
    Ok((state_dir, socket))
}

/// Creates `path` with mode 0700 if missing, then verifies it is a real directory owned by
/// us and closed to everyone else. One that others may only pass through (0711, as
/// [`ensure_searchable_dir`] makes it for `--allow-uid`) is closed again instead of
/// refused: a daemon that allowed other uids once must not keep the next one, without the
/// flag, from starting (and taking back what runs); closing it only takes access away.
pub fn ensure_private_dir(path: &Path) -> Result<(), StateDirError> {
    check_dir(path, Others::Nothing)?.settle()
}

/// Like [`ensure_private_dir`], but others may pass through it (mode 0711: search, never
/// read or write) and it is made so: the socket's directory when other uids are allowed
/// to connect (`--allow-uid`). What admits them is the daemon's `SO_PEERCRED` check.
pub fn ensure_searchable_dir(path: &Path) -> Result<(), StateDirError> {
    check_dir(path, Others::Search)?.settle()
}

/// A directory made (if missing) and verified by [`check_dir`] whose mode is not changed
/// yet: [`Checked::settle`] changes it. What decides whether this process may have the
/// directory at all (the lease, a socket another daemon listens on) comes between the
/// two, so that a daemon that is refused leaves the mode the running one chose.
#[derive(Debug)]
pub struct Checked {
    path: PathBuf,
    fd: rustix::fd::OwnedFd,
    mode: u32,
    others: Others,
}

impl Checked {
    /// Gives the directory the mode its use asks for: closed to others (0700), or open
    /// for them to pass through (0711).
    pub fn settle(self) -> Result<(), StateDirError> {
        let io_err = |err: rustix::io::Errno| StateDirError::Io {
            path: self.path.clone(),
            err: err.into(),
        };
        match self.others {
            Others::Search => {
                fs::fchmod(&self.fd, Mode::from_raw_mode(0o711)).map_err(io_err)?;
            }
            Others::Nothing => {
                let mode = self.mode;
                if mode & 0o077 != 0 {
                    fs::fchmod(&self.fd, Mode::from_raw_mode(mode & !0o077)).map_err(io_err)?;
                    log::info!(
                        "state directory {}: mode {mode:04o} closed to {:04o} (other uids are not allowed now)",
                        self.path.display(),
                        mode & !0o077
                    );
                }
            }
        }
        Ok(())
    }
}

/// Makes `path` (as [`ensure_private_dir`] or, when `searchable`, [`ensure_searchable_dir`]
/// would) and verifies it, but leaves its mode to [`Checked::settle`].
pub fn check_private_dir(path: &Path, searchable: bool) -> Result<Checked, StateDirError> {
    check_dir(
        path,
        if searchable {
            Others::Search
        } else {
            Others::Nothing
        },
    )
}

/// What group and others may do in a state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Others {
    Nothing,
    Search,
}

impl Others {
    /// The group and other bits of the mode that allows it.
    fn allowed(self) -> u32 {
        match self {
            Others::Nothing => 0,
            Others::Search => 0o011,
        }
    }
}

fn check_dir(path: &Path, others: Others) -> Result<Checked, StateDirError> {
    let io_err = |err: rustix::io::Errno| StateDirError::Io {
        path: path.to_owned(),
        err: err.into(),
    };
    match fs::mkdir(path, Mode::RWXU) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(rustix::io::Errno::NOENT) => {
            // Missing parents are made as `mkdir -p` would, private to us; the directory
            // itself is then checked like any other.
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|err| StateDirError::Io {
                    path: path.to_owned(),
                    err,
                })?;
        }
        Err(e) => return Err(io_err(e)),
    }
    // O_NOFOLLOW|O_DIRECTORY: a symlink or a file fails here instead of being trusted.
    let fd = fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP => match std::fs::read_link(path) {
            Ok(target) => StateDirError::Symlink {
                path: path.to_owned(),
                target,
            },
            Err(_) => StateDirError::NotADirectory(path.to_owned()),
        },
        e => io_err(e),
    })?;
    let st = fs::fstat(&fd).map_err(io_err)?;
    if st.st_uid != fs_uid() {
        return Err(StateDirError::WrongOwner {
            path: path.to_owned(),
            owner: st.st_uid,
        });
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o077 & !Others::Search.allowed() != 0 {
        return Err(StateDirError::OpenToOthers {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(Checked {
        path: path.to_owned(),
        fd,
        mode,
        others,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("genward-sd-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn creates_a_private_directory() {
        let base = scratch("create");
        let dir = base.join("state");
        ensure_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Idempotent.
        ensure_private_dir(&dir).unwrap();
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn missing_parents_are_made_private() {
        let base = scratch("nested");
        let dir = base.join("a").join("b").join("state");
        ensure_private_dir(&dir).unwrap();
        for d in [base.join("a"), base.join("a").join("b"), dir.clone()] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn refuses_open_directories_and_symlinks() {
        let base = scratch("refuse");
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = ensure_private_dir(&open).unwrap_err();
        assert!(
            matches!(err, StateDirError::OpenToOthers { mode: 0o755, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("chmod 700"));

        let link = base.join("link");
        let private = base.join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&private, &link).unwrap();
        let err = ensure_private_dir(&link).unwrap_err();
        assert!(matches!(err, StateDirError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(
            err.to_string().contains("private"),
            "names the target: {err}"
        );

        let file = base.join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            ensure_private_dir(&file).unwrap_err(),
            StateDirError::NotADirectory(_)
        ));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_searchable_directory_lets_others_pass_and_nothing_more() {
        let dir = scratch("searchable");
        ensure_searchable_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o711);
        ensure_searchable_dir(&dir).expect("accepted again on the next start");
        // A daemon without `--allow-uid` next: closed again, not refused.
        ensure_private_dir(&dir).expect("closed again");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Anything beyond passing through is still refused, as it is not ours to fix.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o751)).unwrap();
        assert!(matches!(
            ensure_private_dir(&dir),
            Err(StateDirError::OpenToOthers { mode: 0o751, .. })
        ));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(
            ensure_searchable_dir(&dir),
            Err(StateDirError::OpenToOthers { .. })
        ));
    }
}
