//! Generation numbers that never repeat for a state directory, at the cost of one write
//! per [`BLOCK`]/2 spawns rather than one per spawn.
//!
//! `highwater` holds a ceiling: no number at or above it was ever handed out. The daemon
//! reserves numbers in blocks: the ceiling is raised to `next + BLOCK` (written durably)
//! whenever fewer than `BLOCK / 2` numbers remain below it. A restarted daemon starts at
//! the persisted ceiling, so the numbers a dead daemon reserved but never used are simply
//! skipped, and whatever it handed out lies below.
//!
//! # Protocol with the core
//!
//! The core allocates ([`Core::next_generation`](crate::core::Core::next_generation) is
//! one past the last number allocated); the driver keeps the ceiling ahead of it:
//!
//! 1. At start: `let (alloc, first) = GenAllocator::open(&store, floor)?;` then
//!    `Core::new(config, first)`. `floor` is [`generation_floor`] of the records loaded.
//! 2. After every `Core::handle` / `Core::handle_timeout` (either may allocate: a spawn, a
//!    restart command, a backoff that fired), *before* executing any of the actions it
//!    queued, call `alloc.reserve(core.next_generation())`. Actions are what hand a
//!    number out (the reply, the event, the spawn with `GENWARD_GEN`, the descriptor), so
//!    every number that leaves the daemon lies below a durable ceiling.
//! 3. A failed reserve is retried by the next call. While it fails, the half block of
//!    headroom keeps the guarantee ([`ReserveError::exposed`] is false); once exposed,
//!    numbers above the durable ceiling are out, and could repeat after a crash.

use std::fmt;
use std::io;

use super::error::StoreError;
use super::format::{self, FormatError, Kind};
use super::layout::Store;
use super::load::{load_file, Newer, Outcome};
use crate::core::{SessionRecord, GEN_LIMIT};
use crate::proto::json::{FieldError, Limits};

/// The ceiling's file, in the state directory.
pub const HIGHWATER_FILE: &str = "highwater";

/// Numbers reserved per write. A restart skips at most this many.
pub const BLOCK: u64 = 4096;

/// How far above everything found on disk a directory whose ceiling was lost starts: no
/// record says what a removed session's generations were, so leave room for a great many.
pub const RECOVERY_GAP: u64 = 1 << 32;

/// Generation numbers on disk are below this: the core's [`GEN_LIMIT`] less room for two
/// [`RECOVERY_GAP`]s, so that a directory whose ceiling was lost still numbers on above
/// whatever it holds. A counter that starts at 1 never gets here; a file that names a
/// number at or above it (a highwater ceiling, a descriptor, a session record) was damaged
/// or not written by us, and is set aside when read — accepted, it would push numbering
/// past what the loop can watch, and every later start would fail.
pub const MAX_STORED_GEN: u64 = GEN_LIMIT - 2 * RECOVERY_GAP;

const MAX_FILE: usize = 256;

const LIMITS: Limits = Limits {
    max_len: MAX_FILE,
    max_depth: 1,
    max_string_len: 32,
    max_elements: 4,
};

/// Keeps the persisted ceiling ahead of the core's generation numbers.
#[derive(Debug)]
pub struct GenAllocator {
    /// Durable: every number handed out is below it.
    ceiling: u64,
}

/// A reservation that could not be written.
#[derive(Debug)]
pub struct ReserveError {
    /// Why.
    pub err: io::Error,
    /// Whether numbers at or above the durable ceiling are allocated already (so one may
    /// repeat if the daemon dies before a later reserve succeeds).
    pub exposed: bool,
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot save the generation high-water mark: {}",
            self.err
        )?;
        if self.exposed {
            f.write_str(
                " (numbers above the saved mark are in use: they could repeat after a crash)",
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ReserveError {}

impl GenAllocator {
    /// Reads the ceiling and returns the allocator with the first generation number the
    /// core may allocate: the persisted ceiling, raised to `floor` (one past the highest
    /// generation any other state file names, see [`generation_floor`]). A first block is
    /// reserved at once, so the first spawns cost no write.
    ///
    /// A missing ceiling in a directory that has other state, or a bad one (moved aside),
    /// cannot be trusted: numbering restarts [`RECOVERY_GAP`] above `floor`, with a
    /// warning. Fails only if the directory cannot be written: the daemon must not hand
    /// out numbers it cannot vouch for.
    pub fn open(store: &Store, floor: u64) -> Result<(GenAllocator, u64), StoreError> {
        let floor = floor.max(1);
        let outcome = read_ceiling(store)?;
        let first = match outcome {
            Outcome::Read(ceiling) if ceiling >= floor => ceiling,
            Outcome::Missing if floor == 1 => 1,
            outcome => {
                let first = floor.saturating_add(RECOVERY_GAP);
                let why = match outcome {
                    Outcome::Read(c) => {
                        format!("the saved mark {c} is below generation {floor} found on disk")
                    }
                    Outcome::Missing => "it is missing but other state exists".to_owned(),
                    Outcome::Bad => "it was unreadable".to_owned(),
                };
                log::warn!("generation high-water mark not trusted ({why}): numbering continues at {first}");
                first
            }
        };
        let mut alloc = GenAllocator { ceiling: first };
        alloc
            .raise(store, first)
            .map_err(|e| StoreError::Io(e.err))?;
        Ok((alloc, first))
    }

    /// For a program resumed by an upgrade: the ceiling the previous program kept durable,
    /// taken as it is when it is above `floor` (the highest number handed out): nothing is
    /// written, so a full or read-only state directory keeps neither the new program nor,
    /// after a rollback, the previous one from resuming; the first
    /// [`reserve`](Self::reserve) that needs more raises it, retried like any other.
    /// Otherwise as [`open`](Self::open).
    pub fn reopen(store: &Store, floor: u64) -> Result<GenAllocator, StoreError> {
        let outcome = read_ceiling(store)?;
        match outcome {
            Outcome::Read(ceiling) if ceiling > floor => Ok(GenAllocator { ceiling }),
            _ => GenAllocator::open(store, floor).map(|(alloc, _)| alloc),
        }
    }

    /// The durable ceiling.
    pub fn ceiling(&self) -> u64 {
        self.ceiling
    }

    /// Keeps the ceiling at least half a block above `next` (the core's
    /// [`next_generation`](crate::core::Core::next_generation)), writing a new one when it
    /// is not. Returns whether it wrote. Cheap when it does not: one comparison.
    pub fn reserve(&mut self, store: &Store, next: u64) -> Result<bool, ReserveError> {
        if self.ceiling.saturating_sub(next) >= BLOCK / 2 || self.ceiling >= GEN_LIMIT {
            return Ok(false);
        }
        self.raise(store, next).map(|()| true)
    }

    fn raise(&mut self, store: &Store, next: u64) -> Result<(), ReserveError> {
        let ceiling = next.saturating_add(BLOCK).min(GEN_LIMIT).max(self.ceiling);
        match store
            .root
            .write_atomic(HIGHWATER_FILE, &encode_ceiling(ceiling))
        {
            Ok(()) => {
                self.ceiling = ceiling;
                Ok(())
            }
            Err(err) => Err(ReserveError {
                err,
                exposed: next > self.ceiling,
            }),
        }
    }
}

/// The durable ceiling as the file says it (a bad file moved aside).
fn read_ceiling(store: &Store) -> Result<Outcome<u64>, StoreError> {
    let mut buf = Vec::new();
    load_file(
        &store.root_place(),
        HIGHWATER_FILE,
        MAX_FILE,
        &mut buf,
        Newer::MoveAside,
        decode_ceiling,
    )
}

/// One past the highest generation named by any of `sessions` and `descriptors` (1 when
/// none is): the lowest number a restarted daemon may hand out whatever `highwater` says.
pub fn generation_floor<'a>(
    sessions: impl IntoIterator<Item = &'a SessionRecord>,
    descriptors: impl IntoIterator<Item = u64>,
) -> u64 {
    let mut highest = 0;
    for s in sessions {
        for gen in named_generations(s) {
            highest = highest.max(gen);
        }
    }
    for gen in descriptors {
        highest = highest.max(gen);
    }
    highest.saturating_add(1)
}

/// The `highwater` file for `ceiling`.
pub fn encode_ceiling(ceiling: u64) -> Vec<u8> {
    format::encode(Kind::HighWater, |w| {
        w.u64("ceiling", ceiling);
    })
}

/// Decodes a `highwater` file.
pub fn decode_ceiling(bytes: &[u8]) -> Result<u64, FormatError> {
    let o = format::decode(bytes, Kind::HighWater, &LIMITS)?;
    o.check_fields(&["ceiling"])?;
    match o.req_u64("ceiling")? {
        0 => Err(FieldError::invalid("ceiling", "must be at least 1").into()),
        c if c > MAX_STORED_GEN => Err(FieldError::invalid("ceiling", beyond(c)).into()),
        c => Ok(c),
    }
}

/// Why generation number `gen` found on disk is refused (see [`MAX_STORED_GEN`]).
pub fn beyond(gen: u64) -> String {
    format!("{gen} is beyond the generation numbers the daemon can use (below {MAX_STORED_GEN})")
}

/// The generations a session record names (its current one, its last, its ends).
pub fn named_generations(s: &SessionRecord) -> impl Iterator<Item = u64> + '_ {
    let ends = s.recent_ends.iter().filter_map(|e| e.gen());
    let named = [s.current, s.last_gen, s.last_end.as_ref().map(|e| e.gen())];
    named.into_iter().flatten().chain(ends)
}
