//! One client's burst of costly requests is served over many turns of the loop: other
//! clients are answered in between, and a request whose cost grows with the table is
//! refused before that cost is paid where its answer could never be sent.

mod util;

use serde_json::{json, Value};
use util::daemon::Daemon;

/// A thousand spawns pipelined on one connection are not served in one go: a `list`
/// sent on another connection after them is answered while they are still being served,
/// so it sees only the first of the sessions they create.
#[test]
fn another_client_is_answered_in_the_middle_of_a_burst_of_spawns() {
    const N: usize = 1_000;
    let d = Daemon::start("fair-spawns", &[]);
    let mut a = d.client();
    let mut b = d.client();
    b.ok(json!({"op": "hello"}));
    let mut burst = Vec::new();
    for i in 0..N {
        let req = json!({"id": i, "op": "spawn", "session": format!("s{i}"), "argv": ["true"]});
        burst.extend_from_slice(req.to_string().as_bytes());
        burst.push(b'\n');
    }
    a.send_raw(&burst);
    let page = b.ok(json!({"op": "list", "limit": 1000}));
    let seen = page["sessions"].as_array().map_or(0, Vec::len);
    // A turn serves a few dozen of them; the whole burst before the list would show all
    // (or, with the burst still arriving when the list came, most of them).
    assert!(
        seen <= N / 2,
        "the list waited for the burst: {seen} sessions"
    );
    let mut answered = 0;
    while answered < N {
        if let util::daemon::Msg::Json(r) = a.read_msg() {
            if r.get("id").is_some() {
                assert_eq!(r["ok"], json!(true), "{r}");
                answered += 1;
            }
        }
    }
    let all: Vec<Value> = (0..N)
        .map(|i| json!({"op": "get", "session": format!("s{i}")}))
        .collect();
    for r in a.pipelined(&all) {
        assert_eq!(r["ok"], json!(true), "{r}");
    }
}

/// A burst of `remove`s is served a slice at a time too, though each costs the daemon
/// little: what each slice leaves to write on disk (a session file removed per request)
/// is bounded, so another client is answered while most of the burst is still to come.
/// And the slice's records are written before its answers go: a `remove` answered is a
/// session file gone, every time.
#[test]
fn another_client_is_answered_in_the_middle_of_a_burst_of_removes() {
    const N: usize = 3_000;
    let d = Daemon::start("fair-removes", &[]);
    let mut a = d.client();
    let mut b = d.client();
    // Sessions without a process: each waits for a session that never comes.
    let spawns: Vec<Value> = (0..N)
        .map(|i| {
            json!({"op": "spawn", "session": format!("r{i}"), "argv": ["true"],
                   "depends_on": {"never": "started"}})
        })
        .collect();
    for r in a.pipelined(&spawns) {
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    let files = d.dir.join("state").join("sessions");
    assert!(files.join(format!("r{}.json", N - 1)).exists());
    let mut burst = Vec::new();
    for i in 0..N {
        let req = json!({"id": i, "op": "remove", "session": format!("r{i}")});
        burst.extend_from_slice(req.to_string().as_bytes());
        burst.push(b'\n');
    }
    a.send_raw(&burst);
    let listed = b.ok(json!({"op": "list"}));
    let left = listed["sessions"].as_array().map_or(0, Vec::len);
    // A slice writes a few dozen records; one of a thousand requests (the work a plain
    // request is charged) would have removed a third of them before the list was read.
    assert!(
        left > N * 4 / 5,
        "the list waited for the burst: {left} sessions left"
    );
    let mut answered = 0;
    while answered < N {
        if let util::daemon::Msg::Json(r) = a.read_msg() {
            if let Some(i) = r["id"].as_u64() {
                assert_eq!(r["ok"], json!(true), "{r}");
                let file = files.join(format!("r{i}.json"));
                assert!(
                    !file.exists(),
                    "remove of r{i} answered, its file still there"
                );
                answered += 1;
            }
        }
    }
}

/// A `spawn` and the `subscribe` written right behind it are served in the same slice,
/// wherever the slice's bounds fall: a live subscription to the new session sees its
/// generation's `spawned` (clients wait for it), for every pair of a long burst.
#[test]
fn a_spawn_and_the_subscribe_behind_it_are_never_split() {
    const N: usize = 100;
    let d = Daemon::start("fair-pairs", &[]);
    let mut a = d.client();
    let mut burst = Vec::new();
    for i in 0..N {
        let spawn = json!({"id": format!("s{i}"), "op": "spawn", "session": format!("p{i}"),
                           "argv": ["sleep", "30"]});
        let subscribe =
            json!({"id": format!("u{i}"), "op": "subscribe", "session": format!("p{i}")});
        for req in [spawn, subscribe] {
            burst.extend_from_slice(req.to_string().as_bytes());
            burst.push(b'\n');
        }
    }
    a.send_raw(&burst);
    let mut gens = std::collections::HashMap::new();
    let mut spawned = std::collections::HashSet::new();
    while spawned.len() < N || gens.len() < N {
        let util::daemon::Msg::Json(m) = a.read_msg() else {
            continue;
        };
        if let Some(id) = m["id"].as_str() {
            assert_eq!(m["ok"], json!(true), "{m}");
            if let Some(i) = id.strip_prefix('s') {
                gens.insert(format!("p{i}"), m["gen"].as_u64().unwrap());
            }
        } else if m["event"] == "spawned" {
            spawned.insert((
                m["session"].as_str().unwrap().to_string(),
                m["gen"].as_u64().unwrap(),
            ));
        }
    }
    for (session, gen) in &gens {
        assert!(
            spawned.contains(&(session.clone(), *gen)),
            "{session} gen {gen}: no spawned"
        );
    }
}
