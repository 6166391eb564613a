//! Daemon state on disk: the private state directory, the lease that makes one daemon per
//! directory, and the file operations everything on disk goes through.

pub mod atomic;
pub mod dir;
pub mod lease;
pub mod state_dir;
pub mod strict_read;
