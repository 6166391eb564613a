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
