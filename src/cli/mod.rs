//! The client side of genward: argument parsing and the pure pieces the commands share.
//!
//! Everything here is independent of the daemon and the protocol, so each piece is tested
//! on its own; [`terminal`] is the only part that touches the operating system.

pub mod args;
pub mod commands;
pub mod detach_key;
pub mod duration;
pub mod exit_status;
pub mod signal_name;
pub mod table;
pub mod terminal;
