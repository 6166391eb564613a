//! `sessions/<name>.json`: one file per session, written whenever something it holds
//! changes, removed when the session is.

use super::error::StoreError;
use super::layout::Store;
use super::load::{load_dir, Batch, Place};
use super::names::{session_file, session_of_file, SESSIONS_DIR};
use super::session_codec::{decode_session, encode_session, MAX_SESSION_FILE};
use crate::core::SessionRecord;
use crate::proto::json::FieldError;

impl Store {
    /// Saves `record` atomically and durably, replacing its previous file.
    pub fn write_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let bytes = encode_session(record).map_err(|err| StoreError::Unencodable {
            what: format!("session {:?}", &*record.name),
            err,
        })?;
        let file = session_file(&record.name);
        self.sessions.write_atomic(&file, &bytes)?;
        Ok(())
    }

    /// Removes a session's file, durably: a removed session must not come back after a
    /// crash. A session without a file is not an error.
    pub fn remove_session(&self, name: &str) -> Result<(), StoreError> {
        self.sessions.remove_durably(&session_file(name))?;
        Ok(())
    }

    /// Reads every session file (at most `max`), sorted by name. A bad file (corrupt,
    /// foreign, cut short, misnamed, from a newer version, or whose name differs from the
    /// session inside) is moved aside and counted, never returned and never fatal; only a
    /// failing directory is an error.
    pub fn load_sessions(&self, max: usize) -> Result<Batch<SessionRecord>, StoreError> {
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
            Ok(record)
        })?;
        batch.records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(batch)
    }
}
