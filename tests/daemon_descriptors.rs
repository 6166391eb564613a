//! Running out of descriptors: spawns are refused (`limit`) while descriptors are still
//! kept in reserve, so clients can still connect and be answered; a connection that
//! arrives while the daemon has none left at all is told so at once (`limit`), never left
//! hanging; and service resumes once descriptors free up.

mod util;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use genward::testkit::proc;
use serde_json::{json, Value};
use util::daemon::{Daemon, PATIENCE};

/// What a new connection got in answer to `hello`.
#[derive(Debug, PartialEq)]
enum Answer {
    Served,
    Refused(String),
    /// The daemon closed it (refused) before its reason could be read.
    Closed,
}

fn hello(stream: &UnixStream) -> Answer {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    // A refused connection may already be closed: its reason is still readable.
    let _ = writer.write_all(b"{\"id\":1,\"op\":\"hello\"}\n");
    let mut line = String::new();
    match BufReader::new(stream).read_line(&mut line) {
        Ok(0) => Answer::Closed,
        Ok(_) => {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["ok"] == json!(true) {
                Answer::Served
            } else {
                Answer::Refused(v["error"]["code"].as_str().unwrap_or("").to_owned())
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Answer::Closed,
        Err(e) => panic!("no answer within {PATIENCE:?}: the connection hangs ({e})"),
    }
}

#[test]
fn connections_beyond_the_descriptor_limit_are_refused_not_left_hanging() {
    // A shell that lowers the hard limit (so the daemon cannot raise it) and runs the
    // daemon as its child.
    let Some(d) = limited_daemon(
        "connections_beyond_the_descriptor_limit_are_refused_not_left_hanging",
        "emfile",
        48,
    ) else {
        return;
    };
    let mut served = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        let stream = UnixStream::connect(&d.socket).unwrap();
        match hello(&stream) {
            Answer::Served => served.push(stream),
            Answer::Refused(code) => {
                assert_eq!(code, "limit");
                refused += 1;
            }
            Answer::Closed => refused += 1,
        }
        if refused >= 5 {
            break;
        }
    }
    assert!(
        refused >= 5,
        "never ran out of descriptors ({} served)",
        served.len()
    );
    assert!(!served.is_empty());
    drop(served);
    // Descriptors are free again: a new connection is served. (The daemon notices the
    // closed connections as it serves this one; retry until it has.)
    for attempt in 0.. {
        let stream = UnixStream::connect(&d.socket).unwrap();
        match hello(&stream) {
            Answer::Served => break,
            other => assert!(
                attempt < 100,
                "still refused once descriptors are free: {other:?}"
            ),
        }
    }
}

/// The soft descriptor limit of process `pid`.
fn nofile_of(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// The number before `what` in `message` (`... 57 in use, ...`).
/// A daemon whose soft and hard descriptor limit is `limit`, for good: started without
/// CAP_SYS_RESOURCE (which root has), so that it cannot raise its hard limit again.
/// `None`, with a SKIP line naming `test`, where that cannot be arranged.
fn limited_daemon(test: &str, tag: &str, limit: u64) -> Option<Daemon> {
    let setpriv = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-sys_resource", "true"])
        .status();
    if !setpriv.is_ok_and(|s| s.success()) {
        util::daemon::skip_because(&format!("{test}: no setpriv to drop CAP_SYS_RESOURCE"));
        return None;
    }
    let ulimit = format!("ulimit -n {limit} && \"$@\"; :");
    let wrapper = [
        "setpriv",
        "--bounding-set",
        "-sys_resource",
        "sh",
        "-c",
        ulimit.as_str(),
        "sh",
    ];
    let d = Daemon::start_wrapped(tag, &wrapper, &[], None);
    if nofile_of(d.pid) != limit {
        util::daemon::skip_because(&format!("{test}: the daemon raised its limit"));
        return None;
    }
    Some(d)
}

fn number_before(message: &str, what: &str) -> usize {
    let head = &message[..message.find(what).unwrap_or_else(|| panic!("{message}"))];
    head.trim_end()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {what:?} in {message}"))
}

#[test]
fn spawns_are_refused_while_descriptors_are_kept_for_clients() {
    const LIMIT: u64 = 160;
    let Some(d) = limited_daemon(
        "spawns_are_refused_while_descriptors_are_kept_for_clients",
        "fd-reserve",
        LIMIT,
    ) else {
        return;
    };
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // A session the restart policy starts again once it exits, which it does when told.
    let restarting = c.ok(json!({"op": "spawn", "session": "again",
        "restart": {"mode": "always", "initial": "10ms"},
        "argv": ["sh", "-c", "read _"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", restarting));

    let mut gens = Vec::new();
    let refused = loop {
        let name = format!("s{}", gens.len());
        let r = c.request(json!({"op": "spawn", "session": name, "argv": ["sleep", "1000"]}));
        if r["ok"] == json!(true) {
            let gen = r["gen"].as_u64().unwrap();
            // Started before the next, so the count is of what children hold.
            c.events_until(|m| m.is("spawned", gen));
            gens.push(gen);
            assert!(gens.len() < LIMIT as usize, "never refused");
            continue;
        }
        assert_eq!(r["error"]["code"], json!("limit"), "{r}");
        break r["error"]["message"].as_str().unwrap().to_owned();
    };
    assert!(
        gens.len() >= 4,
        "refused after {} spawns: {refused}",
        gens.len()
    );
    assert!(refused.contains("descriptor limit 160"), "{refused}");

    // What the daemon counts is never less than what it holds, and not far above.
    let counted = number_before(&refused, "in use");
    let open = proc::fd_count(d.pid);
    println!(
        "{} spawns, then refused: {refused} ({open} open)",
        gens.len()
    );
    assert!(counted >= open, "counted {counted}, {open} open: {refused}");
    assert!(
        counted <= open + 8,
        "counted {counted}, {open} open: {refused}"
    );
    // The reserve is left: the refusal came before the limit was near.
    let reserve = number_before(&refused, "are kept in reserve");
    assert!(
        open as u64 + reserve as u64 <= LIMIT,
        "{open} open: {refused}"
    );

    // A new client is served in full.
    let mut other = d.client();
    other.ok(json!({"op": "hello"}));
    let list = other.ok(json!({"op": "list"}));
    assert_eq!(
        list["sessions"].as_array().unwrap().len(),
        gens.len() + 1,
        "{list}"
    );

    // More clients, each served from the reserve, so that what the restarting session's
    // end gives back is not enough for its next start either.
    let more: Vec<_> = (0..10)
        .map(|_| {
            let mut m = d.client();
            m.ok(json!({"op": "hello"}));
            m
        })
        .collect();
    // The policy's restart fails as a spawn of its own, and the daemon carries on.
    c.ok(json!({"op": "write", "session": "again", "data": "go\n"}));
    c.events_until(|m| m.is("exited", restarting));
    let seen = c.events_until(|m| m.json()["event"] == "spawn_failed");
    let failed = seen.last().unwrap().json();
    assert_eq!(failed["session"], json!("again"), "{failed}");
    assert!(failed["gen"].as_u64().unwrap() > restarting, "{failed}");
    let why = failed["error"]["message"].as_str().unwrap_or("");
    assert!(why.contains("descriptor limit 160"), "{failed}");
    // Not the session's failure: it waits in backoff, the refused start uncounted.
    let s = &other.ok(json!({"op": "get", "session": "again"}))["session"];
    assert_eq!(
        (&s["state"], &s["restarts"]),
        (&json!("backoff"), &json!(1)),
        "{s}"
    );
    other.ok(json!({"op": "hello"}));
    drop(more);

    // Sessions removed: their descriptors are given back, and spawns work again.
    c.ok(json!({"op": "remove", "session": "again"}));
    for i in 0..gens.len() {
        c.ok(json!({"op": "remove", "session": format!("s{i}")}));
    }
    // A session is forgotten once its generations are released, descriptors and all.
    let mut left: std::collections::HashSet<String> =
        (0..gens.len()).map(|i| format!("s{i}")).collect();
    left.insert("again".into());
    c.events_until(|m| {
        let v = m.json();
        if v["event"] == "state" && v["state"] == "removed" {
            left.remove(v["session"].as_str().unwrap_or(""));
        }
        left.is_empty()
    });
    c.ok(json!({"op": "spawn", "session": "after", "argv": ["true"]}));
}

#[test]
fn a_stop_answered_while_clients_hold_every_descriptor_survives_a_crash() {
    // Clients alone can never take the descriptors the state files need: the `stop`
    // answered below is on disk, so the next daemon knows the session is to stay down.
    let Some(mut d) = limited_daemon(
        "a_stop_answered_while_clients_hold_every_descriptor_survives_a_crash",
        "fd-state",
        64,
    ) else {
        return;
    };
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // It outlives the stop's first signal, so the stop is still under way at the crash.
    let gen = c.ok(json!({"op": "spawn", "session": "stub", "grace": "1h",
        "on_recover": "keep", "restart": {"mode": "always"},
        "argv": ["sh", "-c", "trap '' TERM; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("spawned", gen));
    let mut held = Vec::new();
    loop {
        let stream = UnixStream::connect(&d.socket).unwrap();
        match hello(&stream) {
            Answer::Served => held.push(stream),
            Answer::Refused(code) => {
                assert_eq!(code, "limit");
                break;
            }
            Answer::Closed => break,
        }
        assert!(held.len() < 64, "never refused");
    }
    c.ok(json!({"op": "stop", "session": "stub"}));
    d.crash_and_restart(&[]);
    drop(held);
    let mut c = d.client();
    let got = c.ok(json!({"op": "get", "session": "stub"}));
    assert_eq!(got["session"]["state"], json!("stopping"), "{got}");
    // The end of it: nothing may outlive the test.
    c.ok(json!({"op": "subscribe", "all": true}));
    c.ok(json!({"op": "signal", "session": "stub", "signal": 9}));
    c.events_until(|m| m.is("exited", gen));
}

/// Spawns sessions `prefix0`, `prefix1`, ... (each started before the next; on a terminal
/// if `pty`, else on pipes) until a spawn is refused with `limit`; returns how many ran.
fn fill(c: &mut util::daemon::Client, prefix: &str, pty: bool, most: usize) -> usize {
    let mut n = 0;
    loop {
        let r = c.request(json!({"op": "spawn", "session": format!("{prefix}{n}"),
            "pty": pty, "argv": ["sleep", "1000"]}));
        if r["ok"] != json!(true) {
            assert_eq!(r["error"]["code"], json!("limit"), "{r}");
            return n;
        }
        let gen = r["gen"].as_u64().unwrap();
        c.events_until(|m| m.is("spawned", gen));
        n += 1;
        assert!(n < most, "never refused");
    }
}

/// Removes `prefix0` .. `prefix{n-1}` and waits until each is forgotten (its generations
/// released, their cgroups given back).
fn remove_all(c: &mut util::daemon::Client, prefix: &str, n: usize) {
    let mut left: std::collections::HashSet<String> =
        (0..n).map(|i| format!("{prefix}{i}")).collect();
    for name in &left {
        c.ok(json!({"op": "remove", "session": name}));
    }
    c.events_until(|m| {
        let v = m.json();
        if v["event"] == "state" && v["state"] == "removed" {
            left.remove(v["session"].as_str().unwrap_or(""));
        }
        left.is_empty()
    });
}

/// Emptied cgroups kept for reuse hold descriptors, but only as a cache: a daemon that ran
/// and removed a batch of sessions admits as many spawns as a fresh one.
#[test]
fn kept_cgroups_never_cost_a_spawn_its_descriptors() {
    const TEST: &str = "kept_cgroups_never_cost_a_spawn_its_descriptors";
    const LIMIT: u64 = 128;
    let Some(d) = limited_daemon(TEST, "fd-pool", LIMIT) else {
        return;
    };
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    c.ok(json!({"op": "subscribe", "all": true}));
    // Pipes-mode sessions hold more descriptors each than terminal ones: kept cgroups of
    // terminal sessions are more than pipes-mode ones can take up again.
    let fresh = fill(&mut c, "a", false, LIMIT as usize);
    assert!(fresh >= 4, "refused after {fresh} spawns");
    remove_all(&mut c, "a", fresh);
    let terminals = fill(&mut c, "b", true, LIMIT as usize);
    remove_all(&mut c, "b", terminals);
    let again = fill(&mut c, "c", false, LIMIT as usize);
    println!("{fresh} spawns fit on a fresh daemon, {again} after {terminals} on terminals");
    assert_eq!(again, fresh, "fewer spawns fit once cgroups were kept");
    remove_all(&mut c, "c", again);
}

/// A limit lowered while the daemon runs (`prlimit` by someone else) is the one spawns are
/// refused under: refused with `limit`, naming it, not accepted and then failed in their
/// setup for want of a descriptor.
#[test]
fn a_limit_lowered_while_running_is_the_one_spawns_are_refused_under() {
    let d = Daemon::start("fd-lowered", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Room for a few sessions above what the daemon holds for itself.
    let lowered_to = proc::fd_count(d.pid) as u64 + 100;
    let lowered = libc::rlimit {
        rlim_cur: lowered_to,
        rlim_max: nofile_of(d.pid).max(lowered_to),
    };
    // SAFETY: `lowered` is a valid rlimit that outlives the call, and a null old-limit
    // pointer asks for nothing back.
    let rc = unsafe {
        libc::prlimit(
            d.pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &lowered,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let ran = fill(&mut c, "s", false, lowered_to as usize);
    assert!(ran >= 2, "refused after {ran} spawns");
    let r = c.err(
        json!({"op": "spawn", "session": "one-more", "argv": ["true"]}),
        "limit",
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    let named = format!("descriptor limit {lowered_to}");
    assert!(message.contains(&named), "{r}");
    remove_all(&mut c, "s", ran);
    c.ok(json!({"op": "spawn", "session": "after", "argv": ["true"]}));
}

/// Liveness probes need descriptors of the daemon's (a command's pidfd and status pipe, a
/// socket): clients filling every connection the budget allows must leave them those, or
/// healthy sessions fail their probes for want of descriptors and are stopped as
/// unhealthy.
#[test]
fn clients_holding_every_connection_never_fail_a_liveness_probe() {
    const TEST: &str = "clients_holding_every_connection_never_fail_a_liveness_probe";
    let Some(d) = limited_daemon(TEST, "fd-probes", 128) else {
        return;
    };
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Each probe marks a line here as it runs (then holds its descriptors a while).
    let marks = d.dir.join("probes");
    let probe = format!("echo >> {}; sleep 0.6", marks.display());
    let probes_run = || std::fs::read(&marks).map_or(0, |b| b.len());
    let mut n = 0;
    loop {
        let r = c.request(json!({"op": "spawn", "session": format!("p{n}"),
            "argv": ["sleep", "1000"],
            "live": {"command": ["sh", "-c", &probe], "interval": "1s", "failures": 2}}));
        if r["ok"] != json!(true) {
            assert_eq!(r["error"]["code"], json!("limit"), "{r}");
            break;
        }
        let gen = r["gen"].as_u64().unwrap();
        c.events_until(|m| m.is("spawned", gen));
        n += 1;
        assert!(n < 128, "never refused");
    }
    assert!(n >= 4, "only {n} sessions fit");
    let mut held = Vec::new();
    loop {
        let stream = UnixStream::connect(&d.socket).unwrap();
        match hello(&stream) {
            Answer::Served => held.push(stream),
            Answer::Refused(_) | Answer::Closed => break,
        }
        assert!(held.len() < 128, "never refused");
    }
    // Probes of every session run twice more with every connection taken (nothing but
    // the marks announces a probe); then the removal of a session tells when everything
    // they caused was reported.
    let (before, deadline) = (probes_run(), std::time::Instant::now() + PATIENCE);
    while probes_run() < before + 2 * n {
        assert!(
            std::time::Instant::now() < deadline,
            "the probes stopped running"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(held);
    c.ok(json!({"op": "remove", "session": "p0"}));
    let seen = c.events_until(|m| {
        let v = m.json();
        v["event"] == "state" && v["state"] == "removed" && v["session"] == "p0"
    });
    let unhealthy: Vec<_> = seen
        .iter()
        .filter(|m| m.json()["event"] == "unhealthy")
        .map(|m| m.json().clone())
        .collect();
    assert!(
        unhealthy.is_empty(),
        "probes failed for want of descriptors: {unhealthy:?}"
    );
}
