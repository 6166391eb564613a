//! Unit tests of the core, all driven through the invariant checker.

mod commands;
mod crash_stops;
mod deadlines;
mod depends;
mod harness;
mod image;
mod image_refusals;
mod interleavings;
mod kept_io;
mod left_down;
mod lifecycle;
mod list_page;
mod liveness;
mod persist;
mod random_walk;
mod readiness;
mod reload;
mod restart;
mod scenarios;
mod shutdown;
mod wake;
