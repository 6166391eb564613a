//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod cli;
pub mod daemon;
pub mod fuse;
pub mod keeper;
pub mod log_files;
pub mod pidns;
pub mod recorded;
pub mod setup;
pub mod sys;
pub mod tmux;
