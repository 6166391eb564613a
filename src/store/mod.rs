//! Daemon state on disk: the private state directory and the lease that makes one daemon
//! per directory.

pub mod lease;
pub mod state_dir;
