//! The daemon: a single-threaded mio loop that routes each readiness to the one owner of
//! that state and executes the core's actions.
//!
//! - `daemon.rs`: the loop and the routing between owners; `daemon/`: starting
//!   (`start.rs`), a child's output on its way to subscribers (`output.rs`), requests
//!   (`requests.rs`), what processes tell the core (`processes.rs`), and both sides of an
//!   upgrade (`upgrade.rs`, `resume.rs`). `turn.rs`: what one turn hands the next;
//!   `backlog.rs`: fairness between sources (bulk output waits behind what trickles).
//! - `children.rs`, `child.rs`: live generations — process handles, stdio, input queues;
//!   `children/`: starting, a tree's signals and emptiness, a leader's exit; `child/`:
//!   a child taken back, kept by the keeper, carried across an upgrade. `launch.rs`: one
//!   start in flight; `lookup.rs`: the lookup helper it may wait for first.
//!   `descriptors.rs`: the descriptors kept in reserve, counted from what the children and
//!   connections hold. `cgroup_pool.rs`: emptied cgroups kept for the next generations
//!   without limits. `probe_identities.rs`: whom probe commands run as.
//! - `exits.rs`: waiting for the exit status of an adopted process its parent reaps;
//!   `leftovers.rs`: what ended adopted processes started, killed once per turn.
//! - `recover.rs`: taking back what a previous daemon left; `persist.rs`: the state
//!   directory (lease, descriptors, sessions) and the generations taken back unverified,
//!   whose identity `unverified.rs` schedules checks of until it can be told; `saved.rs`:
//!   what each session's file holds, so that one is not written again unchanged.
//! - `clients.rs`, `client.rs`: connections; `clients/`: answers, following, waits;
//!   `subscriptions.rs` (and `subscriptions/`): who follows which session and how far they
//!   got; `pacers.rs`, `parked.rs`: lossless followers and output held back for them.
//! - `logs.rs`, `ring.rs`: each session's replay log; `frame.rs`: a record's bytes (in
//!   the output journal's mapping); `journaled.rs`: which journal segments are needed.
//! - `token.rs`: what a poll token stands for.
//! - `notify.rs`: systemd's notifications (ready, reloading, stopping, the watchdog);
//!   `ready.rs`: the daemon's own readiness (s6's fd, then systemd);
//!   `daemon/reload.rs`: loading the configuration and reloading it.
//! - `readiness.rs` (and `readiness/`): each generation's ready and live checks at run
//!   time — the notification pipe, the output matcher, probes in flight.
//! - `log_sink.rs` (and `log_sink/`): output to log files and `--output-to-stdout`,
//!   through the log writer process.
//! - `keeper_link.rs`: the link to the keeper (see [`crate::keeper`]); `keeper_start.rs`:
//!   finding, verifying and emptying the state directory's keeper at start, or starting one;
//!   `keeper_launch.rs`: starting a keeper process (waited for or not);
//!   `keeper_restarts.rs`: replacing a keeper lost while the daemon runs, with a backoff;
//!   `daemon/keeper.rs`: the loop's side of both.
//! - `upgrade/`: the image, the probe, and what waits between turns (`upgrader.rs`).

mod backlog;
mod cgroup_pool;
mod child;
mod children;
mod client;
mod clients;
pub mod config;
mod containment;
mod daemon;
mod descriptors;
mod exits;
mod frame;
mod groups;
mod held;
mod journaled;
mod keeper_launch;
pub mod keeper_link;
mod keeper_restarts;
mod keeper_start;
mod launch;
mod leftovers;
mod listener;
mod log_sink;
mod logs;
mod lookup;
mod notify;
mod outbox;
mod pacers;
mod parked;
mod persist;
mod probe_identities;
mod readiness;
mod ready;
mod recover;
mod ring;
mod run_as;
mod saved;
mod signals;
mod subscriptions;
mod terminal_sizes;
mod token;
mod turn;
mod unverified;
pub mod upgrade;

pub use config::StartError;
pub use config::{ContainmentMode, DaemonConfig};
pub use daemon::Daemon;
