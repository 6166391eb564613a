//! The daemon: a single-threaded mio loop that routes each readiness to the one owner of
//! that state and executes the core's actions.
//!
//! - `daemon.rs`: the loop and the routing between owners.
//! - `children.rs`, `child.rs`: live generations — process handles, stdio, input queues.
//! - `exits.rs`: waiting for the exit status of an adopted process its parent reaps.
//! - `recover.rs`: taking back what a previous daemon left; `unverified.rs`: the
//!   generations taken back whose identity is checked again until it can be told.
//! - `clients.rs`, `client.rs`, `subscriptions.rs`: connections, answers, who follows
//!   which session and how far they got.
//! - `logs.rs`, `ring.rs`: each session's replay log; `frame.rs`: a record's bytes (in
//!   the output journal's mapping); `journaled.rs`: which journal segments are needed.
//! - `token.rs`: what a poll token stands for.
//! - `keeper_link.rs`: the link to the keeper (see [`crate::keeper`]); `keeper_start.rs`:
//!   finding, verifying and emptying the state directory's keeper at start, or starting one.

mod child;
mod children;
mod client;
mod clients;
pub mod config;
mod containment;
mod daemon;
mod exits;
mod frame;
mod groups;
mod journaled;
pub mod keeper_link;
mod keeper_start;
mod launch;
mod listener;
mod logs;
mod outbox;
mod pacers;
mod parked;
mod persist;
mod ready;
mod recover;
mod ring;
mod signals;
mod subscriptions;
mod token;
mod turn;
mod unverified;
pub mod upgrade;

pub use config::StartError;
pub use config::{ContainmentMode, DaemonConfig};
pub use daemon::Daemon;
