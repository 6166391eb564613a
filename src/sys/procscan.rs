//! Scans of `/proc`: which processes are in a group, and who holds a given open file.
//!
//! Both are snapshots of a moving system and are meant for reporting and for "is anything
//! left" checks after signalling, not as a basis for signalling anyone.

use std::fs;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;

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

/// Live (non-zombie) processes whose process group is `pgid`, the leader included.
pub fn group_members(pgid: i32) -> io::Result<Vec<i32>> {
    let mut members = Vec::new();
    for pid in pids()? {
        let Ok(stat) = read_proc_file(&format!("/proc/{pid}/stat")) else {
            continue; // exited meanwhile
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let state = after.split_ascii_whitespace().next().unwrap_or("");
        if state == "Z" || state == "X" {
            continue;
        }
        // Field 5 is the process group.
        if stat_field(&stat, 5) == Some(pgid as u64) {
            members.push(pid);
        }
    }
    Ok(members)
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

/// Zombie processes whose parent is `parent`: orphans reparented to us (as PID 1 or as a
/// child subreaper) that have exited and wait to be reaped.
pub fn zombie_children(parent: i32) -> io::Result<Vec<i32>> {
    let mut zombies = Vec::new();
    for pid in pids()? {
        let Ok(stat) = read_proc_file(&format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let state = after.split_ascii_whitespace().next().unwrap_or("");
        // Field 4 is the parent.
        if state == "Z" && stat_field(&stat, 4) == Some(parent as u64) {
            zombies.push(pid);
        }
    }
    Ok(zombies)
}

/// Live (non-zombie) processes per process group, from one scan of `/proc`. Lets a caller
/// waiting on many groups check them all with one scan instead of one scan each.
pub fn live_group_sizes() -> io::Result<std::collections::HashMap<i32, usize>> {
    let mut sizes = std::collections::HashMap::new();
    for pid in pids()? {
        let Ok(stat) = read_proc_file(&format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let state = after.split_ascii_whitespace().next().unwrap_or("");
        if state == "Z" || state == "X" {
            continue;
        }
        if let Some(pgid) = stat_field(&stat, 5).and_then(|g| i32::try_from(g).ok()) {
            *sizes.entry(pgid).or_insert(0) += 1;
        }
    }
    Ok(sizes)
}
