//! A `subscribe` written right behind a `spawn` on the same connection follows the new
//! generation from its `spawned` event on even when the daemon read the `spawn` alone
//! and the start completed before the `subscribe` reached it (two writes, two reads):
//! the subscription starts where the log was when the spawn had been served. A behind
//! subscriber whose session is then removed still gets that start before the output
//! (or a `dropped`), never the output alone.
//!
//! The order is made certain here: the `subscribe` is written only once another
//! connection has seen the generation's `spawned` and `state` `running`.

mod util;

use serde_json::{json, Value};
use util::daemon::{Client, Daemon, Msg};

/// Far more output than the subscriber's queue and socket hold.
const FLOOD: u64 = 16_000_000;

/// Spawns, on `sub`, a session that waits for a line on its input and then floods, and
/// returns once another connection has seen it running: its generation and pid.
fn spawn_seen_running(d: &Daemon, sub: &mut Client, session: &str) -> (u64, u64) {
    let mut watch = d.client();
    watch.ok(json!({"op": "subscribe", "all": true}));
    let script = format!("read go; exec head -c {FLOOD} /dev/zero");
    let r = sub.ok(json!({"op": "spawn", "session": session, "argv": ["sh", "-c", script]}));
    let gen = r["gen"].as_u64().unwrap();
    let seen = watch.events_until(|m| m.is("state", gen) && m.json()["state"] == "running");
    let pid = seen
        .iter()
        .find(|m| m.is("spawned", gen))
        .map(|m| m.json()["pid"].as_u64().unwrap())
        .expect("spawned before running");
    (gen, pid)
}

/// Sends `req` without reading anything.
fn send(c: &mut Client, req: Value) {
    let mut line = serde_json::to_vec(&req).unwrap();
    line.push(b'\n');
    c.send_raw(&line);
}

/// Everything `sub` receives up to its session's `state` `removed`, the answers left out.
fn until_removed(sub: &mut Client) -> Vec<Msg> {
    let mut seen =
        sub.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    seen.retain(|m| m.json().get("event").is_some());
    seen
}

/// `gen`'s `spawned` and `state` `running` come before any of its output, and its output
/// positions are contiguous but for what a `dropped` names.
fn assert_start_first(seen: &[Msg], gen: u64) {
    let names: Vec<String> = seen
        .iter()
        .map(|m| {
            let v = m.json();
            format!(
                "{}{}",
                v["event"].as_str().unwrap_or("?"),
                v["state"]
                    .as_str()
                    .map(|s| format!(":{s}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    let first_output = seen
        .iter()
        .position(|m| matches!(m, Msg::Output(v, _) if v["gen"] == json!(gen)));
    let spawned = seen.iter().position(|m| m.is("spawned", gen));
    let running = seen
        .iter()
        .position(|m| m.is("state", gen) && m.json()["state"] == "running");
    let (Some(spawned), Some(running)) = (spawned, running) else {
        panic!("gen {gen}'s start never sent: {names:?}");
    };
    assert!(spawned < running, "{names:?}");
    if let Some(out) = first_output {
        assert!(running < out, "output before the start: {names:?}");
    }
    let mut pos = 0;
    for m in seen {
        match m {
            Msg::Output(v, data) => {
                assert_eq!(v["pos"].as_u64(), Some(pos), "silent gap: {names:?}");
                pos += data.len() as u64;
            }
            Msg::Json(v) if v["event"] == "dropped" => {
                assert_eq!(v["from"].as_u64(), Some(pos), "{v}");
                pos = v["to"].as_u64().unwrap();
            }
            Msg::Json(_) => {}
        }
    }
    assert!(seen.last().is_some_and(|m| m.json()["state"] == "removed"));
}

#[test]
fn an_ordinary_subscriber_behind_its_spawn_gets_the_start_before_the_output_when_removed() {
    let d = Daemon::start("behind-spawn-ordinary", &[]);
    let mut sub = d.client();
    let (gen, _) = spawn_seen_running(&d, &mut sub, "flood");
    // Right behind the spawn on its connection, but read after the generation started.
    send(
        &mut sub,
        json!({"id": "sub", "op": "subscribe", "session": "flood"}),
    );
    let mut ctl = d.client();
    ctl.ok(json!({"op": "write", "session": "flood", "data": "go\n"}));
    let end = ctl.ok(json!({"op": "wait", "session": "flood", "gen": gen}));
    assert_eq!(end["end"]["code"], 0, "{end}");
    ctl.ok(json!({"op": "remove", "session": "flood"}));
    // Only now does the subscriber read.
    let seen = until_removed(&mut sub);
    assert_start_first(&seen, gen);
    assert!(
        seen.iter().any(|m| m.json()["event"] == "dropped"),
        "it was behind: told what it missed"
    );
}

#[test]
fn a_lossless_subscriber_behind_its_spawn_gets_the_start_before_the_output_when_removed() {
    if util::sys::write_syscall().is_none() {
        return;
    }
    let d = Daemon::start("behind-spawn-lossless", &[]);
    let mut sub = d.client();
    let (gen, pid) = spawn_seen_running(&d, &mut sub, "flood");
    send(
        &mut sub,
        json!({"id": "sub", "op": "subscribe", "session": "flood", "lossless": true, "demote_after": "1h"}),
    );
    let mut ctl = d.client();
    ctl.ok(json!({"op": "write", "session": "flood", "data": "go\n"}));
    // The child waits for the subscriber, which reads nothing.
    util::sys::await_blocked_in_write(pid);
    ctl.ok(json!({"op": "remove", "session": "flood"}));
    let seen = until_removed(&mut sub);
    assert_start_first(&seen, gen);
    assert!(
        seen.iter()
            .any(|m| m.json()["event"] == "demoted" && m.json()["reason"] == "removing"),
        "told it is lossless no more"
    );
}

#[test]
fn a_subscribe_not_right_behind_the_spawn_starts_now() {
    let d = Daemon::start("behind-spawn-not-next", &[]);
    let mut sub = d.client();
    let (gen, _) = spawn_seen_running(&d, &mut sub, "later");
    // Another request between: the subscription starts at the end of the log, after the
    // start that was already sent.
    sub.ok(json!({"op": "hello"}));
    sub.ok(json!({"op": "subscribe", "session": "later"}));
    let mut ctl = d.client();
    ctl.ok(json!({"op": "write", "session": "later", "data": "go\n"}));
    let seen = sub.events_until(|m| m.is("exited", gen));
    assert!(
        !seen.iter().any(|m| m.is("spawned", gen)),
        "replayed the start: {:?}",
        seen.iter()
            .map(|m| m.json()["event"].clone())
            .collect::<Vec<_>>()
    );
}
