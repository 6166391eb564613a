//! Starting the child process without waiting for it.
//!
//! Linux (x86-64, AArch64, RISC-V 64): `clone(CLONE_VM | SIGCHLD)` on a stack of our own.
//! The child shares our memory, so no page tables are copied and nothing of ours is
//! faulted in copy-on-write (what makes `fork` markedly slower: the first version measured
//! 0.62 of `posix_spawn`'s rate with it). Unlike `posix_spawn` (`CLONE_VM | CLONE_VFORK`)
//! we do not sleep until the child has exec'd: a child whose `chdir` or `execve` hangs on a
//! dead mount would otherwise hang us with it, in uninterruptible sleep. The price is that
//! the child's stack and the [`Plan`] it reads must stay valid for as long as the child may
//! use them — until it has exec'd or exited, which the status pipe tells (see
//! [`ChildMemory`]) — and that the child must not write anything we could be using at the
//! same time (see `raw.rs`). Measured, not waiting costs no spawn rate (the parent's and
//! the child's work overlap instead; see docs/benchmarks.md), and reusing the stacks of
//! children that have left (instead of a fresh mapping per spawn) gains a little.
//!
//! Into a cgroup (x86-64 Linux 5.7+): `clone3(CLONE_VM | CLONE_INTO_CGROUP)` on the same
//! kind of stack, so the child is in its cgroup from its first instruction. The C library
//! has no `clone3` wrapper that runs a function on a new stack, hence [`clone3`]'s few
//! lines of assembly. Elsewhere (other architectures, older kernels, `clone3` filtered by a
//! seccomp policy), the plain `clone` above, and the child writes itself into the cgroup's
//! `cgroup.procs` as its first step (see `child.rs`): still before the program runs.
//!
//! Other targets: `fork`, and the child has memory of its own.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use super::band::Lease;
use super::child::{self, Plan};
use super::raw;

/// Usable stack for the child: it runs only `child::run`, a flat sequence of system calls
/// with small frames.
const STACK: usize = 64 * 1024;

/// Memory the child may be using: the plan, and on Linux its stack. Dropping it frees both,
/// so it must be dropped only once the child has provably left our memory: its status pipe
/// reached end-of-file (the kernel closes the child's descriptors after it switched to a new
/// address space on exec, or released ours on exit) or it was reaped.
///
/// Also the band of descriptor numbers a child started sharing our table was lent (see
/// `band.rs`), until it is taken back earlier ([`ChildMemory::left_table`]).
pub(crate) struct ChildMemory {
    plan: NonNull<Plan>,
    stack: Option<Stack>,
    lease: Option<Lease>,
}

// SAFETY: the pointers refer to allocations owned by this value alone (the parent only
// reads the plan, the child only reads it and writes its own stack); moving the owner to
// another thread moves that ownership with it.
unsafe impl Send for ChildMemory {}

impl ChildMemory {
    /// The plan, for the parent to read (the child only ever reads it too).
    pub fn plan(&self) -> &Plan {
        // SAFETY: `plan` came from `Box::into_raw` and is freed only in `drop`.
        unsafe { self.plan.as_ref() }
    }

    /// Whether the child started sharing our descriptor table and has not said yet that
    /// it left it.
    pub fn shares_table(&self) -> bool {
        self.lease.is_some()
    }

    /// The child said it has a descriptor table of its own: its band is taken back.
    pub fn left_table(&mut self) {
        self.lease = None;
    }
}

impl Drop for ChildMemory {
    fn drop(&mut self) {
        // SAFETY: `plan` came from `Box::into_raw` and is freed exactly once, here; the
        // owner drops this only once the child no longer uses it (type docs).
        drop(unsafe { Box::from_raw(self.plan.as_ptr()) });
        if let Some(stack) = self.stack.take() {
            Stack::recycle(stack);
        }
    }
}

/// Stacks of children that have left our memory, for the next children: a fresh mapping
/// costs three system calls and a page fault or two in every child.
static SPARE_STACKS: std::sync::Mutex<Vec<Stack>> = std::sync::Mutex::new(Vec::new());
/// About as many as starts a burst has in flight (an orchestrator starting tools in a
/// window of tens): with fewer, a pipelined burst maps and unmaps most of its stacks
/// anyway. At most 64 × 68 KiB of address space, of which only the pages children
/// touched are resident.
const SPARE_MAX: usize = 64;

/// An anonymous mapping with a guard page below, so a child that overflowed its stack
/// would fault instead of writing into our heap.
struct Stack {
    base: NonNull<libc::c_void>,
    len: usize,
    guard: usize,
}

// SAFETY: the mapping is owned by this value alone; whoever holds it may use or unmap it.
unsafe impl Send for Stack {}

impl Stack {
    fn recycle(stack: Stack) {
        let mut spare = SPARE_STACKS.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_MAX {
            spare.push(stack);
        }
    }

    fn get() -> Option<Stack> {
        if let Some(s) = SPARE_STACKS.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(s);
        }
        Stack::new()
    }

    fn new() -> Option<Stack> {
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => 4096,
        };
        let len = STACK + page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | stack_flag(),
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let stack = Stack {
            base: NonNull::new(base)?,
            len,
            guard: page,
        };
        // SAFETY: the lowest page of our own fresh mapping.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return None; // `stack` unmaps on drop
        }
        Some(stack)
    }

    /// The initial stack pointer: the top of the mapping, 16-byte aligned as every ABI
    /// requires (the mapping is page-aligned, so the top is).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of our own mapping.
        unsafe { self.base.as_ptr().cast::<u8>().add(self.len).cast() }
    }

    /// The usable part, above the guard page, as `clone3` wants it: lowest address and
    /// size (the kernel starts the child at their sum, [`Stack::top`]).
    #[cfg_attr(
        not(all(target_os = "linux", target_arch = "x86_64")),
        allow(dead_code)
    )]
    fn usable(&self) -> (u64, u64) {
        let low = self.base.as_ptr() as usize + self.guard;
        (low as u64, (self.len - self.guard) as u64)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        debug_assert!(self.guard < self.len);
        // SAFETY: unmaps exactly the mapping made in `new`, which nothing uses any more
        // (see `ChildMemory`).
        unsafe { libc::munmap(self.base.as_ptr(), self.len) };
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn stack_flag() -> libc::c_int {
    libc::MAP_STACK
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn stack_flag() -> libc::c_int {
    0
}

extern "C" fn child_entry(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `plan` is the `Plan` that `launch` handed to `clone`, which the parent keeps
    // alive (in `ChildMemory`) until this child has exec'd or exited.
    unsafe { child::run(&*(plan as *const Plan)) }
}

/// Blocks every signal in this thread until dropped, so no handler of ours runs in the
/// child before it has reset them all.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    fn new() -> SignalsBlocked {
        // SAFETY: plain sigset manipulation on local, initialized values.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            SignalsBlocked(old)
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

/// How the child is started.
#[derive(Debug, Clone, Copy)]
pub(crate) enum How {
    /// `clone(CLONE_VM)` (or `fork`): no cgroup, or one the child enters itself.
    Plain,
    /// `clone3(CLONE_VM | CLONE_INTO_CGROUP)` into the cgroup whose directory is `cgroup`,
    /// with `CLONE_PIDFD` if `pidfd`.
    IntoCgroup {
        /// An `O_PATH` or `O_RDONLY` directory descriptor of a cgroup-v2 cgroup.
        cgroup: RawFd,
        /// Ask the kernel for a pidfd too.
        pidfd: bool,
    },
}

/// A started child.
pub(crate) struct Launched {
    pub pid: libc::pid_t,
    /// The pidfd `clone3` gave (only with [`How::IntoCgroup`] and `pidfd`).
    pub pidfd: Option<OwnedFd>,
    /// What to keep until the child has left our memory.
    pub memory: ChildMemory,
}

/// Starts a child running `child::run(plan)` and returns at once, without waiting for it to
/// exec: its pid and the memory to keep until it has left ours, or the errno of `clone` /
/// `clone3` / `fork` (the memory is then freed here). [`How::IntoCgroup`] where
/// [`CLONE3`] is false fails with `ENOSYS`.
///
/// With a `lease` (only where [`raw::SHARED_MEMORY`]; the plan's descriptors are in its
/// band and `plan.unshare_below` is its end), the child starts sharing our descriptor
/// table (`CLONE_FILES`) and leaves it as its first step; the lease is kept with the
/// memory.
pub(crate) fn launch(plan: Box<Plan>, how: How, lease: Option<Lease>) -> Result<Launched, i32> {
    if matches!(how, How::IntoCgroup { .. }) && !CLONE3 {
        return Err(libc::ENOSYS);
    }
    let stack = if raw::SHARED_MEMORY {
        Some(Stack::get().ok_or(libc::ENOMEM)?)
    } else {
        None
    };
    debug_assert_eq!(lease.is_some(), plan.unshare_below.is_some());
    let files = if lease.is_some() && stack.is_some() {
        libc::CLONE_FILES
    } else {
        0
    };
    let memory = ChildMemory {
        plan: NonNull::from(Box::leak(plan)),
        stack,
        lease,
    };
    let arg = memory.plan.as_ptr().cast::<libc::c_void>();
    #[cfg_attr(
        not(all(target_os = "linux", target_arch = "x86_64")),
        allow(unused_mut)
    )]
    let mut pidfd: libc::c_int = -1;
    let blocked = SignalsBlocked::new();
    let pid = match (&memory.stack, how) {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        (
            Some(stack),
            How::IntoCgroup {
                cgroup,
                pidfd: want,
            },
        ) => {
            let (low, size) = stack.usable();
            let args = CloneArgs {
                flags: (libc::CLONE_VM | files) as u64
                    | CLONE_INTO_CGROUP
                    | if want { libc::CLONE_PIDFD as u64 } else { 0 },
                pidfd: if want {
                    std::ptr::addr_of_mut!(pidfd) as u64
                } else {
                    0
                },
                exit_signal: libc::SIGCHLD as u64,
                stack: low,
                stack_size: size,
                cgroup: cgroup as u64,
                ..CloneArgs::default()
            };
            // SAFETY: as for `clone` below: `child_entry` runs on `stack` (the kernel
            // starts the child at its top) with `arg` pointing to the plan, both kept
            // until the child has left our memory; the flags add only the cgroup to
            // start in and, for us, a pidfd written to `pidfd` before the call returns.
            match unsafe { clone3(&args, child_entry, arg) } {
                r if r < 0 => {
                    // Raw result: the errno is not in the C library's slot.
                    drop(blocked);
                    return Err(-r as i32);
                }
                r => r as libc::pid_t,
            }
        }
        (_, How::IntoCgroup { .. }) => unreachable!("checked above: CLONE3 is false"),

        // SAFETY: `child_entry` runs on the top of `stack`, inside the mapping, with `arg`
        // pointing to the plan; both stay allocated until the child has left our memory
        // because `memory` is returned to the caller, whose contract (see `ChildMemory`) is
        // to keep it until then. Without CLONE_VFORK we return at once; without
        // CLONE_SIGHAND or CLONE_THREAD the child has its own signal handlers and thread
        // group, and it resets the handlers before unblocking signals; with CLONE_FILES
        // (a lease) it shares our descriptor table only until its first step, touching no
        // descriptor but the band's status pipe before it (see `band.rs`).
        (Some(stack), How::Plain) => unsafe {
            libc::clone(
                child_entry,
                stack.top(),
                libc::CLONE_VM | files | libc::SIGCHLD,
                arg,
            )
        },
        (None, How::Plain) => {
            // SAFETY: `fork` has no preconditions; the child only calls `child::run`, which
            // makes async-signal-safe calls on memory prepared before, and never returns.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                child_entry(arg);
            }
            pid
        }
    };
    let errno = std::io::Error::last_os_error().raw_os_error();
    drop(blocked);
    if pid < 0 {
        return Err(errno.unwrap_or(libc::EAGAIN));
    }
    let pidfd = (pidfd >= 0).then(|| {
        // SAFETY: a descriptor the kernel just made for us (CLONE_PIDFD), owned by nobody
        // else.
        unsafe { OwnedFd::from_raw_fd(pidfd) }
    });
    if let Some(lease) = &memory.lease {
        lease.started(pid);
    }
    crate::sys::started::started(pid);
    Ok(Launched { pid, pidfd, memory })
}

/// Whether this target can start a child with [`How::IntoCgroup`] at all (the kernel may
/// still refuse: see [`probe_clone_into_cgroup`]).
pub(crate) const CLONE3: bool = cfg!(all(target_os = "linux", target_arch = "x86_64"));

/// `CLONE_INTO_CGROUP` from `<linux/sched.h>` (Linux 5.7).
#[cfg(target_os = "linux")]
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` from `<linux/sched.h>`, up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `clone3(args)`, the child running `entry(arg)` on the stack `args` names and exiting
/// with its return value should it return; returns the child's pid in the parent, or the
/// negated errno.
///
/// # Safety
/// `args` must describe a stack (`stack`, `stack_size`) that is the child's alone and stays
/// mapped, with `arg`, until the child has exec'd or exited; with `CLONE_VM`, `entry` must
/// behave as `child::run` does (raw system calls only, no writes to our memory).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn clone3(
    args: &CloneArgs,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> isize {
    let ret: isize;
    // SAFETY: the x86-64 system call convention (number in rax, arguments in rdi and rsi,
    // result in rax, rcx and r11 clobbered). In the parent (rax != 0) nothing else
    // changes. The child starts with our registers but rax = 0 and rsp at the top of its
    // own stack (16-byte aligned, so `call` leaves it as the C ABI expects on entry); it
    // never comes back to Rust code here: it calls `entry(arg)` (kept in r12 and r13,
    // which the kernel preserves) and exits, so what it clobbers concerns no one.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit_group}",
            "syscall",
            "ud2",
            "2:",
            exit_group = const libc::SYS_exit_group,
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    ret
}

/// Whether the kernel starts children into a cgroup with `clone3(CLONE_INTO_CGROUP)`
/// (Linux 5.7+, and `clone3` not filtered away): asks for it with a descriptor that is not
/// a cgroup, which such a kernel rejects with `EBADF` after validating the flags (older
/// kernels say `ENOSYS`, `EINVAL` or `E2BIG`; seccomp filters usually `ENOSYS` or `EPERM`).
/// Nothing is started either way.
pub(crate) fn probe_clone_into_cgroup() -> bool {
    if !CLONE3 {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(not_a_cgroup) = rustix::fs::open(
            "/",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            return false;
        };
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: std::os::fd::AsRawFd::as_raw_fd(&not_a_cgroup) as u64,
            ..CloneArgs::default()
        };
        // SAFETY: without CLONE_VM or a stack, a successful call would be a plain fork
        // (a child with a copy of our memory, returning here); it cannot succeed with a
        // descriptor that is not a cgroup, and the child would only `_exit` if it did.
        let r = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        let errno = std::io::Error::last_os_error().raw_os_error();
        match r {
            // SAFETY: we are the child of that impossible fork: leave at once.
            0 => unsafe { libc::_exit(0) },
            pid if pid > 0 => {
                // SAFETY: reaps our own child.
                unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
                crate::sys::reaped::note(pid as i32);
                false
            }
            _ => errno == Some(libc::EBADF),
        }
    }
    #[cfg(not(target_os = "linux"))]
    false
}
