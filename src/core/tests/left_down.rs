//! Which configured sessions the daemon's end left down, and so run again at the next
//! start: those its shutdown stopped and those whose generation was lost with it — never
//! one that ended on its own (a one-shot done, one `failed`, restarts run out), which a
//! restart leaves as a reload would, whatever order the end and the daemon's end came in.

use std::sync::Arc;

use super::harness::{spec, Harness};
use crate::core::{
    Command, ConfigSession, DependOn, ExitStatus, OnBusy, Plan, RestState, Restart, SessionState,
    Spec,
};

fn entry(name: &str, spec: Spec) -> ConfigSession {
    ConfigSession {
        name: Arc::from(name),
        spec,
        on_busy: OnBusy::Replace,
    }
}

fn names(list: &[Arc<str>]) -> Vec<&str> {
    list.iter().map(|n| &**n).collect()
}

/// The current generation of `name`, started.
fn run(h: &mut Harness, name: &str) -> u64 {
    let gen = h.get(name).current.expect("a current generation");
    h.started(gen);
    gen
}

/// A spec restarting on failure at most `max` times.
fn on_failure(max: u32) -> Spec {
    let mut s = spec();
    s.restart.mode = Restart::OnFailure;
    s.restart.max_restarts = Some(max);
    s
}

fn depending_on(on: &[&str]) -> Spec {
    let mut s = spec();
    for name in on {
        s.depends_on.insert((*name).to_owned(), DependOn::Started);
    }
    s
}

/// The next daemon on `h`'s records, `kept` adopted, its start-up finished and the config
/// loaded: the plan of that first load.
fn next_start(h: &Harness, kept: &[(u64, &str)], config: Vec<ConfigSession>) -> (Harness, Plan) {
    let (mut next, problems) = h.reborn(h.records(), 10);
    assert!(problems.is_empty(), "{problems:?}");
    for (gen, name) in kept {
        assert!(next.adopt(*gen, name));
    }
    next.resume();
    let plan = next.reload(config).unwrap();
    (next, plan)
}

/// `mig` exited 0, `bad` failed, `flaky` ran out of restarts, all before a crash; `svc`
/// runs on (adopted) and `lost` was running and is not found. Only `lost` runs again.
#[test]
fn a_session_that_ended_before_a_crash_is_left_as_it_ended() {
    let mut h = Harness::new();
    let config = vec![
        entry("mig", spec()),
        entry("bad", spec()),
        entry("flaky", on_failure(0)),
        entry("svc", spec()),
        entry("lost", spec()),
    ];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    let bad = run(&mut h, "bad");
    let flaky = run(&mut h, "flaky");
    let svc = run(&mut h, "svc");
    let lost = run(&mut h, "lost");
    h.ends(mig, ExitStatus::Code(0));
    h.ends(bad, ExitStatus::Code(3));
    h.ends(flaky, ExitStatus::Code(1));
    assert_eq!(h.get("flaky").state, SessionState::Failed);
    // The daemon dies: no shutdown.
    let (next, plan) = next_start(&h, &[(svc, "svc")], config);
    assert_eq!(names(&plan.start), ["lost"]);
    assert_eq!(names(&plan.unchanged), ["bad", "flaky", "mig", "svc"]);
    assert_eq!(next.get("mig").state, SessionState::Exited);
    assert_eq!(next.get("mig").current, None);
    assert_eq!(next.get("bad").state, SessionState::Failed);
    assert_eq!(next.get("flaky").state, SessionState::Failed);
    assert_eq!(next.get("svc").current, Some(svc));
    assert!(next.get("lost").current.is_some_and(|g| g > lost));
}

/// A second crash: the one-shot stays done, and one a crash left down and no config load
/// took up yet (a start without the config) still runs when the config comes.
#[test]
fn crash_after_crash_keeps_the_difference() {
    let mut h = Harness::new();
    let config = vec![entry("mig", spec()), entry("lost", spec())];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    run(&mut h, "lost");
    h.ends(mig, ExitStatus::Code(0));
    let (mut between, problems) = h.reborn(h.records(), 10);
    assert!(problems.is_empty(), "{problems:?}");
    between.resume();
    let (next, plan) = next_start(&between, &[], config);
    assert_eq!(names(&plan.start), ["lost"]);
    assert_eq!(names(&plan.unchanged), ["mig"]);
    assert_eq!(next.get("mig").state, SessionState::Exited);
}

/// `mig` exited 0 and `bad` failed before a clean shutdown: the shutdown stopped neither,
/// so neither runs again; `svc`, which it stopped, and `backoff`, whose restart it
/// cancelled, do.
#[test]
fn a_session_that_ended_before_a_shutdown_is_not_stopped_by_it() {
    let mut h = Harness::new();
    let config = vec![
        entry("mig", spec()),
        entry("bad", spec()),
        entry("svc", spec()),
        entry("backoff", on_failure(5)),
    ];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    let bad = run(&mut h, "bad");
    let svc = run(&mut h, "svc");
    let backoff = run(&mut h, "backoff");
    h.ends(mig, ExitStatus::Code(0));
    h.ends(bad, ExitStatus::Code(3));
    h.ends(backoff, ExitStatus::Code(1));
    assert_eq!(h.get("backoff").state, SessionState::Backoff);
    h.cmd(Command::Shutdown).unwrap();
    h.ends(svc, ExitStatus::Signal(15));
    let flagged: Vec<String> = h
        .records()
        .iter()
        .filter(|r| r.stopped_by_shutdown)
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(
        flagged,
        ["backoff", "svc"],
        "what the records say it stopped"
    );
    let (next, plan) = next_start(&h, &[], config);
    assert_eq!(names(&plan.start), ["backoff", "svc"]);
    assert_eq!(names(&plan.unchanged), ["bad", "mig"]);
    assert_eq!(next.get("mig").state, SessionState::Exited);
    assert_eq!(next.get("bad").state, SessionState::Failed);
}

/// A shutdown stops `web` before the sessions it depends on. Meanwhile `mig` exits 0 on
/// its own (its policy would not restart it): the shutdown did not stop it, and it rests
/// `exited`. `keeper`, restarted `always`, ends on its own too, but its policy would have
/// started it again: the shutdown kept it down, and it runs again.
#[test]
fn a_session_that_ended_on_its_own_during_a_shutdown_is_not_stopped_by_it() {
    let mut h = Harness::new();
    let mut always = spec();
    always.restart.mode = Restart::Always;
    let config = vec![
        entry("mig", spec()),
        entry("keeper", always),
        entry("web", depending_on(&["mig", "keeper"])),
    ];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    let keeper = run(&mut h, "keeper");
    let web = run(&mut h, "web");
    h.cmd(Command::Shutdown).unwrap();
    h.ends(mig, ExitStatus::Code(0));
    h.ends(keeper, ExitStatus::Code(0));
    assert_eq!(h.get("mig").state, SessionState::Exited);
    h.ends(web, ExitStatus::Signal(15));
    let records = h.records();
    let mig_record = records.iter().find(|r| &*r.name == "mig").unwrap();
    assert!(!mig_record.stopped_by_shutdown);
    assert_eq!(mig_record.rest, RestState::Exited);
    let (next, plan) = next_start(&h, &[], config);
    assert_eq!(names(&plan.start), ["keeper", "web"]);
    assert_eq!(names(&plan.unchanged), ["mig"]);
    assert_eq!(next.get("mig").state, SessionState::Exited);
}

/// A record an older daemon wrote at its shutdown for a one-shot that was done: flagged
/// as stopped by the shutdown, though it rests `exited`. The flag is not believed.
#[test]
fn an_older_daemons_flag_on_a_finished_session_is_not_believed() {
    let mut h = Harness::new();
    let config = vec![entry("mig", spec()), entry("svc", spec())];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    let svc = run(&mut h, "svc");
    h.ends(mig, ExitStatus::Code(0));
    h.cmd(Command::Shutdown).unwrap();
    h.ends(svc, ExitStatus::Signal(15));
    let mut records = h.records();
    for r in &mut records {
        // What an older daemon wrote: every configured session that wanted to run.
        r.stopped_by_shutdown = true;
    }
    let (mut next, problems) = h.reborn(records, 10);
    assert!(problems.is_empty(), "{problems:?}");
    next.resume();
    let plan = next.reload(config).unwrap();
    assert_eq!(names(&plan.start), ["svc"]);
    assert_eq!(names(&plan.unchanged), ["mig"]);
}

/// A live upgrade between a start that took back the shutdown's sessions and the config's
/// load (a start without the config): what the shutdown stopped still runs at that load.
#[test]
fn an_upgrade_keeps_what_the_shutdown_stopped() {
    let mut h = Harness::new();
    let config = vec![entry("mig", spec()), entry("svc", spec())];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    let svc = run(&mut h, "svc");
    h.ends(mig, ExitStatus::Code(0));
    h.cmd(Command::Shutdown).unwrap();
    h.ends(svc, ExitStatus::Signal(15));
    let (mut next, problems) = h.reborn(h.records(), 10);
    assert!(problems.is_empty(), "{problems:?}");
    next.resume();
    next.core = super::image::through_bytes(&next.core, next.core.config().clone());
    let plan = next.reload(config).unwrap();
    assert_eq!(names(&plan.start), ["svc"]);
    assert_eq!(names(&plan.unchanged), ["mig"]);
}

/// A service that needs the migration `completed`: after a clean restart the service runs
/// again at once, against the migration's one run, which is not repeated.
#[test]
fn a_dependent_of_a_one_shot_done_runs_again_without_it() {
    let mut h = Harness::new();
    let mut web = spec();
    web.depends_on.insert("mig".to_owned(), DependOn::Completed);
    let config = vec![entry("mig", spec()), entry("web", web)];
    h.reload(config.clone()).unwrap();
    let mig = run(&mut h, "mig");
    h.ends(mig, ExitStatus::Code(0));
    let web = run(&mut h, "web");
    h.cmd(Command::Shutdown).unwrap();
    h.ends(web, ExitStatus::Signal(15));
    let (mut next, plan) = next_start(&h, &[], config);
    assert_eq!(names(&plan.start), ["web"]);
    assert_eq!(names(&plan.unchanged), ["mig"]);
    let again = next.get("web").current.expect("started again");
    assert!(again > web);
    assert_eq!(next.get("web").waiting, None, "not waiting for mig");
    next.started(again);
    assert_eq!(next.get("mig").current, None);
}
