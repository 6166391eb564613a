//! The daemon's hold on upgrades between turns: the one asked for and waiting for its
//! moment, the running program's file (what a failed upgrade runs again, opened at start
//! because the path may hold another file by then) and the path `upgrade` runs by
//! default.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{probe, Pending, LAUNCH_WAIT};
use crate::proto::envelope::RequestId;
use crate::proto::error::{ErrorCode, ProtoError};
use crate::sys::reexec;

/// An `upgrade_failed` error that says the daemon runs on unchanged.
pub fn refused(why: impl std::fmt::Display) -> ProtoError {
    ProtoError::new(
        ErrorCode::UpgradeFailed,
        format!(
            "{why}; genward {} runs on unchanged",
            env!("CARGO_PKG_VERSION")
        ),
    )
}

/// What a pending upgrade's moment brought.
#[derive(Debug)]
pub enum Due {
    /// No generation is starting: run it now.
    Run(Pending),
    /// Starts kept it waiting for [`LAUNCH_WAIT`]: refuse it.
    GaveUp(Pending),
}

#[derive(Debug)]
pub struct Upgrader {
    pending: Option<Pending>,
    own_program: Option<OwnedFd>,
    program_path: PathBuf,
}

impl Upgrader {
    /// For a daemon started afresh: the running program opened now.
    pub fn started() -> Upgrader {
        Upgrader {
            pending: None,
            own_program: reexec::open_own_program()
                .map_err(|e| log::warn!("opening the running program (for upgrades): {e}"))
                .ok(),
            program_path: std::env::current_exe().unwrap_or_else(|_| "genward".into()),
        }
    }

    /// For a daemon resumed from an image: what the previous program opened or said.
    pub fn resumed(own_program: Option<OwnedFd>, program_path: PathBuf) -> Upgrader {
        Upgrader {
            pending: None,
            own_program,
            program_path,
        }
    }

    /// Checks an `upgrade` asked by `client`: the program is opened and asked which
    /// images it reads now. `Err` is the answer refusing it; nothing changed then.
    pub fn ask(
        &mut self,
        client: u64,
        rid: &RequestId,
        binary: Option<String>,
    ) -> Result<(), ProtoError> {
        if self.pending.is_some() {
            return Err(ProtoError::new(
                ErrorCode::Busy,
                "an upgrade is already under way",
            ));
        }
        if self.own_program.is_none() {
            let why = "the running program could not be opened at start, so a failed upgrade could not go back to it";
            return Err(refused(why));
        }
        let path = binary.map_or_else(|| self.program_path.clone(), PathBuf::from);
        let program =
            reexec::open_program(&path).map_err(|e| refused(format!("{}: {e}", path.display())))?;
        let probed = probe::probe(program.as_fd())
            .map_err(|e| refused(format!("{}: {e}", path.display())))?;
        log::info!(
            "upgrade to {} (genward {}) asked",
            path.display(),
            probed.version
        );
        self.pending = Some(Pending {
            client,
            rid: rid.clone(),
            program,
            path,
            version: probed.version,
            asked: Instant::now(),
        });
        Ok(())
    }

    /// The pending upgrade, if its moment came: none is `launching`, or starts kept it
    /// waiting too long.
    pub fn due(&mut self, launching: bool) -> Option<Due> {
        let asked = self.pending.as_ref()?.asked;
        if !launching {
            return self.pending.take().map(Due::Run);
        }
        if asked.elapsed() >= LAUNCH_WAIT {
            return self.pending.take().map(Due::GaveUp);
        }
        None
    }

    /// When a pending upgrade gives up waiting for starts to finish.
    pub fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.asked + LAUNCH_WAIT)
    }

    /// The running program, opened at start.
    pub fn own_program(&self) -> Option<&OwnedFd> {
        self.own_program.as_ref()
    }

    /// The program the daemon was started as.
    pub fn program_path(&self) -> &Path {
        &self.program_path
    }
}
