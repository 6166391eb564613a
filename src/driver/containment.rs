//! Choosing what holds each generation's process tree when the daemon starts, and
//! clearing away the cgroup subtrees that earlier daemons left: those of the same state
//! directory as soon as nothing runs in them, and those of any other directory once their
//! maker is verified gone and nothing runs in them.

use std::path::PathBuf;

use super::config::ContainmentMode;
use crate::sys::cgroup::{
    own_cgroup, owner_of, prune_subtree, CgroupRoot, GenCgroup, Placement, DAEMON_LEAF,
};
use crate::sys::identity::{self, Observed, Verdict};

/// The characters of the state directory's id a subtree's name carries.
const ID_CHARS: usize = 12;

/// The name of the cgroup subtree of the daemon with `pid` on the state directory `dir_id`:
/// `genward-<id>-<pid>`.
fn subtree_name(dir_id: &str, pid: u32) -> String {
    let id: String = dir_id.chars().take(ID_CHARS).collect();
    format!("genward-{id}-{pid}")
}

/// Whether `name` is the subtree of another daemon on the state directory `dir_id`
/// (`genward-<id>-<digits>`, not `own_pid`'s). Only the daemon holding the directory's
/// lease asks, and only one can hold it: every such subtree was made by a daemon before
/// it and is its to clear. Another directory's subtrees (another id: another daemon,
/// perhaps in another PID namespace with the same pids) and anything else are not.
fn is_predecessor(name: &str, dir_id: &str, own_pid: u32) -> bool {
    let id: String = dir_id.chars().take(ID_CHARS).collect();
    let Some(pid) = name
        .strip_prefix("genward-")
        .and_then(|rest| rest.strip_prefix(id.as_str()))
        .and_then(|rest| rest.strip_prefix('-'))
    else {
        return false;
    };
    !id.is_empty()
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && pid.parse::<u32>() != Ok(own_pid)
}

/// Whether `name` is any daemon's subtree (`genward-<id>-<digits>`) other than one of the
/// state directory `dir_id` (those are [`Predecessors`]) — or our own.
fn is_other_directorys(name: &str, dir_id: &str) -> bool {
    let id: String = dir_id.chars().take(ID_CHARS).collect();
    let Some((their_id, pid)) = name
        .strip_prefix("genward-")
        .and_then(|rest| rest.rsplit_once('-'))
    else {
        return false;
    };
    !their_id.is_empty()
        && their_id.bytes().all(|b| b.is_ascii_alphanumeric())
        && their_id != id
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
}

/// Version tag of the owner mark (see [`own_mark`]).
const MARK_TAG: &str = "gw1";

/// The owner mark this daemon puts on its subtree: `gw1 <pid namespace> <pid> <identity
/// token>`. With it, a later daemon of *any* state directory can verify that the maker is
/// gone. `None` where the namespace or the token cannot be read (the subtree then stays
/// unmarked, and is only ever cleared by a daemon on the same directory).
fn own_mark() -> Option<String> {
    let ns = identity::pid_namespace().ok()?;
    let pid = i32::try_from(std::process::id()).ok()?;
    match identity::observe(pid, None) {
        Observed::Token(token) => Some(format!("{MARK_TAG} {ns} {pid} {token}")),
        Observed::Gone | Observed::Unreadable(_) => None,
    }
}

/// Whether the daemon that `mark` names is verified gone, seen from the PID namespace
/// `own_ns`: the mark is well-formed and of that namespace (a pid means nothing across
/// namespaces), and the process on its pid is not the one it names, or none is, or it has
/// exited. Anything else — a malformed mark, another namespace, an identity that cannot
/// be read — is not known to be gone, and its subtree is left alone.
fn maker_gone(mark: &str, own_ns: u64) -> bool {
    let mut fields = mark.splitn(4, ' ');
    let (Some(MARK_TAG), Some(ns), Some(pid), Some(token)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return false;
    };
    let (Ok(ns), Ok(pid)) = (ns.parse::<u64>(), pid.parse::<i32>()) else {
        return false;
    };
    ns == own_ns && pid > 0 && identity::verify_running(pid, Some(token)) == Verdict::Mismatch
}

/// Removes the subtrees that daemons of *other* state directories left when they died
/// (killed, or crashed, with no daemon on their directory after them to clear them up):
/// each one whose owner mark names a daemon verified gone, as far as no process is in it.
/// A subtree that still holds a process stays (a daemon on its directory may take it
/// back), and so does every one whose maker lives, cannot be verified (another PID
/// namespace, no mark), or is not named as a daemon names its subtree. Called once at
/// start; returns how many went.
pub fn clear_abandoned(root: &CgroupRoot, dir_id: &str) -> usize {
    let Ok(own_ns) = identity::pid_namespace() else {
        return 0;
    };
    let found = match root.siblings(|name| is_other_directorys(name, dir_id)) {
        Ok(found) => found,
        Err(e) => {
            log::warn!("looking for cgroups other daemons left: {e}");
            return 0;
        }
    };
    let mut removed = 0;
    for path in found {
        if !owner_of(&path).is_some_and(|mark| maker_gone(&mark, own_ns)) {
            continue;
        }
        match prune_subtree(&path, is_leaf_of_ours) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) => log::warn!("removing the cgroup subtree {}: {e}", path.display()),
        }
    }
    if removed > 0 {
        log::info!("removed {removed} cgroup subtrees that daemons now gone left");
    }
    removed
}

/// Whether `name` is a cgroup a daemon makes in its subtree: `gen-<digits>` or `daemon`.
fn is_leaf_of_ours(name: &str) -> bool {
    name == DAEMON_LEAF
        || name
            .strip_prefix("gen-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The cgroup an earlier daemon on the state directory `dir_id` made for a generation
/// whose leader, `pid`, is taken back after it died: `<own>/genward-<id>-<digits>/gen-<digits>`
/// as `/proc/<pid>/cgroup` names it, opened again, so that the generation stays contained
/// as it was started — stopped and killed whole, however its descendants detached, and
/// its end seen by the cgroup's emptiness. `None` for any other cgroup (the generation
/// is then contained by its session, as every one is without cgroups).
pub fn predecessor_cgroup(root: &CgroupRoot, dir_id: &str, pid: u32) -> Option<GenCgroup> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let name = own_cgroup(&text)?;
    recorded_cgroup(root, dir_id, &name)
}

/// The cgroup `name` (as `/proc/<pid>/cgroup` names it: below the cgroup v2 mount), opened
/// again if it is one an earlier daemon on the state directory `dir_id` made for a
/// generation — `<own>/genward-<id>-<digits>/gen-<digits>`, beside this daemon's own
/// subtree — and still exists. A generation's descriptor records it, so that its tree is
/// found again even once its leader is gone. `None` for any other name.
pub fn recorded_cgroup(root: &CgroupRoot, dir_id: &str, name: &str) -> Option<GenCgroup> {
    let own = &root.location().own;
    let below = match own.as_str() {
        "/" => name.strip_prefix('/')?,
        own => name.strip_prefix(own)?.strip_prefix('/')?,
    };
    let (subtree, leaf) = below.split_once('/')?;
    let ours = is_predecessor(subtree, dir_id, std::process::id())
        && leaf != DAEMON_LEAF
        && is_leaf_of_ours(leaf);
    if !ours {
        return None;
    }
    let path = root.location().dir.join(subtree).join(leaf);
    GenCgroup::reopen(path, name.to_owned())
        .inspect_err(|e| {
            if e.kind() != std::io::ErrorKind::NotFound {
                log::warn!("opening the cgroup {name} again: {e}");
            }
        })
        .ok()
}

/// The subtrees earlier daemons on this state directory left (they crashed, or were
/// killed, before removing them) that still hold a process: the generations taken back
/// from them, or what those left running. Each is removed as soon as it is found empty
/// (see [`Predecessors::prune`]); without this a host collects one per crash, forever.
#[derive(Debug, Default)]
pub struct Predecessors {
    left: Vec<PathBuf>,
}

impl Predecessors {
    /// Finds the subtrees beside `root` that earlier daemons on `dir_id` made, and removes
    /// at once what of them holds no process. Called once the previous daemon's
    /// generations are taken back, so that what they run is known to be running.
    pub fn find(root: &CgroupRoot, dir_id: &str) -> Predecessors {
        let own = std::process::id();
        let left = match root.siblings(|name| is_predecessor(name, dir_id, own)) {
            Ok(found) => found,
            Err(e) => {
                log::warn!("looking for cgroups earlier daemons left: {e}");
                Vec::new()
            }
        };
        let mut found = Predecessors { left };
        found.prune();
        found
    }

    /// Removes each remaining subtree's empty generation cgroups, and the subtree itself
    /// once nothing is left in it; keeps those that still hold a process for a later look
    /// (when a generation taken back from them ends, and when the daemon exits). Never
    /// removes a cgroup with a process in it.
    pub fn prune(&mut self) {
        self.left
            .retain(|path| match prune_subtree(path, is_leaf_of_ours) {
                Ok(true) => {
                    log::info!(
                        "removed the cgroup subtree an earlier daemon left: {}",
                        path.display()
                    );
                    false
                }
                Ok(false) => true,
                Err(e) => {
                    log::warn!("removing the cgroup subtree {}: {e}", path.display());
                    true
                }
            });
    }

    /// Whether no subtree of an earlier daemon is left.
    pub fn is_empty(&self) -> bool {
        self.left.is_empty()
    }
}

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
    let name = subtree_name(dir_id, std::process::id());
    match CgroupRoot::setup(&name, Placement::StayPut) {
        Ok(mut root) => {
            if let Some(mark) = own_mark() {
                if let Err(e) = root.mark_owner(&mark) {
                    log::info!("cgroup subtree left unmarked (cleared only by a daemon on this state directory): {e}");
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn only_this_directorys_subtrees_of_other_pids_are_predecessors() {
        assert_eq!(subtree_name(ID, 42), "genward-0123456789ab-42");
        assert!(is_predecessor("genward-0123456789ab-41", ID, 42));
        assert!(is_predecessor("genward-0123456789ab-99999999999", ID, 42));
        // Its own, another directory's, and anything not named as a daemon names it.
        assert!(!is_predecessor("genward-0123456789ab-42", ID, 42));
        assert!(!is_predecessor("genward-0123456789ac-41", ID, 42));
        assert!(!is_predecessor("genward-0123456789ab-", ID, 42));
        assert!(!is_predecessor("genward-0123456789ab-4x", ID, 42));
        assert!(!is_predecessor("genward-0123456789ab-41-x", ID, 42));
        assert!(!is_predecessor("genward-0123456789abc-41", ID, 42));
        assert!(!is_predecessor("genward-0123456789ab", ID, 42));
        assert!(!is_predecessor("xgenward-0123456789ab-41", ID, 42));
        assert!(!is_predecessor("genward--41", "", 42));
    }

    #[test]
    fn other_directories_subtrees_are_named_as_a_daemon_names_them() {
        assert!(is_other_directorys("genward-fedcba987654-41", ID));
        assert!(is_other_directorys("genward-x-1", ID));
        // This directory's (predecessors, or our own) and what no daemon names so.
        assert!(!is_other_directorys("genward-0123456789ab-41", ID));
        assert!(!is_other_directorys("genward-fedcba987654-", ID));
        assert!(!is_other_directorys("genward-fedcba987654-4x", ID));
        assert!(!is_other_directorys("genward--41", ID));
        assert!(!is_other_directorys("genward-a.b-41", ID));
        assert!(!is_other_directorys("genward-41", ID));
        assert!(!is_other_directorys("other-fedcba987654-41", ID));
    }

    #[test]
    fn a_maker_is_gone_only_when_verified_so_in_our_pid_namespace() {
        let ns = identity::pid_namespace().unwrap();
        let mark = own_mark().expect("a mark on Linux");
        // Alive: ourselves.
        assert!(!maker_gone(&mark, ns));
        // The same pid with another start: a different process, so ours is gone.
        let pid = std::process::id();
        let boot = identity::boot_id().unwrap();
        let stranger = format!("{MARK_TAG} {ns} {pid} linux1:{boot}:0:1");
        assert!(maker_gone(&stranger, ns));
        // In another PID namespace the pid says nothing.
        assert!(!maker_gone(&stranger, ns + 1));
        // Malformed, another version, no token, a token that cannot be compared.
        for bad in [
            "",
            "gw1",
            &format!("gw1 {ns} {pid}"),
            &format!("gw2 {ns} {pid} linux1:{boot}:0:1"),
            &format!("gw1 x {pid} linux1:{boot}:0:1"),
            &format!("gw1 {ns} -1 linux1:{boot}:0:1"),
            &format!("gw1 {ns} {pid} nonsense"),
        ] {
            assert!(!maker_gone(bad, ns), "{bad:?}");
        }
    }

    #[test]
    fn only_generation_and_daemon_leaves_are_ours() {
        assert!(is_leaf_of_ours("gen-7"));
        assert!(is_leaf_of_ours("daemon"));
        assert!(!is_leaf_of_ours("gen-"));
        assert!(!is_leaf_of_ours("gen-7x"));
        assert!(!is_leaf_of_ours("other"));
    }
}
