//! A lookup helper (see [`crate::lookup`]) the daemon waits for without waiting: started
//! through the asynchronous spawn, its answer read from its stdout as readiness, bounded,
//! and the helper let go of (killed if need be, reaped on `SIGCHLD`) once it has answered
//! or once its start is given up.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;

use crate::lookup::answer::{self, Answer, MAX_ANSWER};
use crate::lookup::Query;
use crate::sys::fd::{read_nonblocking, ReadOutcome};
use crate::sys::process::ReaperMode;
use crate::sys::spawn::{start, Env, IoMode, SpawnError, SpawnRequest, Starting, StderrMode};

/// Our own binary, which the helper runs: the running one even if its file was replaced
/// or removed since (Linux), else the path we were started from.
fn own_program() -> OsString {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        return "/proc/self/exe".into();
    }
    std::env::current_exe()
        .unwrap_or_else(|_| PathBuf::from("genward"))
        .into()
}

/// Bytes read from a helper per readiness before its answer is checked against the bound.
const CHUNK: usize = 16 * 1024;

/// A helper that has been started and has not answered yet.
#[derive(Debug)]
pub struct Lookup {
    /// The helper, never finished: it is let go of (see `sys::spawn::reap_abandoned`)
    /// when this is dropped, after its answer or without it.
    helper: Starting,
    /// What it wrote so far; at most [`MAX_ANSWER`] bytes.
    answer: Vec<u8>,
}

impl Lookup {
    /// Starts a helper for `query`, without waiting for it (not even for its exec).
    pub fn start(query: &Query, reaper: ReaperMode) -> Result<Lookup, SpawnError> {
        let mut argv = vec![own_program()];
        argv.extend(query.to_args());
        let request = SpawnRequest {
            argv,
            // Out of whatever directory the daemon is in, so the helper pins no mount.
            cwd: Some("/".into()),
            env: Env {
                unset: crate::driver::children::starts::DAEMON_ONLY_VARS
                    .iter()
                    .map(Into::into)
                    .collect(),
                ..Env::default()
            },
            io: IoMode::Pipes {
                stderr: StderrMode::Null,
            },
            reaper,
            ..SpawnRequest::default()
        };
        Ok(Lookup {
            helper: start(&request)?,
            answer: Vec::new(),
        })
    }

    /// Our end of the helper's stdout, to watch for readability.
    pub fn fd(&self) -> RawFd {
        self.helper.stdout_fd().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// The helper's pid (our unreaped child).
    pub fn pid(&self) -> i32 {
        self.helper.pid()
    }

    /// Reads what the helper wrote, without blocking: `Some` once it is all there (end of
    /// file), or once it cannot be an answer (too long, unreadable); `None` means wait for
    /// the next readiness.
    pub fn read(&mut self) -> Option<Answer> {
        let fd = self.helper.stdout_fd()?;
        let mut chunk = [0u8; CHUNK];
        loop {
            match read_nonblocking(fd, &mut chunk) {
                Ok(ReadOutcome::Data(n)) => {
                    if self.answer.len() + n > MAX_ANSWER {
                        return Some(Err(format!(
                            "the lookup helper answered more than {MAX_ANSWER} bytes"
                        )
                        .into()));
                    }
                    self.answer.extend_from_slice(&chunk[..n]);
                }
                Ok(ReadOutcome::WouldBlock) => return None,
                Ok(ReadOutcome::Eof) => return Some(self.complete()),
                Err(e) => {
                    return Some(Err(
                        format!("reading the lookup helper's answer: {e}").into()
                    ))
                }
            }
        }
    }

    /// The answer, the helper's stdout having ended: it exited (or never ran our program,
    /// which its status pipe then says, without waiting: it wrote that before it exited).
    fn complete(&mut self) -> Answer {
        if self.helper.poll() {
            if let Some(e) = self.helper.failure() {
                return Err(format!("starting the lookup helper: {e}").into());
            }
        }
        answer::decode(&self.answer)
            .unwrap_or_else(|why| Err(format!("the lookup helper gave no answer: {why}").into()))
    }
}
