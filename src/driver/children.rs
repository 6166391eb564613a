//! The live children the driver owns: per generation, its process handle, our ends of its
//! stdio, and its queued input. Nothing here decides anything; the core does.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;

use mio::Token;

use crate::core::{self, Spec, Stream};
use crate::sys::process::{Process, ReaperMode};
use crate::sys::spawn::{Env, IoMode, SpawnRequest, StderrMode};

/// An output descriptor being read.
#[derive(Debug)]
pub struct OutputFd {
    /// Which stream it carries.
    pub stream: Stream,
    /// The descriptor (for a PTY, shared with input: see [`Child::input_fd`]).
    pub fd: OwnedFd,
    /// Its registration.
    pub token: Token,
}

/// One spawned generation.
#[derive(Debug)]
pub struct Child {
    /// Its session.
    pub session: Arc<str>,
    /// The process handle (pidfd where available).
    pub process: Process,
    /// Registration of the pidfd, while watched.
    pub pidfd_token: Option<Token>,
    /// Output descriptors still open.
    pub outputs: Vec<OutputFd>,
    /// Pipes mode: our end of its stdin, and its registration while we wait to write.
    pub stdin: Option<(OwnedFd, Token)>,
    /// PTY mode: the master, for input and resize (also in `outputs` while readable).
    pub pty: bool,
    /// Bytes accepted by the core, not yet written.
    pub input: Vec<u8>,
    /// Close stdin once `input` is written.
    pub close_after_input: bool,
    /// The leader's exit was already reported to the core.
    pub exit_seen: bool,
    /// After the leader exited with `kill_group`: watch for the group to empty.
    pub awaiting_group: bool,
    /// The spec's `on_exit` is `kill_group`.
    pub kill_group: bool,
}

impl Child {
    /// The descriptor input is written to: the stdin pipe or the PTY master.
    pub fn input_fd(&self) -> Option<RawFd> {
        if let Some((fd, _)) = &self.stdin {
            return Some(fd.as_raw_fd());
        }
        if self.pty {
            return self
                .outputs
                .iter()
                .find(|o| o.stream == Stream::Pty)
                .map(|o| o.fd.as_fd().as_raw_fd());
        }
        None
    }
}

fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

/// The OS-level spawn request for a core spec.
pub fn spawn_request(spec: &Spec, reaper: ReaperMode) -> SpawnRequest {
    SpawnRequest {
        argv: spec.argv.iter().map(|a| os(a)).collect(),
        cwd: spec.cwd.as_ref().map(|c| PathBuf::from(os(c))),
        env: Env {
            inherit: spec.env.inherit,
            set: spec.env.set.iter().map(|(k, v)| (os(k), os(v))).collect(),
            unset: spec.env.unset.iter().map(|k| os(k)).collect(),
        },
        io: match spec.io {
            core::IoMode::Pipes { stderr } => IoMode::Pipes {
                stderr: match stderr {
                    core::Stderr::Pipe => StderrMode::Pipe,
                    core::Stderr::Merge => StderrMode::Merge,
                    core::Stderr::Null => StderrMode::Null,
                },
            },
            core::IoMode::Pty { rows, cols } => IoMode::Pty {
                rows,
                cols,
                term: None,
            },
        },
        reaper,
    }
}
