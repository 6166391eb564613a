//! A large table: `genward ls` (table and `--json`) lists 10,000 sessions, each exactly
//! once, page by page; the classic `list` answers 3,000 of them in one line and refuses
//! 10,000 (`limit`, naming the pages); and the paged `list` gives every session exactly
//! once while another client creates and removes sessions between pages. (The core's own
//! test pages through 100,000.)

mod util;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use serde_json::{json, Value};
use util::cli::gw;
use util::daemon::{Client, Daemon, Msg};

const SESSIONS: usize = 10_000;

/// Sessions the classic `list` still answers in one line (about 256 bytes each).
const CLASSIC: usize = 3_000;

/// Largest page answer: the daemon's page bound (256 KiB) plus one session.
const PAGE_LINE_BOUND: usize = 256 * 1024 + 4096;

fn name(i: usize) -> String {
    format!("s-{i:05}")
}

/// Sends `requests` as one pipelined burst and returns their answers in order.
fn pipelined(c: &mut Client, requests: &[Value]) -> Vec<Value> {
    let mut bytes = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let mut r = r.clone();
        r["id"] = json!(format!("burst-{i}"));
        serde_json::to_writer(&mut bytes, &r).unwrap();
        bytes.push(b'\n');
    }
    c.stream().try_clone().unwrap().write_all(&bytes).unwrap();
    let mut answers = vec![Value::Null; requests.len()];
    let mut left = requests.len();
    while left > 0 {
        let Msg::Json(v) = c.read_msg() else { continue };
        let Some(i) = v["id"]
            .as_str()
            .and_then(|id| id.strip_prefix("burst-"))
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        answers[i] = v;
        left -= 1;
    }
    answers
}

fn spawn_true(session: &str) -> Value {
    json!({"op": "spawn", "session": session, "argv": ["true"]})
}

/// Creates `names` (each running `true` once), 200 at a time.
fn create(c: &mut Client, names: &[String]) {
    for batch in names.chunks(200) {
        let requests: Vec<Value> = batch.iter().map(|n| spawn_true(n)).collect();
        for (n, a) in batch.iter().zip(pipelined(c, &requests)) {
            assert_eq!(a["ok"], json!(true), "spawn {n}: {a}");
        }
    }
}

/// Every session, read with the paged `list`, checking each page's bounds.
fn pages(c: &mut Client, limit: usize, between: &mut dyn FnMut()) -> Vec<String> {
    let mut names = Vec::new();
    let mut after = Value::Null;
    loop {
        let page = c.ok(json!({"op": "list", "after": after, "limit": limit}));
        let line = serde_json::to_vec(&page).unwrap();
        assert!(line.len() <= PAGE_LINE_BOUND, "{} bytes", line.len());
        let sessions = page["sessions"].as_array().unwrap();
        assert!(sessions.len() <= limit);
        names.extend(
            sessions
                .iter()
                .map(|s| s["name"].as_str().unwrap().to_string()),
        );
        between();
        match &page["next"] {
            Value::Null => return names,
            next => {
                assert_eq!(Some(next), sessions.last().map(|s| &s["name"]));
                after = next.clone();
            }
        }
    }
}

/// Asserts that the rows of each session in `table` form one block (a session's rows are
/// its generations, side by side) and returns the sessions in order.
fn table_sessions(table: &str) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for line in table.lines().skip(1) {
        let session = line.split_whitespace().next().unwrap().to_string();
        if order.last() != Some(&session) {
            order.push(session);
        }
    }
    let unique: BTreeSet<&String> = order.iter().collect();
    assert_eq!(unique.len(), order.len(), "a session listed twice");
    order
}

#[test]
fn a_large_table_is_listed_whole_and_each_session_once() {
    let d = Daemon::start("ls-many", &[]);
    let mut c = d.client();
    let all: Vec<String> = (0..SESSIONS).map(name).collect();
    create(&mut c, &all[..CLASSIC]);
    // The classic form answers a table this size in one line.
    let classic = c.ok(json!({"op": "list"}));
    assert_eq!(classic["sessions"].as_array().unwrap().len(), CLASSIC);
    create(&mut c, &all[CLASSIC..]);

    // The table, printed page by page.
    let out = gw(&d, &["ls"]).ok();
    assert!(out.starts_with("SESSION"), "{out:.200}");
    assert_eq!(table_sessions(&out), all);

    // `--json`: one session object per line.
    let lines: Vec<Value> = gw(&d, &["ls", "--json"])
        .ok()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let listed: Vec<&str> = lines.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(listed, all);

    // Not one this size: refused, naming the paged form.
    let refused = c.err(json!({"op": "list"}), "limit");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(why.contains("\"limit\""), "{why}");

    // Pages while another client creates sessions (behind and ahead of the reader) and
    // removes some: no session twice, and every one that stayed, once.
    let mut churn = d.client();
    let mut round = 0;
    let mut removed = BTreeSet::new();
    let mut created = Vec::new();
    let seen = pages(&mut c, 250, &mut || {
        round += 1;
        let fresh = [
            format!("a-{round:03}"),
            format!("s-{:05}x", (round * 250 + 400).min(SESSIONS - 1)),
        ];
        create(&mut churn, &fresh);
        created.extend(fresh);
        let gone = name((round * 389) % SESSIONS);
        churn.ok(json!({"op": "remove", "session": gone}));
        removed.insert(gone);
    });
    let mut count: HashMap<&String, usize> = HashMap::new();
    for n in &seen {
        *count.entry(n).or_default() += 1;
    }
    assert!(count.values().all(|&k| k == 1), "a session listed twice");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "pages out of order");
    for n in all.iter().filter(|n| !removed.contains(*n)) {
        assert!(count.contains_key(n), "{n} missing");
    }
    assert!(round >= SESSIONS / 250, "{round} pages");
    // A created name past the reader is listed; the `a-` ones came behind it.
    assert!(created
        .iter()
        .any(|n| n.starts_with("s-") && count.contains_key(n)));
    assert!(!created
        .iter()
        .any(|n| n.starts_with("a-") && count.contains_key(n)));
}

#[test]
fn bad_pages_are_refused_and_an_empty_table_lists_as_before() {
    let d = Daemon::start("ls-pages-empty", &[]);
    let mut c = d.client();
    c.err(json!({"op": "list", "limit": 0}), "bad_request");
    c.err(json!({"op": "list", "after": 3}), "bad_request");
    let page = c.ok(json!({"op": "list", "limit": 5}));
    assert_eq!(page["sessions"], json!([]));
    assert_eq!(page["next"], Value::Null);
    let hello = c.ok(json!({"op": "hello"}));
    assert!(hello["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("list_pages")));
    let out = gw(&d, &["ls"]).ok();
    assert_eq!(out.lines().count(), 1, "{out}");
    // JSON lines, one per session: none.
    assert_eq!(gw(&d, &["ls", "--json"]).ok(), "");
}
