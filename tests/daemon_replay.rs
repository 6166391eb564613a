//! Late subscribers replay from the session's buffer: the last N bytes, a position seen
//! earlier, a generation, or everything retained; `unsubscribe` stops the flow; a reader
//! behind when its session is removed still learns how it ended.

mod util;

use serde_json::json;
use util::daemon::{output_of, Daemon, Msg};

#[test]
fn late_subscribers_replay_what_they_ask_for() {
    let d = Daemon::start("replay", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let g1 = c.ok(json!({"op": "spawn", "session": "r", "argv": ["printf", "one\\ntwo\\n"]}))
        ["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", g1));
    let g2 = c.ok(json!({"op": "spawn", "session": "r", "argv": ["printf", "three\\n"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.events_until(|m| m.is("exited", g2));
    let pos_of_three = seen
        .iter()
        .find_map(|m| match m {
            Msg::Output(h, _) if h["gen"] == g2 => h["pos"].as_u64(),
            _ => None,
        })
        .expect("gen 2 output has a position");
    assert_eq!(pos_of_three, 8, "positions count every generation's bytes");

    // Everything retained, in order, events included.
    let mut all = d.client();
    all.ok(json!({"op": "subscribe", "session": "r", "from_start": true}));
    let got = all.events_until(|m| m.is("exited", g2));
    assert_eq!(output_of(&got, g1), b"one\ntwo\n");
    assert_eq!(output_of(&got, g2), b"three\n");
    let order: Vec<String> = got
        .iter()
        .filter(|m| m.json()["gen"] == g1 || m.json()["gen"] == g2)
        .filter(|m| m.json()["event"] != "state")
        .map(|m| {
            format!(
                "{}:{}",
                m.json()["event"].as_str().unwrap(),
                m.json()["gen"]
            )
        })
        .collect();
    let exited1 = order
        .iter()
        .position(|e| *e == format!("exited:{g1}"))
        .unwrap();
    let spawned2 = order
        .iter()
        .position(|e| *e == format!("spawned:{g2}"))
        .unwrap();
    assert!(exited1 < spawned2, "{order:?}");

    // From a position seen earlier.
    let mut from = d.client();
    from.ok(json!({"op": "subscribe", "session": "r", "from_pos": pos_of_three}));
    let got = from.events_until(|m| m.is("exited", g2));
    assert_eq!(output_of(&got, g1), b"");
    assert_eq!(output_of(&got, g2), b"three\n");

    // From a generation.
    let mut by_gen = d.client();
    by_gen.ok(json!({"op": "subscribe", "session": "r", "from_gen": g2}));
    let got = by_gen.events_until(|m| m.is("exited", g2));
    assert!(!got.iter().any(|m| m.json()["gen"] == g1), "{got:?}");

    // The last N bytes (whole records).
    let mut tail = d.client();
    tail.ok(json!({"op": "subscribe", "session": "r", "tail": 3}));
    let got = tail.events_until(|m| m.is("exited", g2));
    assert_eq!(output_of(&got, g2), b"three\n");
    assert_eq!(output_of(&got, g1), b"");

    // Unsubscribed: the next generation's events do not arrive; a request still answers.
    tail.ok(json!({"op": "unsubscribe", "session": "r"}));
    let g3 = c.ok(json!({"op": "spawn", "session": "r", "argv": ["true"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", g3));
    tail.ok(json!({"op": "hello"}));
    assert!(
        !tail.backlog.iter().any(|m| m.json()["gen"] == g3),
        "{:?}",
        tail.backlog
    );
}

/// `unsubscribe` from what the connection does not follow is refused and changes nothing;
/// so is one session while it follows all of them (it would meet that session again).
#[test]
fn unsubscribe_from_what_is_not_followed_is_refused() {
    let d = Daemon::start("unsubscribe", &[]);
    let mut c = d.client();
    let r = c.err(json!({"op": "unsubscribe", "all": true}), "bad_request");
    assert!(r.to_string().contains("follows no session"), "{r}");
    let mut other = d.client();
    for name in ["a", "b"] {
        other.ok(json!({"op": "spawn", "session": name, "argv": ["true"]}));
    }
    c.ok(json!({"op": "subscribe", "session": "a"}));
    let r = c.err(json!({"op": "unsubscribe", "session": "b"}), "bad_request");
    assert!(r.to_string().contains("does not follow session"), "{r}");
    // Still following `a`.
    let gen = other.ok(json!({"op": "spawn", "session": "a", "argv": ["true"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
    c.ok(json!({"op": "unsubscribe", "session": "a"}));
    c.err(json!({"op": "unsubscribe", "session": "a"}), "bad_request");

    c.ok(json!({"op": "subscribe", "all": true}));
    let r = c.err(json!({"op": "unsubscribe", "session": "a"}), "bad_request");
    assert!(r.to_string().contains("follows all sessions"), "{r}");
    let gen = other.ok(json!({"op": "spawn", "session": "a", "argv": ["true"]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| m.is("exited", gen));
    c.ok(json!({"op": "unsubscribe", "all": true}));
}

#[test]
fn wait_without_a_generation_waits_for_the_current_one() {
    let d = Daemon::start("wait-current", &[]);
    let mut c = d.client();
    let gen = c.ok(json!({"op": "spawn", "session": "w", "argv": ["cat"]}))["gen"]
        .as_u64()
        .unwrap();
    let mut waiter = d.client();
    waiter.send_raw(b"{\"id\":77,\"op\":\"wait\",\"session\":\"w\"}\n");
    c.ok(json!({"op": "close_input", "session": "w", "if_gen": gen}));
    let r = loop {
        if let Msg::Json(v) = waiter.read_msg() {
            if v["id"] == 77 {
                break v;
            }
        }
    };
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["end"]["gen"], gen);
    assert_eq!(r["end"]["code"], 0);
    // Afterwards, waiting for that generation answers at once from memory.
    let again = c.ok(json!({"op": "wait", "session": "w", "gen": gen}));
    assert_eq!(again["end"]["gen"], gen);
    // Nothing running: waiting for "the current one" answers with the last end.
    let last = c.ok(json!({"op": "wait", "session": "w"}));
    assert_eq!(last["end"]["gen"], gen);
    // A generation that never existed is an error, not a hang.
    c.err(
        json!({"op": "wait", "session": "w", "gen": 999}),
        "not_running",
    );
}

#[test]
fn a_wait_answer_never_overtakes_the_output_it_follows() {
    let d = Daemon::start("wait-order", &[]);
    let mut c = d.client();
    // Subscribed before the spawn, so every byte is either delivered or reported dropped.
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "big", "buffer": 1 << 20,
        "argv": ["sh", "-c", "head -c 13000000 /dev/zero; echo LAST"]}))["gen"]
        .as_u64()
        .unwrap();
    c.send_raw(b"{\"id\":\"w\",\"op\":\"wait\",\"session\":\"big\"}\n");
    let mut seen_exit = false;
    let mut covered = 0u64; // output bytes received or reported dropped
    loop {
        match c.read_msg() {
            Msg::Output(h, data) if h["gen"] == gen => covered += data.len() as u64,
            Msg::Json(v) if v["event"] == "dropped" => {
                covered += v["to"].as_u64().unwrap() - v["from"].as_u64().unwrap()
            }
            Msg::Json(v) if v["event"] == "exited" => seen_exit = true,
            Msg::Json(v) if v["id"] == "w" => {
                assert_eq!(v["end"]["gen"], gen, "{v}");
                break;
            }
            _ => {}
        }
    }
    assert!(seen_exit, "the exit record came before the wait answer");
    assert_eq!(
        covered, 13_000_005,
        "all output came before the wait answer"
    );
}

/// Removing a session while a reader is behind: what it was not sent of the output goes
/// with the log (one `dropped`), but it still learns how the generation ended and that
/// the session was removed, which were queued behind that output.
#[test]
fn a_reader_behind_when_its_session_is_removed_still_gets_the_end_and_the_removal() {
    let d = Daemon::start("removed-behind", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut stuck = d.client();
    let total: u64 = 12 << 20;
    // More output than the reader's queue takes, all of it kept by the log.
    let script = format!("head -c {total} /dev/zero; echo; echo done; exec sleep 1000");
    let r = c.ok(json!({"op": "spawn", "session": "gone", "buffer": 32 << 20,
                        "argv": ["sh", "-c", script]}));
    let gen = r["gen"].as_u64().unwrap();
    stuck.ok(json!({"op": "subscribe", "session": "gone", "from_start": true}));
    c.output_until(gen, "done");
    c.ok(json!({"op": "remove", "session": "gone"}));
    c.events_until(|m| m.json()["event"] == "state" && m.json()["state"] == "removed");
    let mut got = 0u64;
    let mut dropped = None;
    let mut exited = None;
    loop {
        match stuck.next_event() {
            Msg::Output(h, data) => {
                assert!(dropped.is_none(), "output after the dropped: {h}");
                assert_eq!(h["pos"].as_u64(), Some(got), "contiguous");
                got += data.len() as u64;
            }
            Msg::Json(v) if v["event"] == "dropped" => {
                assert_eq!(v["from"].as_u64(), Some(got), "{v}");
                assert_eq!(v["to"].as_u64(), Some(total + 6), "{v}");
                dropped = Some(v);
            }
            Msg::Json(v) if v["event"] == "exited" => {
                assert_eq!(v["gen"], json!(gen));
                exited = Some(v);
            }
            Msg::Json(v) if v["event"] == "state" && v["state"] == "removed" => break,
            _ => {}
        }
    }
    assert!(dropped.is_some(), "the output it missed is named");
    let exited = exited.expect("the generation's end");
    assert_eq!(exited["cause"], "stopped", "{exited}");
}

/// A request sent after a `subscribe` is answered after everything that subscribe
/// replays, however far beyond the connection's queue (4 MiB) that is: a client marks the
/// end of a replay with a request (`genward logs` does), and a larger `buffer` must not
/// cut the listing short.
#[test]
fn an_answer_after_a_subscribe_comes_after_its_whole_replay() {
    let d = Daemon::start("replay-fence", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let len: usize = 12 << 20;
    let spawn = json!({"op": "spawn", "session": "big", "buffer": 16 << 20,
                       "argv": ["head", "-c", len.to_string(), "/dev/zero"]});
    let gen = c.ok(spawn)["gen"].as_u64().unwrap();
    c.events_until(|m| m.is("exited", gen));
    let mut r = d.client();
    r.send_raw(
        b"{\"id\":\"s\",\"op\":\"subscribe\",\"session\":\"big\",\"from_start\":true}\n\
          {\"id\":\"after\",\"op\":\"hello\"}\n",
    );
    let (mut replayed, mut ended) = (0, false);
    loop {
        match r.read_msg() {
            Msg::Output(_, data) => replayed += data.len(),
            Msg::Json(v) if v["id"] == "after" => break,
            Msg::Json(v) => ended |= v["event"] == "exited",
        }
    }
    assert_eq!(
        replayed, len,
        "the answer came before the end of the replay"
    );
    assert!(ended, "the replay's exit record came before the answer");
}

/// `buffer: 0` replays nothing: a new subscription, wherever it asks to start, is given
/// none of the session's output (one asking for a position before the end is told it is
/// gone), while followers get the output live.
#[test]
fn a_session_with_buffer_0_replays_nothing_to_a_new_subscription() {
    let mut d = Daemon::start("replay-none", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "q", "buffer": 0,
                          "argv": ["sh", "-c", "echo hello; read go; echo bye; read end"]}))["gen"]
        .as_u64()
        .unwrap();
    // Live output reaches a follower.
    c.output_until(gen, "hello");
    let starts = [
        json!({"from_start": true}),
        json!({"tail": 1000}),
        json!({"from_gen": gen}),
        json!({"from_pos": 0}),
    ];
    let mut late = Vec::new();
    for start in starts {
        let mut s = d.client();
        let mut req = json!({"op": "subscribe", "session": "q"});
        req.as_object_mut()
            .unwrap()
            .extend(start.as_object().unwrap().clone());
        s.ok(req.clone());
        // Answered after whatever the subscription replays.
        s.ok(json!({"op": "hello"}));
        let replayed: Vec<&Msg> = s
            .backlog
            .iter()
            .filter(|m| matches!(m, Msg::Output(..)))
            .collect();
        assert!(replayed.is_empty(), "{req} replayed {replayed:?}");
        let dropped: Vec<_> = s
            .backlog
            .iter()
            .filter(|m| m.json()["event"] == "dropped")
            .map(|m| (m.json()["from"].clone(), m.json()["to"].clone()))
            .collect();
        let gone = if req.get("from_pos").is_some() {
            vec![(json!(0), json!(6))]
        } else {
            vec![]
        };
        assert_eq!(dropped, gone, "{req}: {:?}", s.backlog);
        late.push(s);
    }
    // From now on, each gets the output live.
    c.ok(json!({"op": "write", "session": "q", "data": "\n"}));
    for s in &mut late {
        let seen = s.output_until(gen, "bye");
        assert_eq!(output_of(&seen, gen), b"bye\n");
    }
    drop((c, late));
    // Nor after a crash of the daemon (its keeper hands the session over), which still
    // goes on from the session's positions.
    d.crash_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "q", "from_start": true}));
    c.ok(json!({"op": "hello"}));
    assert!(
        !c.backlog.iter().any(|m| matches!(m, Msg::Output(..))),
        "{:?}",
        c.backlog
    );
    let mut from = d.client();
    from.ok(json!({"op": "subscribe", "session": "q", "from_pos": 0}));
    from.ok(json!({"op": "hello"}));
    let dropped: Vec<_> = from
        .backlog
        .iter()
        .filter(|m| matches!(m, Msg::Output(..)) || m.json()["event"] == "dropped")
        .map(|m| (m.json()["from"].clone(), m.json()["to"].clone()))
        .collect();
    assert_eq!(dropped, [(json!(0), json!(10))], "{:?}", from.backlog);
    c.ok(json!({"op": "write", "session": "q", "data": "\n"}));
    c.events_until(|m| m.is("exited", gen));
}

/// A `buffer` of 0 holds from the session's first record, not only from its first spawn:
/// a generation waiting for its dependencies has no process yet, and its `state` events
/// are not replayed either.
#[test]
fn a_waiting_session_with_buffer_0_replays_nothing_either() {
    let d = Daemon::start("replay-none-waiting", &[]);
    let mut c = d.client();
    c.ok(
        json!({"op": "spawn", "session": "w", "buffer": 0, "argv": ["true"],
                "depends_on": {"never": "started"}}),
    );
    let mut s = d.client();
    s.ok(json!({"op": "subscribe", "session": "w", "from_start": true}));
    // Answered after whatever the subscription replays.
    s.ok(json!({"op": "hello"}));
    let replayed: Vec<&Msg> = s
        .backlog
        .iter()
        .filter(|m| m.json().get("event").is_some())
        .collect();
    assert!(replayed.is_empty(), "replayed {replayed:?}");
}
