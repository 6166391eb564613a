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
//! Other targets: `fork`, and the child has memory of its own.

use std::ptr::NonNull;

use super::child::{self, Plan};
use super::raw;

/// Usable stack for the child: it runs only `child::run`, a flat sequence of system calls
/// with small frames.
const STACK: usize = 64 * 1024;

/// Memory the child may be using: the plan, and on Linux its stack. Dropping it frees both,
/// so it must be dropped only once the child has provably left our memory: its status pipe
/// reached end-of-file (the kernel closes the child's descriptors after it switched to a new
/// address space on exec, or released ours on exit) or it was reaped.
pub(crate) struct ChildMemory {
    plan: NonNull<Plan>,
    stack: Option<Stack>,
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
const SPARE_MAX: usize = 8;

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

/// Starts a child running `child::run(plan)` and returns at once, without waiting for it to
/// exec: its pid and the memory to keep until it has left ours, or the errno of `clone` /
/// `fork` (the memory is then freed here).
pub(crate) fn launch(plan: Box<Plan>) -> Result<(libc::pid_t, ChildMemory), i32> {
    let stack = if raw::SHARED_MEMORY {
        Some(Stack::get().ok_or(libc::ENOMEM)?)
    } else {
        None
    };
    let memory = ChildMemory {
        plan: NonNull::from(Box::leak(plan)),
        stack,
    };
    let arg = memory.plan.as_ptr().cast::<libc::c_void>();
    let blocked = SignalsBlocked::new();
    let pid = match &memory.stack {
        // SAFETY: `child_entry` runs on the top of `stack`, inside the mapping, with `arg`
        // pointing to the plan; both stay allocated until the child has left our memory
        // because `memory` is returned to the caller, whose contract (see `ChildMemory`) is
        // to keep it until then. Without CLONE_VFORK we return at once; without
        // CLONE_FILES, CLONE_SIGHAND or CLONE_THREAD the child has its own descriptor table,
        // signal handlers and thread group, and it resets the handlers before unblocking
        // signals.
        Some(stack) => unsafe {
            libc::clone(
                child_entry,
                stack.top(),
                libc::CLONE_VM | libc::SIGCHLD,
                arg,
            )
        },
        None => {
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
    Ok((pid, memory))
}
