//! Choosing what holds each generation's process tree when the daemon starts.

use super::config::ContainmentMode;
use crate::sys::cgroup::{CgroupRoot, Placement};

/// The cgroup subtree generations get cgroups in, or `None` for session containment —
/// chosen per `mode`, and said in the log. `Err` only when cgroups were required.
///
/// The daemon stays in the cgroup it started in (it creates `genward-<pid>/` beside
/// itself and removes it on exit): limits then work for the controllers that cgroup
/// already offers its children (a delegated systemd unit with controllers enabled, or the
/// root cgroup of a pure v2 host).
pub fn cgroup_root(mode: ContainmentMode) -> Result<Option<CgroupRoot>, String> {
    if mode == ContainmentMode::Session {
        log::info!("containment: each generation's session (--containment session)");
        return Ok(None);
    }
    let name = format!("genward-{}", std::process::id());
    match CgroupRoot::setup(&name, Placement::StayPut) {
        Ok(root) => {
            log::info!(
                "containment: a cgroup per generation under {} (controllers for limits: {})",
                root.path().display(),
                root.controllers()
            );
            Ok(Some(root))
        }
        Err(why) if mode == ContainmentMode::Cgroup => Err(format!("--containment cgroup: {why}")),
        Err(why) => {
            log::info!("containment: each generation's session ({why})");
            Ok(None)
        }
    }
}
