//! Choosing what holds each generation's process tree when the daemon starts.

use super::config::ContainmentMode;
use crate::sys::cgroup::{CgroupRoot, Placement};

/// The cgroup subtree generations get cgroups in, or `None` for session containment —
/// chosen per `mode`, and said in the log. `Err` only when cgroups were required.
///
/// The daemon stays in the cgroup it started in (it creates `genward-<id>-<pid>/` beside
/// itself and removes it on exit): limits then work for the controllers that cgroup
/// already offers its children (a delegated systemd unit with controllers enabled, or the
/// root cgroup of a pure v2 host).
///
/// The name carries the state directory's id as well as the pid: daemons in different
/// PID namespaces (containers sharing a cgroup tree) may have the same pid, and one must
/// never take the other's cgroup for a stale one of its own; a daemon restarted on the
/// same directory has another pid, so it never removes the cgroups of processes its
/// predecessor left running.
pub fn cgroup_root(mode: ContainmentMode, dir_id: &str) -> Result<Option<CgroupRoot>, String> {
    if mode == ContainmentMode::Session {
        log::info!("containment: each generation's session (--containment session)");
        return Ok(None);
    }
    let id: String = dir_id.chars().take(12).collect();
    let name = format!("genward-{id}-{}", std::process::id());
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
