//! State-directory fixtures shared by the store's tests and its bench: a session record
//! with every part filled in, and files placed as a test needs them (without the store's
//! `fsync`s, which would make writing thousands of them slow and prove nothing).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{
    Desired, Event, ExitCause, LastEnd, RestState, Restart, SessionRecord, SpawnError,
    SpawnErrorKind, Spec,
};

/// A session record named `name` with a spec, a restart policy, a last end and two recent
/// ends (one exit, one failed spawn), as a session that has run a while would have.
pub fn sample_session(name: &str) -> SessionRecord {
    let name: Arc<str> = Arc::from(name);
    let mut spec = Spec::new(vec![
        b"/usr/bin/agent".to_vec(),
        b"--workdir".to_vec(),
        format!("/srv/{name}").into_bytes(),
    ]);
    spec.env.set = vec![(b"PORT".to_vec(), b"8080".to_vec())];
    spec.restart.mode = Restart::OnFailure;
    spec.grace = Duration::from_millis(2500);
    SessionRecord {
        name: name.clone(),
        spec,
        origin: crate::core::Origin::Client,
        desired: Desired::Up,
        rest: RestState::Failed,
        restarts: 2,
        restart_at_unix_ms: None,
        restart_uncounted: false,
        current: Some(12),
        current_overlaps: true,
        stopped_by_shutdown: false,
        last_gen: Some(11),
        last_end: Some(LastEnd::Exited {
            gen: 11,
            code: Some(1),
            signal: None,
            cause: ExitCause::Exited,
        }),
        recent_ends: vec![
            Event::SpawnFailed {
                session: name.clone(),
                gen: 10,
                error: SpawnError::new(SpawnErrorKind::NotFound, 2),
            },
            Event::Exited {
                session: name,
                gen: 11,
                code: Some(1),
                signal: None,
                cause: ExitCause::Exited,
                discarded: 0,
                truncated: false,
            },
        ],
        stops: Vec::new(),
    }
}

/// Writes `bytes` to `path` as the store's files are (mode 0600), without `fsync`.
pub fn place_file(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.write_all(bytes).unwrap();
}
