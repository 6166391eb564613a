//! The state directory opened for reading and writing its files: [`Store`].
//!
//! ```text
//! <state dir>/
//!   lease               the daemon holding the directory (flock + pid + identity)
//!   genward.sock        the control socket
//!   id                  the directory's random id and format version
//!   highwater           the generation ceiling: no number at or above it was handed out
//!   sessions/<name>.json  one per session: spec, desired state, restarts, recent ends
//!   gens/<gen>.json     one per live generation: pid, group, identity, start, I/O mode
//!   output/<n>.seg      retained output of all sessions (`journal`), and its spares
//!   output/positions    position ceilings of output not on disk (`positions`)
//!   bad/                files moved aside, the newest few
//! ```

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::aside::BAD_DIR;
use super::atomic::is_temporary;
use super::descriptor::{decode_descriptor, MAX_DESCRIPTOR_FILE};
use super::dir::Dir;
use super::dir_id::{decode_id, encode_id, DirId, ID_FILE, MAX_ID_FILE};
use super::error::StoreError;
use super::load::{load_file, Newer, Outcome, Place};
use super::names::{GENS_DIR, SESSIONS_DIR};

/// The state directory's files, open. Opening it checks the format version first, so a
/// directory written by a newer genward is refused before anything in it is read.
///
/// Take the [`Lease`](super::lease::Lease) before opening: nothing here guards against a
/// second daemon writing the same files.
#[derive(Debug)]
pub struct Store {
    pub(crate) root: Dir,
    pub(crate) sessions: Dir,
    pub(crate) gens: Dir,
    pub(crate) bad: Dir,
    id: DirId,
}

impl Store {
    /// Opens the state directory at `path` (which must exist, be ours and private, as
    /// [`ensure_private_dir`](super::state_dir::ensure_private_dir) makes it): reads its
    /// id, or makes one for a new directory, creates the subdirectories, and removes
    /// temporary files of writes a dead daemon did not finish in the directory itself
    /// (those in `sessions/` and `gens/` are removed as they are loaded).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let root = Dir::open(path)?;
        let bad = root.subdir(BAD_DIR)?;
        let sessions = root.subdir(SESSIONS_DIR)?;
        let gens = root.subdir(GENS_DIR)?;
        let id = read_or_make_id(&root, &bad, &gens)?;
        let removed = root.remove_temporaries()?;
        if removed > 0 {
            log::debug!("removed {removed} unfinished temporary files");
        }
        Ok(Store {
            root,
            sessions,
            gens,
            bad,
            id,
        })
    }

    /// The directory's id, for descriptors and children's `GENWARD_GEN`.
    pub fn id(&self) -> &DirId {
        &self.id
    }

    /// The state directory's path.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    pub(crate) fn root_place(&self) -> Place<'_> {
        Place {
            dir: &self.root,
            label: "state",
            bad: &self.bad,
        }
    }
}

fn read_or_make_id(root: &Dir, bad: &Dir, gens: &Dir) -> Result<DirId, StoreError> {
    let place = Place {
        dir: root,
        label: "state",
        bad,
    };
    let mut buf = Vec::new();
    match load_file(
        &place,
        ID_FILE,
        MAX_ID_FILE,
        &mut buf,
        Newer::Refuse,
        decode_id,
    )? {
        Outcome::Read((id, _)) => Ok(id),
        outcome => {
            let id = match id_of_descriptors(gens) {
                Some(id) => {
                    log::warn!(
                        "state directory id {id} taken back from the generations' descriptors (its file was missing or bad)"
                    );
                    id
                }
                None => {
                    let id = DirId::generate();
                    if matches!(outcome, Outcome::Bad) {
                        log::warn!(
                            "new state directory id {id}: children started under the old one are not found by a sweep"
                        );
                    }
                    id
                }
            };
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            root.write_atomic(ID_FILE, &encode_id(&id, now))?;
            Ok(id)
        }
    }
}

/// The id the descriptors in `gens` were written under, when there are some and they all
/// agree: an `id` file lost or damaged while processes of the directory ran is taken back
/// from them, so those processes are still this directory's — taken back, or found by
/// the sweep — not disowned as another's and left to run unsupervised. Files that do not
/// read or decode are passed over (their load moves them aside later).
fn id_of_descriptors(gens: &Dir) -> Option<DirId> {
    let mut found: Option<DirId> = None;
    let mut agree = true;
    let mut buf = Vec::new();
    let listed = gens.each_entry(|name, _, _| {
        let Some(name) = name.filter(|n| n.ends_with(".json") && !is_temporary(n)) else {
            return true;
        };
        if gens
            .read_strict(name, MAX_DESCRIPTOR_FILE, &mut buf)
            .is_err()
        {
            return true;
        }
        let Ok(d) = decode_descriptor(&buf) else {
            return true;
        };
        match &found {
            None => found = Some(d.dir_id),
            Some(id) => agree = *id == d.dir_id,
        }
        agree
    });
    listed.ok()?;
    found.filter(|_| agree)
}
