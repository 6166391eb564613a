//! Replacing the daemon's program in place (`genward upgrade`): every session, process,
//! connection and queued byte carried across `execve` in a sealed image, as systemd does
//! for its own re-execution.
//!
//! The sequence, from the request to the answer (the daemon's side is in
//! `daemon/upgrade.rs` and `daemon/resume.rs`; what waits between turns in [`upgrader`]):
//! 1. The program named (default: the one the daemon was started as) is opened, and run
//!    once to ask which image formats it reads ([`probe`]), its answer awaited without
//!    pausing the loop (another upgrade meanwhile is `busy`; a shutdown ends the check);
//!    refused here, nothing changed.
//! 2. The upgrade waits (bounded) until no generation is between `fork` and `execve`.
//! 3. Each owner exports its state ([`state`]; the core's through [`core_section`]);
//!    the image is written to a sealed memory file; close-on-exec is cleared on exactly
//!    the descriptors it names; the daemon's signals are blocked (the mask survives
//!    `execve`, so what arrives meanwhile stays pending); the opened program is executed.
//!    If `execve` fails, all of that is undone and the request answered with why.
//! 4. The new program decodes and checks the whole image before it owns a descriptor.
//!    If it cannot resume, it executes the previous program — from a descriptor opened
//!    when that one started, so even a path that now holds the new file does not matter —
//!    with the same image, which resumes and answers `upgrade_failed`.
//! 5. Resumed: the loop continues with the same clock, generations, children (still its
//!    children: the pid did not change), connections and queues; the requester is
//!    answered with the version that runs now.

pub mod core_section;
pub mod probe;
pub mod state;
pub mod upgrader;

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::proto::envelope::RequestId;

/// Longest an upgrade waits for starts in flight to finish before it is refused.
pub const LAUNCH_WAIT: Duration = Duration::from_secs(10);

/// The hidden command a daemon re-executes into.
pub const RESUME_COMMAND: &str = "__resume";

/// The hidden command that answers which image formats a program reads.
pub const PROBE_COMMAND: &str = "__image-version";

/// Set in the environment of a new program to make it fail to resume, so that the
/// rollback can be tested with a real exec. Removed by the program that reads it.
pub const FAULT_VAR: &str = "GENWARD_TEST_RESUME_FAULT";

/// An upgrade asked for and checked, waiting for its moment.
#[derive(Debug)]
pub struct Pending {
    /// The connection that asked, and its request id.
    pub client: u64,
    pub rid: RequestId,
    /// The program to run, opened when it was checked.
    pub program: OwnedFd,
    pub path: PathBuf,
    /// Its version, as it said.
    pub version: String,
    /// When it was asked.
    pub asked: Instant,
}

/// What the resumed program is told on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeArgs {
    pub image_fd: i32,
    pub previous_program_fd: i32,
    /// Set when the previous program runs again because the new one could not resume:
    /// why it could not.
    pub rolled_back: Option<String>,
}

impl ResumeArgs {
    /// The command line after the program name.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec![
            RESUME_COMMAND.into(),
            "--image-fd".into(),
            self.image_fd.to_string().into(),
            "--previous-program-fd".into(),
            self.previous_program_fd.to_string().into(),
        ];
        if let Some(why) = &self.rolled_back {
            args.push("--rolled-back".into());
            args.push(why.into());
        }
        args
    }

    /// Parses what follows [`RESUME_COMMAND`].
    pub fn parse(args: &[String]) -> Result<ResumeArgs, String> {
        let mut image_fd = None;
        let mut previous = None;
        let mut rolled_back = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{a}: value missing"));
            let fd = |v: &String| {
                v.parse::<i32>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("{a} {v}: not a descriptor number"))
            };
            match a.as_str() {
                "--image-fd" => image_fd = Some(fd(value()?)?),
                "--previous-program-fd" => previous = Some(fd(value()?)?),
                "--rolled-back" => rolled_back = Some(value()?.clone()),
                other => return Err(format!("{other}: unknown")),
            }
        }
        Ok(ResumeArgs {
            image_fd: image_fd.ok_or("--image-fd missing")?,
            previous_program_fd: previous.ok_or("--previous-program-fd missing")?,
            rolled_back,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_args_round_trip() {
        for rolled_back in [None, Some("it failed: why".to_string())] {
            let a = ResumeArgs {
                image_fd: 7,
                previous_program_fd: 9,
                rolled_back,
            };
            let strings: Vec<String> = a
                .to_args()
                .into_iter()
                .skip(1)
                .map(|s| s.into_string().unwrap())
                .collect();
            assert_eq!(ResumeArgs::parse(&strings).unwrap(), a);
        }
        assert!(ResumeArgs::parse(&["--image-fd".into()]).is_err());
        assert!(ResumeArgs::parse(&["--image-fd".into(), "-3".into()]).is_err());
    }
}
