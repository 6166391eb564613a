//! The daemon's declarative configuration (`genward daemon --config PATH`): the sessions
//! it runs by itself, each written exactly as a `spawn` request's members.
//!
//! Two forms, told apart by what `PATH` is:
//!
//! - a file holding one object, `{"sessions": {"NAME": {spawn members}, ...}}`;
//! - a directory of `NAME.json` files, one session each (one `spawn` object), so packages
//!   and configuration management can drop files in. Hidden files and editors' and
//!   package managers' leftovers are skipped ([`read::is_ignored`]); any other entry not
//!   named `NAME.json` with a valid session name is an error.
//!
//! Loading is strict and all-or-nothing: every file is read and decoded, then the whole
//! set is checked ([`set::check_whole_set`]), and the first problem is the error, which
//! names the file, the line and column, and the field (`web.json:4:13: grace: ...`). What
//! the sessions become is the core's business ([`Core::reload`](crate::core::Core::reload)).

mod decode;
mod locate;
mod read;
mod set;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::core::ConfigSession;

pub use decode::{decode_dir_entry, decode_file};
pub use read::is_ignored;

/// Largest config file read.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Most directory entries looked at (ignored ones included).
pub const MAX_DIR_ENTRIES: usize = 4096;
/// Most sessions in one configuration.
pub const MAX_SESSIONS: usize = 4096;

/// One configured session and the file it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The session as the core takes it.
    pub session: ConfigSession,
    /// The file that configures it, for messages.
    pub file: PathBuf,
}

/// Why a configuration cannot be loaded: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or directory) at fault.
    pub file: PathBuf,
    /// 1-based line and column (in characters) of the offending text, when known.
    pub at: Option<(usize, usize)>,
    /// The field it is about (`grace`, `restart.mode`, `sessions.web.argv[2]`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: String,
}

impl ConfigError {
    /// A problem with a whole file (or directory), at no particular place.
    pub fn file(file: &Path, problem: impl Into<String>) -> ConfigError {
        ConfigError {
            file: file.to_owned(),
            at: None,
            field: None,
            problem: problem.into(),
        }
    }
}

/// `file:line:col: field: problem`, leaving out what is not known.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.at {
            write!(f, ":{line}:{col}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// Loads the configuration at `path` (a file or a directory, see the module's docs).
pub fn load(path: &Path) -> Result<Vec<Entry>, ConfigError> {
    let entries = read::read(path)?;
    set::check_whole_set(&entries)?;
    Ok(entries)
}

/// The sessions of `entries`, as [`Core::reload`](crate::core::Core::reload) takes them.
pub fn sessions(entries: &[Entry]) -> Vec<ConfigSession> {
    entries.iter().map(|e| e.session.clone()).collect()
}
