//! What the daemon keeps on disk so that its successor can carry on: the generation
//! high-water mark, each session's record, each live generation's descriptor — and, at
//! start, taking those back (see `store`'s module docs for the protocol this follows).
//!
//! The lease (one daemon per directory) is held here for the daemon's lifetime, and the
//! generations whose identity could not be verified are checked again from here: their
//! descriptors stay until a check can tell.
//!
//! The core decides what a session is; this only writes what the core says changed — and
//! of that, only a file whose bytes differ from what it holds ([`Saved`]) — and reads it
//! back once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::config::StartError;
use super::logs::Logs;
use super::saved::Saved;
use super::unverified::Unverified;
use crate::core::{Core, SessionRecord, Time, WallClock};
use crate::store::journal::Journal;
use crate::store::lease::Lease;
use crate::store::sessions::session_file_bytes;
use crate::store::state_dir::check_private_dir;
use crate::store::{generation_floor, Descriptor, GenAllocator, IoKind, Store, StoreError};
use crate::sys::process::Process;

/// Most session records and descriptors read at start.
const MAX_RECORDS: usize = 1 << 20;

/// Proof that the session records the core changed so far have been written (or, where
/// the disk refused, set to be tried again): handed out only by
/// [`Persist::sync_sessions`], and asked for by everything that writes to a client's
/// socket (see `Clients`), so that nothing reaches a client before the records that say
/// it are on disk — a rule kept by the types, not by each caller remembering it. Neither
/// `Clone` nor `Copy`: each write to the clients needs a write of the records before it.
#[derive(Debug)]
pub struct RecordsSaved(());

/// How soon a session record that could not be written is tried again.
const SAVE_RETRY: Duration = Duration::from_secs(1);

/// Most of those tried again at once.
const SAVE_RETRY_BATCH: usize = 64;

/// Most session files written with shared flushes (see `store::atomic`): a bound on the
/// memory their bytes take at once.
const SAVE_BATCH: usize = 1024;

/// The state directory's contents, owned for the daemon's lifetime.
#[derive(Debug)]
pub struct Persist {
    store: Store,
    alloc: GenAllocator,
    /// Generations whose process could not be verified at start, nor since: their
    /// descriptors stay on disk (this daemon, or a later one, may still verify them) until
    /// a check says `match` or `mismatch` ([`Persist::resolved`]).
    unverified: HashSet<u64>,
    /// Their identity checks, on a backed-off timer.
    checks: Unverified,
    /// Sessions whose record could not be written (a full disk, descriptors short): what
    /// a client was answered must reach the disk as soon as it allows, or a crash would
    /// undo it, so they are written again every [`SAVE_RETRY`] until that succeeds.
    unsaved: BTreeSet<Arc<str>>,
    /// When they are tried again.
    save_retry_at: Option<Instant>,
    /// What each session's file holds: a record that would be written as those very
    /// bytes is not written again.
    saved: Saved,
    /// One daemon per directory, for as long as this one runs.
    lease: Lease,
}

/// The state directory opened again after an upgrade, before the lease is owned (the
/// image may still be refused, and the previous program then needs the lease as it was).
#[derive(Debug)]
pub struct Reopened {
    store: Store,
    alloc: GenAllocator,
    /// What the session files read hold (nothing is known of those not read).
    saved: Saved,
}

impl Reopened {
    /// Holds the lease from now on.
    pub fn leased(self, lease: Lease) -> Persist {
        Persist {
            store: self.store,
            alloc: self.alloc,
            unverified: HashSet::new(),
            unsaved: BTreeSet::new(),
            save_retry_at: None,
            saved: self.saved,
            checks: Unverified::default(),
            lease,
        }
    }
}

/// What the previous daemon left.
#[derive(Debug)]
pub struct Left {
    /// Every session's record.
    pub sessions: Vec<SessionRecord>,
    /// Every generation that was live.
    pub descriptors: Vec<Descriptor>,
    /// The first generation number this daemon may hand out.
    pub first_gen: u64,
}

impl Left {
    /// Each session's replay log capacity, for reading its retained output back.
    pub fn log_capacities(&self) -> HashMap<Arc<str>, usize> {
        self.sessions
            .iter()
            .map(|r| (r.name.clone(), r.spec.buffer_bytes))
            .collect()
    }
}

/// Unix milliseconds now.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Makes the state directory (and the socket's, if elsewhere) ours and private — others
/// may only pass through when other uids are allowed to connect (`shared`) — and takes
/// the lease, held for the daemon's lifetime: nothing is read before the directory is
/// ours alone.
///
/// A directory's mode is changed only once this daemon may have it: the state directory's
/// once the lease is taken, the socket's (when elsewhere) once the socket is bound — the
/// returned [`SocketDir`] is settled then. A daemon refused because another one runs
/// leaves both as the running one made them.
pub fn claim_directories(
    state_dir: &std::path::Path,
    socket: &std::path::Path,
    shared: bool,
) -> Result<(Lease, SocketDir), StartError> {
    let socket_dir = socket.parent().unwrap_or(state_dir);
    let checked = check_private_dir(state_dir, shared && socket_dir == state_dir)
        .map_err(|e| StartError(e.to_string()))?;
    let lease = Lease::acquire(state_dir)
        .map_err(|e| StartError(format!("{}: {e}", state_dir.display())))?;
    checked.settle().map_err(|e| StartError(e.to_string()))?;
    let socket_dir = if socket_dir != state_dir {
        Some(check_private_dir(socket_dir, shared).map_err(|e| StartError(format!("socket {e}")))?)
    } else {
        None
    };
    Ok((lease, SocketDir(socket_dir)))
}

/// The socket's directory, when it is not the state directory: verified, its mode to be
/// settled once the socket is bound there.
#[derive(Debug)]
pub struct SocketDir(Option<crate::store::state_dir::Checked>);

impl SocketDir {
    /// The socket is ours: its directory gets the mode this daemon's clients need.
    pub fn settle(self) -> Result<(), StartError> {
        match self.0 {
            Some(checked) => checked
                .settle()
                .map_err(|e| StartError(format!("socket {e}"))),
            None => Ok(()),
        }
    }
}

impl Persist {
    /// Opens the state in `dir` (already leased) and reads what was left.
    pub fn open(dir: &std::path::Path, lease: Lease) -> Result<(Persist, Left), String> {
        let store = Store::open(dir).map_err(|e| e.to_string())?;
        let mut saved = Saved::default();
        let sessions = store
            .load_sessions_seen(MAX_RECORDS, |record, bytes| {
                saved.holding(record.name.clone(), bytes)
            })
            .map_err(|e| format!("reading sessions: {e}"))?;
        // What was read is taken for what is on disk only once that is durable; else every
        // session the core marks is written, as it would be with nothing read.
        if let Err(e) = store.sync_sessions_dir() {
            log::warn!("flushing the sessions read: {e}");
            saved.forget_all();
        }
        let descriptors = store
            .load_descriptors(MAX_RECORDS)
            .map_err(|e| format!("reading descriptors: {e}"))?;
        for (what, bad) in [("session", sessions.bad), ("descriptor", descriptors.bad)] {
            if bad > 0 {
                log::warn!("{bad} bad {what} file(s) moved aside");
            }
        }
        let floor = generation_floor(&sessions.records, descriptors.records.iter().map(|d| d.gen));
        let (alloc, first_gen) =
            GenAllocator::open(&store, floor).map_err(|e| format!("generation numbers: {e}"))?;
        let persist = Reopened {
            store,
            alloc,
            saved,
        }
        .leased(lease);
        let left = Left {
            sessions: sessions.records,
            descriptors: descriptors.records,
            first_gen,
        };
        Ok((persist, left))
    }

    /// Opens the state in `dir` again for a daemon that re-executed itself: its sessions
    /// and generations come from the upgrade image, so the files that record them are not
    /// read (they say the same) — so nothing is known of what they hold, and each is
    /// written the first time the core marks it; `floor` is the highest generation number
    /// it has handed out.
    pub fn reopen(dir: &std::path::Path, floor: u64) -> Result<Reopened, String> {
        let store = Store::open(dir).map_err(|e| e.to_string())?;
        let alloc =
            GenAllocator::reopen(&store, floor).map_err(|e| format!("generation numbers: {e}"))?;
        Ok(Reopened {
            store,
            alloc,
            saved: Saved::default(),
        })
    }

    /// The lease's descriptor, carried across an upgrade.
    pub fn lease_fd(&self) -> std::os::fd::RawFd {
        self.lease.as_raw_fd()
    }

    /// Keeps the durable high-water mark above every number the core may hand out next:
    /// called before any action of the core is executed.
    pub fn reserve(&mut self, core: &Core) {
        if let Err(e) = self.alloc.reserve(&self.store, core.next_generation()) {
            log::error!("writing the generation high-water mark: {}", e.err);
        }
    }

    /// Writes the records of every session the core says changed (removes those gone),
    /// and, when it is time, those that could not be written before; a file that already
    /// holds the record's bytes is left as it is.
    pub fn sync_sessions(&mut self, core: &mut Core, now: Time) -> RecordsSaved {
        // Called after every step: nothing to do (the usual case) costs nothing.
        let dirty = core.take_dirty_sessions();
        let retry = self.save_retry_at.is_some_and(|at| at <= Instant::now());
        if dirty.is_empty() && !retry {
            return RecordsSaved(());
        }
        let mut names = dirty;
        if retry {
            // A bounded batch per retry: a disk still full must not hold the loop.
            self.save_retry_at = None;
            let again: Vec<Arc<str>> = self
                .unsaved
                .iter()
                .filter(|n| !names.contains(n))
                .take(SAVE_RETRY_BATCH)
                .cloned()
                .collect();
            names.extend(again);
        }
        let clock = WallClock {
            now,
            unix_ms: unix_ms(),
        };
        // Files to write, in batches that share their flushes; removals together.
        let mut writes = Vec::new();
        let mut removals = Vec::new();
        for name in names {
            let result = match core.session_record(&name, clock) {
                Some(record) => match session_file_bytes(&record) {
                    // A file that holds those very bytes is not written again.
                    Ok(bytes) if self.saved.holds(&name, &bytes) => Ok(()),
                    Ok(bytes) => {
                        writes.push((name, bytes));
                        continue;
                    }
                    Err(e) => Err(e),
                },
                None => {
                    self.saved.forget(&name);
                    removals.push(name);
                    continue;
                }
            };
            self.saved_or_not(name, result);
        }
        if !removals.is_empty() {
            let names: Vec<&str> = removals.iter().map(|n| &**n).collect();
            let results = self.store.remove_sessions(&names);
            for (name, result) in removals.into_iter().zip(results) {
                self.saved_or_not(name, result);
            }
        }
        while !writes.is_empty() {
            let rest = writes.split_off(writes.len().min(SAVE_BATCH));
            let batch = std::mem::replace(&mut writes, rest);
            // Forgotten first: a write that fails may have replaced the file or not.
            batch.iter().for_each(|(name, _)| self.saved.forget(name));
            let files: Vec<(&str, &[u8])> = batch.iter().map(|(n, b)| (&**n, &b[..])).collect();
            let results = self.store.write_session_files(&files);
            for ((name, bytes), result) in batch.into_iter().zip(results) {
                if result.is_ok() {
                    self.saved.holding(name.clone(), &bytes);
                }
                self.saved_or_not(name, result);
            }
        }
        if !self.unsaved.is_empty() && self.save_retry_at.is_none() {
            self.save_retry_at = Some(Instant::now() + SAVE_RETRY);
        }
        RecordsSaved(())
    }

    /// Notes whether session `name`'s record reached the disk: one that did not is
    /// written again every [`SAVE_RETRY`] until it does.
    fn saved_or_not(&mut self, name: Arc<str>, result: Result<(), StoreError>) {
        match result {
            Ok(()) if self.unsaved.remove(&name) => {
                log::info!("session {name}: its state is saved again")
            }
            Ok(()) => {}
            Err(e) if self.unsaved.insert(name.clone()) => log::error!(
                "session {name}: saving its state: {e}; trying again every {}s",
                SAVE_RETRY.as_secs()
            ),
            Err(_) => {}
        }
    }

    /// The sessions whose record could not be written yet, for an upgrade's image.
    pub fn unsaved(&self) -> Vec<String> {
        self.unsaved.iter().map(|n| n.to_string()).collect()
    }

    /// Sessions whose record the program before an upgrade could not write: tried again
    /// with the next retry, as they would have been.
    pub fn save_again(&mut self, names: Vec<String>) {
        if names.is_empty() {
            return;
        }
        self.unsaved.extend(names.into_iter().map(Arc::from));
        self.save_retry_at = Some(Instant::now());
    }

    /// When session records that could not be written are tried again.
    pub fn save_deadline(&self) -> Option<Instant> {
        self.save_retry_at
    }

    /// Describes a generation that just started, so that a successor can find it. Until
    /// this succeeded nobody may hear of it: a crash would leave a running process that
    /// no daemon can account for (the next one kills it).
    pub fn describe(
        &self,
        session: &Arc<str>,
        gen: u64,
        process: &Process,
        pty: bool,
        cgroup: Option<&str>,
    ) -> Result<(), StoreError> {
        let pid = process.pid() as u32;
        let descriptor = Descriptor {
            session: session.clone(),
            gen,
            pid,
            pgid: pid,
            sid: pid,
            identity: process.token().map(str::to_owned),
            started_unix_ms: unix_ms(),
            io: if pty { IoKind::Pty } else { IoKind::Pipes },
            dir_id: self.store.id().clone(),
            cgroup: cgroup.map(str::to_owned),
        };
        self.store.write_descriptor(&descriptor)
    }

    /// The replay logs, written through to the state directory's output journal, with
    /// what it kept of the sessions `core` restored (`capacities` from
    /// [`Left::log_capacities`]); `resumed` for a program an upgrade started (see
    /// [`Logs::open`]). Without a journal (it cannot be opened) the logs live in memory
    /// only.
    pub fn open_logs(
        &self,
        core: &Core,
        capacities: HashMap<Arc<str>, usize>,
        resumed: bool,
    ) -> Logs {
        let mut logs = self.open_journal(core, &capacities, resumed);
        // A `buffer` of 0 replays nothing, whatever its log holds or was raised to (a
        // lossless follower's, after an upgrade).
        for name in capacities.keys() {
            if core.buffer_bytes(name) == Some(0) {
                logs.set_replays(name, false);
            }
        }
        logs
    }

    fn open_journal(
        &self,
        core: &Core,
        capacities: &HashMap<Arc<str>, usize>,
        resumed: bool,
    ) -> Logs {
        match Journal::open(&self.store) {
            Ok(journal) => {
                let sessions: HashMap<Arc<str>, usize> = capacities
                    .iter()
                    .filter(|(name, _)| core.has_session(name))
                    .map(|(name, &cap)| (name.clone(), cap))
                    .collect();
                Logs::open(journal, &sessions, core.generation_owners(), resumed)
            }
            Err(e) => {
                log::error!("retained output cannot be kept on disk: {e}");
                Logs::default()
            }
        }
    }

    /// Sets session `name`'s file aside (to `bad/`, see `store::aside`): its record read
    /// well but was not taken back, for `why`.
    pub fn set_aside_session(&mut self, name: &str, why: &str) {
        self.saved.forget(name);
        self.store.set_aside_session(name, why);
    }

    /// Sets generation `gen`'s descriptor aside: it read well but is not taken back, for
    /// `why`.
    pub fn set_aside_descriptor(&self, gen: u64, why: &str) {
        self.store.set_aside_descriptor(gen, why);
    }

    /// The state directory's id (in every child's `GENWARD_GEN`).
    pub fn dir_id(&self) -> &str {
        self.store.id().as_str()
    }

    /// A generation whose process could not be verified: its descriptor is kept.
    pub fn keep_unverified(&mut self, gen: u64) {
        self.unverified.insert(gen);
    }

    /// An unverified generation's identity was checked again and could be told: `match`
    /// (an adopted generation like any other now) or `mismatch` (its record proved wrong).
    /// Its descriptor goes when it is forgotten, as any other's.
    pub fn resolved(&mut self, gen: u64) {
        self.unverified.remove(&gen);
        self.checks.forget(gen);
    }

    /// Checks again, on its timer, the identity of unverified `gen` (its process recorded
    /// as `pid` with `token`).
    pub fn check_again(&mut self, gen: u64, session: Arc<str>, pid: u32, token: String) {
        self.checks.keep(gen, session, pid, token, Instant::now());
    }

    /// The unverified generations being checked again.
    pub fn checks(&self) -> &Unverified {
        &self.checks
    }

    /// `gen` was checked at `now` and still cannot be verified: checked later.
    pub fn still_unverified(&mut self, gen: u64, now: Instant) {
        self.checks.checked(gen, now);
    }

    /// Stops checking `gen`, whose end the core no longer awaits; its descriptor stays.
    pub fn stop_checking(&mut self, gen: u64) {
        self.checks.forget(gen);
    }

    /// Forgets a generation that is gone (reaped, or its record proved wrong); the
    /// descriptor of one still unverified stays (invariant 5).
    pub fn forget(&mut self, gen: u64) {
        if self.unverified.contains(&gen) {
            return;
        }
        if let Err(e) = self.store.remove_descriptor(gen) {
            log::error!("gen {gen}: removing its descriptor: {e}");
        }
    }
}
