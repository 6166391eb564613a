//! Daemon state on disk: the private state directory, the lease that makes one daemon per
//! directory, and the file operations everything on disk goes through.

pub mod aside;
pub mod atomic;
pub mod dir;
pub mod error;
pub mod format;
pub mod lease;
pub mod names;
pub mod state_dir;
pub mod strict_read;

pub use error::StoreError;
