//! Readiness with real processes, one kind per test: a newline on the notification
//! descriptor, a line of output, a Unix or TCP socket accepting, a command exiting 0 —
//! each held back by the test (a fifo, a socket not yet bound, a file not yet made) so the
//! order is observed, never timed. Then `wait --ready` and `depends_on` ordering.

mod util;

use genward::testkit::wait::exit_of_all;
use serde_json::{json, Value};
use util::cli::gw;
use util::daemon::{fifo, release, Client, Daemon, Msg};

fn gen_of(r: &Value) -> u64 {
    r["gen"].as_u64().expect("gen")
}

/// The listed readiness of `session`'s current generation (`None` once ready: left out).
fn ready_of(c: &mut Client, session: &str) -> Option<String> {
    let r = c.ok(json!({"op": "get", "session": session}));
    r["session"]["generations"][0]["ready"]
        .as_str()
        .map(str::to_string)
}

/// Sends a readiness `wait` on its own connection, answered later.
fn wait_ready(d: &Daemon, session: &str) -> Client {
    let mut w = d.client();
    w.send_raw(
        format!("{{\"id\":1,\"op\":\"wait\",\"session\":\"{session}\",\"for\":\"ready\"}}\n")
            .as_bytes(),
    );
    w
}

fn wait_answer(w: &mut Client) -> Value {
    match w.read_msg() {
        Msg::Json(v) => v,
        other => panic!("wait answered with {other:?}"),
    }
}

#[test]
fn a_newline_on_the_notification_fd_makes_it_ready() {
    let d = Daemon::start("ready-fd", &[]);
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!("read x < {}; echo >&5; exec sleep 100", go.display());
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sh", "-c", script], "ready": {"fd": 5}})));
    c.events_until(|m| m.is("spawned", gen));
    // Held at the fifo: not ready, and a readiness wait is pending.
    assert_eq!(ready_of(&mut c, "a").as_deref(), Some("starting"));
    let mut w = wait_ready(&d, "a");
    release(&go);
    c.events_until(|m| m.is("ready", gen));
    let answer = wait_answer(&mut w);
    assert_eq!(answer["end"]["event"], "ready", "{answer}");
    assert_eq!(
        ready_of(&mut c, "a"),
        None,
        "ready: left out of the listing"
    );
}

#[test]
fn a_newline_after_a_flood_on_the_notification_fd_is_found() {
    let d = Daemon::start("ready-fd-flood", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // 20,000 bytes without a newline, then one, in a single write (below the pipe's
    // capacity): more than the daemon reads from it in one turn.
    let blob = d.dir.join("blob");
    let mut bytes = vec![b'x'; 20_000];
    bytes.push(b'\n');
    std::fs::write(&blob, bytes).unwrap();
    let script = format!("cat {} >&3; exec sleep 100", blob.display());
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sh", "-c", script], "ready": {"fd": 3, "timeout": "20s"}})));
    c.events_until(|m| m.is("ready", gen));
}

#[test]
fn a_notification_fd_closed_without_a_newline_fails_readiness_and_the_process_runs_on() {
    let d = Daemon::start("ready-fd-closed", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sh", "-c", "exec 3>&-; echo closed; exec sleep 100"], "ready": {"fd": 3}})));
    let seen = c.events_until(|m| m.is("ready_failed", gen));
    let failed = seen.last().unwrap().json();
    assert_eq!(
        failed["reason"], "notification fd closed without a newline",
        "{failed}"
    );
    let r = c.ok(json!({"op": "get", "session": "a"}));
    assert_eq!(r["session"]["state"], "running");
    assert_eq!(r["session"]["generations"][0]["ready"], "ready_failed");
    // `wait --ready` says why, with a failure status.
    let out = gw(&d, &["wait", "--ready", "a"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("readiness failed: notification fd closed"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_line_of_output_containing_the_text_makes_it_ready_across_reads() {
    let d = Daemon::start("ready-output", &[]);
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // The text comes in two writes, with the first half already on the line before.
    let script = format!(
        "echo starting; printf 'web: list'; read x < {}; printf 'ening on 80\\n'; exec sleep 100",
        go.display()
    );
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sh", "-c", script], "ready": {"output": "listening on"}})));
    c.output_until(gen, "web: list");
    assert_eq!(ready_of(&mut c, "a").as_deref(), Some("starting"));
    release(&go);
    c.events_until(|m| m.is("ready", gen));
    let out = gw(&d, &["wait", "--ready", "a"]);
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn a_unix_socket_accepting_makes_it_ready() {
    let d = Daemon::start("ready-unix", &[]);
    let path = d.dir.join("app.sock");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(
        json!({"op": "spawn", "session": "a", "argv": ["sleep", "100"],
        "ready": {"unix": path.to_str().unwrap(), "interval": "20ms"}}),
    ));
    c.events_until(|m| m.is("spawned", gen));
    // Nothing listens yet: probes fail, readiness waits.
    assert_eq!(ready_of(&mut c, "a").as_deref(), Some("starting"));
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    c.events_until(|m| m.is("ready", gen));
}

#[test]
fn a_tcp_port_accepting_makes_it_ready_and_one_refusing_times_out() {
    let d = Daemon::start("ready-tcp", &[]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = listener.local_addr().unwrap().to_string();
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(
        json!({"op": "spawn", "session": "up", "argv": ["sleep", "100"],
        "ready": {"tcp": open, "interval": "20ms"}}),
    ));
    c.events_until(|m| m.is("ready", gen));
    // A port nobody listens on (bound, then closed): never ready.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = closed.local_addr().unwrap().to_string();
    drop(closed);
    let gen = gen_of(&c.ok(
        json!({"op": "spawn", "session": "down", "argv": ["sleep", "100"],
        "ready": {"tcp": refused, "interval": "20ms", "timeout": "300ms"}}),
    ));
    let seen = c.events_until(|m| m.is("ready_failed", gen));
    assert_eq!(
        seen.last().unwrap().json()["reason"],
        "timed out after 300ms"
    );
    // A name would need a blocking lookup: refused, naming the field.
    let e = c.err(
        json!({"op": "spawn", "session": "x", "argv": ["true"], "ready": {"tcp": "db.example:5432"}}),
        "bad_request",
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ready.tcp"),
        "{e}"
    );
}

#[test]
fn a_command_exiting_zero_makes_it_ready() {
    let d = Daemon::start("ready-command", &[]);
    let flag = d.dir.join("up");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(
        json!({"op": "spawn", "session": "a", "argv": ["sleep", "100"],
        "ready": {"command": ["test", "-e", flag.to_str().unwrap()], "interval": "20ms"}}),
    ));
    c.events_until(|m| m.is("spawned", gen));
    assert_eq!(ready_of(&mut c, "a").as_deref(), Some("starting"));
    std::fs::write(&flag, b"").unwrap();
    c.events_until(|m| m.is("ready", gen));
}

#[test]
fn bad_ready_and_depends_on_fields_are_refused_naming_them() {
    let d = Daemon::start("ready-bad", &[]);
    let mut c = d.client();
    for (ready, field) in [
        (json!({"fd": 1}), "ready.fd"),
        (json!({"fd": 3, "output": "x"}), "exactly one"),
        (json!({}), "exactly one"),
        (json!({"output": "x", "colour": 1}), "ready.colour"),
        (json!({"output": "x", "timeout": "soon"}), "ready.timeout"),
        (json!("fd"), "ready"),
    ] {
        let e = c.err(
            json!({"op": "spawn", "session": "a", "argv": ["true"], "ready": ready}),
            "bad_request",
        );
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains(field), "{ready}: {msg}");
    }
    let e = c.err(
        json!({"op": "spawn", "session": "a", "argv": ["true"], "depends_on": {"db": "up"}}),
        "bad_request",
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("depends_on.db"),
        "{e}"
    );
    let r = c.ok(json!({"op": "list"}));
    assert_eq!(r["sessions"], json!([]), "nothing was created");
}

#[test]
fn a_dependent_starts_only_after_its_dependency_printed_its_ready_line() {
    let d = Daemon::start("depends", &[]);
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let db_script = format!("read x < {}; echo db-up; exec sleep 100", go.display());
    let db = gen_of(&c.ok(json!({"op": "spawn", "session": "db",
        "argv": ["sh", "-c", db_script], "ready": {"output": "db-up"}})));
    let web = gen_of(&c.ok(json!({"op": "spawn", "session": "web",
        "argv": ["sh", "-c", "echo web-started; exec sleep 100"],
        "depends_on": {"db": "ready"}})));
    c.events_until(|m| m.is("spawned", db));
    // db is held at its fifo: web has not started, and says why.
    let r = c.ok(json!({"op": "get", "session": "web"}));
    assert_eq!(r["session"]["generations"][0]["lifecycle"], "pending");
    assert_eq!(r["session"]["waiting"], "waiting for db to be ready");
    let ls = gw(&d, &["ls"]);
    assert!(ls.stdout.contains("waiting for db to be ready"), "{ls:?}");
    release(&go);
    let seen = c.events_until(|m| m.is("spawned", web));
    let ready_at = seen.iter().position(|m| m.is("ready", db));
    let line_at = seen.iter().position(|m| match m {
        Msg::Output(h, data) => h["gen"] == json!(db) && data.windows(5).any(|w| w == b"db-up"),
        _ => false,
    });
    let (ready_at, line_at) = (ready_at.expect("db ready"), line_at.expect("db's line"));
    assert!(
        line_at < ready_at && ready_at < seen.len() - 1,
        "db's line, then its readiness, then web's spawn: {seen:?}"
    );
    // A spawn that would close a cycle is refused, naming it.
    let e = c.err(
        json!({"op": "spawn", "session": "db", "argv": ["true"], "depends_on": {"web": "started"}}),
        "bad_request",
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("db -> web -> db"),
        "{e}"
    );
}

#[test]
fn shutdown_stops_a_dependent_before_its_dependency() {
    let d = Daemon::start("depends-shutdown", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // db says when it is asked to stop; web ignores SIGTERM long enough to be seen first.
    let db = gen_of(&c.ok(json!({"op": "spawn", "session": "db",
        "argv": ["sh", "-c", "trap 'echo db-stopping; exit 0' TERM; echo db-up; while :; do sleep 0.05; done"],
        "ready": {"output": "db-up"}})));
    let web = gen_of(&c.ok(json!({"op": "spawn", "session": "web",
        "argv": ["sh", "-c", "trap 'echo web-stopping; exit 0' TERM; echo web-up; while :; do sleep 0.05; done"],
        "depends_on": {"db": "ready"}})));
    c.output_until(web, "web-up");
    c.ok(json!({"op": "shutdown"}));
    let seen = c.events_until(|m| m.is("exited", db));
    let web_end = seen.iter().position(|m| m.is("exited", web));
    assert!(
        web_end.is_some(),
        "web ended before db was stopped: {seen:?}"
    );
    let db_stopping = seen.iter().position(|m| match m {
        Msg::Output(h, data) => {
            h["gen"] == json!(db) && data.windows(11).any(|w| w == b"db-stopping")
        }
        _ => false,
    });
    assert!(
        db_stopping > web_end,
        "db was asked to stop only once web had ended: {seen:?}"
    );
}

#[test]
fn a_failing_liveness_probe_stops_the_generation_and_its_restart_policy_brings_it_back() {
    let d = Daemon::start("liveness", &[]);
    let healthy = d.dir.join("healthy");
    std::fs::write(&healthy, b"").unwrap();
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "a", "argv": ["sleep", "100"],
        "restart": {"mode": "on-failure", "initial": "10ms"},
        "live": {"command": ["test", "-e", healthy.to_str().unwrap()], "interval": "20ms", "failures": 2}})));
    c.events_until(|m| m.is("spawned", gen));
    // Healthy while the file exists; once it is gone, two failures in a row stop it.
    std::fs::remove_file(&healthy).unwrap();
    let seen = c.events_until(|m| m.is("exited", gen));
    let unhealthy = seen
        .iter()
        .find(|m| m.is("unhealthy", gen))
        .expect("unhealthy before the exit");
    assert_eq!(unhealthy.json()["failures"], 2);
    assert_eq!(seen.last().unwrap().json()["cause"], "stopped");
    // Its end was a failure: the policy starts a new generation.
    c.events_until(|m| m.json()["event"] == "spawned" && m.json()["session"] == "a");
}

#[test]
fn a_readiness_probe_and_a_dependent_go_on_across_an_upgrade() {
    let d = Daemon::start("ready-upgrade", &[]);
    let path = d.dir.join("db.sock");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let db = gen_of(&c.ok(
        json!({"op": "spawn", "session": "db", "argv": ["sleep", "100"],
        "ready": {"unix": path.to_str().unwrap(), "interval": "20ms"}}),
    ));
    let web = gen_of(&c.ok(
        json!({"op": "spawn", "session": "web", "argv": ["sleep", "100"],
        "depends_on": {"db": "ready"}}),
    ));
    c.events_until(|m| m.is("spawned", db));
    let mut u = d.client();
    let answer = u.request(json!({"op": "upgrade"}));
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(ready_of(&mut u, "db").as_deref(), Some("starting"));
    let r = u.ok(json!({"op": "get", "session": "web"}));
    assert_eq!(r["session"]["waiting"], "waiting for db to be ready");
    // The probe goes on in the new program: db becomes ready, then web starts.
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let seen = c.events_until(|m| m.is("spawned", web));
    assert!(seen.iter().any(|m| m.is("ready", db)), "{seen:?}");
}

#[test]
fn readiness_works_in_a_pseudo_terminal_too() {
    let d = Daemon::start("ready-pty", &[]);
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // A line of terminal output (CR LF endings) ...
    let script = format!("read x < {}; echo server up; exec sleep 100", go.display());
    let out = gen_of(&c.ok(json!({"op": "spawn", "session": "out", "pty": true,
        "argv": ["sh", "-c", script], "ready": {"output": "server up"}})));
    // ... and a notification descriptor beside the terminal.
    let fd = gen_of(&c.ok(json!({"op": "spawn", "session": "fd", "pty": true,
        "argv": ["sh", "-c", "echo >&4; exec sleep 100"], "ready": {"fd": 4}})));
    let mut seen = c.events_until(|m| m.is("ready", fd));
    c.seen_or_until(&mut seen, |m| m.is("spawned", out));
    assert_eq!(ready_of(&mut c, "out").as_deref(), Some("starting"));
    release(&go);
    c.events_until(|m| m.is("ready", out));
}

/// A probe command is killed with what it started: one still running after its interval
/// (a shell waiting on its `sleep`), and one that ended leaving a process behind. Nothing
/// of either outlives it.
#[test]
fn a_probe_command_takes_what_it_started_with_it() {
    let d = Daemon::start("ready-probe-tree", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let hung = gen_of(&c.ok(
        json!({"op": "spawn", "session": "hung", "argv": ["sleep", "100"],
        "ready": {"command": ["sh", "-c", "sleep 97531; true"], "interval": "50ms",
                  "timeout": "300ms"}}),
    ));
    let left = gen_of(&c.ok(
        json!({"op": "spawn", "session": "left", "argv": ["sleep", "100"],
        "ready": {"command": ["sh", "-c", "sleep 97532 & exit 0"], "interval": "50ms"}}),
    ));
    let seen = c.events_until(|m| m.is("ready_failed", hung));
    if !seen.iter().any(|m| m.is("ready", left)) {
        c.events_until(|m| m.is("ready", left));
    }
    let deadline = std::time::Instant::now() + util::daemon::PATIENCE;
    for argv in [["sleep", "97531"], ["sleep", "97532"]] {
        assert!(
            exit_of_all(&argv, deadline),
            "{argv:?}, started by a probe, outlived it"
        );
    }
    c.ok(json!({"op": "shutdown"}));
}

/// A program that notifies first thing may be read before its start's status is: its
/// readiness counts all the same (it was lost, and the generation waited out its
/// timeout). A race, so tried many times over.
#[test]
fn a_program_that_notifies_at_once_is_ready() {
    let d = Daemon::start("ready-fd-at-once", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gens: Vec<u64> = (0..40)
        .map(|i| {
            gen_of(&c.ok(json!({"op": "spawn", "session": format!("n{i}"),
                "argv": ["sh", "-c", "echo >&3; exec sleep 100"], "ready": {"fd": 3}})))
        })
        .collect();
    let mut ready = std::collections::BTreeSet::new();
    c.events_until(|m| {
        if let Some(gen) = gens.iter().find(|g| m.is("ready", **g)) {
            ready.insert(*gen);
        }
        assert!(
            !gens.iter().any(|g| m.is("ready_failed", *g)),
            "{:?}",
            m.json()
        );
        ready.len() == gens.len()
    });
    c.ok(json!({"op": "shutdown"}));
}

/// A notification the daemon no longer waits for — a second one, after the one that made
/// the generation ready, or one after the readiness timed out — writes into a pipe still
/// open: the program runs on (closed, the write would have killed it with `SIGPIPE`). A
/// readiness that timed out is reported, not acted on.
#[test]
fn a_notification_nobody_waits_for_does_not_kill_the_program() {
    // (what the program notifies before the gate, the check's timeout, what is awaited)
    for (first, timeout, awaited) in [
        ("echo >&3; ", "60s", "ready"),
        ("", "100ms", "ready_failed"),
    ] {
        let d = Daemon::start(&format!("ready-fd-{awaited}"), &[]);
        let gate = fifo(&d, "gate");
        let mut c = d.client();
        c.ok(json!({"op": "subscribe", "all": true}));
        let script = format!(
            "{first}read x < {}; echo >&3; echo still-here; exec sleep 100",
            gate.display()
        );
        let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "s",
            "argv": ["sh", "-c", script], "ready": {"fd": 3, "timeout": timeout}})));
        c.events_until(|m| m.is(awaited, gen));
        release(&gate);
        let seen = c.events_until(|m| {
            m.is("exited", gen)
                || util::daemon::output_of(std::slice::from_ref(m), gen).ends_with(b"still-here\n")
        });
        assert!(
            !seen.iter().any(|m| m.is("exited", gen)),
            "after {awaited}, the notification ended it: {seen:?}"
        );
        c.ok(json!({"op": "stop", "session": "s"}));
    }
}

/// A generation that ends before it is ready: subscribers see `ready_failed` ("exited
/// before it was ready"), but a readiness `wait` is answered with its terminal event,
/// which says how it ended — one waiting before the end, and one sent after it while a
/// child of the leader (ignoring TERM, with an hour's `kill_grace` and `drain`) still holds
/// its output, answered only once the exit is reported.
#[test]
fn a_readiness_wait_for_one_that_ends_first_is_answered_with_its_end() {
    let d = Daemon::start("ready-ended-first", &[]);
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = format!(
        // TERM ignored before the fork: the leader's end sends its group TERM at once,
        // which a child that set its own trap only after the fork could meet first.
        "read x < {}; trap '' TERM; sleep 1000 & exit 4",
        go.display()
    );
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "a",
        "argv": ["sh", "-c", script], "ready": {"output": "READY"},
        "kill_grace": "1h", "drain": "1h"})));
    c.events_until(|m| m.is("spawned", gen));
    // Waiting before the end: a request behind it answered means it is registered.
    let mut before = d.client();
    before.send_raw(b"{\"id\":\"w\",\"op\":\"wait\",\"session\":\"a\",\"for\":\"ready\"}\n");
    before.ok(json!({"op": "hello"}));
    release(&go);
    let seen = c.events_until(|m| m.is("ready_failed", gen));
    let failed = seen.last().unwrap().json();
    assert_eq!(failed["reason"], "exited before it was ready", "{failed}");
    // Waiting after the end, while the exit is not reported yet: not answered at once.
    let mut after = d.client();
    after.send_raw(
        b"{\"id\":\"w\",\"op\":\"wait\",\"session\":\"a\",\"for\":\"ready\"}\n\
          {\"id\":\"h\",\"op\":\"hello\"}\n",
    );
    let first = wait_answer(&mut after);
    assert_eq!(first["id"], "h", "the wait was answered at once: {first}");
    // The leftover child killed, the exit is reported: both waits get it.
    c.ok(json!({"op": "stop", "session": "a", "grace": 0}));
    c.events_until(|m| m.is("exited", gen));
    for w in [&mut before, &mut after] {
        let answer = wait_answer(w);
        assert_eq!(answer["id"], "w", "{answer}");
        assert_eq!(answer["end"]["event"], "exited", "{answer}");
        assert_eq!(answer["end"]["code"], 4, "{answer}");
    }
    // The command line says it ended, with a failure status.
    let out = gw(&d, &["wait", "--ready", "--json", "a"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.contains("\"exited\""), "{out:?}");
}
