//! Low descriptor numbers kept for children that start sharing our descriptor table.
//!
//! A child started without `CLONE_FILES` gets a copy of our whole descriptor table, and
//! closes it all again before `execve` (`close_range`): two passes over every descriptor
//! we hold, about 0.1 µs each — milliseconds per spawn for a daemon holding the pipes,
//! pidfds and cgroup watches of thousands of running sessions, so a spawn's cost grew with
//! the sessions running.
//!
//! Instead the child starts *sharing* our table (`CLONE_FILES`), and its first step is
//! `close_range(end, ~0, CLOSE_RANGE_UNSHARE)`: when the range covers the top of the table
//! the kernel copies only the descriptors below `end` into the child's own new table
//! (Linux 5.9). So the few descriptors the child needs — its stdio sources, the status pipe,
//! a cgroup's `cgroup.procs`, an extra descriptor — are first put at low numbers kept for
//! this: a **band**, one of [`BANDS`], each of [`SLOTS`] numbers holding `/dev/null` while
//! free. The copy costs the same whatever we hold.
//!
//! Until the child has its own table, whatever we do to the band's numbers the child sees,
//! so a band is lent to one child at a time ([`Lease`]) and taken back only once the child
//! has left the shared table: it writes [`UNSHARED`] to the status pipe right after the
//! `close_range` (the caller then drops the lease), or it died (see [`release_dead`]).
//! Taking a band back puts `/dev/null` over its numbers, which also drops our references to
//! the child's pipe ends, so end-of-file reaches the right side as before.
//!
//! Where bands cannot be kept (the kernel lacks `CLOSE_RANGE_UNSHARE`, a seccomp policy
//! refuses it, the numbers found are not low), or every band is lent, a child starts the
//! old way, with a copy of the whole table.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use rustix::fs::{open, Mode, OFlags};
use rustix::io::fcntl_dupfd_cloexec;

/// Children starting at once with a band each; more start the old way.
pub(crate) const BANDS: usize = 8;
/// Descriptors one child may need moved: three stdio sources, the status pipe, a cgroup's
/// `cgroup.procs`, one extra.
pub(crate) const SLOTS: usize = 6;
/// The lowest number a band may use: an extra descriptor for the child at a number below
/// `LOWEST - 1` is placed by its `dup2` without touching a band.
pub(crate) const LOWEST: RawFd = 10;
/// Bands found above this are not low enough to be worth it: the child would copy all
/// descriptors below the band's end.
const HIGHEST_END: RawFd = 256;
/// Under a descriptor limit below this no bands are kept: the table a child copies is
/// small anyway, and the bands' [`BANDS`] × [`SLOTS`] numbers would be a real share of it.
const SMALLEST_LIMIT: u64 = 1024;

/// What a child writes to the status pipe once it has a descriptor table of its own.
/// A failure report (see `child.rs`) never starts with it: its first byte is a step
/// number (below 32) or, big-endian, 0.
pub(crate) const UNSHARED: u8 = 0xff;

/// `CLOSE_RANGE_UNSHARE` from `<linux/close_range.h>`.
pub(crate) const CLOSE_RANGE_UNSHARE: u32 = 1 << 1;

/// The kept numbers and who has them.
struct Bands {
    /// `/dev/null`, put over a band's numbers while it is free.
    null: OwnedFd,
    /// `slots[b]`: band `b`'s numbers, each holding `null` or a child's descriptor.
    slots: [[OwnedFd; SLOTS]; BANDS],
    /// Per band: lent (with the serial of the lease, and the child's pid once started).
    lent: [Option<(u64, Option<libc::pid_t>)>; BANDS],
    /// One above the highest number of any band.
    end: RawFd,
    next_serial: u64,
}

/// `None` before the first use; `Some(None)` where bands cannot be kept.
static STATE: Mutex<Option<Option<Bands>>> = Mutex::new(None);

/// A band lent to one child: its numbers, and the lower bound the child's `close_range`
/// copies below. Dropping it takes the band back (see the module docs for when that is
/// safe).
#[derive(Debug)]
pub(crate) struct Lease {
    band: usize,
    serial: u64,
    /// The band's numbers, in [`SLOTS`] order.
    pub slots: [RawFd; SLOTS],
    /// What the child passes to `close_range` as its first descriptor.
    pub end: RawFd,
}

impl Lease {
    /// Puts `fd` at the band's number `index` (below [`SLOTS`]) and returns that number,
    /// for the child to find it there.
    pub fn place(&self, index: usize, fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<RawFd> {
        let slot = self.slots[index];
        put(fd.as_raw_fd(), slot)?;
        Ok(slot)
    }

    /// Records the child the band is lent to, so [`release_dead`] can take it back if the
    /// child dies before leaving the shared table.
    pub fn started(&self, pid: libc::pid_t) {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Some(bands)) = state.as_mut() {
            if let Some((serial, child)) = &mut bands.lent[self.band] {
                if *serial == self.serial {
                    *child = Some(pid);
                }
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Some(bands)) = state.as_mut() {
            if matches!(bands.lent[self.band], Some((serial, _)) if serial == self.serial) {
                bands.give_back(self.band);
            }
        }
    }
}

impl Bands {
    /// Opens `/dev/null` and keeps `BANDS * SLOTS` of the lowest free numbers from
    /// [`LOWEST`] up; `None` if they are not low or anything fails.
    fn reserve() -> Option<Bands> {
        let null = open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).ok()?;
        let mut end = 0;
        let mut band = || -> Option<[OwnedFd; SLOTS]> {
            let fds: Vec<OwnedFd> = (0..SLOTS)
                .map(|_| fcntl_dupfd_cloexec(&null, LOWEST).ok())
                .collect::<Option<_>>()?;
            end = fds
                .iter()
                .map(|fd| fd.as_raw_fd() + 1)
                .fold(end, RawFd::max);
            fds.try_into().ok()
        };
        let slots = [(); BANDS].map(|()| band());
        if slots.iter().any(Option::is_none) || end > HIGHEST_END {
            return None;
        }
        Some(Bands {
            null,
            slots: slots.map(|s| s.expect("checked above")),
            lent: [None; BANDS],
            end,
            next_serial: 0,
        })
    }

    fn give_back(&mut self, band: usize) {
        for slot in &self.slots[band] {
            // Cannot fail for two open descriptors of ours (and if it did, the slot would
            // keep a child's end open a while, never hand a wrong one to anyone).
            let _ = put(self.null.as_raw_fd(), slot.as_raw_fd());
        }
        self.lent[band] = None;
    }
}

/// `dup3(fd, slot, O_CLOEXEC)`: what `slot` refers to becomes `fd`'s, atomically (no
/// moment where the number is free for another open to take). Close-on-exec, like every
/// descriptor of ours.
fn put(fd: RawFd, slot: RawFd) -> std::io::Result<()> {
    // SAFETY: two descriptor numbers; `slot` is a band's, owned by `Bands`, which keeps
    // owning it (only what it refers to changes).
    if unsafe { libc::dup3(fd, slot, libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a child may leave a shared table with `close_range(CLOSE_RANGE_UNSHARE)` here:
/// asked once, by a forked child whose table is its own (in this process the call would
/// give the calling thread a table of its own).
fn unshare_supported() -> bool {
    if !super::raw::SHARED_MEMORY {
        return false;
    }
    // SAFETY: the child makes one raw system call and exits, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: a range covering nothing, in a child with a table of its own.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                u32::MAX,
                u32::MAX,
                CLOSE_RANGE_UNSHARE,
            )
        };
        // SAFETY: ends the forked child without running anything of ours.
        unsafe { libc::_exit(if rc == 0 { 0 } else { 1 }) };
    }
    if pid < 0 {
        return false;
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, by pid.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            crate::sys::reaped::note(pid);
            return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        }
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// Keeps the bands now if they are to be kept at all (decided once: `CLOSE_RANGE_UNSHARE`
/// works, the descriptor limit is at least [`SMALLEST_LIMIT`], low numbers are free), so
/// that a process counting its descriptors counts them among its own. Otherwise the first
/// spawn decides.
pub fn keep() {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    decide(&mut state);
}

fn decide(state: &mut Option<Option<Bands>>) -> Option<&mut Bands> {
    state
        .get_or_insert_with(|| {
            let limit = crate::sys::rlimit::nofile_soft_limit().unwrap_or(u64::MAX);
            (limit >= SMALLEST_LIMIT && unshare_supported())
                .then(Bands::reserve)
                .flatten()
        })
        .as_mut()
}

/// Lends a free band, or `None` (none free, or bands cannot be kept here): the child then
/// starts with a copy of the whole table.
pub(crate) fn lend() -> Option<Lease> {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let bands = decide(&mut state)?;
    let band = bands.lent.iter().position(Option::is_none)?;
    let serial = bands.next_serial;
    bands.next_serial += 1;
    bands.lent[band] = Some((serial, None));
    Some(Lease {
        band,
        serial,
        slots: bands.slots[band].each_ref().map(AsRawFd::as_raw_fd),
        end: bands.end,
    })
}

/// Takes back the bands of children that died before leaving the shared table (killed
/// before their first step): nothing else would, and the status pipe's copy in the band
/// would keep its end-of-file from ever coming. Asked without reaping (`WNOWAIT`): the
/// child is our unreaped child, so its pid names it.
pub(crate) fn release_dead() {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(Some(bands)) = state.as_mut() else {
        return;
    };
    for band in 0..BANDS {
        let Some((_, Some(pid))) = bands.lent[band] else {
            continue;
        };
        // SAFETY: `info` is a valid out-pointer; WNOWAIT leaves the child as it is.
        let exited = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            rc == 0 && info.si_pid() == pid
        };
        if exited {
            bands.give_back(band);
        }
    }
}
