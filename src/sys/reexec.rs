//! Replacing the daemon's program without leaving its process: the sealed memory file that
//! carries its state across `execve`, keeping chosen descriptors open across it, the
//! signal mask that keeps signals pending through it, and the exec itself — of a file
//! opened beforehand, so the program run is the one that was checked, and so the previous
//! program can be run again even when its path now holds another file.

use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{memfd_create, MemfdFlags, SealFlags};
use rustix::io::FdFlags;

/// Seals that make an image immutable: whoever holds it knows it reads what was written.
fn image_seals() -> SealFlags {
    SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE
}

/// Writes `bytes` into a new memory file and seals it. The descriptor is close-on-exec;
/// [`keep_across_exec`] clears that for the exec that should inherit it.
pub fn sealed_image(bytes: &[u8]) -> io::Result<OwnedFd> {
    let fd = memfd_create(
        "genward-upgrade",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut done = 0;
    while done < bytes.len() {
        match rustix::io::write(&fd, &bytes[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    rustix::fs::fcntl_add_seals(&fd, image_seals())?;
    Ok(fd)
}

/// Reads a sealed image, at most `max` bytes. An unsealed file is refused: anyone else
/// holding it could change it while it is read.
pub fn read_image(fd: BorrowedFd<'_>, max: usize) -> io::Result<Vec<u8>> {
    let seals = rustix::fs::fcntl_get_seals(fd)?;
    if !seals.contains(image_seals()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the image is not sealed",
        ));
    }
    let size = rustix::fs::fstat(fd)?.st_size as u64;
    if size > max as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the image is {size} bytes, more than {max}"),
        ));
    }
    let mut out = vec![0u8; size as usize];
    let mut done = 0;
    while done < out.len() {
        match rustix::io::pread(fd, &mut out[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    out.truncate(done);
    Ok(out)
}

/// Whether `fd` is closed by the next `execve`.
pub fn set_close_on_exec(fd: BorrowedFd<'_>, close: bool) -> io::Result<()> {
    let flags = if close {
        FdFlags::CLOEXEC
    } else {
        FdFlags::empty()
    };
    rustix::io::fcntl_setfd(fd, flags)?;
    Ok(())
}

/// Clears close-on-exec on every descriptor of `fds`; on failure, restores the ones
/// already changed and says which failed.
pub fn keep_across_exec(fds: &[RawFd]) -> io::Result<()> {
    for (i, &raw) in fds.iter().enumerate() {
        // SAFETY: the caller's descriptors are open for the duration of this call (they
        // are owned by the daemon's state, which is not dropped meanwhile).
        let fd = unsafe { BorrowedFd::borrow_raw(raw) };
        if let Err(e) = set_close_on_exec(fd, false) {
            close_on_exec(&fds[..i]);
            return Err(io::Error::new(e.kind(), format!("descriptor {raw}: {e}")));
        }
    }
    Ok(())
}

/// Sets close-on-exec again on every descriptor of `fds` (after an exec that failed).
pub fn close_on_exec(fds: &[RawFd]) {
    for &raw in fds {
        // SAFETY: as in `keep_across_exec`: the descriptors are open and owned elsewhere.
        let fd = unsafe { BorrowedFd::borrow_raw(raw) };
        let _ = set_close_on_exec(fd, true);
    }
}

/// Takes ownership of a descriptor number inherited across `execve`, after checking it is
/// open, and marks it close-on-exec (the next exec decides afresh what it keeps).
pub fn adopt_inherited(raw: RawFd) -> io::Result<OwnedFd> {
    if raw < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "negative descriptor",
        ));
    }
    // SAFETY: `fcntl(F_GETFD)` on any integer is harmless: it fails with EBADF for a
    // number that is not open.
    if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the number is open (checked above), and the image that named it hands its
    // ownership to exactly one owner: the resuming daemon takes each number once.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    set_close_on_exec(fd.as_fd(), true)?;
    Ok(fd)
}

/// The running program's file, opened (close-on-exec): run again on a failed upgrade even
/// if its path has been replaced since.
pub fn open_own_program() -> io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        "/proc/self/exe",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    Ok(fd)
}

/// Opens the program at `path` for a later exec: a regular file someone may execute.
pub fn open_program(path: &std::path::Path) -> io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    let regular =
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile;
    if !regular {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if st.st_mode & 0o111 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not executable",
        ));
    }
    Ok(fd)
}

/// A path that names an open descriptor's file in this process (and in a child forked
/// from it, as long as the descriptor is inherited up to its exec).
pub fn fd_path(fd: BorrowedFd<'_>) -> std::path::PathBuf {
    format!("/proc/self/fd/{}", fd.as_raw_fd()).into()
}

/// `signals` as a set, to block so that what arrives while the program is replaced stays
/// pending for the next one (the mask survives `execve`; handlers do not).
fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: `sigemptyset`/`sigaddset` only write to the set passed, a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

fn sigmask(how: libc::c_int, signals: &[i32]) -> io::Result<()> {
    let set = signal_set(signals);
    // SAFETY: both pointers are valid for the call (a local set; no old set asked for).
    let rc = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Blocks the daemon's handled `signals` before an exec.
pub fn block_signals(signals: &[i32]) -> io::Result<()> {
    sigmask(libc::SIG_BLOCK, signals)
}

/// Unblocks them: after a failed exec, or once the resumed daemon has its handlers.
pub fn unblock_signals(signals: &[i32]) -> io::Result<()> {
    sigmask(libc::SIG_UNBLOCK, signals)
}

fn c_strings(items: &[OsString]) -> io::Result<Vec<CString>> {
    items
        .iter()
        .map(|s| {
            CString::new(s.as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in an argument"))
        })
        .collect()
}

/// Runs the program `program` (an open file) in place of this one, with `args` (the
/// first is `argv[0]`) and this process's environment. Returns only on failure.
pub fn exec(program: BorrowedFd<'_>, args: &[OsString]) -> io::Error {
    let argv = match c_strings(args) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let envp: Vec<CString> = match c_strings(
        &std::env::vars_os()
            .map(|(k, v)| {
                let mut kv = k;
                kv.push("=");
                kv.push(v);
                kv
            })
            .collect::<Vec<_>>(),
    ) {
        Ok(e) => e,
        Err(e) => return e,
    };
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    let empty: &CStr = c"";
    // SAFETY: `program` is an open descriptor; the path is an empty C string (with
    // AT_EMPTY_PATH the descriptor itself is run); `argv` and `envp` are arrays of valid
    // NUL-terminated strings ending in a null pointer, alive for the call.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            program.as_raw_fd(),
            empty.as_ptr(),
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    io::Error::last_os_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_image_reads_back_and_cannot_change() {
        let fd = sealed_image(b"hello image").unwrap();
        assert_eq!(read_image(fd.as_fd(), 1 << 20).unwrap(), b"hello image");
        assert!(rustix::io::write(&fd, b"x").is_err());
        assert!(read_image(fd.as_fd(), 4).is_err());
    }

    #[test]
    fn an_unsealed_file_is_refused() {
        let fd = memfd_create("t", MemfdFlags::CLOEXEC).unwrap();
        assert!(read_image(fd.as_fd(), 1 << 20).is_err());
    }

    #[test]
    fn inherited_numbers_are_checked() {
        assert!(adopt_inherited(-1).is_err());
        assert!(adopt_inherited(1 << 20).is_err());
    }
}
