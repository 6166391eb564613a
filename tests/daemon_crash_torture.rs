//! The daemon killed (SIGKILL) at random points — while it spawns, replaces, stops, floods
//! subscribers with output, backs off before a restart, or stops what it took back at its
//! start (never before it is ready) — and started again on the same state directory, many
//! times over. After every restart:
//!
//! - **no orphans**: every process carrying the directory's `GENWARD_GEN` marker is listed
//!   by the daemon, or ends (the start-up sweep's kills are awaited on pidfds);
//! - **no duplicates**: never two running generations of one session (every spawn here
//!   replaces), in the listing, in the process table, or in the event stream;
//! - **no stranger signalled**: bystanders put on the pids of recorded workers that ended
//!   while no daemon ran (`ns_last_pid` in a PID namespace of the test's own; root only,
//!   a SKIP line otherwise) survive, and those generations are reported `lost`;
//! - **generations** only grow: every number handed out is above every number seen
//!   before, across all restarts, and no number names two processes or two sessions;
//! - **no stale precondition** is accepted: `write`/`signal` with the `if_gen` of a
//!   generation from before the crash that is no longer current fail `stale_generation`;
//! - **no descriptor** is left for a generation the daemon no longer tracks;
//! - and after a last `shutdown`, nothing runs and no descriptor is left.
//!
//! Every violation is printed as it is found and fails the run, which names its seed; the
//! counts are printed at the end. The `_fallback` variant runs some lives with the fallback
//! reaper. The narrow windows the torture found, since fixed, are reproduced one by one in
//! tests/daemon_crash_windows.rs. `GENWARD_TORTURE_KILLS` sets the number of kills
//! (30 by default; `make torture` runs 200), `GENWARD_TORTURE_SEED` replays a run: the
//! seed drives every choice (operations, kill points, workers ended while no daemon runs),
//! though the processes' own timing still varies from run to run.

mod util;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use genward::testkit::proc;
use genward::testkit::rng::SplitMix64;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use serde_json::{json, Value};
use util::daemon::{Client, Daemon, Msg, PATIENCE};
use util::pidns::{Bystander, PidNamespace};
use util::recorded::{self, descriptors, marked, marker, wait_past_tick, KillMarkedOnDrop};
use util::sys::{readable, skip};

/// The sessions the operations pick from.
const SESSIONS: &[&str] = &["t0", "t1", "t2", "t3", "t4", "t5"];

/// At most this many bystanders are kept alive at once (older ones are retired).
const MAX_BYSTANDERS: usize = 6;

/// What a generation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Sleeps.
    Idle,
    /// Sleeps with two children in its session.
    Family,
    /// Ignores SIGTERM, and so does its child: stopping it takes SIGKILL.
    Stubborn,
    /// Writes 2 MB as fast as it can, then sleeps.
    Flood,
    /// Echoes its input, over pipes.
    Cat,
    /// Echoes its input, in a pseudo-terminal.
    Pty,
    /// Fails at once, restarted after a short backoff, forever.
    CrashLoop,
    /// Fails after a moment, restarted on failure.
    FailLoop,
    /// Succeeds at once.
    Quick,
}

const WORKS: &[Work] = &[
    Work::Idle,
    Work::Family,
    Work::Stubborn,
    Work::Flood,
    Work::Cat,
    Work::Pty,
    Work::CrashLoop,
    Work::FailLoop,
    Work::Quick,
];

impl Work {
    /// A `spawn` request running this in `session`.
    fn spawn(self, session: &str, rng: &mut SplitMix64) -> Value {
        let sh = |script: &str| json!(["sh", "-c", script]);
        let argv = match self {
            Work::Idle => json!(["sleep", "1000000"]),
            Work::Family => sh("sleep 1000000 & sleep 1000000 & exec sleep 1000000"),
            Work::Stubborn => sh("trap '' TERM; sleep 1000000 & exec sleep 1000000"),
            Work::Flood => sh("yes genward-torture-flood | head -c 2000000; exec sleep 1000000"),
            Work::Cat | Work::Pty => json!(["cat"]),
            Work::CrashLoop => sh("echo crash; exit 3"),
            Work::FailLoop => sh("sleep 0.05; exit 1"),
            Work::Quick => json!(["true"]),
        };
        let mut req = json!({"op": "spawn", "session": session, "argv": argv,
            "grace": rng.pick(&["20ms", "100ms", "300ms"]),
            "kill_grace": "300ms", "drain": "300ms",
            "on_recover": rng.pick(&["stop", "stop", "keep"])});
        match self {
            Work::Pty => req["pty"] = json!({"rows": 24, "cols": 80}),
            Work::CrashLoop => {
                req["restart"] = json!({"mode": "always", "initial": "20ms", "max": "200ms"})
            }
            Work::FailLoop => {
                req["restart"] = json!({"mode": "on-failure", "initial": "30ms", "max": "300ms"})
            }
            _ => {}
        }
        req
    }

    /// Whether a generation running this ends by itself soon (a `wait` for it answers).
    fn ends_soon(self) -> bool {
        matches!(self, Work::CrashLoop | Work::FailLoop | Work::Quick)
    }
}

/// What the run counted; printed at the end.
#[derive(Debug, Default)]
struct Counts {
    kills: u64,
    requests: u64,
    messages: u64,
    generations: u64,
    marked_seen: u64,
    swept: u64,
    orphans: u64,
    duplicate_checks: u64,
    duplicates: u64,
    workers_ended_while_down: u64,
    reported_lost: u64,
    strangers: u64,
    stranger_misses: u64,
    strangers_signalled: u64,
    stale_checks: u64,
    stale_accepted: u64,
    descriptors_checked: u64,
    descriptors_left: u64,
    second_ends: u64,
    generation_order_violations: u64,
    generation_reuses: u64,
    internal_errors: u64,
}

/// Something a kill point waits for before the kill.
#[derive(Clone, Copy, Debug)]
enum Await {
    /// The response to request `id`.
    Response(u64),
    /// The response to spawn `id`, then its generation's first event of `kinds`.
    AfterSpawn(u64, &'static [&'static str]),
}

/// How the run goes.
#[derive(Clone, Copy, Debug)]
struct Mode {
    /// Whether some lives use the fallback reaper.
    fallback: bool,
    /// Whether the daemons run with their keeper: then what ends while no daemon runs is
    /// reported with its status (the keeper kept its pidfd) rather than `lost`.
    keeper: bool,
}

/// A request sent without waiting for its answer.
#[derive(Debug)]
struct Pending {
    op: &'static str,
    session: &'static str,
}

/// The run: the daemon, what it said and what was checked. (Fields drop in order: the
/// client, the daemon, then the namespace it runs in.)
struct Torture {
    c: Option<Client>,
    d: Daemon,
    /// Whatever carries the directory's marker once the daemon is gone is killed.
    _leftovers: KillMarkedOnDrop,
    ns: Option<PidNamespace>,
    wrapper: Vec<String>,
    rng: SplitMix64,
    mode: Mode,
    state: PathBuf,
    dir_id: String,
    /// The current daemon's life, from 0.
    life: u64,
    /// Requests in flight, by id.
    pending: HashMap<u64, Pending>,
    /// Responses received, by id, and the generations spawns and restarts answered with.
    answered: HashSet<u64>,
    spawn_gens: HashMap<u64, u64>,
    next_id: u64,
    /// Every generation seen: its session and the life it was first seen in.
    gens: HashMap<u64, (String, u64)>,
    /// Generations seen `spawned` (in any life).
    spawned: HashSet<u64>,
    /// Generations whose terminal event was seen, with the life it was seen in, and the
    /// events about each generation seen this life.
    ended: HashMap<u64, u64>,
    events: HashMap<u64, BTreeSet<String>>,
    /// The leader process each generation was seen running as: (pid, start time).
    leaders: HashMap<u64, (u32, u64)>,
    /// Per session, the generations started and not ended, from this life's events.
    live: HashMap<String, BTreeSet<u64>>,
    /// Per session, the last generation a response named and what its spec runs.
    current: HashMap<String, u64>,
    work: HashMap<String, Work>,
    /// Generations whose worker this test ended while no daemon ran.
    expect_lost: Vec<(String, u64)>,
    bystanders: Vec<Bystander>,
    counts: Counts,
    violations: Vec<String>,
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

/// A line on the stderr descriptor, which the test harness does not capture: the seed and
/// the counts are visible in every run.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

impl Torture {
    fn new(seed: u64, ns: Option<PidNamespace>, mode: Mode) -> Torture {
        let wrapper = ns.as_ref().map(PidNamespace::wrapper).unwrap_or_default();
        let mut rng = SplitMix64::new(seed);
        let args = daemon_args(&mut rng, mode);
        let w: Vec<&str> = wrapper.iter().map(String::as_str).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let d = Daemon::start_wrapped("torture", &w, &args, None);
        let state = d.dir.join("state");
        let dir_id = recorded::dir_id(&state);
        Torture {
            rng,
            mode,
            ns,
            wrapper,
            _leftovers: KillMarkedOnDrop(dir_id.clone()),
            d,
            c: None,
            state,
            dir_id,
            life: 0,
            pending: HashMap::new(),
            answered: HashSet::new(),
            spawn_gens: HashMap::new(),
            next_id: 1 << 32,
            gens: HashMap::new(),
            spawned: HashSet::new(),
            ended: HashMap::new(),
            events: HashMap::new(),
            leaders: HashMap::new(),
            live: HashMap::new(),
            current: HashMap::new(),
            work: HashMap::new(),
            expect_lost: Vec::new(),
            bystanders: Vec::new(),
            counts: Counts::default(),
            violations: Vec::new(),
        }
    }

    fn violation(&mut self, what: String) {
        say(&format!("VIOLATION (life {}): {what}", self.life));
        self.violations.push(format!("life {}: {what}", self.life));
    }

    fn client(&mut self) -> &mut Client {
        self.c.as_mut().expect("connected")
    }

    // ---- what the daemon says --------------------------------------------------------

    /// Records that `gen` belongs to `session`; a number naming two sessions was reused.
    fn note(&mut self, session: &str, gen: u64) {
        match self.gens.get(&gen) {
            Some((s, _)) if s != session => {
                self.counts.generation_reuses += 1;
                let s = s.clone();
                self.violation(format!("gen {gen} named for {s} and for {session}"));
            }
            Some(_) => {}
            None => {
                self.counts.generations += 1;
                self.gens.insert(gen, (session.to_owned(), self.life));
            }
        }
    }

    /// Takes in one message from the daemon, in the order it was sent.
    fn observe(&mut self, m: &Msg) {
        self.counts.messages += 1;
        let v = m.json();
        if let Some(event) = v["event"].as_str() {
            self.observe_event(event, v);
        } else {
            self.observe_response(v);
        }
    }

    fn observe_event(&mut self, event: &str, v: &Value) {
        let session = v["session"].as_str().unwrap_or_default().to_owned();
        if event == "dropped" {
            // Events of this session may be among what was missed.
            self.live.remove(&session);
            return;
        }
        let Some(gen) = v["gen"].as_u64() else { return };
        self.note(&session, gen);
        self.events.entry(gen).or_default().insert(event.to_owned());
        match event {
            "spawned" => {
                if !self.spawned.insert(gen) {
                    self.counts.generation_reuses += 1;
                    self.violation(format!("gen {gen} of {session} spawned twice: {v}"));
                }
                let live = self.live.entry(session.clone()).or_default();
                live.remove(&gen);
                if !live.is_empty() {
                    let others = live.clone();
                    self.counts.duplicates += 1;
                    self.violation(format!(
                        "gen {gen} of {session} spawned while {others:?} had not ended"
                    ));
                }
                self.live.entry(session.clone()).or_default().insert(gen);
                let current = self.current.entry(session).or_insert(gen);
                *current = gen.max(*current);
            }
            "exited" | "spawn_failed" => {
                if self.ended.insert(gen, self.life).is_some() {
                    self.counts.second_ends += 1;
                    self.violation(format!("gen {gen} of {session} ended twice: {v}"));
                }
                if let Some(live) = self.live.get_mut(&session) {
                    live.remove(&gen);
                }
            }
            _ => {}
        }
    }

    fn observe_response(&mut self, v: &Value) {
        let Some(id) = v["id"].as_u64() else { return };
        self.answered.insert(id);
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        if v["ok"] != json!(true) {
            if v["error"]["code"] == "internal" {
                self.counts.internal_errors += 1;
                self.violation(format!("{} on {}: {v}", p.op, p.session));
            }
            if p.op == "spawn" {
                self.work.remove(p.session);
            }
            return;
        }
        if matches!(p.op, "spawn" | "restart") {
            let gen = v["gen"].as_u64().expect("a new generation");
            // Every number seen so far (events about this one aside) was handed out
            // before this one.
            if let Some(max) = self.gens.keys().copied().filter(|&g| g != gen).max() {
                if gen <= max {
                    self.counts.generation_order_violations += 1;
                    self.violation(format!(
                        "{} on {} answered gen {gen}, not above gen {max} seen before",
                        p.op, p.session
                    ));
                }
            }
            self.note(p.session, gen);
            self.spawn_gens.insert(id, gen);
            self.current.insert(p.session.to_owned(), gen);
        }
    }

    /// Takes in everything read while a request waited for its answer.
    fn drain_backlog(&mut self) {
        while let Some(m) = self.client().backlog.pop_front() {
            self.observe(&m);
        }
    }

    /// A request answered before anything else is done.
    fn sync(&mut self, req: Value) -> Value {
        self.counts.requests += 1;
        let r = self.client().request(req);
        self.drain_backlog();
        if r["error"]["code"] == "internal" {
            self.counts.internal_errors += 1;
            self.violation(format!("internal error: {r}"));
        }
        r
    }

    /// Sends a request without waiting for its answer; returns its id.
    fn send(&mut self, op: &'static str, session: &'static str, mut req: Value) -> u64 {
        self.counts.requests += 1;
        let id = self.next_id;
        self.next_id += 1;
        req["id"] = json!(id);
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.client().send_raw(&line);
        self.pending.insert(id, Pending { op, session });
        id
    }

    /// Reads one message (waiting at most [`PATIENCE`]) and takes it in.
    fn read_one(&mut self) {
        let m = self.client().next_event();
        self.observe(&m);
    }

    fn done(&self, a: Await) -> bool {
        match a {
            Await::Response(id) => self.answered.contains(&id),
            Await::AfterSpawn(id, kinds) => {
                self.answered.contains(&id)
                    && match self.pending_gen(id) {
                        None => true,
                        Some(gen) => self
                            .events
                            .get(&gen)
                            .is_some_and(|seen| kinds.iter().any(|k| seen.contains(*k))),
                    }
            }
        }
    }

    /// The generation a spawn answered with (`None` if it failed).
    fn pending_gen(&self, id: u64) -> Option<u64> {
        self.spawn_gens.get(&id).copied()
    }
}

/// Daemon options for one life: the containment (and with `fallback`, the reaper) vary
/// between restarts on the same state directory, as an operator may change them.
fn daemon_args(rng: &mut SplitMix64, mode: Mode) -> Vec<String> {
    let fallback = mode.fallback;
    let mut args = Vec::new();
    if !mode.keeper {
        args.push("--no-keeper");
    }
    if fallback && rng.chance(35) {
        args.extend(["--reaper", "fallback"]);
    }
    if rng.chance(30) {
        args.extend(["--containment", "session"]);
    }
    args.into_iter().map(String::from).collect()
}

/// Process `pid`'s command line, for messages.
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            String::from_utf8_lossy(&c)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// Ends process `leader` (pinned by `pidfd`) and every process of its session, members
/// forked meanwhile included, and with `reaped`, waits until their parent (the namespace's
/// init) has reaped them all, so that the session's number is free again.
fn end_session(leader: u32, pidfd: &OwnedFd, reaped: bool) {
    let _ = pidfd_send_signal(pidfd, Signal::KILL);
    assert!(readable(pidfd.as_fd(), Instant::now() + PATIENCE));
    // The members' ends and reaping show from outside only as their /proc entries changing,
    // which has no event to wait on: bounded polling.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let members: Vec<(u32, proc::Stat)> = proc::pids()
            .into_iter()
            .filter_map(|pid| Some((pid, proc::stat(pid).filter(|s| s.session == leader)?)))
            .filter(|(_, s)| reaped || !s.is_zombie())
            .collect();
        if members.is_empty() {
            return;
        }
        for (pid, _) in members.iter().filter(|(_, s)| !s.is_zombie()) {
            let Ok(fd) = pidfd_open(Pid::from_raw(*pid as i32).unwrap(), PidfdFlags::empty())
            else {
                continue;
            };
            // Pinned: still a member of the session?
            if proc::stat(*pid).is_some_and(|s| s.session == leader) {
                let _ = pidfd_send_signal(&fd, Signal::KILL);
            }
        }
        assert!(
            Instant::now() < deadline,
            "session {leader} not ended and reaped: {members:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A state directory id that is not the test's: a marker with it belongs to someone else.
const FOREIGN_ID: &str = "0123456789abcdef0123456789abcdef";

impl Torture {
    // ---- one life of the daemon -------------------------------------------------------

    /// Connects to the daemon just started and checks what it took back.
    fn connect(&mut self) {
        // What ran in the last life is learnt again from the listing.
        self.live.clear();
        self.c = Some(self.d.client());
        self.sync(json!({"op": "subscribe", "all": true}));
        self.checkpoint();
    }

    /// Everything checked after a restart (and at the start).
    fn checkpoint(&mut self) {
        // What the system says first, then what the daemon says: whatever the first shows
        // that the second does not account for must be on its way out.
        let processes = marked(&self.dir_id);
        let files = descriptors(&self.state);
        let list = self.sync(json!({"op": "list"}));
        if list["ok"] != json!(true) {
            self.violation(format!("list failed: {list}"));
            return;
        }
        // gen → (session, lifecycle), and each session's current generation.
        let mut listed: HashMap<u64, (String, String)> = HashMap::new();
        let mut current_of: HashMap<String, Option<u64>> = HashMap::new();
        // Sessions whose removal was asked before the crash: they may be gone by the
        // time they are asked about again.
        let mut removing: HashSet<String> = HashSet::new();
        self.live.clear();
        for s in list["sessions"].as_array().expect("sessions") {
            let name = s["name"].as_str().expect("a name").to_owned();
            current_of.insert(name.clone(), s["current"].as_u64());
            if s["state"] == "removing" {
                removing.insert(name.clone());
            }
            if let Some(gen) = s["current"].as_u64() {
                self.note(&name, gen);
            }
            let mut running = Vec::new();
            for g in s["generations"].as_array().expect("generations") {
                let gen = g["gen"].as_u64().expect("gen");
                self.note(&name, gen);
                let lifecycle = g["lifecycle"].as_str().unwrap_or_default().to_owned();
                if matches!(
                    lifecycle.as_str(),
                    "starting" | "running" | "stopping" | "killing" | "unkillable"
                ) {
                    running.push(gen);
                }
                // Started, its end not reported yet (that event is still to come, to this
                // subscribed client).
                if !g["pid"].is_null()
                    && !matches!(lifecycle.as_str(), "pending" | "reported" | "gone")
                {
                    self.live.entry(name.clone()).or_default().insert(gen);
                }
                listed.insert(gen, (name.clone(), lifecycle));
            }
            self.counts.duplicate_checks += 1;
            if running.len() > 1 {
                self.counts.duplicates += 1;
                self.violation(format!("{name} lists {running:?} running at once: {s}"));
            }
        }

        // Orphans: a marked process whose generation is not listed must end (the start-up
        // sweep's kills are in flight); its end is awaited on a pidfd.
        for p in &processes {
            self.counts.marked_seen += 1;
            if listed.contains_key(&p.gen) {
                continue;
            }
            if self.ends(p.pid, p.gen) {
                self.counts.swept += 1;
            } else {
                let session = self.gens.get(&p.gen).map(|(s, _)| s.clone());
                self.counts.orphans += 1;
                self.violation(format!(
                    "orphan: pid {} ({}) of gen {} ({session:?}) runs on, unlisted",
                    p.pid,
                    cmdline(p.pid),
                    p.gen
                ));
            }
        }

        // One process per generation number, ever; one running leader per session.
        let mut leaders: HashMap<String, BTreeSet<u64>> = HashMap::new();
        for p in processes.iter().filter(|p| p.leader) {
            let seen = *self.leaders.entry(p.gen).or_insert((p.pid, p.starttime));
            if seen != (p.pid, p.starttime) {
                self.counts.generation_reuses += 1;
                self.violation(format!(
                    "gen {} ran as pid {} and as pid {}",
                    p.gen, seen.0, p.pid
                ));
            }
            if let Some((session, _)) = listed.get(&p.gen) {
                leaders.entry(session.clone()).or_default().insert(p.gen);
            }
        }
        for (session, gens) in leaders {
            self.counts.duplicate_checks += 1;
            if gens.len() > 1 {
                self.counts.duplicates += 1;
                self.violation(format!("{session} runs generations {gens:?} at once"));
            }
        }

        // Descriptors only for generations the daemon tracks. One released in the turn
        // that answered the listing may wait for that turn's end (what a generation taken
        // back left is looked for then, its descriptor kept until it is): any answer to
        // a later request comes after it.
        if files
            .iter()
            .any(|f| !listed.contains_key(&f.gen) && f.path.exists())
        {
            self.sync(json!({"op": "hello"}));
        }
        for f in &files {
            self.counts.descriptors_checked += 1;
            if listed.contains_key(&f.gen) || !f.path.exists() {
                continue;
            }
            self.counts.descriptors_left += 1;
            self.violation(format!(
                "descriptor {} left for gen {} of {} (pid {}), which is not listed",
                f.path.display(),
                f.gen,
                f.session,
                f.pid
            ));
        }

        // Strangers on recycled pids are untouched; the workers whose pids they took are
        // reported lost.
        let mut hurt = Vec::new();
        for (i, b) in self.bystanders.iter().enumerate() {
            if !b.untouched() {
                hurt.push(i);
            }
        }
        for i in hurt.into_iter().rev() {
            let b = self.bystanders.remove(i);
            self.counts.strangers_signalled += 1;
            self.violation(format!(
                "the stranger on pid {} (recycled) was signalled",
                b.ns_pid
            ));
        }
        for (session, gen) in std::mem::take(&mut self.expect_lost) {
            let r = self.sync(json!({"op": "wait", "session": session, "gen": gen}));
            if r["ok"] == json!(true) {
                // With the keeper, its pidfd outlived the daemon: its status is reported
                // exactly — this test's SIGKILL, or the stop signal the daemon sent before
                // it died, with the cause that stop makes of it.
                let kept = self.mode.keeper && r["end"]["code"].is_number();
                if r["end"]["cause"] == "lost" || kept {
                    self.counts.reported_lost += 1;
                } else if !self.ended.contains_key(&gen) {
                    self.violation(format!(
                        "gen {gen} of {session} ended while no daemon ran, reported {r}"
                    ));
                }
            } else if r["error"]["code"] != "no_such_session" || current_of.contains_key(&session) {
                self.violation(format!(
                    "gen {gen} of {session} ended while no daemon ran: wait says {r}"
                ));
            }
        }

        // A precondition naming a generation from before the crash that is no longer
        // current is refused.
        let mut names: Vec<&String> = current_of.keys().collect();
        names.sort();
        let mut probes = Vec::new();
        for name in names {
            let current = current_of[name];
            let mut old: Vec<u64> = self
                .gens
                .iter()
                .filter(|(&g, (s, life))| s == name && *life < self.life && Some(g) != current)
                .map(|(&g, _)| g)
                .collect();
            old.sort_unstable();
            let Some(&latest) = old.last() else { continue };
            let other = old[self.rng.below_usize(old.len())];
            for gen in BTreeSet::from([latest, other]) {
                probes.push((name.clone(), gen, current));
            }
        }
        for (session, gen, current) in probes {
            let req = if self.rng.chance(50) {
                json!({"op": "write", "session": session, "if_gen": gen, "data": "stale\n"})
            } else {
                json!({"op": "signal", "session": session, "if_gen": gen, "signal": "CONT"})
            };
            let r = self.sync(req.clone());
            self.counts.stale_checks += 1;
            let removed = r["error"]["code"] == "no_such_session" && removing.contains(&session);
            if r["ok"] == json!(true) || (r["error"]["code"] != "stale_generation" && !removed) {
                self.counts.stale_accepted += 1;
                self.violation(format!("{req} with current gen {current:?}, answered {r}"));
            }
        }
    }

    /// Whether process `pid`, marked as generation `gen`, ends (now or within
    /// [`PATIENCE`]), awaited on a pidfd.
    fn ends(&self, pid: u32, gen: u64) -> bool {
        let Some(raw) = Pid::from_raw(pid as i32) else {
            return true;
        };
        let Ok(pidfd) = pidfd_open(raw, PidfdFlags::empty()) else {
            return true;
        };
        // The pidfd pins the process: without the marker now, it is someone else.
        if marker(pid) != Some(format!("{}:{gen}", self.dir_id)) {
            return true;
        }
        readable(pidfd.as_fd(), Instant::now() + PATIENCE)
    }

    /// Sends a few random requests without waiting, reads a random number of messages,
    /// perhaps waits for something the requests set going, and kills the daemon.
    fn round(&mut self) {
        // Up to two batches play out first (every answer, every start or failure they set
        // going): the kill then finds processes running, stopping, flooding, backing off.
        let batches = 1 + self.rng.below(3);
        for _ in 1..batches {
            let first = self.next_id;
            let mut awaits = Vec::new();
            for _ in 0..self.rng.below(7) {
                self.random_op(&mut awaits);
            }
            awaits.extend((first..self.next_id).map(Await::Response));
            for a in awaits {
                self.await_done(a);
            }
        }
        let m = self.rng.below(7);
        let mut awaits = Vec::new();
        for _ in 0..m {
            self.random_op(&mut awaits);
        }
        // At least `m` messages (the answers) are coming, events among them.
        for _ in 0..self.rng.below(m + 1) {
            self.read_one();
        }
        if !awaits.is_empty() && self.rng.chance(40) {
            let a = awaits[self.rng.below_usize(awaits.len())];
            self.await_done(a);
        }
        self.kill();
    }

    /// Reads messages until `a` is done.
    fn await_done(&mut self, a: Await) {
        let deadline = Instant::now() + PATIENCE;
        while !self.done(a) {
            assert!(Instant::now() < deadline, "gave up waiting for {a:?}");
            self.read_one();
        }
    }

    fn random_op(&mut self, awaits: &mut Vec<Await>) {
        let s: &'static str = self.rng.pick(SESSIONS);
        let old = self.current.get(s).copied();
        let if_gen = |rng: &mut SplitMix64| old.filter(|_| rng.chance(30));
        let roll = self.rng.below(100);
        match roll {
            0..=34 => {
                let work = self.rng.pick(WORKS);
                let req = work.spawn(s, &mut self.rng);
                let id = self.send("spawn", s, req);
                self.work.insert(s.to_owned(), work);
                let kinds: &'static [&'static str] = if work == Work::Flood {
                    &["output", "exited", "spawn_failed"]
                } else {
                    &["spawned", "spawn_failed"]
                };
                awaits.push(Await::AfterSpawn(id, kinds));
                self.maybe_wait_for(s, old, awaits);
            }
            35..=46 => {
                let grace = self.rng.pick(&["0ms", "30ms", "200ms"]);
                let mut req = json!({"op": "stop", "session": s, "grace": grace});
                if let Some(g) = if_gen(&mut self.rng) {
                    req["if_gen"] = json!(g);
                }
                self.send("stop", s, req);
                self.maybe_wait_for(s, old, awaits);
            }
            47..=55 => {
                let id = self.send("restart", s, json!({"op": "restart", "session": s}));
                awaits.push(Await::AfterSpawn(id, &["spawned", "spawn_failed"]));
                self.maybe_wait_for(s, old, awaits);
            }
            56..=65 => {
                let mut req = json!({"op": "write", "session": s, "data": "hello\n"});
                if let Some(g) = if_gen(&mut self.rng) {
                    req["if_gen"] = json!(g);
                }
                self.send("write", s, req);
            }
            66..=71 => {
                let signal = self.rng.pick(&["HUP", "CONT", "WINCH", "INT"]);
                let scope = self.rng.pick(&["leader", "tree"]);
                let req = json!({"op": "signal", "session": s, "signal": signal, "scope": scope});
                self.send("signal", s, req);
            }
            72..=75 => {
                let (rows, cols) = (10 + self.rng.below(50), 20 + self.rng.below(150));
                let req = json!({"op": "resize", "session": s, "rows": rows, "cols": cols});
                self.send("resize", s, req);
            }
            76..=79 => {
                self.send("remove", s, json!({"op": "remove", "session": s}));
                self.work.remove(s);
            }
            80..=89 if self.work.get(s).is_some_and(|w| w.ends_soon()) => {
                // Answered when its current run ends (or at once in a backoff): the kill
                // lands just after an end, in the restart's backoff.
                let id = self.send("wait", s, json!({"op": "wait", "session": s}));
                awaits.push(Await::Response(id));
            }
            80..=89 => {
                self.send("get", s, json!({"op": "get", "session": s}));
            }
            _ => {
                self.send("list", s, json!({"op": "list"}));
            }
        }
    }

    /// Half the time, a `wait` for generation `old`, which the request just sent ends: the
    /// kill may then land between its end and what follows (a replacement's start).
    fn maybe_wait_for(&mut self, s: &'static str, old: Option<u64>, awaits: &mut Vec<Await>) {
        if let Some(gen) = old.filter(|_| self.rng.chance(50)) {
            let id = self.send("wait", s, json!({"op": "wait", "session": s, "gen": gen}));
            awaits.push(Await::Response(id));
        }
    }

    /// SIGKILL, then takes in what the daemon sent before it died.
    fn kill(&mut self) {
        self.d.kill();
        self.counts.kills += 1;
        if let Some(mut c) = self.c.take() {
            while let Some(m) = c.read_msg_or_eof() {
                self.observe(&m);
            }
        }
        // What a spawn never answered runs, if anything, is not known.
        for p in self.pending.values() {
            if matches!(p.op, "spawn" | "remove") {
                self.work.remove(p.session);
            }
        }
        self.pending.clear();
        self.events.clear();
    }

    /// While no daemon runs: perhaps a recorded worker ends, and (in the PID namespace) a
    /// stranger takes its pid.
    fn while_down(&mut self) {
        while self.bystanders.len() >= MAX_BYSTANDERS {
            // Checked at every restart so far; done with.
            self.bystanders.remove(0).kill();
        }
        if !self.rng.chance(40) {
            return;
        }
        let files = descriptors(&self.state);
        if files.is_empty() {
            return;
        }
        let f = files[self.rng.below_usize(files.len())].clone();
        let outer = match &self.ns {
            Some(ns) => ns.pids().get(&f.pid).copied(),
            None => Some(f.pid),
        };
        let Some(outer) = outer else { return };
        let Ok(pidfd) = pidfd_open(Pid::from_raw(outer as i32).unwrap(), PidfdFlags::empty())
        else {
            return;
        };
        // Pinned by the pidfd: the recorded leader if it carries the marker and leads its
        // session.
        if marker(outer) != Some(format!("{}:{}", self.dir_id, f.gen))
            || !proc::stat(outer).is_some_and(|s| s.session == outer && !s.is_zombie())
        {
            return;
        }
        let Some(started) = recorded::starttime(outer) else {
            return;
        };
        // The worker ends, and so does everything in its session: while a member lives,
        // the session's number (the leader's pid) stays taken.
        end_session(outer, &pidfd, self.ns.is_some());
        self.counts.workers_ended_while_down += 1;
        self.expect_lost.push((f.session.clone(), f.gen));
        let foreign = self.rng.chance(50);
        let Some(ns) = self.ns.as_mut() else { return };
        wait_past_tick(started);
        // Some strangers carry another directory's marker, with the same generation.
        let marker = foreign.then(|| format!("{FOREIGN_ID}:{}", f.gen));
        for _ in 0..3 {
            match ns.bystander(f.pid, marker.as_deref()) {
                Ok(b) => {
                    self.counts.strangers += 1;
                    self.bystanders.push(b);
                    return;
                }
                // Something else in the namespace forked in between.
                Err(_) => self.counts.stranger_misses += 1,
            }
        }
    }

    fn restart(&mut self) {
        self.life += 1;
        let args = daemon_args(&mut self.rng, self.mode);
        let w: Vec<&str> = self.wrapper.iter().map(String::as_str).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.d.restart_wrapped(&w, &args);
        self.connect();
    }

    /// Shuts the last daemon down: it stops everything, exits 0 and leaves nothing behind.
    fn finish(&mut self) {
        self.sync(json!({"op": "shutdown"}));
        let mut c = self.c.take().expect("connected");
        while let Some(m) = c.read_msg_or_eof() {
            self.observe(&m);
        }
        assert_eq!(
            self.d.exit_code(),
            Some(0),
            "the daemon's exit after shutdown"
        );
        for p in marked(&self.dir_id) {
            if !self.ends(p.pid, p.gen) {
                self.counts.orphans += 1;
                self.violation(format!("pid {} of gen {} outlived shutdown", p.pid, p.gen));
            }
        }
        for f in descriptors(&self.state) {
            self.counts.descriptors_left += 1;
            self.violation(format!("descriptor of gen {} left after shutdown", f.gen));
        }
        for b in std::mem::take(&mut self.bystanders) {
            if !b.untouched() {
                self.counts.strangers_signalled += 1;
                self.violation(format!("the stranger on pid {} was signalled", b.ns_pid));
            }
            b.kill();
        }
    }
}

/// Runs the torture (`fallback`: some lives use the fallback reaper) as `name`.
fn torture(name: &str, mode: Mode) {
    let kills = env_u64("GENWARD_TORTURE_KILLS").unwrap_or(30);
    let seed = env_u64("GENWARD_TORTURE_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        t.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
    });
    say(&format!(
        "{name}: seed {seed} (GENWARD_TORTURE_SEED={seed} replays it), {kills} kills"
    ));
    let ns = match PidNamespace::new() {
        Ok(ns) => Some(ns),
        Err(why) => {
            skip(&format!("{name}, strangers on recycled pids"), &why);
            None
        }
    };
    let started = Instant::now();
    let mut t = Torture::new(seed, ns, mode);
    t.connect();
    for _ in 0..kills {
        t.round();
        t.while_down();
        t.restart();
    }
    t.finish();
    let c = &t.counts;
    say(&format!(
        "{name}: seed {seed}, {:.1} s: {} kills and restarts, {} requests, {} messages, \
         {} generations",
        started.elapsed().as_secs_f64(),
        c.kills,
        c.requests,
        c.messages,
        c.generations
    ));
    say(&format!(
        "  orphans {} ({} marked processes seen after restarts, {} unlisted ones ended); \
         duplicates {} ({} checks)",
        c.orphans, c.marked_seen, c.swept, c.duplicates, c.duplicate_checks
    ));
    say(&format!(
        "  strangers signalled {} ({} put on recycled pids, {} misses); workers ended while \
         down {}, reported lost {}",
        c.strangers_signalled,
        c.strangers,
        c.stranger_misses,
        c.workers_ended_while_down,
        c.reported_lost
    ));
    say(&format!(
        "  stale if_gen accepted {} ({} checks); descriptors left {} ({} checked); \
         generation order violations {}, reuses {}; second ends {}; internal errors {}",
        c.stale_accepted,
        c.stale_checks,
        c.descriptors_left,
        c.descriptors_checked,
        c.generation_order_violations,
        c.generation_reuses,
        c.second_ends,
        c.internal_errors
    ));
    assert!(
        t.violations.is_empty(),
        "seed {seed}: {} violations, the first: {:#?}",
        t.violations.len(),
        &t.violations[..t.violations.len().min(10)]
    );
}

#[test]
fn the_daemon_killed_at_random_points_loses_nothing_and_hurts_no_one() {
    torture(
        "the_daemon_killed_at_random_points_loses_nothing_and_hurts_no_one",
        Mode {
            fallback: false,
            keeper: false,
        },
    );
}

/// The same with the keeper: the sessions keep their I/O across each crash.
#[test]
fn the_daemon_killed_at_random_points_loses_nothing_and_hurts_no_one_keeper() {
    torture(
        "the_daemon_killed_at_random_points_loses_nothing_and_hurts_no_one_keeper",
        Mode {
            fallback: false,
            keeper: true,
        },
    );
}

/// The same with the fallback reaper in some lives (where a process taken back has no
/// pidfd, and its end is seen by reading its identity again).
#[test]
fn the_daemon_killed_at_random_points_loses_nothing_and_hurts_no_one_fallback() {
    torture(
        "the_daemon_killed_at_random_points_loses_nothing_and_hurts_no_one_fallback",
        Mode {
            fallback: true,
            keeper: false,
        },
    );
}
