//! Reading state files back: one file ([`load_file`]) or a directory of them
//! ([`load_dir`]), each read strictly and decoded, a bad one moved aside.
//!
//! A directory is read in one pass with one reusable buffer: memory is the records kept
//! plus one file's bytes and parse tree, however many files there are, and the number of
//! files read is bounded by the caller.

use rustix::fs::FileType;

use super::aside::move_aside;
use super::atomic::is_temporary;
use super::dir::Dir;
use super::error::StoreError;
use super::format::FormatError;
use super::strict_read::ReadError;

/// The outcome of reading one file.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    /// Read and decoded.
    Read(T),
    /// There was no such file.
    Missing,
    /// The file was bad: moved aside (or left and skipped if even that failed).
    Bad,
}

/// Where a file is, for reading and for moving aside.
pub(crate) struct Place<'a> {
    /// Its directory.
    pub dir: &'a Dir,
    /// The directory's label in moved-aside names: `sessions`, `gens`, `state`.
    pub label: &'a str,
    /// Where bad files go.
    pub bad: &'a Dir,
}

/// What a newer format version in a file means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Newer {
    /// The whole directory is refused (the `id` file speaks for the directory).
    Refuse,
    /// The file alone is bad: a newer daemon writes the newer version into `id` before
    /// anything else, so a newer file in a directory of ours was not written by one.
    MoveAside,
}

/// Reads file `name` (at most `max` bytes, into `buf`) and decodes it.
pub(crate) fn load_file<T>(
    at: &Place<'_>,
    name: &str,
    max: usize,
    buf: &mut Vec<u8>,
    newer: Newer,
    decode: impl FnOnce(&[u8]) -> Result<T, FormatError>,
) -> Result<Outcome<T>, StoreError> {
    let why = match at.dir.read_strict(name, max, buf) {
        Ok(()) => match decode(buf) {
            Ok(value) => return Ok(Outcome::Read(value)),
            Err(FormatError::Newer { version }) if newer == Newer::Refuse => {
                return Err(StoreError::Newer {
                    path: at.dir.path_of(name),
                    version,
                })
            }
            Err(e) => e.to_string(),
        },
        Err(ReadError::Missing) => return Ok(Outcome::Missing),
        Err(ReadError::Io(e)) => return Err(StoreError::Io(e)),
        Err(e) => e.to_string(),
    };
    move_aside(at.dir, at.label, name, at.bad, &why);
    Ok(Outcome::Bad)
}

/// What loading a directory of records found.
#[derive(Debug)]
pub struct Batch<T> {
    /// The records read, in directory order.
    pub records: Vec<T>,
    /// Bad files (corrupt, foreign, misnamed): moved aside, or skipped if even that failed.
    pub bad: usize,
    /// Good-looking files not read because `max_files` were read already.
    pub over_limit: usize,
    /// Temporary files of unfinished writes, removed.
    pub temporaries: usize,
}

/// Reads every file of a directory of records: `key` says which names are records (and
/// what the name says, e.g. the generation number), `decode` turns a file's bytes into a
/// record, checking it against its key. At most `max_files` are read; each at most
/// `max_bytes`. Anything else in the directory is moved aside, except subdirectories,
/// which are left alone with a warning (nothing of ours is one, and they cannot be pruned).
pub(crate) fn load_dir<K, T>(
    at: &Place<'_>,
    max_files: usize,
    max_bytes: usize,
    key: impl Fn(&str) -> Option<K>,
    mut decode: impl FnMut(K, &[u8]) -> Result<T, FormatError>,
) -> Result<Batch<T>, StoreError> {
    let mut batch = Batch {
        records: Vec::new(),
        bad: 0,
        over_limit: 0,
        temporaries: 0,
    };
    let mut buf = Vec::new();
    let mut failed = None;
    at.dir.each_entry(|name, raw, kind| {
        let Some(name) = name else {
            log::warn!(
                "{}: ignoring an entry whose name is not UTF-8: {raw:?}",
                at.dir.path().display()
            );
            return true;
        };
        if kind == FileType::Directory {
            log::warn!(
                "{}: ignoring a directory nothing of ours creates",
                at.dir.path_of(name).display()
            );
            return true;
        }
        if is_temporary(name) {
            match at.dir.unlink(name) {
                Ok(()) => batch.temporaries += 1,
                Err(e) => log::debug!("{e}"),
            }
            return true;
        }
        let Some(k) = key(name) else {
            move_aside(
                at.dir,
                at.label,
                name,
                at.bad,
                "not a name the daemon writes",
            );
            batch.bad += 1;
            return true;
        };
        if batch.records.len() >= max_files {
            batch.over_limit += 1;
            return true;
        }
        match load_file(at, name, max_bytes, &mut buf, Newer::MoveAside, |b| {
            decode(k, b)
        }) {
            Ok(Outcome::Read(record)) => batch.records.push(record),
            // Removed between the listing and the read.
            Ok(Outcome::Missing) => {}
            Ok(Outcome::Bad) => batch.bad += 1,
            Err(e) => {
                failed = Some(e);
                return false;
            }
        }
        true
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if batch.over_limit > 0 {
        log::warn!(
            "{}: {} files beyond the limit of {max_files} were not read",
            at.dir.path().display(),
            batch.over_limit
        );
    }
    Ok(batch)
}
