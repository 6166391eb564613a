//! Operating-system wrappers: spawn, pipes, PTYs, pidfd reaper, identity tokens, signals.
//!
//! Nothing here knows about sessions or generations: this layer starts processes, watches
//! them, tells them apart, and signals them only when it can prove who they are.
//!
//! - [`spawn`]: our own fork + exec over pipes or a PTY, with exec failures reported as
//!   errors rather than as a child exiting 127.
//! - [`cgroup`]: cgroup-v2 containment: a cgroup per generation, entered before the
//!   program runs, `cgroup.kill`, emptiness from `cgroup.events`, limits.
//! - [`process`]: the handle for a started or adopted process: exit observation without
//!   reaping, reaping exactly once, and signals that never reach a stranger.
//! - [`identity`]: versioned identity tokens, the tri-state comparison and adoption.
//! - [`pidfd_ext`]: an adopted process's exit status, and its process group's signal,
//!   through its pidfd where the kernel offers them.
//! - [`pty`], [`fd`]: PTY pairs and the non-blocking read/write helpers.
//! - [`fdpass`]: descriptors passed over a Unix socket (`SCM_RIGHTS`), for the keeper.
//! - [`sigchld`]: the SIGCHLD self-pipe for the fallback (no pidfd) path.
//! - [`procscan`]: `/proc` scans for group members and for who still holds a pipe.
//! - [`reaped`]: every child of ours reaped, noted for the copy of our list of children.
//! - [`tree`]: a session's processes found by walking our own subtree (not the host),
//!   signalled one verified pidfd at a time, and watched until empty; escapees reported.
//! - [`spare_fd`]: one descriptor held back, so that a cgroup's kill works when the
//!   descriptor limit is reached; what a descriptor shortage is.
//! - [`wait_ready`]: a blocking wait for one of a few descriptors, for after the loop.
//! - [`unix_connect`]: a connect to a Unix socket that gives up after a while (the
//!   client's, to a daemon that may be stopped with its backlog full).

pub mod cgroup;
pub mod fd;
pub mod fdpass;
pub mod file_size_limit;
pub mod identity;
pub mod orphans;
pub mod peer;
pub mod pidfd_ext;
pub mod pidfd_probe;
pub mod process;
pub mod procscan;
pub mod pty;
pub mod reaped;
pub mod reexec;
pub mod rlimit;
pub mod sigchld;
pub mod signal_pipe;
pub mod spare_fd;
pub mod spawn;
pub mod started;
pub mod terminal;
pub mod tree;
pub mod unix_connect;
pub mod users;
pub mod wait_ready;
