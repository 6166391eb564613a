//! cgroup-v2 containment with real processes: a child is in its generation's cgroup before
//! its program runs, an escaped (setsid, double-forked) process is still inside and dies
//! with `cgroup.kill`, `cgroup.events` reports when the last process leaves, limits where
//! the controllers are enabled and a typed error where not.
//!
//! Each test makes a private subtree below the cgroup this test process is in, named after
//! this process and a counter, and never moves the test process. Tests that need to create
//! cgroups print `SKIP <test>: <reason>` and return when they cannot (not root, no
//! writable cgroup v2, a controller missing).

mod util;

use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use genward::sys::cgroup::{
    own_cgroup, parse_populated, CgroupRoot, Controller, GenCgroup, LimitError, Limits, Location,
    Placement,
};
use genward::sys::process::{Exit, ReaperMode};
use genward::sys::spawn::{
    cgroup_entry, reap_abandoned, start_in, start_in_via, CgroupEntry, IoMode, SpawnError,
    SpawnRequest, StderrMode, Step,
};
use genward::testkit::proc;
use rustix::event::PollFlags;
use rustix::process::Signal;
use util::sys::*;

/// A private cgroup subtree for one test. Dropped (also when the test fails), it kills
/// whatever is left inside, waits until it is empty, and removes every cgroup of it.
struct Tree {
    root: Option<CgroupRoot>,
    path: PathBuf,
}

impl Tree {
    /// `None` (after a SKIP line) when this host or user cannot have one.
    fn new(test: &str) -> Option<Tree> {
        if !is_root() {
            skip(test, "creating cgroups needs root (or a delegated subtree)");
            return None;
        }
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "genward-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        match CgroupRoot::setup(&name, Placement::StayPut) {
            Ok(root) => Some(Tree {
                path: root.path().to_owned(),
                root: Some(root),
            }),
            Err(why) => {
                skip(test, &format!("no usable cgroup v2 here: {why}"));
                None
            }
        }
    }

    fn root(&self) -> &CgroupRoot {
        self.root.as_ref().expect("until drop")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::write(self.path.join("cgroup.kill"), "1");
        if let Ok(events) = fs::File::open(self.path.join("cgroup.events")) {
            let deadline = Instant::now() + TIMEOUT;
            loop {
                let text = fs::read_to_string(self.path.join("cgroup.events")).unwrap_or_default();
                if parse_populated(&text) != Some(true)
                    || !wait_for(events.as_fd(), PollFlags::PRI, deadline)
                {
                    break;
                }
            }
        }
        drop(self.root.take());
        if self.path.exists() {
            eprintln!("test cgroup {:?} could not be removed", self.path);
        }
    }
}

/// The v2 cgroup of `pid`, as `/proc/<pid>/cgroup` names it.
fn cgroup_of(pid: i32) -> Option<String> {
    own_cgroup(&fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)
}

fn self_cgroup() -> String {
    own_cgroup(&fs::read_to_string("/proc/self/cgroup").unwrap()).unwrap()
}

/// Waits until the cgroup is empty, woken by `cgroup.events` only.
fn wait_empty(gen: &GenCgroup) {
    let deadline = Instant::now() + TIMEOUT;
    while gen.is_populated().expect("read cgroup.events") {
        assert!(
            wait_for(gen.events_fd(), PollFlags::PRI, deadline),
            "cgroup still populated after {TIMEOUT:?}: {:?}",
            gen.pids()
        );
    }
}

/// The ways into a cgroup this kernel can test: the fallback always, `clone3` where it
/// works (else a SKIP line).
fn entries(test: &str) -> Vec<CgroupEntry> {
    let mut entries = vec![CgroupEntry::ChildWritesProcs];
    match cgroup_entry() {
        CgroupEntry::CloneIntoCgroup => entries.push(CgroupEntry::CloneIntoCgroup),
        CgroupEntry::ChildWritesProcs => skip(
            &format!("{test} (clone3)"),
            "no clone3(CLONE_INTO_CGROUP) on this kernel or target",
        ),
    }
    entries
}

#[test]
fn the_cgroup_v2_mount_is_found_or_the_reason_given() {
    match Location::find() {
        Ok(location) => {
            assert!(location.dir.join("cgroup.procs").exists(), "{location:?}");
            assert!(location.dir.starts_with(&location.mount), "{location:?}");
            assert_eq!(location.own, self_cgroup());
        }
        Err(why) => skip(
            "the_cgroup_v2_mount_is_found_or_the_reason_given",
            &format!("no cgroup v2: {why}"),
        ),
    }
}

#[test]
fn setup_in_place_moves_nothing_and_leaves_nothing() {
    let before = self_cgroup();
    let Some(tree) = Tree::new("setup_in_place_moves_nothing_and_leaves_nothing") else {
        return;
    };
    let path = tree.path.clone();
    assert!(path.join("cgroup.kill").exists());
    assert!(!tree.root().moved_self());
    assert_eq!(self_cgroup(), before, "setup moved the test process");
    let gen = tree.root().create_generation(1).unwrap();
    assert_eq!(gen.path(), path.join("gen-1"));
    assert!(!gen.is_populated().unwrap());
    drop(gen);
    assert!(
        !path.join("gen-1").exists(),
        "an empty generation's cgroup stays"
    );
    drop(tree);
    assert!(!path.exists(), "the subtree stays");
}

#[test]
fn the_child_is_in_its_cgroup_before_the_program_runs() {
    const TEST: &str = "the_child_is_in_its_cgroup_before_the_program_runs";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    let ours = self_cgroup();
    for (n, entry) in entries(TEST).into_iter().enumerate() {
        for reaper in [ReaperMode::Auto, ReaperMode::Fallback] {
            let gen = tree
                .root()
                .create_generation(10 * n as u64 + reaper as u64)
                .unwrap();
            // The program prints the cgroup it runs in, then waits for its stdin to close.
            let req = request_with(&["cat", "/proc/self/cgroup", "-"], reaper);
            let starting = start_in_via(&req, &gen.open_dir().unwrap(), entry).expect("start");
            let pid = starting.pid();
            if entry == CgroupEntry::CloneIntoCgroup {
                // Started inside: already there before the status pipe said anything, while
                // it may still be on its way to `execve`.
                assert_eq!(
                    cgroup_of(pid).as_deref(),
                    Some(gen.name_in_hierarchy()),
                    "{entry:?}"
                );
            }
            let mut child = finish(starting).expect("exec");
            assert_eq!(
                child.process.pidfd().is_some(),
                reaper == ReaperMode::Auto,
                "{entry:?} {reaper:?}"
            );
            let mut out = Vec::new();
            read_until(child.stdout.as_ref().unwrap().as_fd(), &mut out, "\n");
            let seen = own_cgroup(&lossy(&out));
            assert_eq!(seen.as_deref(), Some(gen.name_in_hierarchy()), "{entry:?}");
            assert_eq!(gen.pids().unwrap(), vec![pid], "{entry:?}");
            assert!(gen.is_populated().unwrap());
            drop(child.stdin.take());
            assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
            wait_empty(&gen);
        }
    }
    assert_eq!(self_cgroup(), ours, "spawning moved the test process");
}

/// Spawns a leader that starts an escapee (its own session, double-forked, orphaned) and
/// then sleeps; returns the child and the escapee's pid once the escapee's own parent has
/// exited and been reaped (`ready`), so the cgroup holds exactly these two.
fn leader_and_escapee(gen: &GenCgroup) -> (genward::sys::spawn::Child, i32) {
    let req = request(&[
        "sh",
        "-c",
        r#"setsid -w sh -c 'sleep 1000 & echo escapee $!'; echo ready; exec sleep 1000"#,
    ]);
    let child =
        finish(start_in(&req, Some(&gen.open_dir().unwrap())).expect("start")).expect("exec");
    let mut out = Vec::new();
    let stdout = child.stdout.as_ref().unwrap().as_fd();
    let escapee = read_number(stdout, &mut out, "escapee ");
    read_until(stdout, &mut out, "ready\n");
    let leader = child.process.pid();
    let stat = proc::stat(escapee as u32).expect("escapee running");
    assert_ne!(
        stat.session, leader as u32,
        "the escapee did not leave the session"
    );
    assert_ne!(stat.ppid, leader as u32, "the escapee is not orphaned");
    (child, escapee)
}

#[test]
fn an_escaped_double_forked_process_is_contained_and_killed() {
    let Some(tree) = Tree::new("an_escaped_double_forked_process_is_contained_and_killed") else {
        return;
    };
    let gen = tree.root().create_generation(1).unwrap();
    let (mut child, escapee) = leader_and_escapee(&gen);
    let escapee_fd = pidfd_of(escapee);
    assert_eq!(cgroup_of(escapee).as_deref(), Some(gen.name_in_hierarchy()));
    let mut pids = gen.pids().unwrap();
    pids.sort();
    let mut want = vec![child.process.pid(), escapee];
    want.sort();
    assert_eq!(pids, want);

    gen.kill().unwrap();
    wait_empty(&gen);
    assert!(exited(&escapee_fd), "the escapee survived cgroup.kill");
    assert_eq!(wait_reap(&mut child.process), by_signal(libc::SIGKILL));
    let mut gen = gen;
    gen.remove().unwrap();
    assert!(!gen.path().exists());
}

#[test]
fn a_signal_reaches_every_process_in_the_cgroup() {
    let Some(tree) = Tree::new("a_signal_reaches_every_process_in_the_cgroup") else {
        return;
    };
    let gen = tree.root().create_generation(1).unwrap();
    let (mut child, escapee) = leader_and_escapee(&gen);
    let escapee_fd = pidfd_of(escapee);
    let signalled = gen.signal(Signal::TERM).unwrap();
    assert_eq!(signalled.sent, 2, "{signalled:?}");
    wait_empty(&gen);
    assert!(exited(&escapee_fd));
    assert_eq!(wait_reap(&mut child.process), by_signal(libc::SIGTERM));
}

#[test]
fn cgroup_events_reports_when_the_last_process_leaves() {
    let Some(tree) = Tree::new("cgroup_events_reports_when_the_last_process_leaves") else {
        return;
    };
    let mut gen = tree.root().create_generation(1).unwrap();
    let events = gen.events_fd();
    let mut child =
        finish(start_in(&request(&["cat"]), Some(&gen.open_dir().unwrap())).unwrap()).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    // The child's arrival is a change: reported, and read as populated.
    assert!(wait_for(events, PollFlags::PRI, deadline));
    assert!(gen.is_populated().unwrap());
    // Reading acknowledged it: nothing pending until the next change.
    assert!(!wait_for(events, PollFlags::PRI, Instant::now()));

    drop(child.stdin.take()); // cat exits
    wait_empty(&gen);
    // Empty while the leader is an unreaped zombie: zombies are not counted, and the
    // cgroup can go before the leader is reaped.
    let stat = proc::stat(child.process.pid() as u32).expect("unreaped");
    assert!(stat.is_zombie(), "{stat:?}");
    gen.remove().unwrap();
    assert!(!gen.path().exists());
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn a_cgroup_with_a_process_inside_is_not_removed() {
    let Some(tree) = Tree::new("a_cgroup_with_a_process_inside_is_not_removed") else {
        return;
    };
    let mut gen = tree.root().create_generation(1).unwrap();
    let mut child =
        finish(start_in(&request(&["cat"]), Some(&gen.open_dir().unwrap())).unwrap()).unwrap();
    let err = gen.remove().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EBUSY), "{err}");
    assert!(gen.path().exists());
    drop(child.stdin.take());
    wait_empty(&gen);
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
    gen.remove().unwrap();
}

#[test]
fn a_refused_cgroup_is_reported_as_the_cgroup_step() {
    const TEST: &str = "a_refused_cgroup_is_reported_as_the_cgroup_step";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    let gen = tree.root().create_generation(1).unwrap();
    // A threaded sibling makes the subtree a threaded domain and `gen-1` an invalid
    // domain, which no process may enter.
    let threaded = tree.path.join("threaded");
    fs::create_dir(&threaded).unwrap();
    if let Err(e) = fs::write(threaded.join("cgroup.type"), "threaded") {
        return skip(TEST, &format!("cannot make a threaded cgroup: {e}"));
    }
    assert_eq!(
        fs::read_to_string(gen.path().join("cgroup.type"))
            .unwrap()
            .trim(),
        "domain invalid"
    );
    for entry in entries(TEST) {
        let result = start_in_via(&request(&["/bin/true"]), &gen.open_dir().unwrap(), entry)
            .and_then(finish);
        let err = result.expect_err("a child ran in an invalid cgroup");
        let step = match entry {
            CgroupEntry::ChildWritesProcs => Step::Cgroup,
            CgroupEntry::CloneIntoCgroup => Step::Fork,
        };
        assert_eq!(err.step(), Some(step), "{entry:?}: {err}");
        assert_eq!(err.errno(), Some(libc::EOPNOTSUPP), "{entry:?}: {err}");
        if entry == CgroupEntry::ChildWritesProcs {
            assert_eq!(
                err.to_string(),
                "cgroup: Operation not supported (os error 95)"
            );
        }
    }
    assert!(!gen.is_populated().unwrap());
}

/// What the subtree lacks for `controllers`, for SKIP lines.
fn missing(tree: &Tree, controllers: &[Controller]) -> Option<String> {
    let enabled = tree.root().controllers();
    let missing: Vec<&str> = controllers
        .iter()
        .filter(|c| !enabled.contains(**c))
        .map(|c| c.name())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let location = tree.root().location();
    Some(format!(
        "the {} controller(s) are not enabled below {:?} (cgroup v2 at {:?}; on a hybrid \
         host the v2 hierarchy has no controllers: they are bound to cgroup v1)",
        missing.join(", "),
        location.dir,
        location.mount
    ))
}

#[test]
fn limits_are_applied_where_the_controllers_are_enabled() {
    const TEST: &str = "limits_are_applied_where_the_controllers_are_enabled";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    if let Some(why) = missing(&tree, &[Controller::Pids, Controller::Memory]) {
        return skip(TEST, &why);
    }
    let gen = tree.root().create_generation(1).unwrap();
    let limits = Limits {
        memory_max: Some(256 << 20),
        pids_max: Some(1),
        cpu_max: None,
    };
    tree.root().check_limits(&limits).unwrap();
    gen.set_limits(&limits).unwrap();
    let read = |file: &str| fs::read_to_string(gen.path().join(file)).unwrap();
    assert_eq!(read("memory.max").trim(), (256u64 << 20).to_string());
    assert_eq!(read("pids.max").trim(), "1");
    // The leader fits; nothing it forks does.
    let req = SpawnRequest {
        io: IoMode::Pipes {
            stderr: StderrMode::Merge,
        },
        ..request(&["sh", "-c", "/bin/true; echo after=$?"])
    };
    let mut child = finish(start_in(&req, Some(&gen.open_dir().unwrap())).unwrap()).unwrap();
    let out = lossy(&read_to_eof(child.stdout.as_ref().unwrap().as_fd()));
    wait_reap(&mut child.process);
    assert!(
        !out.contains("after=0"),
        "a fork beyond pids.max ran: {out:?}"
    );
    assert!(
        out.to_lowercase().contains("fork"),
        "no fork failure reported: {out:?}"
    );
    wait_empty(&gen);
}

#[test]
fn a_limit_without_its_controller_is_a_typed_error() {
    const TEST: &str = "a_limit_without_its_controller_is_a_typed_error";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    let gen = tree.root().create_generation(1).unwrap();
    let enabled = tree.root().controllers();
    let mut tried = 0;
    for controller in Controller::ALL {
        if enabled.contains(controller) {
            continue;
        }
        let limits = match controller {
            Controller::Memory => Limits {
                memory_max: Some(1 << 30),
                ..Limits::default()
            },
            Controller::Pids => Limits {
                pids_max: Some(10),
                ..Limits::default()
            },
            Controller::Cpu => Limits {
                cpu_max: Some(genward::sys::cgroup::CpuMax {
                    quota_us: 50_000,
                    period_us: 100_000,
                }),
                ..Limits::default()
            },
        };
        for err in [
            tree.root().check_limits(&limits).unwrap_err(),
            gen.set_limits(&limits).unwrap_err(),
        ] {
            assert!(
                matches!(err, LimitError::ControllerUnavailable { controller: c, .. } if c == controller),
                "{err:?}"
            );
            let text = err.to_string();
            assert!(
                text.contains(controller.limit_file()) && text.contains(controller.name()),
                "{text}"
            );
        }
        assert!(!Path::new(&gen.path().join(controller.limit_file())).exists());
        tried += 1;
    }
    if tried == 0 {
        skip(TEST, "every controller is enabled here: nothing is missing");
    }
    // No limit asked: fine anywhere.
    gen.set_limits(&Limits::default()).unwrap();
}

#[test]
fn a_removed_cgroup_fails_the_start_and_runs_nothing_outside_it() {
    const TEST: &str = "a_removed_cgroup_fails_the_start_and_runs_nothing_outside_it";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    let gen = tree.root().create_generation(1).unwrap();
    let dir = gen.open_dir().unwrap();
    fs::remove_dir(gen.path()).unwrap();
    assert!(gen.open_dir().is_err(), "a removed cgroup opened");
    for entry in entries(TEST) {
        let err = start_in_via(&request(&["/bin/true"]), &dir, entry).unwrap_err();
        let step = match entry {
            CgroupEntry::ChildWritesProcs => Step::Cgroup,
            CgroupEntry::CloneIntoCgroup => Step::Fork,
        };
        assert!(
            matches!(&err, SpawnError::NotFound { step: s, .. } if *s == step),
            "{entry:?}: {err:?}"
        );
    }
}

/// The environment variable that turns [`move_self_helper`] on, naming its subtree.
const HELPER_ENV: &str = "GENWARD_TEST_CGROUP_MOVE_SELF";

#[test]
fn the_daemon_placement_moves_the_process_into_its_leaf() {
    const TEST: &str = "the_daemon_placement_moves_the_process_into_its_leaf";
    // The moving is done by a copy of this test binary, so this process stays put; its
    // subtree is removed by this guard (after the copy has exited).
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "genward-test-move-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let subtree = tree.root().location().dir.join(&name);
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            // Everything in it has exited with the helper (it waits for its child).
            for dir in ["gen-1", "daemon", ""] {
                let _ = fs::remove_dir(self.0.join(dir));
            }
            if self.0.exists() {
                eprintln!("test cgroup {:?} could not be removed", self.0);
            }
        }
    }
    let _remove = Remove(subtree.clone());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "move_self_helper", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(HELPER_ENV, &name)
        .output()
        .unwrap();
    let text = lossy(&out.stdout) + &lossy(&out.stderr);
    assert!(out.status.success(), "helper failed: {text}");
    let own = &tree.root().location().own;
    let subtree_name = if own == "/" {
        format!("/{name}")
    } else {
        format!("{own}/{name}")
    };
    assert!(
        text.contains(&format!("helper moved to {subtree_name}/daemon\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("helper child in {subtree_name}/gen-1\n")),
        "{text}"
    );
    assert_eq!(self_cgroup(), *own, "this process moved");
}

/// Run by [`the_daemon_placement_moves_the_process_into_its_leaf`] in a copy of this test
/// binary: the daemon's setup, moving itself.
#[test]
#[ignore = "a helper process of the_daemon_placement_moves_the_process_into_its_leaf"]
fn move_self_helper() {
    let name = std::env::var(HELPER_ENV).expect("run by its test only");
    let root = CgroupRoot::setup(&name, Placement::MoveSelf).expect("setup");
    assert!(root.moved_self());
    println!("helper moved to {}", self_cgroup());
    let gen = root.create_generation(1).unwrap();
    let mut child = finish(
        start_in(
            &request(&["cat", "/proc/self/cgroup"]),
            Some(&gen.open_dir().unwrap()),
        )
        .unwrap(),
    )
    .unwrap();
    let out = lossy(&read_to_eof(child.stdout.as_ref().unwrap().as_fd()));
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
    println!("helper child in {}", own_cgroup(&out).unwrap());
    println!("helper controllers: {}", root.controllers());
}

#[test]
fn mio_reports_the_emptiness_as_priority_readiness() {
    use mio::unix::SourceFd;
    use mio::{Events, Interest, Poll, Token};
    use std::os::fd::AsRawFd;

    let Some(tree) = Tree::new("mio_reports_the_emptiness_as_priority_readiness") else {
        return;
    };
    let gen = tree.root().create_generation(1).unwrap();
    // Registered the way the driver does: PRIORITY only (edge-triggered, as mio always is).
    let mut poll = Poll::new().unwrap();
    let raw = gen.events_fd().as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&raw), Token(7), Interest::PRIORITY)
        .unwrap();
    let mut child =
        finish(start_in(&request(&["cat"]), Some(&gen.open_dir().unwrap())).unwrap()).unwrap();
    let mut events = Events::with_capacity(4);
    let mut wait = |poll: &mut Poll| {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no cgroup.events readiness within {TIMEOUT:?}"
            );
            poll.poll(&mut events, Some(left)).unwrap();
            if let Some(event) = events.iter().find(|e| e.token() == Token(7)) {
                assert!(event.is_priority() || event.is_error(), "{event:?}");
                return;
            }
        }
    };
    // The child's arrival, then (after reading, which re-arms) its departure.
    wait(&mut poll);
    assert!(gen.is_populated().unwrap());
    drop(child.stdin.take());
    while gen.is_populated().unwrap() {
        wait(&mut poll);
    }
    poll.registry().deregister(&mut SourceFd(&raw)).unwrap();
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn an_emptied_cgroup_is_reusable_only_when_empty_without_limits_or_cgroups_below() {
    const TEST: &str =
        "an_emptied_cgroup_is_reusable_only_when_empty_without_limits_or_cgroups_below";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    let mut gen = tree.root().create_generation(1).unwrap();
    assert!(gen.reusable(), "a fresh, empty cgroup");
    let mut child =
        finish(start_in(&request(&["cat"]), Some(&gen.open_dir().unwrap())).unwrap()).unwrap();
    assert!(!gen.reusable(), "a process is inside");
    drop(child.stdin.take()); // cat exits
    wait_empty(&gen);
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
    assert!(gen.reusable(), "emptied");

    // A cgroup a program made below it is not left for the next one.
    let below = gen.path().join("made-below");
    fs::create_dir(&below).unwrap();
    assert!(!gen.reusable(), "a cgroup is below it");
    fs::remove_dir(&below).unwrap();
    assert!(gen.reusable());

    // Reused: the next process is in it alone, and its emptiness is reported again on
    // the same events descriptor.
    let mut next =
        finish(start_in(&request(&["cat"]), Some(&gen.open_dir().unwrap())).unwrap()).unwrap();
    let pid = next.process.pid();
    assert_eq!(gen.pids().unwrap(), vec![pid]);
    assert_eq!(cgroup_of(pid).as_deref(), Some(gen.name_in_hierarchy()));
    drop(next.stdin.take());
    wait_empty(&gen);
    assert_eq!(wait_reap(&mut next.process), Exit::Code(0));
    gen.remove().unwrap();

    // One that had limits is never reused (they would outlive their generation).
    if let Some(why) = missing(&tree, &[Controller::Pids]) {
        return skip(&format!("{TEST} (limits)"), &why);
    }
    let limited = tree.root().create_generation(2).unwrap();
    limited
        .set_limits(&Limits {
            memory_max: None,
            pids_max: Some(16),
            cpu_max: None,
        })
        .unwrap();
    assert!(!limited.reusable(), "limits were set on it");
}

#[test]
fn a_child_killed_before_its_first_step_still_ends_its_start() {
    // Started into a frozen cgroup, the child never runs an instruction of ours: not the
    // step that leaves the descriptor table it started sharing (see `sys/spawn/band.rs`),
    // not its report. Killed there, its start must still end — as a start whose process
    // is gone, its exit the kill's — and not wait forever for a status pipe that a band
    // of ours would keep open.
    const TEST: &str = "a_child_killed_before_its_first_step_still_ends_its_start";
    let Some(tree) = Tree::new(TEST) else {
        return;
    };
    if cgroup_entry() != CgroupEntry::CloneIntoCgroup {
        return skip(
            TEST,
            "no clone3(CLONE_INTO_CGROUP): a child runs before it is frozen",
        );
    }
    let gen = tree.root().create_generation(1).unwrap();
    if let Err(e) = fs::write(gen.path().join("cgroup.freeze"), "1") {
        return skip(TEST, &format!("cannot freeze a cgroup here: {e}"));
    }
    let req = request_with(&["true"], ReaperMode::Auto);
    let starting =
        start_in_via(&req, &gen.open_dir().unwrap(), CgroupEntry::CloneIntoCgroup).expect("start");
    let pid = starting.pid();
    assert_eq!(gen.pids().unwrap(), vec![pid]);
    gen.kill().expect("cgroup.kill");
    // Dead (a zombie no longer counts as in the cgroup); what a loop does on its SIGCHLD:
    wait_empty(&gen);
    reap_abandoned();
    let mut child = finish(starting).expect("a start whose process is gone");
    assert_eq!(
        wait_reap(&mut child.process),
        Exit::Signal {
            signal: libc::SIGKILL,
            core_dumped: false
        }
    );
}

/// The subtree removed behind its owner's back (nothing ran in it) is made again as it was:
/// the directory, its controllers for the generations, its owner mark; generations get
/// cgroups in it again. While it is there, `restore` does nothing.
#[test]
fn a_removed_subtree_is_restored_as_it_was() {
    const TEST: &str = "a_removed_subtree_is_restored_as_it_was";
    let Some(mut tree) = Tree::new(TEST) else {
        return;
    };
    let root = tree.root.as_mut().expect("until drop");
    let marked = root.mark_owner("gw1 test-owner").is_ok();
    let controllers = root.controllers();
    assert!(!root.restore().expect("restore"), "there: nothing to do");

    drop(root.create_generation(1).expect("a generation's cgroup"));
    fs::remove_dir(root.path()).expect("remove the subtree");
    let gone = root.create_generation(2).unwrap_err();
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT), "{gone}");

    assert!(root.restore().expect("restore"), "made again");
    assert!(root.path().is_dir());
    assert_eq!(root.controllers(), controllers);
    if marked {
        assert_eq!(
            genward::sys::cgroup::owner_of(root.path()).as_deref(),
            Some("gw1 test-owner")
        );
    }
    let gen = root
        .create_generation(2)
        .expect("a generation's cgroup again");
    assert!(gen.path().starts_with(root.path()));
}
