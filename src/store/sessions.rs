//! `sessions/<name>.json`: one file per session, written whenever something it holds
//! changes, removed when the session is.

use std::io;

use super::aside::move_aside;
use super::error::StoreError;
use super::highwater::{beyond, named_generations, MAX_STORED_GEN};
use super::layout::Store;
use super::load::{load_dir, Batch, Place};
use super::names::{session_file, session_of_file, SESSIONS_DIR};
use super::session_codec::{decode_session, encode_session, MAX_SESSION_FILE};
use crate::core::SessionRecord;
use crate::proto::json::FieldError;

impl Store {
    /// Saves `record` atomically and durably, replacing its previous file.
    pub fn write_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let bytes = session_file_bytes(record)?;
        self.sessions
            .write_atomic(&session_file(&record.name), &bytes)?;
        Ok(())
    }

    /// Saves each `(name, bytes)` (a [`session_file_bytes`]) as session `name`'s file,
    /// atomically and durably, the flushes shared by all (see [`Dir::write_atomic_all`]):
    /// for a caller that looks at the bytes first. Each one's result, in order.
    ///
    /// [`Dir::write_atomic_all`]: super::dir::Dir::write_atomic_all
    pub fn write_session_files(&self, files: &[(&str, &[u8])]) -> Vec<Result<(), StoreError>> {
        let files: Vec<(String, &[u8])> = files
            .iter()
            .map(|&(name, bytes)| (session_file(name), bytes))
            .collect();
        let results = self.sessions.write_atomic_all(&files);
        results
            .into_iter()
            .map(|r| r.map_err(StoreError::from))
            .collect()
    }

    /// Removes a session's file, durably: a removed session must not come back after a
    /// crash. A session without a file is not an error.
    pub fn remove_session(&self, name: &str) -> Result<(), StoreError> {
        self.sessions.remove_durably(&session_file(name))?;
        Ok(())
    }

    /// Removes the files of `names`, durably, with one flush of the directory for all.
    /// Each one's result, in order (a failed flush fails each: it is done again).
    pub fn remove_sessions(&self, names: &[&str]) -> Vec<Result<(), StoreError>> {
        let mut results: Vec<Result<(), StoreError>> = names
            .iter()
            .map(|name| Ok(self.sessions.unlink(&session_file(name))?))
            .collect();
        if results.iter().any(Result::is_ok) {
            if let Err(e) = self.sessions.sync() {
                for result in results.iter_mut().filter(|r| r.is_ok()) {
                    *result = Err(io::Error::new(e.kind(), e.to_string()).into());
                }
            }
        }
        results
    }

    /// Flushes the sessions directory. Every session file is flushed before it is renamed
    /// into place, so after this every file read is on disk durably — even one that a
    /// daemon which died between its rename and the directory's `fsync` left, whose name
    /// could otherwise still be lost with power.
    pub fn sync_sessions_dir(&self) -> Result<(), StoreError> {
        self.sessions.sync()?;
        Ok(())
    }

    /// Reads every session file (at most `max`), sorted by name. A bad file (corrupt,
    /// foreign, cut short, misnamed, from a newer version, or whose name differs from the
    /// session inside) is moved aside and counted, never returned and never fatal; only a
    /// failing directory is an error.
    pub fn load_sessions(&self, max: usize) -> Result<Batch<SessionRecord>, StoreError> {
        self.load_sessions_seen(max, |_, _| {})
    }

    /// [`load_sessions`](Store::load_sessions), telling `seen` each record returned with
    /// the bytes of its file. Those are on disk durably once
    /// [`sync_sessions_dir`](Store::sync_sessions_dir) succeeds.
    pub fn load_sessions_seen(
        &self,
        max: usize,
        mut seen: impl FnMut(&SessionRecord, &[u8]),
    ) -> Result<Batch<SessionRecord>, StoreError> {
        let place = Place {
            dir: &self.sessions,
            label: SESSIONS_DIR,
            bad: &self.bad,
        };
        let key = |file: &str| session_of_file(file).map(str::to_owned);
        let mut batch = load_dir(&place, max, MAX_SESSION_FILE, key, |name, bytes| {
            let record = decode_session(bytes)?;
            if *record.name != *name {
                return Err(FieldError::invalid(
                    "name",
                    format!("`{}` in the file of session `{name}`", record.name),
                )
                .into());
            }
            if let Some(gen) = named_generations(&record).find(|g| *g >= MAX_STORED_GEN) {
                return Err(FieldError::invalid("generation", beyond(gen)).into());
            }
            seen(&record, bytes);
            Ok(record)
        })?;
        batch.records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(batch)
    }
}

impl Store {
    /// Moves session `name`'s file to `bad/`, logging `why`: a record that read well but
    /// cannot be taken back (refused by the core, or claiming another session's process)
    /// is set aside like a corrupt one, so it is neither warned about again at every
    /// start nor overwritten unseen by a later session of that name. Left in place, with
    /// a warning, if even the move fails.
    pub fn set_aside_session(&self, name: &str, why: &str) {
        move_aside(
            &self.sessions,
            SESSIONS_DIR,
            &session_file(name),
            &self.bad,
            why,
        );
    }
}

/// The file of `record`'s session, as [`Store::write_session`] writes it (the encoding is
/// deterministic: the same record, the same bytes). Fails for a record the format cannot
/// carry.
pub fn session_file_bytes(record: &SessionRecord) -> Result<Vec<u8>, StoreError> {
    encode_session(record).map_err(|err| StoreError::Unencodable {
        what: format!("session {:?}", &*record.name),
        err,
    })
}
