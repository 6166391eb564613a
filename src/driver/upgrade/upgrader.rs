//! The daemon's hold on upgrades between turns: the program being checked (its answer
//! awaited without waiting: see [`probe`]), the upgrade asked for and waiting for its
//! moment, the running program's file (what a failed upgrade runs again, opened at start
//! because the path may hold another file by then) and the path `upgrade` runs by
//! default.
//!
//! One upgrade at a time: from its check to its execution (or refusal), another is
//! refused `busy`.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use mio::Registry;

use super::probe::{Check, Step};
use super::{probe, Pending, LAUNCH_WAIT};
use crate::driver::children::HelperStart;
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

/// An upgrade whose program is being checked.
#[derive(Debug)]
struct Checking {
    /// The connection that asked, and its request id.
    client: u64,
    rid: RequestId,
    /// The program, opened before it was started.
    program: OwnedFd,
    path: PathBuf,
    check: Check,
}

/// An upgrade refused once its check ended: whom to answer, and with what.
#[derive(Debug)]
pub struct Refusal {
    pub client: u64,
    pub rid: RequestId,
    pub error: ProtoError,
}

#[derive(Debug)]
pub struct Upgrader {
    checking: Option<Checking>,
    pending: Option<Pending>,
    own_program: Option<OwnedFd>,
    program_path: PathBuf,
}

impl Upgrader {
    /// For a daemon started afresh: the running program opened now.
    pub fn started() -> Upgrader {
        Upgrader {
            checking: None,
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
            checking: None,
            pending: None,
            own_program,
            program_path,
        }
    }

    /// Starts checking an `upgrade` asked by `client`: the program is opened and started
    /// to ask which images it reads; its answer comes through [`Upgrader::on_check`] (and
    /// [`Upgrader::overdue`]). `Err` is the answer refusing it now; nothing changed then.
    pub fn ask(
        &mut self,
        registry: &Registry,
        helper: HelperStart,
        client: u64,
        rid: &RequestId,
        binary: Option<String>,
    ) -> Result<(), ProtoError> {
        if self.checking.is_some() || self.pending.is_some() {
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
        let check = Check::start(registry, program.as_fd(), helper)
            .map_err(|e| refused(format!("{}: {e}", path.display())))?;
        log::debug!("upgrade to {}: checking the program", path.display());
        self.checking = Some(Checking {
            client,
            rid: rid.clone(),
            program,
            path,
            check,
        });
        Ok(())
    }

    /// Whether a program is being checked.
    pub fn is_checking(&self) -> bool {
        self.checking.is_some()
    }

    /// The check had a readiness (or `SIGCHLD` came): once it is decided, the upgrade
    /// waits for its moment ([`Upgrader::due`]), or its refusal is returned.
    pub fn on_check(&mut self, registry: &Registry) -> Option<Refusal> {
        let step = self.checking.as_mut()?.check.step(registry);
        match step {
            Step::Pending => None,
            Step::Done(result) => self.checked(registry, result),
        }
    }

    /// A check still undecided at its deadline (looked at once more first) is refused.
    pub fn overdue(&mut self, registry: &Registry, now: Instant) -> Option<Refusal> {
        let checking = self.checking.as_mut()?;
        if now < checking.check.deadline() {
            return None;
        }
        let result = match checking.check.step(registry) {
            Step::Done(result) => result,
            Step::Pending => Err(Check::overdue()),
        };
        self.checked(registry, result)
    }

    /// Gives up a check under way (the daemon shuts down): its program is killed and left
    /// to be reaped, and the upgrade refused with `why`.
    pub fn cancel_check(&mut self, registry: &Registry, why: &str) -> Option<Refusal> {
        self.checked(registry, Err(why.to_owned()))
    }

    /// Ends the check with `result`: the program is let go of, and the upgrade pending
    /// or refused.
    fn checked(
        &mut self,
        registry: &Registry,
        result: Result<probe::Probed, String>,
    ) -> Option<Refusal> {
        let Checking {
            client,
            rid,
            program,
            path,
            mut check,
        } = self.checking.take()?;
        check.abandon(registry);
        match result {
            Ok(probed) => {
                log::info!(
                    "upgrade to {} (genward {}) asked",
                    path.display(),
                    probed.version
                );
                self.pending = Some(Pending {
                    client,
                    rid,
                    program,
                    path,
                    version: probed.version,
                    asked: Instant::now(),
                });
                None
            }
            Err(why) => {
                log::warn!("upgrade to {} refused: {why}", path.display());
                Some(Refusal {
                    client,
                    rid,
                    error: refused(format!("{}: {why}", path.display())),
                })
            }
        }
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

    /// When the check under way is refused if still undecided, or a pending upgrade
    /// gives up waiting for starts to finish.
    pub fn deadline(&self) -> Option<Instant> {
        let check = self.checking.as_ref().map(|c| c.check.deadline());
        let pending = self.pending.as_ref().map(|p| p.asked + LAUNCH_WAIT);
        check.into_iter().chain(pending).min()
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
