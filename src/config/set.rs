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
    check_dependencies(entries, &seen)
}

/// Every `depends_on` names a session of the configuration (one started by a client may
/// come and go: a configuration cannot rest on it), and no chain of them comes back to
/// where it started.
fn check_dependencies(
    entries: &[Entry],
    files: &BTreeMap<&std::sync::Arc<str>, &std::path::PathBuf>,
) -> Result<(), ConfigError> {
    for entry in entries {
        for dep in entry.session.spec.depends_on.keys() {
            if !files.keys().any(|name| name.as_ref() == dep.as_str()) {
                return Err(ConfigError {
                    field: Some(format!("depends_on.{dep}")),
                    ..ConfigError::file(
                        &entry.file,
                        format!("{dep:?} is not a session of the configuration"),
                    )
                });
            }
        }
    }
    let graph = entries.iter().map(|e| {
        let deps = e.session.spec.depends_on.keys().map(String::as_str);
        (e.session.name.as_ref(), deps)
    });
    crate::core::depends::check_set(graph).map_err(|why| {
        // The cycle's first session's file: where to start looking.
        let first = why
            .strip_prefix("dependency cycle: ")
            .and_then(|c| c.split(" -> ").next())
            .and_then(|n| files.iter().find(|(name, _)| name.as_ref() == n))
            .map(|(_, file)| file.as_path());
        let file = first.unwrap_or_else(|| entries[0].file.as_path());
        ConfigError {
            field: Some("depends_on".into()),
            ..ConfigError::file(file, why)
        }
    })
}
