//! The client side of genward: argument parsing and the pure pieces the commands share.
//!
//! The pure pieces (argument parsing, tables, detach keys, exit statuses) are independent
//! of the daemon and tested on their own; durations and signal names are part of the wire
//! format and live in [`crate::proto`], so the command line and the daemon read them alike. The commands build on
//! them: [`client`] is the connection to the daemon, [`dispatch`] runs a parsed command,
//! and each command (or small group) has its own module.

pub mod args;
pub mod attach;
pub mod client;
pub mod commands;
pub mod completions;
pub mod control;
pub mod detach_key;
pub mod dispatch;
pub mod events;
pub mod exit_status;
pub mod json_out;
pub mod list_pages;
pub mod log_opts;
pub mod logs;
pub mod ls;
pub mod run;
pub mod spec_fields;
pub mod table;
pub mod term_modes;
pub mod wait;
