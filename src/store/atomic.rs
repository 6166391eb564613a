//! Writes that are never seen half done: a file is written whole under a temporary name,
//! flushed, renamed over its real name, and the directory flushed.
//!
//! A daemon that dies at any point leaves either the old file or the new one under the
//! real name, never a mix; at worst a temporary file remains, which the next daemon
//! removes ([`Dir::remove_temporaries`]). The `fsync`s make the same true of a machine
//! that loses power, where the state directory is on a disk (on the default RAM-backed
//! directory they cost next to nothing).

use std::io;

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

use super::dir::Dir;

/// The smallest batch of writes flushed with one `syncfs` (see [`Dir::write_atomic_all`]):
/// `syncfs` flushes everything dirty on the filesystem, other programs' writes included —
/// on a disk shared with a heavy writer one call took 70–225 ms where a file's `fsync`
/// took under a millisecond — so it pays only for a batch large enough that its own
/// flushes would cost more; a smaller batch flushes each of its files.
pub const SYNCFS_FROM: usize = 32;

/// Temporary files are `.<name>.tmp`: a leading dot no session name, generation number or
/// fixed file name has, so a temporary file can never be taken for a real one.
pub(crate) fn temporary_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// Whether an entry is one of our temporary files.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

impl Dir {
    /// Replaces file `name` with `bytes` atomically and durably: write a fresh temporary
    /// file (mode 0600, created exclusively, so nothing already there is followed or
    /// reused), `fsync` it, rename it over `name`, `fsync` the directory.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_and_rename(name, bytes)?;
        self.sync()
    }

    /// [`write_atomic`](Dir::write_atomic) without the directory's `fsync`: the new
    /// contents are whole under `name` for any later reader, but the rename may be lost
    /// with power. For a batch of writes followed by one [`sync`](Dir::sync).
    pub fn write_and_rename(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = temporary_name(name);
        let fd = self.create_temporary(&tmp)?;
        let written = write_all(&fd, bytes)
            .and_then(|()| rfs::fsync(&fd))
            .and_then(|()| rfs::renameat(self, tmp.as_str(), self, name));
        drop(fd);
        if let Err(e) = written {
            let _ = self.unlink(&tmp);
            return Err(self.io(e));
        }
        Ok(())
    }

    /// Replaces each of `files` as [`write_atomic`](Dir::write_atomic) replaces one, with
    /// the flushes shared. A batch of [`SYNCFS_FROM`] files or more: every temporary file
    /// written, then one `syncfs` for all their contents, each renamed, and the directory
    /// flushed once — two flushes for the batch where one at a time took two per file (on
    /// a disk, 0.3–7 ms each: a `shutdown` of 20,000 sessions rewrote every file). A
    /// smaller one: each file flushed and renamed, then the directory flushed once. Each
    /// file's result, in order; a file whose write failed is left as it was.
    pub fn write_atomic_all(&self, files: &[(String, &[u8])]) -> Vec<io::Result<()>> {
        if let [(name, bytes)] = files {
            return vec![self.write_atomic(name, bytes)];
        }
        if files.len() < SYNCFS_FROM {
            let mut results: Vec<io::Result<()>> = files
                .iter()
                .map(|(name, bytes)| self.write_and_rename(name, bytes))
                .collect();
            self.sync_renames(&mut results);
            return results;
        }
        let mut results: Vec<io::Result<()>> = files
            .iter()
            .map(|(name, bytes)| {
                let tmp = temporary_name(name);
                let fd = self.create_temporary(&tmp)?;
                write_all(&fd, bytes).map_err(|e| {
                    let _ = self.unlink(&tmp);
                    self.io(e)
                })
            })
            .collect();
        if results.iter().any(Result::is_ok) {
            if let Err(e) = rfs::syncfs(self) {
                self.undo(files, &mut results, e);
                return results;
            }
        }
        for ((name, _), result) in files.iter().zip(&mut results) {
            if result.is_ok() {
                let tmp = temporary_name(name);
                if let Err(e) = rfs::renameat(self, tmp.as_str(), self, name.as_str()) {
                    let _ = self.unlink(&tmp);
                    *result = Err(self.io(e));
                }
            }
        }
        self.sync_renames(&mut results);
        results
    }

    /// Flushes the directory after the renames of a batch, once; if that fails, the
    /// files renamed are in place but may be lost with power: each is an error (written
    /// again).
    fn sync_renames(&self, results: &mut [io::Result<()>]) {
        if results.iter().any(Result::is_ok) {
            if let Err(e) = rfs::fsync(self) {
                for result in results.iter_mut().filter(|r| r.is_ok()) {
                    *result = Err(self.io(e));
                }
            }
        }
    }

    /// The temporary files of a batch whose flush failed are removed, each an error.
    fn undo(&self, files: &[(String, &[u8])], results: &mut [io::Result<()>], e: Errno) {
        for ((name, _), result) in files.iter().zip(results) {
            if result.is_ok() {
                let _ = self.unlink(&temporary_name(name));
                *result = Err(self.io(e));
            }
        }
    }

    /// Creates temporary file `tmp` for writing: fresh (mode 0600, created exclusively, so
    /// nothing already there is followed or reused).
    fn create_temporary(&self, tmp: &str) -> io::Result<std::os::fd::OwnedFd> {
        let create = || {
            rfs::openat(
                self,
                tmp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::RUSR | Mode::WUSR,
            )
        };
        // Temporaries a dead daemon left are removed at start and a failed write removes
        // its own, so one is found here only after an unlink that failed: removed then.
        match create() {
            Err(Errno::EXIST) => {
                self.unlink(tmp)?;
                create()
            }
            other => other,
        }
        .map_err(|e| self.io(e))
    }

    /// Removes file `name` durably (a missing one is not an error): a removal lost with
    /// power would bring back what a client removed.
    pub fn remove_durably(&self, name: &str) -> io::Result<()> {
        self.unlink(name)?;
        self.sync()
    }

    /// Removes the temporary files of writes a dead daemon did not finish. Returns how
    /// many there were.
    pub fn remove_temporaries(&self) -> io::Result<usize> {
        let mut names = Vec::new();
        self.each_entry(|name, _, _| {
            if let Some(name) = name.filter(|n| is_temporary(n)) {
                names.push(name.to_owned());
            }
            true
        })?;
        for name in &names {
            self.unlink(name)?;
        }
        Ok(names.len())
    }
}

fn write_all(fd: &std::os::fd::OwnedFd, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
