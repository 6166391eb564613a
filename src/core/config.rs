//! Daemon-wide limits: every table and queue in the core is bounded by one of these.

/// Limits applied by the core. Exceeding one yields an `limit` error, never growth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Sessions in the table, removing ones included.
    pub max_sessions: usize,
    /// Generations started at once (running, stopping, draining, reaping), and those
    /// pending beside them; a replacement pending for the one it replaces is tracked
    /// beyond it (one per session at most), so a replace at the limit waits, never fails.
    pub max_generations: usize,
    /// Input bytes accepted for a generation but not yet written by the driver.
    pub max_pending_input: usize,
    /// Largest per-session output buffer a spec may ask for.
    pub max_buffer_bytes: usize,
    /// Total bytes of argv, env and cwd in one spec.
    pub max_spec_bytes: usize,
    /// Entries of argv plus env in one spec.
    pub max_spec_items: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_sessions: 256,
            max_generations: 1024,
            max_pending_input: 1 << 20,
            max_buffer_bytes: 64 << 20,
            max_spec_bytes: 1 << 20,
            max_spec_items: 4096,
        }
    }
}
