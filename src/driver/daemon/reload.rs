//! Loading the configuration and reloading it (`reload`, SIGHUP): the driver reads the
//! files and checks whom each session would run as; the core decides what changes
//! ([`Core::reload`](crate::core::Core::reload)). systemd hears `RELOADING=1` before and
//! `READY=1` after every reload that is not a dry run, a refused one too.

use std::path::Path;

use super::Daemon;
use crate::core::{ConfigSession, Plan};
use crate::proto::encode::core_error;
use crate::proto::error::{ErrorCode, ProtoError};

/// Loads the configuration at `path` and checks each session's spec against the daemon's
/// `limits` and its user and groups as far as a `spawn` does before it starts (numeric ids
/// against the daemon's privileges; names are resolved off the loop at each start, so an
/// unknown name is that start's `spawn_failed`): a problem names the file it is in.
pub(super) fn load_checked(
    path: &Path,
    limits: &crate::core::Config,
) -> Result<Vec<ConfigSession>, ProtoError> {
    let bad = |msg: String| ProtoError::new(ErrorCode::BadConfig, msg);
    let entries = crate::config::load(path).map_err(|e| bad(e.to_string()))?;
    for e in &entries {
        let file = e.file.display();
        // Where in the file, as the parser's own problems say it: a file of the directory
        // form holds one session's fields; the single file, every session's.
        let field = match e.file.as_path() == path {
            true => format!("sessions.{}: ", e.session.name),
            false => String::new(),
        };
        e.session
            .spec
            .validate(limits)
            .map_err(|err| bad(format!("{file}: {field}{}", err.message)))?;
        crate::driver::run_as::check_now(&e.session.spec.run_as)
            .map_err(|err| bad(format!("{file}: {}", err.message)))?;
    }
    Ok(crate::config::sessions(&entries))
}

/// Logs what a reload did (or would do).
pub(super) fn log_plan(plan: &Plan, dry_run: bool) {
    let join = |names: &[std::sync::Arc<str>]| names.join(" ");
    log::info!(
        "config{}: start [{}] stop [{}] replace [{}] busy [{}] unchanged {}",
        if dry_run { " (dry run)" } else { "" },
        join(&plan.start),
        join(&plan.stop),
        join(&plan.replace),
        join(&plan.busy),
        plan.unchanged.len()
    );
}

impl Daemon {
    /// Reads the configuration again and brings the sessions in line with it (`dry_run`:
    /// only says what that would do). A bad configuration changes nothing.
    pub(super) fn reload(&mut self, dry_run: bool) -> Result<Plan, ProtoError> {
        let Some(path) = self.cfg.config.clone() else {
            return Err(ProtoError::new(
                ErrorCode::NoConfig,
                "the daemon was started without --config: there is nothing to reload",
            ));
        };
        if dry_run {
            let sessions = load_checked(&path, self.core.config())?;
            return self.core.plan_reload(&sessions).map_err(|e| core_error(&e));
        }
        // Around every attempt, a failed one too: systemd waits for the READY=1.
        self.notify.reloading();
        let result = match load_checked(&path, self.core.config()) {
            Ok(sessions) => {
                // It may stop or replace any session's generations.
                self.exits_first(self.core.awaiting_exit());
                let now = self.clock.now();
                self.core.reload(now, sessions).map_err(|e| core_error(&e))
            }
            Err(e) => Err(e),
        };
        self.run_actions();
        self.notify.reloaded();
        let plan = result?;
        log_plan(&plan, false);
        Ok(plan)
    }

    /// SIGHUP: a reload whose outcome only the log hears of.
    pub(super) fn reload_on_hangup(&mut self) {
        if self.cfg.config.is_none() {
            // Still the reload's notifications: a `Type=notify-reload` unit's `systemctl
            // reload` waits for READY=1 (until its timeout) whatever there is to reload.
            self.notify.reloading();
            log::info!("SIGHUP received; no --config, nothing to reload");
            self.notify.reloaded();
            return;
        }
        if let Err(e) = self.reload(false) {
            log::error!(
                "SIGHUP: configuration not reloaded, nothing changed: {}",
                e.message
            );
        }
    }
}
