//! System calls for the child between its start and `execve`, made without the C library.
//!
//! On Linux the child shares our memory (see `launch.rs`) while we keep running, and it
//! runs with our thread pointer, so any C-library wrapper that fails would write its errno
//! into *our* thread's errno slot behind our back. These wrappers issue the system call
//! instruction directly and return the kernel's negated errno instead: nothing but
//! registers and the child's own stack is written.
//!
//! [`SHARED_MEMORY`] tells which targets have them. Elsewhere the child is started with
//! `fork` (private memory, so the C library's errno is the child's own) and the same
//! functions go through `libc`.

use std::ffi::CStr;
use std::os::fd::RawFd;

/// Whether this target's child may share our memory (`CLONE_VM`): only where the system
/// calls below are raw instructions.
pub(crate) const SHARED_MEMORY: bool = cfg!(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    )
));

/// An errno, as the kernel returns it (positive).
pub(crate) type Errno = i32;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod arch {
    /// # Safety
    /// A raw system call: the caller vouches for `nr` and every argument.
    #[inline(always)]
    pub unsafe fn syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the x86-64 Linux system call convention: number in rax, arguments in
        // rdi, rsi, rdx, r10, r8, r9, result in rax; the kernel clobbers rcx and r11 only.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a[0],
                in("rsi") a[1],
                in("rdx") a[2],
                in("r10") a[3],
                in("r8") a[4],
                in("r9") a[5],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, preserves_flags),
            );
        }
        ret
    }
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
mod arch {
    /// # Safety
    /// A raw system call: the caller vouches for `nr` and every argument.
    #[inline(always)]
    pub unsafe fn syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the AArch64 Linux system call convention: number in x8, arguments in
        // x0..x5, result in x0; nothing else is clobbered.
        unsafe {
            core::arch::asm!(
                "svc 0",
                in("x8") nr,
                inlateout("x0") a[0] as isize => ret,
                in("x1") a[1],
                in("x2") a[2],
                in("x3") a[3],
                in("x4") a[4],
                in("x5") a[5],
                options(nostack, preserves_flags),
            );
        }
        ret
    }
}

#[cfg(all(target_os = "linux", target_arch = "riscv64"))]
mod arch {
    /// # Safety
    /// A raw system call: the caller vouches for `nr` and every argument.
    #[inline(always)]
    pub unsafe fn syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the RISC-V Linux system call convention: number in a7, arguments in
        // a0..a5, result in a0; nothing else is clobbered.
        unsafe {
            core::arch::asm!(
                "ecall",
                in("a7") nr,
                inlateout("a0") a[0] as isize => ret,
                in("a1") a[1],
                in("a2") a[2],
                in("a3") a[3],
                in("a4") a[4],
                in("a5") a[5],
                options(nostack, preserves_flags),
            );
        }
        ret
    }
}

/// Other Linux targets: the child is forked, so the C library's errno is its own.
#[cfg(all(
    target_os = "linux",
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))
))]
mod arch {
    /// # Safety
    /// A system call through `libc::syscall`: the caller vouches for `nr` and every
    /// argument, and runs in a forked child (the errno written is its own).
    pub unsafe fn syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
        // SAFETY: per this function's contract.
        let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
        if r == -1 {
            // SAFETY: reads this (forked, single-threaded) process's errno slot.
            -(unsafe { *libc::__errno_location() } as isize)
        } else {
            r as isize
        }
    }
}

/// `Ok(value)` or the errno of a raw result (the kernel returns -4095..=-1 for errors).
#[cfg(target_os = "linux")]
fn check(r: isize) -> Result<usize, Errno> {
    if (-4095..0).contains(&r) {
        Err(-r as Errno)
    } else {
        Ok(r as usize)
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;

    /// # Safety
    /// As [`arch::syscall`].
    #[inline(always)]
    unsafe fn call(nr: libc::c_long, a: [usize; 6]) -> Result<usize, Errno> {
        // SAFETY: forwarded contract.
        check(unsafe { arch::syscall(nr, a) })
    }

    /// Bytes in the kernel's `sigset_t` (`_NSIG / 8`).
    const KERNEL_SIGSET: usize = if cfg!(any(target_arch = "mips", target_arch = "mips64")) {
        16
    } else {
        8
    };

    /// The highest signal number (`_NSIG - 1`).
    pub const MAX_SIGNAL: i32 = (KERNEL_SIGSET * 8) as i32;

    pub fn setsid() -> Result<(), Errno> {
        // SAFETY: no arguments, no memory.
        unsafe { call(libc::SYS_setsid, [0; 6]) }.map(drop)
    }

    pub fn set_controlling_tty(fd: RawFd) -> Result<(), Errno> {
        // SAFETY: TIOCSCTTY takes an integer argument, no memory.
        unsafe {
            call(
                libc::SYS_ioctl,
                [fd as usize, libc::TIOCSCTTY as usize, 0, 0, 0, 0],
            )
        }
        .map(drop)
    }

    /// `dup3(old, new, flags)`; `old != new`.
    pub fn dup3(old: RawFd, new: RawFd, flags: i32) -> Result<(), Errno> {
        // SAFETY: descriptor numbers only.
        unsafe {
            call(
                libc::SYS_dup3,
                [old as usize, new as usize, flags as usize, 0, 0, 0],
            )
        }
        .map(drop)
    }

    /// `close_range(first, last, flags)` (Linux 5.9; `CLOSE_RANGE_CLOEXEC` 5.11).
    pub fn close_range(first: u32, last: u32, flags: u32) -> Result<(), Errno> {
        // SAFETY: descriptor numbers and flags only.
        unsafe {
            call(
                libc::SYS_close_range,
                [first as usize, last as usize, flags as usize, 0, 0, 0],
            )
        }
        .map(drop)
    }

    /// `rt_sigaction(sig, {SIG_DFL, no flags, empty mask}, NULL)`. The raw call also works
    /// for the signals the C library reserves for itself (32 and 33 in glibc), which can
    /// arrive ignored from whoever started us.
    pub fn default_disposition(sig: i32) -> Result<(), Errno> {
        // Larger than the kernel's `struct sigaction` on every architecture; all zeros is
        // SIG_DFL with no flags and an empty mask in every layout.
        let zeroed = [0u64; 8];
        // SAFETY: `zeroed` is readable for longer than the kernel reads; the old-action
        // pointer is null.
        unsafe {
            call(
                libc::SYS_rt_sigaction,
                [
                    sig as usize,
                    zeroed.as_ptr() as usize,
                    0,
                    KERNEL_SIGSET,
                    0,
                    0,
                ],
            )
        }
        .map(drop)
    }

    /// `rt_sigprocmask(SIG_SETMASK, {}, NULL)`.
    pub fn unblock_all_signals() -> Result<(), Errno> {
        let empty = [0u64; 2];
        // SAFETY: `empty` holds at least KERNEL_SIGSET bytes; the old-set pointer is null.
        unsafe {
            call(
                libc::SYS_rt_sigprocmask,
                [
                    libc::SIG_SETMASK as usize,
                    empty.as_ptr() as usize,
                    0,
                    KERNEL_SIGSET,
                    0,
                    0,
                ],
            )
        }
        .map(drop)
    }

    /// `prlimit64(0, RLIMIT_NOFILE, limit, NULL)`.
    pub fn set_nofile(limit: &libc::rlimit) -> Result<(), Errno> {
        // The kernel's `struct rlimit64` is two u64s (`rlim_t` is narrower on some 32-bit
        // targets, hence the casts).
        #[allow(clippy::unnecessary_cast)]
        let raw = [limit.rlim_cur as u64, limit.rlim_max as u64];
        // SAFETY: `raw` is a valid `struct rlimit64`; the old-limit pointer is null.
        unsafe {
            call(
                libc::SYS_prlimit64,
                [
                    0,
                    libc::RLIMIT_NOFILE as usize,
                    raw.as_ptr() as usize,
                    0,
                    0,
                    0,
                ],
            )
        }
        .map(drop)
    }

    /// `prlimit64(0, resource, {soft, hard}, NULL)`.
    pub fn set_rlimit(resource: i32, soft: u64, hard: u64) -> Result<(), Errno> {
        let raw = [soft, hard];
        // SAFETY: `raw` is a valid `struct rlimit64`; the old-limit pointer is null.
        unsafe {
            call(
                libc::SYS_prlimit64,
                [0, resource as usize, raw.as_ptr() as usize, 0, 0, 0],
            )
        }
        .map(drop)
    }

    /// `umask(mask)`; it cannot fail.
    pub fn umask(mask: u32) {
        // SAFETY: an integer argument, no memory.
        let _ = unsafe { call(libc::SYS_umask, [mask as usize, 0, 0, 0, 0, 0]) };
    }

    // The 32-bit ids' calls: on these targets the plain numbers are the old 16-bit ones.
    #[cfg(any(target_arch = "x86", target_arch = "arm"))]
    const SYS_SETGROUPS: libc::c_long = libc::SYS_setgroups32;
    #[cfg(any(target_arch = "x86", target_arch = "arm"))]
    const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid32;
    #[cfg(any(target_arch = "x86", target_arch = "arm"))]
    const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid32;
    #[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
    const SYS_SETGROUPS: libc::c_long = libc::SYS_setgroups;
    #[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
    const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid;
    #[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
    const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid;
    #[cfg(any(target_arch = "x86", target_arch = "arm"))]
    const SYS_FCHOWN: libc::c_long = libc::SYS_fchown32;
    #[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
    const SYS_FCHOWN: libc::c_long = libc::SYS_fchown;

    /// `fchown(fd, uid, -1)`: gives `fd`'s file to `uid`, its group unchanged.
    pub fn fchown_user(fd: RawFd, uid: u32) -> Result<(), Errno> {
        // SAFETY: integer arguments only.
        unsafe {
            call(
                SYS_FCHOWN,
                [fd as usize, uid as usize, u32::MAX as usize, 0, 0, 0],
            )
        }
        .map(drop)
    }

    /// `setgroups(len, groups)`. The raw call changes this process only, which is what a
    /// child wants (the C library's wrapper would signal every thread of the process).
    pub fn setgroups(groups: &[u32]) -> Result<(), Errno> {
        // SAFETY: `groups` is readable for its length of `gid_t`s (u32 on Linux).
        unsafe {
            call(
                SYS_SETGROUPS,
                [groups.len(), groups.as_ptr() as usize, 0, 0, 0, 0],
            )
        }
        .map(drop)
    }

    /// `setresgid(gid, gid, gid)`.
    pub fn setgid(gid: u32) -> Result<(), Errno> {
        let g = gid as usize;
        // SAFETY: integer arguments only.
        unsafe { call(SYS_SETRESGID, [g, g, g, 0, 0, 0]) }.map(drop)
    }

    /// `setresuid(uid, uid, uid)`.
    pub fn setuid(uid: u32) -> Result<(), Errno> {
        let u = uid as usize;
        // SAFETY: integer arguments only.
        unsafe { call(SYS_SETRESUID, [u, u, u, 0, 0, 0]) }.map(drop)
    }

    /// Whether `path` names something (`faccessat(F_OK)`).
    pub fn exists(path: &CStr) -> bool {
        let at = libc::AT_FDCWD as isize as usize;
        let p = path.as_ptr() as usize;
        // SAFETY: `path` is a NUL-terminated string; the rest are integers.
        unsafe { call(libc::SYS_faccessat, [at, p, libc::F_OK as usize, 0, 0, 0]) }.is_ok()
    }

    pub fn chdir(path: &CStr) -> Result<(), Errno> {
        // SAFETY: `path` is a NUL-terminated string.
        unsafe { call(libc::SYS_chdir, [path.as_ptr() as usize, 0, 0, 0, 0, 0]) }.map(drop)
    }

    /// `execve`; returns only on failure.
    ///
    /// # Safety
    /// `argv` and `envp` are null-terminated arrays of NUL-terminated strings.
    pub unsafe fn execve(
        path: &CStr,
        argv: *const *const libc::c_char,
        envp: *const *const libc::c_char,
    ) -> Errno {
        // SAFETY: per this function's contract.
        match unsafe {
            call(
                libc::SYS_execve,
                [
                    path.as_ptr() as usize,
                    argv as usize,
                    envp as usize,
                    0,
                    0,
                    0,
                ],
            )
        } {
            Ok(_) => libc::EINVAL, // execve does not return on success
            Err(e) => e,
        }
    }

    pub fn write(fd: RawFd, buf: &[u8]) -> Result<usize, Errno> {
        // SAFETY: `buf` is readable for its length.
        unsafe {
            call(
                libc::SYS_write,
                [fd as usize, buf.as_ptr() as usize, buf.len(), 0, 0, 0],
            )
        }
    }

    pub fn exit(code: i32) -> ! {
        loop {
            // SAFETY: ends this process (the child is a thread group of its own).
            let _ = unsafe { call(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]) };
        }
    }
}

/// Elsewhere: the C library, in a forked child.
#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    pub const MAX_SIGNAL: i32 = 64;

    fn errno() -> Errno {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }

    fn check(r: libc::c_int) -> Result<(), Errno> {
        if r < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    pub fn setsid() -> Result<(), Errno> {
        // SAFETY: async-signal-safe, no memory.
        check(unsafe { libc::setsid() })
    }

    pub fn set_controlling_tty(fd: RawFd) -> Result<(), Errno> {
        // SAFETY: TIOCSCTTY takes an integer argument.
        check(unsafe { libc::ioctl(fd, libc::TIOCSCTTY as _, 0) })
    }

    pub fn dup3(old: RawFd, new: RawFd, flags: i32) -> Result<(), Errno> {
        // SAFETY: descriptor numbers only.
        check(unsafe { libc::dup2(old, new) })?;
        if flags & libc::O_CLOEXEC != 0 {
            // SAFETY: as above.
            check(unsafe { libc::fcntl(new, libc::F_SETFD, libc::FD_CLOEXEC) })?;
        }
        Ok(())
    }

    pub fn close_range(_first: u32, _last: u32, _flags: u32) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }

    pub fn default_disposition(sig: i32) -> Result<(), Errno> {
        // SAFETY: a zeroed `sigaction` with `SIG_DFL` is a valid argument.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            check(libc::sigaction(sig, &action, std::ptr::null_mut()))
        }
    }

    pub fn unblock_all_signals() -> Result<(), Errno> {
        // SAFETY: plain sigset manipulation on a local value.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            check(libc::sigprocmask(
                libc::SIG_SETMASK,
                &empty,
                std::ptr::null_mut(),
            ))
        }
    }

    pub fn set_nofile(limit: &libc::rlimit) -> Result<(), Errno> {
        // SAFETY: `limit` is a valid rlimit.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, limit) })
    }

    pub fn set_rlimit(resource: i32, soft: u64, hard: u64) -> Result<(), Errno> {
        let clamp = |v: u64| {
            if v == u64::MAX {
                libc::RLIM_INFINITY
            } else {
                v as libc::rlim_t
            }
        };
        let limit = libc::rlimit {
            rlim_cur: clamp(soft),
            rlim_max: clamp(hard),
        };
        // SAFETY: `limit` is a valid rlimit.
        check(unsafe { libc::setrlimit(resource as _, &limit) })
    }

    pub fn umask(mask: u32) {
        // SAFETY: an integer argument.
        unsafe { libc::umask(mask as libc::mode_t) };
    }

    pub fn setgroups(groups: &[u32]) -> Result<(), Errno> {
        // SAFETY: `groups` is readable for its length of `gid_t`s.
        check(unsafe { libc::setgroups(groups.len() as _, groups.as_ptr().cast()) })
    }

    pub fn setgid(gid: u32) -> Result<(), Errno> {
        // SAFETY: an integer argument.
        check(unsafe { libc::setgid(gid as libc::gid_t) })
    }

    pub fn setuid(uid: u32) -> Result<(), Errno> {
        // SAFETY: an integer argument.
        check(unsafe { libc::setuid(uid as libc::uid_t) })
    }

    pub fn fchown_user(fd: RawFd, uid: u32) -> Result<(), Errno> {
        // SAFETY: integer arguments.
        check(unsafe { libc::fchown(fd, uid as libc::uid_t, libc::gid_t::MAX) })
    }

    pub fn exists(path: &CStr) -> bool {
        // SAFETY: NUL-terminated path.
        unsafe { libc::access(path.as_ptr(), libc::F_OK) == 0 }
    }

    pub fn chdir(path: &CStr) -> Result<(), Errno> {
        // SAFETY: NUL-terminated path.
        check(unsafe { libc::chdir(path.as_ptr()) })
    }

    /// # Safety
    /// `argv` and `envp` are null-terminated arrays of NUL-terminated strings.
    pub unsafe fn execve(
        path: &CStr,
        argv: *const *const libc::c_char,
        envp: *const *const libc::c_char,
    ) -> Errno {
        // SAFETY: per this function's contract.
        unsafe { libc::execve(path.as_ptr(), argv, envp) };
        errno()
    }

    pub fn write(fd: RawFd, buf: &[u8]) -> Result<usize, Errno> {
        // SAFETY: `buf` is readable for its length.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if r < 0 {
            Err(errno())
        } else {
            Ok(r as usize)
        }
    }

    pub fn exit(code: i32) -> ! {
        // SAFETY: ends the forked child without running any handler.
        unsafe { libc::_exit(code) }
    }
}

pub(crate) use imp::*;
