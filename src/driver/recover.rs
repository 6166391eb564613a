//! Carrying on after a previous daemon: its sessions restored, the processes it described
//! adopted only when verifiably the same, and marked processes nothing accounts for
//! stopped — so that nothing runs unsupervised and no stranger is ever signalled.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use mio::Poll;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

use super::children::Children;
use super::persist::{unix_ms, Left, Persist};
use super::unverified::Unverified;
use crate::core::{Containment, Core, Input, OnExit, Time, WallClock};
use crate::sys::identity::{adopt, Adoption};
use crate::sys::process::ReaperMode;

/// Takes back what the previous daemon left: its sessions, then each generation it
/// described — adopted if its process is verifiably the same, reported lost if another
/// process has its pid, kept unsignalled if that cannot be told — and stops marked
/// processes of generations nothing accounts for (started but never described). Returns
/// the generations kept unverified, to be checked again.
pub fn take_back(
    core: &mut Core,
    children: &mut Children,
    persist: &mut Persist,
    left: Left,
    poll: &Poll,
    now: Time,
    reaper: ReaperMode,
) -> Unverified {
    let mut unverified = Unverified::default();
    let wall = WallClock {
        now,
        unix_ms: unix_ms(),
    };
    let sessions = left.sessions.len();
    // Generations known to have ended: whatever they left running was left knowingly
    // (`on_exit: leave`) or out of reach already, and stays as it would have.
    let ended: HashSet<u64> = left
        .sessions
        .iter()
        .flat_map(|r| {
            let last = r.last_end.as_ref().map(|e| e.gen());
            r.recent_ends.iter().filter_map(|e| e.gen()).chain(last)
        })
        .collect();
    let leaving: HashSet<Arc<str>> = left
        .sessions
        .iter()
        .filter(|r| r.spec.on_exit == OnExit::Leave)
        .map(|r| r.name.clone())
        .collect();
    let mut accounted = ended.clone();
    for problem in core.restore(wall, left.sessions) {
        log::warn!(
            "session {}: not restored: {}",
            problem.session,
            problem.error.message
        );
    }
    let mut adopted = 0;
    for d in left.descriptors {
        if ended.contains(&d.gen) {
            // Its end was reported, but the daemon died before it was gone: while what
            // its leader left was being stopped (`on_exit: kill_group` and its
            // `kill_grace`), or before its reap. There is nothing of it to take back: its
            // descriptor goes, and what still carries its marker is stopped by the sweep
            // below, unless its session leaves what a generation started.
            log::info!(
                "{} gen {}: ended before the previous daemon died; stopping what it left",
                d.session,
                d.gen
            );
            persist.forget(d.gen);
            if !leaving.contains(&d.session) {
                accounted.remove(&d.gen);
            }
            continue;
        }
        let token = d.identity.as_deref().unwrap_or("");
        let verdict = adopt(d.pid as i32, token, reaper);
        let input = Input::Adopt {
            gen: d.gen,
            session: d.session.clone(),
            pid: d.pid,
            containment: Containment::Session,
            verified: !matches!(verdict, Adoption::Unverifiable(_)),
        };
        match verdict {
            Adoption::Adopted(process) => {
                accounted.insert(d.gen);
                children.adopt(poll.registry(), d.gen, process);
                core.handle(now, input);
                adopted += 1;
            }
            Adoption::Mismatch => {
                log::info!(
                    "{} gen {}: pid {} is another process now: lost",
                    d.session,
                    d.gen,
                    d.pid
                );
                core.handle(now, input);
                core.handle(now, Input::Lost { gen: d.gen });
            }
            Adoption::Unverifiable(why) => {
                log::warn!(
                    "{} gen {}: pid {} cannot be verified ({why}): kept, never signalled, checked again",
                    d.session,
                    d.gen,
                    d.pid
                );
                persist.keep_unverified(d.gen);
                accounted.insert(d.gen);
                core.handle(now, input);
                if core.awaits_exit(d.gen) {
                    let token = token.to_owned();
                    unverified.keep(d.gen, d.session.clone(), d.pid, token, Instant::now());
                }
            }
        }
    }
    sweep(persist.dir_id(), |gen| accounted.contains(&gen));
    core.resume(now);
    if sessions > 0 {
        log::info!(
            "took back {sessions} session(s), {adopted} running process(es), {} unverified",
            unverified.len()
        );
    }
    unverified
}

/// Kills every process marked as one of this directory's generations that nothing
/// accounts for (`accounted` says which generations are): at start, those started but not
/// yet described when the previous daemon died, or left behind by a generation that is
/// gone; later, what a taken-back process had started when it ends. Each is opened as a
/// pidfd first, and killed only if it still carries the marker then.
pub fn sweep(dir_id: &str, accounted: impl Fn(u64) -> bool) {
    let marked = match crate::sys::procscan::marked() {
        Ok(m) => m,
        Err(e) => {
            log::warn!("looking for unaccounted processes: {e}");
            return;
        }
    };
    let ours = |value: &str| -> Option<u64> {
        let (id, gen) = value.split_once(':')?;
        (id == dir_id).then(|| gen.parse().ok())?
    };
    for (pid, value) in marked {
        let Some(gen) = ours(&value) else { continue };
        if accounted(gen) || pid == std::process::id() as i32 {
            continue;
        }
        let Some(raw) = Pid::from_raw(pid) else {
            continue;
        };
        let Ok(pidfd) = pidfd_open(raw, PidfdFlags::empty()) else {
            continue;
        };
        // The pidfd pins the process: if it still carries the marker, it is the one read.
        if crate::sys::tree::read_marker_value(pid).as_deref() != Some(value.as_str()) {
            continue;
        }
        log::warn!("pid {pid} of generation {gen} was never accounted for: killed");
        let _ = pidfd_send_signal(&pidfd, Signal::KILL);
    }
}
