//! genward: a small, single-threaded supervisor for named sessions of long-running processes.
//!
//! The crate is split so that everything that decides is testable without an operating
//! system: [`core`] is a pure state machine fed `(now, Input)`; [`sys`] wraps the system
//! calls; [`driver`] is the only place that touches both, routing each readiness to the
//! owner of that state; [`proto`] is the one home of the wire format.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations, rust_2018_idioms)]

pub mod cli;
pub mod config;
pub mod core;
pub mod driver;
pub mod env_file;
pub mod keeper;
pub mod log_writer;
pub mod lookup;
pub mod proto;
pub mod store;
pub mod sys;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
