//! The daemon: a single-threaded mio loop that executes the core's actions with the
//! operating-system layer and serves clients on the control socket.

mod child_io;
pub mod children;
pub mod client;
mod clients;
pub mod config;
mod daemon;
mod exec;
pub mod fanout;
pub mod listener;
pub mod outbox;
pub mod ready;
pub mod ring;
pub mod signals;

pub use config::DaemonConfig;
pub use daemon::{Daemon, StartError};
