//! Checks of the configuration as a whole, once every file is decoded: what no single
//! file can be wrong about alone.

use std::collections::BTreeMap;

use super::{ConfigError, Entry, MAX_SESSIONS};

/// The whole-set checks, in one place: every rule that relates sessions to each other
/// belongs here (a session named twice; references between sessions, such as
/// dependencies on other sessions, when a spec can name them).
pub(super) fn check_whole_set(entries: &[Entry]) -> Result<(), ConfigError> {
    if entries.len() > MAX_SESSIONS {
        let file = entries
            .last()
            .map(|e| e.file.as_path())
            .unwrap_or(".".as_ref());
        let why = format!("more than {MAX_SESSIONS} sessions in the configuration");
        return Err(ConfigError::file(file, why));
    }
    let mut seen = BTreeMap::new();
    for entry in entries {
        if let Some(first) = seen.insert(&entry.session.name, &entry.file) {
            let why = format!(
                "session {:?} is configured twice (also in {})",
                entry.session.name,
                first.display()
            );
            return Err(ConfigError::file(&entry.file, why));
        }
    }
    Ok(())
}
