//! The sans-IO supervisor core: no syscalls, no clock, no randomness.
