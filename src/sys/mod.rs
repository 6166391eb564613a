//! Operating-system wrappers: spawn, pipes, PTYs, pidfd reaper, identity tokens, signals.
