//! One log file, written and rotated by size in the numbered scheme of s6-log and
//! logrotate: `web.log` → `web.log.1` → … → `web.log.N`, the one beyond `keep` deleted.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An open log file and what rotating it needs.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: File,
    /// Bytes in the file now.
    size: u64,
    /// Whether the last byte written was a newline (or nothing was).
    line_start: bool,
    max_size: u64,
    keep: u32,
}

impl LogFile {
    /// Opens (creating, mode 0640 less the umask) the file at `path` to append to it.
    /// Anything but a regular file is refused: a FIFO or device could block the writer
    /// (`O_NONBLOCK` makes a FIFO nobody reads fail to open instead of waiting), and
    /// cannot be rotated anyway.
    pub fn open(path: &[u8], max_size: u64, keep: u32) -> io::Result<LogFile> {
        let path = PathBuf::from(OsStr::from_bytes(path));
        // Looked at first for a clear message; the open's `O_NONBLOCK | O_NOFOLLOW` and
        // the check after it hold against a file replaced in between.
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::other("a symbolic link: refused"));
            }
            Ok(m) if !m.is_file() => return Err(io::Error::other("not a regular file")),
            _ => {}
        }
        let (file, meta) = open_append(&path)?;
        // A file that ends in the middle of a line (a write cut short by a full disk, a
        // writer that died mid-line) is continued there: a note starts a line first.
        // Best effort: the file is open for appending only, and may not be readable.
        let mut last = [b'\n'];
        if meta.len() > 0 {
            let reader = OpenOptions::new()
                .read(true)
                .custom_flags(
                    libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                )
                .open(&path);
            // The same file only (not one put in its place since).
            let same = |r: &File| {
                r.metadata()
                    .is_ok_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev())
            };
            if let Some(reader) = reader.ok().filter(same) {
                let _ = reader.read_at(&mut last, meta.len() - 1);
            }
        }
        Ok(LogFile {
            path,
            file,
            size: meta.len(),
            line_start: last[0] == b'\n',
            max_size,
            keep,
        })
    }

    /// Whether the file open is still the one at its path: not deleted, renamed or
    /// replaced (by hand, or by logrotate) since it was opened.
    pub fn still_at_path(&self) -> bool {
        match (std::fs::metadata(&self.path), self.file.metadata()) {
            (Ok(at_path), Ok(open)) => at_path.dev() == open.dev() && at_path.ino() == open.ino(),
            _ => false,
        }
    }

    /// Takes the size and count the latest record gave.
    pub fn configure(&mut self, max_size: u64, keep: u32) {
        self.max_size = max_size;
        self.keep = keep;
    }

    /// Appends `data`, rotating first wherever it would take the file past its size.
    pub fn append(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let room = self.max_size.saturating_sub(self.size);
            if data.len() as u64 <= room {
                return self.write(data);
            }
            if let Some(n) = cut(data, room, self.size, self.line_start) {
                self.write(&data[..n])?;
                data = &data[n..];
            }
            self.rotate()?;
        }
        Ok(())
    }

    /// Appends a line of genward's own, on a line of its own.
    pub fn note(&mut self, line: &[u8]) -> io::Result<()> {
        if !self.line_start {
            self.append(b"\n")?;
        }
        self.append(line)
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
        self.size += data.len() as u64;
        if let Some(&last) = data.last() {
            self.line_start = last == b'\n';
        }
        Ok(())
    }

    /// Shifts the rotated files up by one and starts the file again (with `keep` 0:
    /// empties it).
    fn rotate(&mut self) -> io::Result<()> {
        if self.keep == 0 {
            self.file.set_len(0)?;
        } else {
            let numbered = |n: u32| {
                let mut p = self.path.clone().into_os_string();
                p.push(format!(".{n}"));
                PathBuf::from(p)
            };
            ignore_missing(std::fs::remove_file(numbered(self.keep)))?;
            for n in (1..self.keep).rev() {
                ignore_missing(std::fs::rename(numbered(n), numbered(n + 1)))?;
            }
            // A file deleted or renamed meanwhile has nothing to move: a new one begins.
            ignore_missing(std::fs::rename(&self.path, numbered(1)))?;
            self.file = open_append(&self.path)?.0;
        }
        self.size = 0;
        self.line_start = true;
        Ok(())
    }
}

/// How much of `data` goes into a file of `size` bytes before it is rotated, with `room`
/// bytes left below its limit: up to the last newline that fits (files are cut at line
/// boundaries, as s6-log's are); if none does, nothing when the file ends a line (the
/// line starts the next file), else what fits (a line longer than the limit is split).
/// `None`: nothing.
fn cut(data: &[u8], room: u64, size: u64, line_start: bool) -> Option<usize> {
    let room = usize::try_from(room).unwrap_or(usize::MAX).min(data.len());
    if let Some(i) = data[..room].iter().rposition(|&b| b == b'\n') {
        return Some(i + 1);
    }
    if line_start && size > 0 {
        return None;
    }
    (room > 0).then_some(room)
}

/// Opens the log at `path` to append to it, creating it if missing. The writer runs as
/// the daemon's user (root, typically) while the log's directory may be writable by the
/// session's own, unprivileged user: a symbolic link put at the path (`O_NOFOLLOW`) or a
/// hard link to someone else's file (more than one link) would otherwise have the
/// daemon's user append to, or empty, any file it may write. Only a regular file with a
/// single link is written.
fn open_append(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other("a symbolic link: refused"),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if std::os::unix::fs::MetadataExt::nlink(&meta) != 1 {
        return Err(io::Error::other(
            "a file with more than one link (a hard link): refused",
        ));
    }
    Ok((file, meta))
}

fn ignore_missing(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::{cut, LogFile};

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gw-logfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_line_longer_than_the_limit_is_split_and_keep_zero_empties() {
        let dir = scratch("split");
        let path = dir.join("l.log");
        let mut f = LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 1).unwrap();
        f.append(&[b'a'; 5000]).unwrap();
        f.append(b"\n").unwrap();
        assert_eq!(
            std::fs::read(dir.join("l.log.1")).unwrap(),
            vec![b'a'; 4096]
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [&[b'a'; 904][..], b"\n"].concat()
        );
        let mut f = LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 0).unwrap();
        let full = [&[b'b'; 3999][..], b"\n"].concat();
        // With `keep` 0 no rotated file is made: the file is emptied, and the line that
        // did not fit starts it again.
        f.append(&full).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), full);
        let next = [&[b'c'; 199][..], b"\n"].concat();
        f.append(&next).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), next);
        assert!(!dir.join("l.log.2").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_or_hard_link_at_the_path_is_never_written_through() {
        let dir = scratch("links");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious\n").unwrap();
        let path = dir.join("l.log");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 1).is_err());
        assert!(LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 0).is_err());
        // A symlink to a file not there yet: nothing is created through it.
        let missing = dir.join("made-through-link");
        let path2 = dir.join("l2.log");
        std::os::unix::fs::symlink(&missing, &path2).unwrap();
        assert!(LogFile::open(path2.as_os_str().as_encoded_bytes(), 4096, 1).is_err());
        assert!(!missing.exists());
        // A hard link to another file.
        let path3 = dir.join("l3.log");
        std::fs::hard_link(&victim, &path3).unwrap();
        assert!(LogFile::open(path3.as_os_str().as_encoded_bytes(), 4096, 0).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_reopened_in_mid_line_gets_its_note_on_a_line_of_its_own() {
        let dir = scratch("reopen-mid-line");
        let path = dir.join("l.log");
        std::fs::write(&path, b"cut sho").unwrap();
        let mut f = LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 1).unwrap();
        f.note(b"genward: dropped 3 bytes\n").unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"cut sho\ngenward: dropped 3 bytes\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_deleted_or_renamed_is_no_longer_at_its_path() {
        let dir = scratch("moved");
        let path = dir.join("l.log");
        let f = LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 1).unwrap();
        assert!(f.still_at_path());
        std::fs::rename(&path, dir.join("l.log.old")).unwrap();
        assert!(!f.still_at_path());
        std::fs::write(&path, b"").unwrap();
        assert!(!f.still_at_path());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_note_starts_a_line_of_its_own() {
        let dir = scratch("note");
        let path = dir.join("l.log");
        let mut f = LogFile::open(path.as_os_str().as_encoded_bytes(), 4096, 1).unwrap();
        f.append(b"partial").unwrap();
        f.note(b"genward: dropped 3 bytes\n").unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"partial\ngenward: dropped 3 bytes\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cuts_at_the_last_newline_within_reach() {
        assert_eq!(cut(b"ab\ncd\nef", 7, 10, true), Some(6));
        // No newline fits: a file ending a line is rotated first…
        assert_eq!(cut(b"abcdef", 3, 10, true), None);
        // …one in mid-line, or an empty one, takes what fits (a long line is split).
        assert_eq!(cut(b"abcdef", 3, 10, false), Some(3));
        assert_eq!(cut(b"abcdef", 3, 0, true), Some(3));
        assert_eq!(cut(b"abcdef", 0, 10, false), None);
    }
}
