//! The daemon: a single-threaded mio loop that executes the core's actions with the
//! operating-system layer and serves clients on the control socket.

pub mod encode;
pub mod fanout;
pub mod listener;
pub mod outbox;
pub mod request;
pub mod ring;
