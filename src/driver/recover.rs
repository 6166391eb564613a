//! Carrying on after a previous daemon: its sessions restored, the processes it described
//! adopted only when verifiably the same — with their I/O when a keeper held it — and
//! marked processes nothing accounts for stopped — so that nothing runs unsupervised and
//! no stranger is ever signalled.

use std::collections::HashSet;
use std::sync::Arc;

use mio::Poll;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

use super::children::Children;
use super::keeper_start::{Kept, KeptIo};
use super::logs::Logs;
use super::persist::{unix_ms, Left, Persist};
use crate::core::{AdoptedIo, Containment, Core, Input, OnExit, Stream, Time, WallClock};
use crate::keeper::wire::Role;
use crate::sys::identity::{adopt, adopt_kept, Adoption};
use crate::sys::process::ReaperMode;

/// What taking back a previous daemon's state gave.
#[derive(Debug)]
pub struct TakenBack {
    /// The replay logs, with what the previous daemon retained.
    pub logs: Logs,
    /// The generations resumed with the I/O a keeper held (its copies are still needed).
    pub with_io: HashSet<u64>,
}

/// Takes back what the previous daemon left: its sessions, then each generation it
/// described — adopted if its process is verifiably the same, reported lost if another
/// process has its pid, kept unsignalled if that cannot be told — and stops marked
/// processes of generations nothing accounts for (started but never described).
///
/// A generation whose descriptors a keeper handed over (`kept`, emptied here) is resumed
/// with them: its pidfd is the original process's (see [`adopt_kept`]), and its output
/// streams go on at the offsets where the retained output ended. The handed descriptors
/// of any other generation are closed.
#[allow(clippy::too_many_arguments)]
pub fn take_back(
    core: &mut Core,
    children: &mut Children,
    persist: &mut Persist,
    mut left: Left,
    kept: &mut Kept,
    poll: &Poll,
    now: Time,
    reaper: ReaperMode,
) -> TakenBack {
    let mut unverified = 0;
    let mut with_io = HashSet::new();
    let capacities = left.log_capacities();
    let wall = WallClock {
        now,
        unix_ms: unix_ms(),
    };
    let (descriptors, copies) = one_per_process(left.descriptors, &left.sessions);
    for (gen, why) in copies {
        log::warn!("gen {gen}: not taken back: {why}");
        persist.set_aside_descriptor(gen, &why);
    }
    left.descriptors = descriptors;
    let (sessions, claiming) = not_claiming_others(left.sessions, &left.descriptors);
    for (name, why) in claiming {
        log::warn!("session {name}: not restored: {why}");
        persist.set_aside_session(&name, &format!("not restored: {why}"));
    }
    left.sessions = sessions;
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
    let refused = core.restore(wall, left.sessions);
    // Those taken back: the records less the refused.
    let sessions = sessions - refused.len().min(sessions);
    for problem in refused {
        log::warn!(
            "session {}: not restored: {}",
            problem.session,
            problem.error.message
        );
        let why = format!("not restored: {}", problem.error.message);
        persist.set_aside_session(&problem.session, &why);
    }
    let logs = persist.open_logs(core, capacities, false);
    let mut adopted = 0;
    // The cgroups of generations that had not ended: never another's tree to kill.
    let live_cgroups: HashSet<String> = left
        .descriptors
        .iter()
        .filter(|d| !ended.contains(&d.gen))
        .filter_map(|d| d.cgroup.clone())
        .collect();
    for d in left.descriptors {
        let handed = kept.remove(&d.gen);
        let recorded = d
            .cgroup
            .as_deref()
            .and_then(|name| children.recorded_cgroup(name))
            .filter(|cg| matches!(cg.is_populated(), Ok(true)));
        if ended.contains(&d.gen) {
            // Its end was reported, and what its leader left is still in its cgroup (the
            // crash came while its tree was being emptied): tracked again, its tree
            // killed whole and awaited, as without the crash.
            let name = d.cgroup.as_deref().unwrap_or("");
            let tree = recorded
                .filter(|_| !leaving.contains(&d.session) && !live_cgroups.contains(name))
                .filter(|_| core.would_adopt_tree(d.gen, &d.session));
            if let Some(cg) = tree {
                log::info!(
                    "{} gen {}: ended before the previous daemon died, its tree still in {name}: killing it",
                    d.session,
                    d.gen
                );
                children.adopt_tree(poll.registry(), d.gen, d.pid, cg);
                core.handle(
                    now,
                    Input::AdoptTree {
                        gen: d.gen,
                        session: d.session.clone(),
                        pid: d.pid,
                    },
                );
                accounted.remove(&d.gen);
                continue;
            }
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
        let pidfd = handed
            .as_ref()
            .filter(|_| reaper != ReaperMode::Fallback)
            .and_then(|io| io.has(Role::Pidfd).then_some(()));
        let (verdict, io) = match (pidfd, handed) {
            (Some(()), Some(mut io)) => {
                let pidfd = io.take(Role::Pidfd).expect("checked above");
                match adopt_kept(pidfd, d.pid as i32, token) {
                    a @ Adoption::Adopted(_) => (a, Some(io)),
                    other => {
                        log::info!(
                            "{} gen {}: the keeper's descriptors do not match its record; closed",
                            d.session,
                            d.gen
                        );
                        (other, None)
                    }
                }
            }
            _ => (adopt(d.pid as i32, token, reaper), None),
        };
        let resumed = io.as_ref().map(|io| kept_io(&logs, &d.session, d.gen, io));
        // Contained as it was started: in the cgroup the previous daemon made for it.
        // Where its descriptor names it, whatever became of its leader; else where
        // `/proc` says its (verified) leader is.
        let cgroup = match verdict {
            Adoption::Adopted(_) => {
                let named = d
                    .cgroup
                    .as_deref()
                    .and_then(|n| children.recorded_cgroup(n));
                named.or_else(|| children.predecessor_cgroup(d.pid))
            }
            // Gone while no daemon ran: what it left in its cgroup is its tree still.
            Adoption::Mismatch => recorded,
            Adoption::Unverifiable(_) => None,
        };
        let input = Input::Adopt {
            gen: d.gen,
            session: d.session.clone(),
            pid: d.pid,
            containment: match cgroup {
                Some(_) => Containment::Cgroup,
                None => Containment::Session,
            },
            verified: !matches!(verdict, Adoption::Unverifiable(_)),
            io: resumed,
            started_unix_ms: d.started_unix_ms,
        };
        // The core refuses an `Adopt` for a session it did not take back (its record was
        // bad, moved aside, or not restored), or for a number it could still allocate or
        // that ended already: nothing would supervise that process, nor ever stop it, so
        // it is left unaccounted for — the sweep below kills what carries its marker —
        // and its descriptor goes.
        // One whose process is gone too has nothing left to stop, nor to report (the core
        // would ignore its `Lost` as it ignores the `Adopt`): only its descriptor goes —
        // kept, it would be read again at every start, and never listed.
        if !core.would_adopt(d.gen, &d.session) {
            match verdict {
                Adoption::Mismatch => log::info!(
                    "{} gen {}: pid {} is gone, and its session or generation is not taken back: forgotten",
                    d.session,
                    d.gen,
                    d.pid
                ),
                _ => log::warn!(
                    "{} gen {}: pid {} has no session to go back to (its record is gone or was refused): stopped",
                    d.session,
                    d.gen,
                    d.pid
                ),
            }
            persist.forget(d.gen);
            continue;
        }
        match verdict {
            Adoption::Adopted(process) => {
                accounted.insert(d.gen);
                match io {
                    Some(mut io) => {
                        let outputs = [
                            io.take(Role::Stdout),
                            io.take(Role::Stderr),
                            io.take(Role::Pty),
                        ];
                        let stdin = io.take(Role::Stdin);
                        let registry = poll.registry();
                        children.adopt_with_io(registry, d.gen, process, cgroup, outputs, stdin);
                    }
                    None => children.adopt(poll.registry(), d.gen, process, cgroup),
                }
                core.handle(now, input);
                if resumed.is_some() && core.awaits_exit(d.gen) {
                    with_io.insert(d.gen);
                }
                adopted += 1;
            }
            Adoption::Mismatch => {
                log::info!(
                    "{} gen {}: pid {} is gone, or another process now: lost",
                    d.session,
                    d.gen,
                    d.pid
                );
                // Its tree, still in its cgroup, is killed and awaited (see `Input::Lost`).
                if let Some(cg) = cgroup {
                    children.adopt_tree(poll.registry(), d.gen, d.pid, cg);
                }
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
                    persist.check_again(d.gen, d.session.clone(), d.pid, token);
                    unverified += 1;
                }
            }
        }
    }
    sweep(persist.dir_id(), |gen| accounted.contains(&gen));
    core.resume(now);
    if sessions > 0 {
        log::info!(
            "took back {sessions} session(s), {adopted} running process(es) ({} with their I/O), {} unverified",
            with_io.len(),
            unverified
        );
    }
    // Handed over for generations no descriptor names: closed.
    kept.clear();
    TakenBack { logs, with_io }
}

/// The records less those whose current generation is another session's by its
/// descriptor (a damaged or copied file): the descriptor, written before the spawn was
/// reported, says whose the process is; a record that claims it is refused, whatever order
/// the files are read in, so that no session ever acts on another's process.
fn not_claiming_others(
    records: Vec<crate::core::SessionRecord>,
    descriptors: &[crate::store::descriptor::Descriptor],
) -> (Vec<crate::core::SessionRecord>, Vec<(Arc<str>, String)>) {
    let owner: std::collections::HashMap<u64, &Arc<str>> =
        descriptors.iter().map(|d| (d.gen, &d.session)).collect();
    let mut refused = Vec::new();
    let kept = records
        .into_iter()
        .filter(
            |r| match r.current.and_then(|g| owner.get(&g).map(|o| (g, o))) {
                Some((gen, o)) if **o != r.name => {
                    let why = format!("its current generation {gen} is session {o}'s");
                    refused.push((r.name.clone(), why));
                    false
                }
                _ => true,
            },
        )
        .collect();
    (kept, refused)
}

/// The descriptors less those naming a process another one names too (the same pid and
/// identity token: a file copied under another generation's name), and those, each with
/// why (they are set aside): a process is one generation's, and adopted twice it would be
/// listed twice and its one end reported as two. Of those naming one process, the one its
/// session's record names as current is kept, else the lowest number. Descriptors without
/// an identity token are not compared: nothing tells their processes apart.
fn one_per_process(
    descriptors: Vec<crate::store::descriptor::Descriptor>,
    records: &[crate::core::SessionRecord],
) -> (
    Vec<crate::store::descriptor::Descriptor>,
    Vec<(u64, String)>,
) {
    use std::collections::HashMap;
    let current: HashSet<(&str, u64)> = records
        .iter()
        .filter_map(|r| r.current.map(|g| (&*r.name, g)))
        .collect();
    // Per process, the generation kept: one named current first, then the lowest number
    // (the descriptors come sorted by number).
    let mut kept: HashMap<(u32, String), (u64, bool)> = HashMap::new();
    for d in &descriptors {
        let Some(token) = d.identity.clone() else {
            continue;
        };
        let named = current.contains(&(&*d.session, d.gen));
        let k = kept.entry((d.pid, token)).or_insert((d.gen, named));
        if named && !k.1 {
            *k = (d.gen, true);
        }
    }
    let mut copies = Vec::new();
    let mut keep = Vec::with_capacity(descriptors.len());
    for d in descriptors {
        let winner = d
            .identity
            .clone()
            .and_then(|t| kept.get(&(d.pid, t)))
            .map(|k| k.0);
        match winner {
            Some(w) if w != d.gen => {
                let why = format!("it names pid {}, generation {w}'s process", d.pid);
                copies.push((d.gen, why));
            }
            _ => keep.push(d),
        }
    }
    (keep, copies)
}

/// What the core is told of a generation's I/O a keeper held: each output stream handed
/// over goes on where its retained output ended (from 0 when none is retained), and its
/// input is open if its stdin or terminal was handed over.
fn kept_io(logs: &Logs, session: &str, gen: u64, io: &KeptIo) -> AdoptedIo {
    let mut out = AdoptedIo::default();
    for (stream, role) in [
        (Stream::Stdout, Role::Stdout),
        (Stream::Stderr, Role::Stderr),
        (Stream::Pty, Role::Pty),
    ] {
        if io.has(role) {
            out.outputs[stream.index()] = Some(logs.stream_end(session, gen, stream).unwrap_or(0));
        }
    }
    out.input = io.has(Role::Stdin) || io.has(Role::Pty);
    out
}

/// Kills every process marked as one of this directory's generations that nothing
/// accounts for (`accounted` says which generations are): at start, those started but not
/// yet described when the previous daemon died, left behind by a generation that is
/// gone, or helpers it ran (marked generation 0: probe commands, an upgrade's check);
/// later, what a taken-back process had started when it ends. Each is opened as a
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
    let mut killed = 0;
    let looked = marked.len();
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
        match gen {
            0 => log::warn!("pid {pid}, a probe or check an earlier daemon started: killed"),
            // At start, one never described or whose generation is gone; later, what a
            // taken-back leader left when it ended (as `on_exit: kill_group` says).
            _ => log::warn!("pid {pid}, left behind by generation {gen}: killed"),
        }
        if pidfd_send_signal(&pidfd, Signal::KILL).is_ok() {
            killed += 1;
        }
    }
    log::debug!(
        "look {} through /proc for unaccounted processes: {looked} marked, {killed} killed",
        crate::sys::procscan::marked_looks()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Desired, RestState, SessionRecord, Spec};
    use crate::store::descriptor::{Descriptor, IoKind};
    use crate::store::dir_id::DirId;

    fn record(name: &str, current: Option<u64>) -> SessionRecord {
        SessionRecord {
            name: Arc::from(name),
            spec: Spec::new(vec![b"sleep".to_vec(), b"100".to_vec()]),
            origin: Default::default(),
            desired: Desired::Up,
            rest: RestState::Stopped,
            restarts: 0,
            restart_at_unix_ms: None,
            restart_uncounted: false,
            current,
            current_overlaps: false,
            stopped_by_shutdown: false,
            last_gen: None,
            last_end: None,
            recent_ends: vec![],
            stops: vec![],
        }
    }

    fn descriptor(session: &str, gen: u64) -> Descriptor {
        Descriptor {
            session: Arc::from(session),
            gen,
            pid: 4242,
            pgid: 4242,
            sid: 4242,
            identity: None,
            started_unix_ms: 1_700_000_000_000,
            io: IoKind::Pipes,
            dir_id: DirId::parse("0123456789abcdef0123456789abcdef").unwrap(),
            cgroup: None,
        }
    }

    /// A copy of `b`'s record under another name claims `b`'s running generation: it is
    /// refused in whichever order the files were read, and `b` keeps its own.
    #[test]
    fn a_record_claiming_another_sessions_generation_is_refused() {
        let descriptors = [descriptor("b", 2)];
        for order in [["b", "d"], ["d", "b"]] {
            let records = order.iter().map(|n| record(n, Some(2))).collect();
            let (kept, refused) = not_claiming_others(records, &descriptors);
            let names: Vec<&str> = kept.iter().map(|r| &*r.name).collect();
            assert_eq!(names, ["b"]);
            assert_eq!(refused.len(), 1);
            assert_eq!(&*refused[0].0, "d");
        }
        // Its own, or one no descriptor names: kept.
        let (kept, refused) =
            not_claiming_others(vec![record("a", Some(7)), record("c", None)], &descriptors);
        assert_eq!(kept.len(), 2);
        assert!(refused.is_empty());
    }

    /// A descriptor copied under another number names the same process: one is kept —
    /// the one the session's record calls current, else the lowest — and the other set
    /// aside, so the process is not adopted twice. Without tokens nothing is compared.
    #[test]
    fn a_process_named_by_two_descriptors_is_taken_back_once() {
        let with_token = |session: &str, gen: u64| Descriptor {
            identity: Some("linux1:boot:0:99".into()),
            ..descriptor(session, gen)
        };
        let gens = |kept: &[Descriptor]| kept.iter().map(|d| d.gen).collect::<Vec<_>>();
        let copies = vec![with_token("a", 1), with_token("a", 9)];
        let (kept, aside) = one_per_process(copies.clone(), &[record("a", Some(1))]);
        assert_eq!((gens(&kept), aside.len()), (vec![1], 1));
        let (kept, aside) = one_per_process(copies.clone(), &[record("a", Some(9))]);
        assert_eq!((gens(&kept), aside[0].0), (vec![9], 1));
        let (kept, _) = one_per_process(copies, &[]);
        assert_eq!(gens(&kept), [1]);
        let (kept, aside) = one_per_process(vec![descriptor("a", 1), descriptor("a", 9)], &[]);
        assert_eq!((gens(&kept), aside.len()), (vec![1, 9], 0));
    }
}
