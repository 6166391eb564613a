//! `RLIMIT_FSIZE` without `SIGXFSZ`: a write or `fallocate` past the process's file-size
//! limit (systemd's `LimitFSIZE=`, `docker run --ulimit fsize=`, `ulimit -f` in a run
//! script) sends `SIGXFSZ`, whose default action ends the process — the daemon, with every
//! session left unsupervised, again at every restart. Ignored, the same call fails with
//! `EFBIG` instead, which the callers handle as they handle a full disk (a journal segment
//! not made keeps output in memory; a record not written is tried again).
//!
//! Children do not inherit it: a spawn gives every signal its default disposition before
//! the exec, so a session's program meets its limit as it would anywhere.

/// Ignores `SIGXFSZ` for this process.
pub fn ignore_signal() {
    // SAFETY: `SIG_IGN` installs no handler: no code of ours runs on the signal, and no
    // memory is touched; `signal` with a valid signal number cannot fail otherwise.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
