//! Starting a generation without waiting for its exec: its spawn request made from the
//! spec (with the marker every child carries), a cgroup of its own where the
//! daemon may create one, the start watched through its status pipe, and what was asked
//! of it meanwhile (input, size, signals) handed over once it runs.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use mio::Registry;

use super::{Child, Children};
use crate::core;
use crate::core::{Containment, ResourceLimits, SpawnError, SpawnErrorKind, Spec, Started};
use crate::driver::launch::Launch;
use crate::driver::lookup::Lookup;
use crate::driver::run_as::{self, Resolution};
use crate::lookup::answer::Failure;
use crate::proto::error::bounded_message;
use crate::sys::cgroup::{self, CgroupRoot, GenCgroup};
use crate::sys::process::ReaperMode;
use crate::sys::spawn::{
    start_in, Env, IoMode, SpawnError as SysSpawnError, SpawnRequest, Starting, StderrMode, Step,
};
use crate::sys::tree;

/// A spec's limits in the cgroup layer's terms.
fn cgroup_limits(l: &ResourceLimits) -> cgroup::Limits {
    cgroup::Limits {
        memory_max: l.memory_max,
        pids_max: l.pids_max,
        cpu_max: l.cpu_max.map(|c| cgroup::CpuMax {
            quota_us: c.quota_us,
            period_us: c.period_us,
        }),
    }
}

/// The core's view of a failed start: the class and errno clients act on. The step and
/// path are logged here.
fn spawn_error(gen: u64, e: &SysSpawnError) -> SpawnError {
    // It may quote a path the client sent: kept, and logged, as long as a message may be.
    let message = bounded_message(&e.to_string()).into_owned();
    log::warn!("gen {gen}: spawn failed: {message}");
    match e {
        SysSpawnError::NotFound { .. } => {
            SpawnError::new(SpawnErrorKind::NotFound, libc::ENOENT).with_message(message)
        }
        SysSpawnError::PermissionDenied { errno, .. } => {
            SpawnError::new(SpawnErrorKind::PermissionDenied, *errno).with_message(message)
        }
        // The daemon's own steps: what they lack, the session did not cause.
        SysSpawnError::Os {
            step: Step::Setup | Step::Fork,
            errno,
            ..
        } => daemon_failure(*errno, message),
        // The child's steps (`execve` under the spec's own limits, say): the session's.
        other => SpawnError::new(SpawnErrorKind::Other, other.errno().unwrap_or(libc::EINVAL))
            .with_message(message),
    }
}

/// A start that failed in a step of the daemon's own (pipes, the cgroup's directory, the
/// lookup helper, the child's `clone`, its record), not in the child: marked a
/// [`shortage`](SpawnError::shortage) when what it lacked was descriptors, processes,
/// memory or room on disk, which the restart policy does not hold against the session.
pub(crate) fn daemon_failure(errno: i32, message: String) -> SpawnError {
    let error = SpawnError::new(SpawnErrorKind::Other, errno).with_message(message);
    match errno {
        libc::EMFILE | libc::ENFILE | libc::EAGAIN | libc::ENOMEM | libc::ENOSPC | libc::EDQUOT => {
            error.as_shortage()
        }
        _ => error,
    }
}

/// Starts `request` in `cgroup`, whose directory is opened for the start only: a
/// running generation holds no descriptor of it.
fn start_into(
    gen: u64,
    request: &SpawnRequest,
    cgroup: Option<&GenCgroup>,
) -> Result<Starting, SpawnError> {
    let dir = cgroup.map(GenCgroup::open_dir).transpose().map_err(|e| {
        log::warn!("gen {gen}: opening its cgroup: {e}");
        daemon_failure(
            e.raw_os_error().unwrap_or(libc::EIO),
            format!("opening its cgroup: {e}"),
        )
    })?;
    start_in(request, dir.as_ref()).map_err(|e| spawn_error(gen, &e))
}

/// A lookup's failure (an unknown name, an unreadable database or environment file) as
/// the core's: the message names the field or the file; the errno is the OS error behind
/// it (`ENOENT` for a missing environment file), else `EINVAL` (an unknown name, a
/// malformed file).
fn lookup_failed(gen: u64, why: Failure) -> SpawnError {
    log::warn!("gen {gen}: spawn failed: {}", why.message);
    SpawnError::new(SpawnErrorKind::Other, why.errno.unwrap_or(libc::EINVAL))
        .with_message(why.message)
}

/// A failure the driver decided, logged.
fn logged(gen: u64, e: SpawnError) -> SpawnError {
    log::warn!(
        "gen {gen}: spawn failed: {}",
        e.message.as_deref().unwrap_or("")
    );
    e
}

/// The start could not be watched (registering its descriptor failed).
fn watch_failed(gen: u64, e: &std::io::Error) -> SpawnError {
    log::error!("gen {gen}: watch spawn status: {e}");
    daemon_failure(
        e.raw_os_error().unwrap_or(libc::EIO),
        format!("watching the start: {e}"),
    )
}

fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

/// Variables a service manager gives the daemon itself (readiness, socket activation,
/// watchdog): a child inheriting them would talk to the daemon's manager as if it were
/// the daemon. Removed from an inherited environment unless the spec sets them, and from
/// the daemon's own helpers' (the keeper, the log writer, a lookup).
pub(crate) const DAEMON_ONLY_VARS: &[&str] = &[
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
];

/// How the daemon starts a helper process of its own (a probe command, an upgrade's
/// check): reaped as its children are, and marked `GENWARD_GEN=<state dir id>:0`. No
/// generation is numbered 0, so when the daemon dies while one runs, the next daemon's
/// start-up sweep, which kills every marked process that no generation accounts for,
/// ends it and whatever it started.
#[derive(Debug, Clone)]
pub struct HelperStart {
    pub reaper: ReaperMode,
    /// The environment variable that marks it.
    pub marker: (OsString, OsString),
}

impl HelperStart {
    pub fn new(reaper: ReaperMode, dir_id: &str) -> HelperStart {
        let marker = (tree::GEN_MARKER.into(), format!("{dir_id}:0").into());
        HelperStart { reaper, marker }
    }
}

/// The operating system's spawn request for generation `gen` of a core spec.
///
/// Every child carries `GENWARD_GEN=<state dir id>:<gen>` in its environment, inherited by
/// whatever it starts: a process knows its generation, one that left its session can
/// still be told apart, and after a crash one that was started but not yet described is
/// found (and told from another directory's).
pub fn spawn_request(gen: u64, spec: &Spec, reaper: ReaperMode, dir_id: &str) -> SpawnRequest {
    let mut unset: Vec<OsString> = spec.env.unset.iter().map(|k| os(k)).collect();
    if spec.env.inherit {
        let set_by_spec = |v: &str| spec.env.set.iter().any(|(k, _)| k == v.as_bytes());
        unset.extend(
            DAEMON_ONLY_VARS
                .iter()
                .filter(|v| !set_by_spec(v))
                .map(OsString::from),
        );
    }
    let mut set: Vec<(OsString, OsString)> =
        spec.env.set.iter().map(|(k, v)| (os(k), os(v))).collect();
    set.retain(|(k, _)| k != tree::GEN_MARKER);
    set.push((tree::GEN_MARKER.into(), format!("{dir_id}:{gen}").into()));
    SpawnRequest {
        argv: spec.argv.iter().map(|a| os(a)).collect(),
        cwd: spec.cwd.as_ref().map(|c| PathBuf::from(os(c))),
        env: Env {
            inherit: spec.env.inherit,
            set,
            unset,
        },
        io: match spec.io {
            core::IoMode::Pipes { stderr } => IoMode::Pipes {
                stderr: match stderr {
                    core::Stderr::Pipe => StderrMode::Pipe,
                    core::Stderr::Merge => StderrMode::Merge,
                    core::Stderr::Null => StderrMode::Null,
                },
            },
            core::IoMode::Pty { rows, cols } => IoMode::Pty {
                rows,
                cols,
                term: None,
            },
        },
        reaper,
        ..SpawnRequest::default()
    }
}

impl Children {
    /// Starts generation `gen` without waiting for it to exec: its result comes through
    /// [`launched`](Self::launched) when the status pipe is readable. A spec that names a
    /// user, groups or an environment file first waits for a lookup helper's answer,
    /// which comes the same way (see [`crate::lookup`]).
    /// `extra_fd` is a descriptor the child gets at a number of its own (a readiness
    /// notification pipe's write end).
    pub fn start(
        &mut self,
        registry: &Registry,
        gen: u64,
        spec: &Spec,
        extra_fd: Option<(std::sync::Arc<std::os::fd::OwnedFd>, u32)>,
    ) -> Result<(), SpawnError> {
        let cgroup = self.cgroup_for(gen, &spec.limits)?;
        let mut request = spawn_request(gen, spec, self.reaper, &self.dir_id);
        request.extra_fd = extra_fd;
        let launch = match run_as::resolution(&spec.run_as) {
            Resolution::Lookup(query) => {
                let lookup = Lookup::start(&query, self.reaper).map_err(|e| {
                    log::warn!("gen {gen}: starting the lookup helper: {e}");
                    daemon_failure(
                        e.errno().unwrap_or(libc::EIO),
                        format!("starting the lookup helper: {e}"),
                    )
                })?;
                let run_as = spec.run_as.clone();
                if has_probe_command(spec) {
                    self.probe_identities.want(gen);
                }
                Launch::looking_up(gen, lookup, run_as, request, cgroup, registry)
            }
            Resolution::Known(found) => {
                let found = found.map_err(|why| lookup_failed(gen, why.into()))?;
                run_as::apply(&spec.run_as, found, &mut request).map_err(|e| logged(gen, e))?;
                let starting = start_into(gen, &request, cgroup.as_ref())?;
                Launch::new(gen, starting, cgroup, registry)
            }
        }
        .map_err(|e| watch_failed(gen, &e))?;
        self.launching.insert(gen, launch);
        Ok(())
    }

    /// The exec result of `gen`, if it is known now: the leader's pid, its descriptors
    /// registered, what was held for it handed over. A lookup that answered starts the
    /// child (or fails the start) here.
    pub fn launched(
        &mut self,
        registry: &Registry,
        gen: u64,
    ) -> Option<Result<Started, SpawnError>> {
        let launch = self.launching.get_mut(&gen)?;
        if let Some((answer, run_as, mut request)) = launch.looked_up() {
            let started = answer
                .map_err(|why| lookup_failed(gen, why))
                .and_then(|found| {
                    self.probe_identities.answered(gen, &found);
                    run_as::apply(&run_as, found, &mut request).map_err(|e| logged(gen, e))
                })
                .and_then(|()| start_into(gen, &request, launch.cgroup()))
                .and_then(|starting| {
                    launch
                        .exec(gen, starting, registry)
                        .map_err(|e| watch_failed(gen, &e))
                });
            if let Err(e) = started {
                self.take_launch(gen)?.abandon(registry);
                return Some(Err(e));
            }
        }
        let ready = self.launching.get_mut(&gen)?.ready();
        ready.then(|| self.finish_launch(registry, gen))?
    }

    /// Gives up starting `gen`: the process if it already runs our program (it is then
    /// stopped like any other), else `cancelled`. `None` if `gen` is not starting.
    pub fn cancel_launch(
        &mut self,
        registry: &Registry,
        gen: u64,
    ) -> Option<Result<Started, SpawnError>> {
        if self.launching.get_mut(&gen)?.ready() {
            return self.finish_launch(registry, gen);
        }
        self.take_launch(gen)?.abandon(registry);
        log::info!("gen {gen}: start cancelled before exec");
        let why = "stopped before it started (its start did not finish within the stop's grace)";
        Some(Err(
            SpawnError::new(SpawnErrorKind::Cancelled, 0).with_message(why)
        ))
    }

    /// Takes back a generation that started but that the core must never hear of (its
    /// descriptor could not be written: a successor could not find it). It has only just
    /// run its program: its cgroup is killed, and it is let go of with the process group
    /// it leads, where anything it forked this soon still is (`sys::spawn::abandon`: killed
    /// and reaped).
    pub fn withdraw(&mut self, registry: &Registry, gen: u64) {
        let Some(child) = self.table.remove(&gen) else {
            return;
        };
        self.held -= child.counted();
        self.on_sigchld.remove(&gen);
        // Most often for want of descriptors: the one held back for a kill is lent.
        let spare = &mut self.spare;
        if let Some(Err(e)) = child.cgroup().map(|cg| spare.lend(|| cg.kill())) {
            log::warn!("gen {gen}: withdrawn, but its cgroup was not killed: {e}");
        }
        let (process, cgroup) = child.into_process(registry);
        crate::sys::spawn::abandon(process);
        if let Some(cg) = cgroup.and_then(|cg| self.pool.give(gen, cg)) {
            self.retries
                .defer_removal(gen, cg, std::time::Instant::now());
        }
        log::info!("gen {gen}: withdrawn and killed");
    }

    /// Takes a start out of the table, which gives its memory back once no start is left
    /// (a burst of spawns would otherwise keep its peak for good).
    pub(super) fn take_launch(&mut self, gen: u64) -> Option<Launch> {
        let launch = self.launching.remove(&gen);
        if self.launching.is_empty() {
            self.launching.shrink_to_fit();
        }
        launch
    }

    fn finish_launch(
        &mut self,
        registry: &Registry,
        gen: u64,
    ) -> Option<Result<Started, SpawnError>> {
        let (result, held) = self.take_launch(gen)?.finish(registry);
        let spawned = match result {
            Ok(spawned) => spawned,
            Err(e) => return Some(Err(spawn_error(gen, &e))),
        };
        let pid = spawned.process.pid();
        let containment = match held.cgroup {
            Some(_) => Containment::Cgroup,
            None => Containment::Session,
        };
        let child = Child::new(
            gen,
            spawned,
            held.cgroup,
            held.input,
            held.close_input,
            registry,
        );
        self.insert(gen, child);
        if let Some((rows, cols)) = held.size {
            self.resize(gen, rows, cols);
        }
        for (signal, scope) in held.signals {
            self.signal(gen, signal, scope);
        }
        Some(Ok(Started {
            pid: pid as u32,
            containment,
        }))
    }

    /// A cgroup of its own for `gen`, with `limits` set — an emptied one kept for reuse
    /// when there are none (see `cgroup_pool.rs`); none under session containment, where
    /// limits cannot be enforced and are refused.
    fn cgroup_for(
        &mut self,
        gen: u64,
        limits: &ResourceLimits,
    ) -> Result<Option<GenCgroup>, SpawnError> {
        // Each with an errno: the failed call's, or `EOPNOTSUPP` where what is missing is
        // the support itself (no system call failed).
        let fail = |errno: i32, message: String| {
            log::warn!("gen {gen}: {message}");
            SpawnError::new(SpawnErrorKind::Other, errno).with_message(message)
        };
        let Some(root) = &mut self.cgroups else {
            if limits.is_empty() {
                return Ok(None);
            }
            return Err(fail(
                libc::EOPNOTSUPP,
                "limits need cgroup containment, which this daemon does not have (see `hello`)"
                    .into(),
            ));
        };
        let limits = cgroup_limits(limits);
        root.check_limits(&limits)
            .map_err(|e| fail(e.errno(), e.to_string()))?;
        if limits.is_empty() {
            if let Some(cg) = self.pool.take() {
                return Ok(Some(cg));
            }
        }
        // A step of the daemon's own: what it lacks (`EAGAIN` past the subtree's
        // `cgroup.max.descendants`, `ENOMEM`, `EMFILE`) is a shortage, not the session's.
        let cg = create_generation(root, gen).map_err(|why| {
            log::warn!("gen {gen}: {}", why.message);
            daemon_failure(why.errno, why.message)
        })?;
        if !limits.is_empty() {
            cg.set_limits(&limits)
                .map_err(|e| fail(e.errno(), e.to_string()))?;
        }
        Ok(Some(cg))
    }
}

/// Why a generation's cgroup could not be made: the errno, and what to say.
struct CreateFailed {
    errno: i32,
    message: String,
}

impl CreateFailed {
    fn new(e: &std::io::Error, message: String) -> CreateFailed {
        CreateFailed {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            message,
        }
    }
}

/// Creates generation `gen`'s cgroup in `root`. The subtree itself gone (`ENOENT`:
/// removed behind the daemon's back while nothing ran in it) is made again and the
/// creation tried once more, so that one hand's `rmdir` does not fail every later spawn.
/// If it cannot be made again, the errno is that attempt's (a shortage stays one).
fn create_generation(root: &mut CgroupRoot, gen: u64) -> Result<GenCgroup, CreateFailed> {
    let failed = |e: std::io::Error| CreateFailed::new(&e, format!("creating its cgroup: {e}"));
    let e = match root.create_generation(gen) {
        Ok(cg) => return Ok(cg),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => e,
        Err(e) => return Err(failed(e)),
    };
    let subtree = root.path().display().to_string();
    match root.restore() {
        Ok(true) => {
            log::warn!(
                "the daemon's cgroup subtree {subtree} was removed behind its back: made \
                 it again (controllers for limits: {})",
                root.controllers()
            );
            root.create_generation(gen).map_err(failed)
        }
        // There after all (made again meanwhile): what was missing is not known.
        Ok(false) => Err(failed(e)),
        Err(again) => Err(CreateFailed::new(
            &again,
            format!(
                "creating its cgroup: {e}: the daemon's cgroup subtree {subtree} is gone \
                 and could not be made again: {again}"
            ),
        )),
    }
}

/// Whether generations of `spec` run probe commands (readiness or liveness), which run as
/// the generation does.
fn has_probe_command(spec: &Spec) -> bool {
    use crate::core::ReadyHow;
    let command = |how: &ReadyHow| matches!(how, ReadyHow::Command(_));
    spec.ready.as_ref().is_some_and(|r| command(&r.how))
        || spec.live.as_ref().is_some_and(|l| command(&l.how))
}
