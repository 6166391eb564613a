//! Invariant checker (filled in below).
