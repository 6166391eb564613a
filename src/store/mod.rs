//! Daemon state on disk: the private state directory, the lease that makes one daemon per
//! directory, and what outlives a daemon — the generation high-water mark, each session's
//! record, each live generation's descriptor, and the sessions' retained output
//! ([`journal`], written through shared mappings rather than whole-file writes).
//!
//! Every write is atomic and durable (temporary file, `fsync`, rename, `fsync` of the
//! directory: [`atomic`]); every read is bounded and strict ([`strict_read`], [`format`](mod@format)):
//! a symlink, someone else's file, a file too large, cut short, corrupt, or from a newer
//! version is refused, and moved aside ([`aside`]) rather than trusted. A bad file never
//! stops the daemon; a directory written by a newer genward does, with a message saying
//! so.
//!
//! # Integration
//!
//! Start-up, in this order:
//! 1. [`state_dir::ensure_private_dir`], then [`Lease::acquire`](lease::Lease::acquire),
//!    kept for the daemon's lifetime: nothing is read before the directory is ours alone.
//!    Its error's `Display` is the message for the user (it names a live holder).
//! 2. [`Store::open`]: the format version and the id. [`StoreError::Newer`] means a newer
//!    genward owns the directory: refuse to start with its message.
//! 3. [`Store::load_sessions`] and [`Store::load_descriptors`] (each bounded by a count;
//!    bad files are already moved aside and counted). A session's spec is decoded but
//!    not validated against the daemon's limits: validate it before use.
//! 4. [`GenAllocator::open`](highwater::GenAllocator::open) with the
//!    [`generation_floor`] of what was loaded, then
//!    `Core::new(config, first_gen)` and
//!    [`Core::restore`](crate::core::Core::restore) with the records (a refused record is
//!    logged; its file stays until the session is written or removed).
//! 5. Each descriptor: `sys::identity::adopt(pid, identity, mode)`, then
//!    `Input::Adopt` for it whatever the verdict. Adopted (`match`): the process is ours
//!    again. Mismatch: feed `Input::Lost` at once (its one `lost` end) and
//!    [`remove_descriptor`](Store::remove_descriptor). Unverifiable: keep the file, never
//!    signal the pid, and check again later: until a check says `match` (then as adopted)
//!    or `mismatch` (then as above).
//! 6. [`Core::resume`](crate::core::Core::resume), then serve clients.
//!
//! While running, after each `Core::handle` / `handle_timeout`:
//! 1. [`GenAllocator::reserve`](highwater::GenAllocator::reserve) with
//!    `core.next_generation()`, before any queued action is executed (see [`highwater`]).
//! 2. For `Action::Spawn`: give the child `GENWARD_GEN=`[`gen_marker`](dir_id::gen_marker),
//!    and once it is started (its pid known) [`write_descriptor`](Store::write_descriptor)
//!    before the spawn's success is fed back to the core (which emits `spawned`). Remove
//!    the descriptor when the generation is released after a verified end (reaped, or a
//!    verified identity mismatch), never on an unverifiable one.
//! 3. Every session [`Core::take_dirty_sessions`](crate::core::Core::take_dirty_sessions)
//!    names (after restore, adoption and resume too): its
//!    [`Core::session_record`](crate::core::Core::session_record), with a
//!    [`WallClock`](crate::core::WallClock) read now, to
//!    [`write_session`](Store::write_session); `None` (the session is gone):
//!    [`remove_session`](Store::remove_session). Once per session per turn. A file
//!    known to hold the record's bytes already (written since, or read by
//!    [`load_sessions_seen`](Store::load_sessions_seen) and made durable by
//!    [`sync_sessions_dir`](Store::sync_sessions_dir)) need not be written again: the
//!    core names every session whose record may have changed, not only those that did.
//!
//! An upgrade by re-exec needs none of this: the core's whole state goes into the memfd
//! the new binary inherits as [`core_image`]'s bytes (inside the caller's versioned
//! envelope), and comes back exactly; the files stay as they were, for a crash later.
//!
//! The store never calls back and holds no state but open directories: the driver decides
//! when, the store how.

pub mod aside;
pub mod atomic;
pub mod core_image;
pub mod descriptor;
pub mod descriptors;
pub mod dir;
pub mod dir_id;
pub mod error;
pub mod format;
pub mod highwater;
pub mod image;
pub mod journal;
pub mod journal_read;
pub mod keeper_file;
pub mod layout;
pub mod lease;
mod load;
pub mod mapping;
pub mod names;
pub mod positions;
pub mod session_codec;
pub mod sessions;
pub mod state_dir;
pub mod stop_codec;
pub mod strict_read;

pub use descriptor::{Descriptor, IoKind};
pub use dir_id::DirId;
pub use error::StoreError;
pub use highwater::{generation_floor, GenAllocator};
pub use layout::Store;
pub use load::Batch;
