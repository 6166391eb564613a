//! Daemon state on disk: the private state directory, the lease that makes one daemon per
//! directory, and what outlives a daemon — the generation high-water mark, each session's
//! record, each live generation's descriptor.
//!
//! Every write is atomic and durable (temporary file, `fsync`, rename, `fsync` of the
//! directory: [`atomic`]); every read is bounded and strict ([`strict_read`], [`format`]):
//! a symlink, someone else's file, a file too large, cut short, corrupt, or from a newer
//! version is refused, and moved aside ([`aside`]) rather than trusted. A bad file never
//! stops the daemon; a directory written by a newer genward does, with a message saying
//! so.
//!
//! # Integration
//!
//! Start-up, in this order:
//! 1. [`state_dir::ensure_private_dir`], then [`Lease::acquire`](lease::Lease::acquire):
//!    nothing is read before the directory is ours alone.
//! 2. [`Store::open`]: the format version and id (refuses a newer directory).
//! 3. [`Store::load_sessions`] and [`Store::load_descriptors`].
//! 4. [`GenAllocator::open`](highwater::GenAllocator::open) with the
//!    [`generation_floor`](highwater::generation_floor) of what was loaded, and
//!    `Core::new(config, first_gen)`.
//!
//! Then, while running: see [`highwater`] for the ceiling, [`sessions`] and
//! [`descriptors`] for when each file is written.

pub mod aside;
pub mod atomic;
pub mod descriptor;
pub mod descriptors;
pub mod dir;
pub mod dir_id;
pub mod error;
pub mod format;
pub mod highwater;
pub mod layout;
pub mod lease;
mod load;
pub mod names;
pub mod session_codec;
pub mod sessions;
pub mod state_dir;
pub mod strict_read;

pub use descriptor::{Descriptor, IoKind};
pub use dir_id::DirId;
pub use error::StoreError;
pub use highwater::{generation_floor, GenAllocator};
pub use layout::Store;
pub use load::Batch;
