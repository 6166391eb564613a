//! Under cgroup containment a generation without limits may run in the cgroup of one that
//! ended, kept once emptied: it is alone in it, as in a new one. A generation with limits
//! gets a cgroup of its own, and its limits never reach a later generation.

mod util;

use std::time::Instant;

use genward::sys::cgroup::Location;
use serde_json::{json, Value};
use util::daemon::{output_of, Client, Daemon, Msg, PATIENCE};

/// Prints the generation's cgroup (`cg=`), how many processes are in it while only the
/// shell runs (`n=`: read with builtins, nothing forked) and its `pids.max` if it has one.
const REPORT: &str = r#"c=$(sed -n 's/^0:://p' /proc/self/cgroup); echo "cg=$c"
n=0; while read -r p; do n=$((n+1)); done < "$1$c/cgroup.procs"; echo "n=$n"
if [ -f "$1$c/pids.max" ]; then read -r m < "$1$c/pids.max"; echo "pids.max=$m"; fi"#;

/// Runs [`REPORT`] as a generation of `session` (with `limits`, if any) and waits for it
/// to be gone; its output, or the message of its refusal.
fn report(
    c: &mut Client,
    mount: &str,
    session: &str,
    limits: Option<Value>,
) -> Result<String, String> {
    let mut spawn =
        json!({"op": "spawn", "session": session, "argv": ["sh", "-c", REPORT, "sh", mount]});
    if let Some(limits) = limits {
        spawn["limits"] = limits;
    }
    let gen = c.ok(spawn)["gen"].as_u64().unwrap();
    let seen = c.events_until(|m| m.is("exited", gen) || m.is("spawn_failed", gen));
    if let Some(error) = seen.iter().find_map(|m| match m {
        Msg::Json(v) if v["event"] == "spawn_failed" => Some(v["error"]["message"].clone()),
        _ => None,
    }) {
        return Err(error.as_str().unwrap_or_default().to_owned());
    }
    // Gone (reaped, its cgroup given back) once no longer listed.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = c.ok(json!({"op": "get", "session": session}));
        let listed = got["session"]["generations"].as_array().map_or(0, Vec::len);
        if listed == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "gen {gen} still listed: {got}");
    }
    Ok(String::from_utf8_lossy(&output_of(&seen, gen)).into_owned())
}

fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {out:?}"))
}

#[test]
fn an_emptied_cgroup_is_reused_alone_and_never_one_that_had_limits() {
    const TEST: &str = "an_emptied_cgroup_is_reused_alone_and_never_one_that_had_limits";
    let d = Daemon::start("cgroup-reuse", &[]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    let mount = Location::find().expect("cgroup containment works").mount;
    let mount = mount.to_str().unwrap();
    c.ok(json!({"op": "subscribe", "all": true}));

    let first = report(&mut c, mount, "a", None).unwrap();
    assert_eq!(field(&first, "n"), "1", "{first}");
    let second = report(&mut c, mount, "b", None).unwrap();
    assert_eq!(
        field(&second, "cg"),
        field(&first, "cg"),
        "reused once emptied"
    );
    assert_eq!(field(&second, "n"), "1", "alone in it: {second}");

    let limited = match report(&mut c, mount, "lim", Some(json!({"pids_max": 16}))) {
        Ok(out) => out,
        Err(message) => {
            // Without the pids controller (as on a hybrid host): refused, as it should.
            println!("SKIP {TEST} (limits): refused here: {message}");
            eprintln!("SKIP {TEST} (limits): refused here: {message}");
            return;
        }
    };
    assert_eq!(field(&limited, "pids.max"), "16", "{limited}");
    assert_ne!(
        field(&limited, "cg"),
        field(&first, "cg"),
        "a cgroup of its own"
    );
    // Its cgroup is removed, not kept: no later generation gets its limit.
    for session in ["c", "d"] {
        let out = report(&mut c, mount, session, None).unwrap();
        assert_ne!(field(&out, "cg"), field(&limited, "cg"), "{out}");
        assert_eq!(field(&out, "pids.max"), "max", "{out}");
    }
}

#[test]
fn a_kept_cgroup_removed_meanwhile_is_not_used() {
    const TEST: &str = "a_kept_cgroup_removed_meanwhile_is_not_used";
    let d = Daemon::start("cgroup-reuse-removed", &[]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    let mount = Location::find().expect("cgroup containment works").mount;
    let mount = mount.to_str().unwrap();
    c.ok(json!({"op": "subscribe", "all": true}));

    let first = report(&mut c, mount, "a", None).unwrap();
    // Kept, empty: a privileged hand may remove it.
    std::fs::remove_dir(format!("{mount}{}", field(&first, "cg"))).unwrap();
    let second = report(&mut c, mount, "b", None).unwrap();
    assert_ne!(field(&second, "cg"), field(&first, "cg"), "{second}");
    assert_eq!(field(&second, "n"), "1", "{second}");
}

/// A generation that needed `SIGKILL` (its cgroup killed through `cgroup.kill`) leaves a
/// cgroup no later generation gets: a process started into such a cgroup was killed at
/// once. So the replacement of a stubborn process, and everything after it, runs.
#[test]
fn a_cgroup_that_was_killed_is_never_reused() {
    const TEST: &str = "a_cgroup_that_was_killed_is_never_reused";
    let d = Daemon::start("cgroup-killed", &[]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    let mount = Location::find().expect("cgroup containment works").mount;
    let mount = mount.to_str().unwrap();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Emptied cgroups in the pool first, as after any run of short jobs.
    for name in ["j1", "j2", "j3"] {
        report(&mut c, mount, name, None).unwrap();
    }
    let stubborn = c.ok(json!({"op": "spawn", "session": "agent",
        "argv": ["sh", "-c", "trap '' TERM; echo up; cat"],
        "grace": "100ms", "kill_grace": "100ms"}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(stubborn, "up");
    let next = c.ok(json!({"op": "spawn", "session": "agent",
        "argv": ["sh", "-c", "echo alive; exec sleep 100"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", stubborn));
    let end = seen.iter().find(|m| m.is("exited", stubborn)).unwrap();
    assert_eq!(end.json()["code"], 137, "needed SIGKILL: {end:?}");
    c.output_until(next, "alive");
    // Still running: nothing killed it when it started, nor after.
    let later = report(&mut c, mount, "j4", None).unwrap();
    assert_eq!(field(&later, "n"), "1", "{later}");
    let got = c.ok(json!({"op": "get", "session": "agent"}));
    assert_eq!(got["session"]["current"], next, "{got}");
    assert_eq!(got["session"]["state"], "running", "{got}");
}
