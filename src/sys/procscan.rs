//! Scans of `/proc`: which processes are in a group, and who holds a given open file.
//!
//! Both are snapshots of a moving system and are meant for reporting and for "is anything
//! left" checks after signalling, not as a basis for signalling anyone.

use std::fs;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::identity::{read_proc_file, stat_field};

/// Cap on the processes examined by one scan, so a pathological system cannot make a scan
/// unbounded.
pub const MAX_SCAN: usize = 1 << 20;

fn pids() -> io::Result<impl Iterator<Item = i32>> {
    Ok(fs::read_dir("/proc")?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .take(MAX_SCAN))
}

/// The fields of `/proc/<pid>/stat` the scans need.
struct Stat {
    pid: i32,
    /// Zombie or dead: holds nothing and cannot be signalled.
    gone: bool,
    pgid: u64,
}

/// Every process's [`Stat`], skipping those that exit while we look.
fn stats() -> io::Result<impl Iterator<Item = Stat>> {
    Ok(pids()?.filter_map(|pid| {
        let stat = read_proc_file(&format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 1..];
        let state = after.split_ascii_whitespace().next()?;
        Some(Stat {
            pid,
            gone: state == "Z" || state == "X",
            // Field 5: the process group.
            pgid: stat_field(&stat, 5)?,
        })
    }))
}

/// How many times [`marked`] has looked through `/proc` in this process: its log says it,
/// so that how many looks a start-up took can be checked.
static MARKED_LOOKS: AtomicU64 = AtomicU64::new(0);

/// Every process whose environment marks it (`GENWARD_GEN`, see `sys::tree`), with the
/// marker's value. Reads every process's environment once: at start-up, and at most once
/// per loop turn after (for all the generations taken back that ended in it), never per
/// generation.
pub fn marked() -> io::Result<Vec<(i32, String)>> {
    MARKED_LOOKS.fetch_add(1, Ordering::Relaxed);
    Ok(pids()?
        .filter_map(|pid| Some((pid, crate::sys::tree::read_marker_value(pid)?)))
        .collect())
}

/// How many looks through `/proc` [`marked`] has taken so far.
pub fn marked_looks() -> u64 {
    MARKED_LOOKS.load(Ordering::Relaxed)
}

/// Live (non-zombie) processes whose process group is `pgid`, the leader included.
pub fn group_members(pgid: i32) -> io::Result<Vec<i32>> {
    Ok(stats()?
        .filter(|s| !s.gone && s.pgid == pgid as u64)
        .map(|s| s.pid)
        .collect())
}

/// Which of `pgids` have no live member other than their (zombie) leaders, judged by two
/// consecutive scans so that a member forking while one scan runs is seen by the other.
/// One pair of scans answers for any number of groups.
pub fn empty_groups(pgids: &[i32]) -> io::Result<Vec<i32>> {
    let mut live = std::collections::HashSet::new();
    for _ in 0..2 {
        live.extend(stats()?.filter(|s| !s.gone).map(|s| s.pgid));
    }
    Ok(pgids
        .iter()
        .copied()
        .filter(|g| !live.contains(&(*g as u64)))
        .collect())
}

/// Processes (other than this one) holding an open descriptor on the same file as `fd`
/// (for a pipe: the same pipe). Finds a grandchild that left its group with `setsid` but
/// still holds our output pipe. Needs permission to read other processes' `/proc/<pid>/fd`
/// (same user, or root); unreadable processes are skipped.
pub fn holders_of(fd: BorrowedFd<'_>) -> io::Result<Vec<i32>> {
    let target = rustix::fs::fstat(fd)?;
    let me = std::process::id() as i32;
    let mut holders = Vec::new();
    for pid in pids()? {
        if pid == me {
            continue;
        }
        let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = entries.filter_map(|e| e.ok()).any(|entry| {
            fs::metadata(entry.path())
                .map(|m| m.dev() == target.st_dev as u64 && m.ino() == target.st_ino as u64)
                .unwrap_or(false)
        });
        if holds {
            holders.push(pid);
        }
    }
    Ok(holders)
}
