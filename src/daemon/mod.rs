//! Daemon-side pieces the driver composes: client output queues and the replay log.

pub mod listener;
pub mod outbox;
pub mod ring;
