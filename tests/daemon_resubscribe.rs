//! Subscribing again to what a connection already follows changes the subscription's
//! terms (lossless or not, `demote_after`) and keeps its position; a start option there
//! is refused, naming it, and changes nothing.

mod util;

use std::time::{Duration, Instant};

use serde_json::json;
use util::daemon::{Client, Daemon, Msg, PATIENCE};

/// The pid of `session`'s generation, once it was started.
fn pid_of(c: &mut Client, session: &str) -> u64 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = c.ok(json!({"op": "get", "session": session}));
        if let Some(pid) = got["session"]["generations"][0]["pid"].as_u64() {
            return pid;
        }
        assert!(Instant::now() < deadline, "never started: {got}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A session that waits for a line on its input, then writes `n` bytes and ends.
fn spawn_flood(c: &mut Client, session: &str, n: u64) -> u64 {
    let script = format!("read go; exec head -c {n} /dev/zero");
    let r = c.ok(json!({"op": "spawn", "session": session, "argv": ["sh", "-c", script]}));
    r["gen"].as_u64().unwrap()
}

#[test]
fn subscribing_again_without_lossless_lets_held_output_flow() {
    if util::sys::write_syscall().is_none() {
        return;
    }
    let d = Daemon::start("resub-ordinary", &[]);
    let mut c = d.client();
    // Far more than every queue on the way holds.
    let gen = spawn_flood(&mut c, "dg2", 40_000_000);
    let pid = pid_of(&mut c, "dg2");
    let mut sub = d.client();
    // A bound far beyond the test's patience: only the change of terms can let it run on.
    sub.ok(json!({"op": "subscribe", "session": "dg2", "lossless": true, "demote_after": "1h"}));
    c.ok(json!({"op": "write", "session": "dg2", "data": "go\n"}));
    util::sys::await_blocked_in_write(pid);
    // Answered even though its queue is full of output; from now on it is an ordinary
    // subscriber, which the child no longer waits for.
    sub.ok(json!({"op": "subscribe", "session": "dg2", "lossless": false}));
    let end = c.ok(json!({"op": "wait", "session": "dg2", "gen": gen}));
    assert_eq!(end["end"]["code"], 0, "{end}");
    // It missed what went by meanwhile: told so, as an ordinary subscriber is.
    let seen = sub.events_until(|m| m.is("exited", gen));
    assert!(seen.iter().any(|m| m.json()["event"] == "dropped"));
    assert!(!seen.iter().any(|m| m.json()["event"] == "demoted"));
}

#[test]
fn subscribing_again_with_lossless_holds_the_output_for_it() {
    if util::sys::write_syscall().is_none() {
        return;
    }
    let d = Daemon::start("resub-lossless", &[]);
    let mut c = d.client();
    let gen = spawn_flood(&mut c, "up", 40_000_000);
    let pid = pid_of(&mut c, "up");
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "up"}));
    sub.ok(json!({"op": "subscribe", "session": "up", "lossless": true, "demote_after": "1h"}));
    c.ok(json!({"op": "write", "session": "up", "data": "go\n"}));
    // The child waits for the reader, which then gets everything, in order.
    util::sys::await_blocked_in_write(pid);
    let mut pos = 0;
    loop {
        match sub.next_event() {
            Msg::Output(h, data) => {
                assert_eq!(h["pos"].as_u64(), Some(pos), "contiguous");
                pos += data.len() as u64;
            }
            Msg::Json(v) if v["event"] == "dropped" => panic!("lossless, yet sent {v}"),
            Msg::Json(v) if v["event"] == "exited" && v["gen"] == gen => break,
            _ => {}
        }
    }
    assert_eq!(pos, 40_000_000);
}

#[test]
fn a_start_option_on_an_existing_subscription_keeps_its_position() {
    let d = Daemon::start("resub-start", &[]);
    let mut c = d.client();
    let r = c.ok(
        json!({"op": "spawn", "session": "s", "argv": ["sh", "-c", "echo one; read go; echo two"]}),
    );
    let gen = r["gen"].as_u64().unwrap();
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "s", "from_start": true}));
    sub.output_until(gen, "one\n");
    // As a client subscribing again after a reconnection does: answered, and ignored.
    for (option, value) in [
        ("from_start", json!(true)),
        ("from_pos", json!(0)),
        ("from_gen", json!(gen)),
        ("tail", json!(100)),
    ] {
        let mut req = json!({"op": "subscribe", "session": "s"});
        req[option] = value;
        sub.ok(req);
    }
    // Still subscribed, from where it was: the rest comes once, nothing is replayed.
    c.ok(json!({"op": "write", "session": "s", "data": "go\n"}));
    let seen = sub.events_until(|m| m.is("exited", gen));
    let out = util::daemon::output_of(&seen, gen);
    assert_eq!(out, b"two\n");
    // After an unsubscribe, the same request starts afresh.
    sub.ok(json!({"op": "unsubscribe", "session": "s"}));
    sub.ok(json!({"op": "subscribe", "session": "s", "from_start": true}));
    let seen = sub.events_until(|m| m.is("exited", gen));
    assert_eq!(util::daemon::output_of(&seen, gen), b"one\ntwo\n");
}

#[test]
fn following_all_counts_as_following_each_session() {
    let d = Daemon::start("resub-all", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "spawn", "session": "a", "argv": ["sleep", "60"]}));
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "all": true}));
    // Start options are ignored there too; terms change, for all or for one.
    sub.ok(json!({"op": "subscribe", "all": true, "from_start": true}));
    sub.ok(json!({"op": "subscribe", "session": "a", "tail": 10}));
    sub.ok(json!({"op": "subscribe", "all": true, "lossless": true}));
    sub.ok(json!({"op": "subscribe", "session": "a"}));
}

#[test]
fn subscribing_again_while_behind_holds_up_no_later_request() {
    let d = Daemon::start("resub-behind", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "spawn", "session": "fl", "argv": ["yes", "a line of output"]}));
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "fl"}));
    // It reads nothing: once far more was read from the session than its socket, its
    // queue in the daemon (4 MiB) and the session's log (1 MiB) hold, it is behind.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = c.ok(json!({"op": "get", "session": "fl"}));
        let read = got["session"]["generations"][0]["offsets"]["stdout"].as_u64();
        if read.unwrap_or(0) > 16 << 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the session never wrote 16 MiB: {got}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Subscribing again replays nothing (it keeps its position), so what it asks next
    // is done at once, unread output or not: here it starts a marker session.
    sub.send_raw(b"{\"id\":\"again\",\"op\":\"subscribe\",\"session\":\"fl\"}\n");
    sub.send_raw(
        b"{\"id\":\"mark\",\"op\":\"spawn\",\"session\":\"marker\",\"argv\":[\"true\"]}\n",
    );
    // Seen from another connection (nothing announces a request's effect to it).
    let deadline = Instant::now() + PATIENCE;
    while c.request(json!({"op": "get", "session": "marker"}))["ok"] != true {
        assert!(
            Instant::now() < deadline,
            "a request after a re-subscribe was not handled while the subscriber is behind"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    c.ok(json!({"op": "remove", "session": "fl"}));
}
