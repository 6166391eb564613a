//! Helpers shared by every kind of test: the unit tests, the integration tests in `tests/`,
//! the benches and the fuzz targets. One home for each, so that none is written twice.
//!
//! Compiled only for tests (`cfg(test)`) or with the `testkit` feature, which the
//! integration tests and benches get through the crate's dev-dependency on itself and the
//! fuzz crate through its dependency; the daemon is built without it.
//!
//! - [`rng`]: a small seeded PRNG, and the [`Choose`](rng::Choose) interface that lets the
//!   same generators run on it or on a fuzzer's bytes;
//! - [`walk`]: what the core's random walk and its fuzz target share (session names, small
//!   limits, random specs, the live generations);
//! - [`full_listener`]: a Unix listener whose queue is full (a stopped daemon's socket);
//! - [`proc`]: reading `/proc` (process state, parent, group, children, descriptors);
//! - [`scratch`]: private temporary directories;
//! - [`state`]: state-directory fixtures (a full session record, files placed as is);
//! - [`wait`]: waiting for a descriptor or a child's exit with a deadline, not a sleep.
//!
//! What only the integration tests need (a daemon under test, a protocol client, the CLI,
//! tmux) stays in `tests/util/`.

pub mod full_listener;
pub mod proc;
pub mod rng;
pub mod scratch;
pub mod state;
pub mod wait;
pub mod walk;
