//! Reading a configuration from disk: a file, or a directory of `NAME.json` files. Every
//! read is bounded (file size, directory entries), and nothing is opened that could block
//! (a FIFO named `x.json` is refused, not read).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::decode::{decode_dir_entry, decode_file};
use super::{ConfigError, Entry, MAX_DIR_ENTRIES, MAX_FILE_BYTES, MAX_SESSIONS};

/// Reads the configuration at `path`, a file or a directory.
pub(super) fn read(path: &Path) -> Result<Vec<Entry>, ConfigError> {
    let meta = std::fs::metadata(path).map_err(|e| ConfigError::file(path, e.to_string()))?;
    if meta.is_dir() {
        read_dir(path)
    } else {
        decode_file(path, &read_file(path)?)
    }
}

/// Whether a directory entry is skipped: hidden files (`.*`), editors' backups and swap
/// files (`*~`, `*.swp`, `*.tmp`) and package managers' leftovers (`*.dpkg-old`,
/// `*.dpkg-new`, `*.dpkg-dist`, `*.rpmnew`, `*.rpmsave`, `*.rpmorig`).
pub fn is_ignored(name: &str) -> bool {
    const SUFFIXES: &[&str] = &[
        "~",
        ".swp",
        ".tmp",
        ".dpkg-old",
        ".dpkg-new",
        ".dpkg-dist",
        ".rpmnew",
        ".rpmsave",
        ".rpmorig",
    ];
    name.starts_with('.') || SUFFIXES.iter().any(|s| name.ends_with(s))
}

fn read_dir(dir: &Path) -> Result<Vec<Entry>, ConfigError> {
    let listing = std::fs::read_dir(dir).map_err(|e| ConfigError::file(dir, e.to_string()))?;
    let mut names = Vec::new();
    for (i, item) in listing.enumerate() {
        if i >= MAX_DIR_ENTRIES {
            let why = format!("more than {MAX_DIR_ENTRIES} entries");
            return Err(ConfigError::file(dir, why));
        }
        let item = item.map_err(|e| ConfigError::file(dir, e.to_string()))?;
        let file = item.path();
        let Ok(name) = item.file_name().into_string() else {
            return Err(ConfigError::file(&file, "a file name that is not UTF-8"));
        };
        if is_ignored(&name) {
            continue;
        }
        let Some(session) = name.strip_suffix(".json") else {
            let why = "not a NAME.json file (hidden files, *~, *.swp, *.tmp and package managers' leftovers are the only others allowed)";
            return Err(ConfigError::file(&file, why));
        };
        crate::core::check_session_name(session)
            .map_err(|why| ConfigError::file(&file, format!("the file's name: {why}")))?;
        names.push(name);
    }
    if names.len() > MAX_SESSIONS {
        let why = format!("more than {MAX_SESSIONS} sessions");
        return Err(ConfigError::file(dir, why));
    }
    // Name order, so errors and starts do not depend on the directory's own order.
    names.sort();
    let mut entries = Vec::with_capacity(names.len());
    for name in names {
        let file = dir.join(&name);
        let session = name.strip_suffix(".json").unwrap_or(&name);
        entries.push(decode_dir_entry(&file, session, &read_file(&file)?)?);
    }
    Ok(entries)
}

/// A regular file's bytes, at most [`MAX_FILE_BYTES`].
fn read_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let failed = |e: std::io::Error| ConfigError::file(path, e.to_string());
    let meta = std::fs::metadata(path).map_err(failed)?;
    if !meta.is_file() {
        return Err(ConfigError::file(path, "not a regular file"));
    }
    // Non-blocking: should it be swapped for a FIFO after the check, opening it does not
    // wait for a writer.
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() > MAX_FILE_BYTES {
        let why = format!("larger than {MAX_FILE_BYTES} bytes");
        return Err(ConfigError::file(path, why));
    }
    Ok(bytes)
}
