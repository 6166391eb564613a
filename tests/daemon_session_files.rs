//! A session's file is written when its record changes, and only then: a clean stop and
//! a start leave the files of idle sessions as they are (each write is an `fsync`, a
//! rename and another `fsync`: minutes with 100,000 sessions on a disk), while a record
//! that changed — or a file spelled otherwise than this daemon spells it — is written.
//!
//! A file is told unwritten by holding it open: a write replaces it by a rename, which
//! leaves the held file with no link.

mod util;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use genward::store::names::SESSIONS_DIR;
use genward::store::session_codec::{decode_session, encode_session};
use genward::testkit::state::place_file;
use serde_json::json;
use util::daemon::Daemon;

const ARGS: &[&str] = &["--no-keeper"];

fn session_file(d: &Daemon, name: &str) -> PathBuf {
    d.dir
        .join("state")
        .join(SESSIONS_DIR)
        .join(format!("{name}.json"))
}

/// Session files held open, to tell later which were replaced.
struct Held(Vec<(String, PathBuf, File)>);

impl Held {
    fn now(d: &Daemon, names: &[&str]) -> Held {
        let files = names
            .iter()
            .map(|&name| {
                let path = session_file(d, name);
                let file = File::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                (name.to_owned(), path, file)
            })
            .collect();
        Held(files)
    }

    /// The sessions whose file was replaced since it was held, by name.
    fn replaced(&self) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(name, path, file)| {
                let held = file.metadata().unwrap();
                let now = std::fs::metadata(path).unwrap_or_else(|e| panic!("{name}: {e}"));
                // A file replaced by a rename has no link left; one still in place is the
                // very file at its name.
                held.nlink() == 0 || held.ino() != now.ino()
            })
            .map(|(name, _, _)| name.as_str())
            .collect()
    }
}

/// Rewrites a session's file as an older genward might have spelled it: the same record,
/// other bytes (a space after the opening brace).
fn respell(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let body = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    assert_eq!(bytes[body], b'{');
    let mut other = bytes[..=body].to_vec();
    other.push(b' ');
    other.extend_from_slice(&bytes[body + 1..]);
    place_file(path, &other);
    bytes
}

#[test]
fn only_session_files_whose_record_changed_are_written() {
    let mut d = Daemon::start("session-files", ARGS);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut ended = Vec::new();
    for name in ["idle", "respelled"] {
        let r = c.ok(json!({"op": "spawn", "session": name, "argv": ["true"]}));
        ended.push(r["gen"].as_u64().unwrap());
    }
    c.ok(json!({"op": "spawn", "session": "busy", "argv": ["sleep", "1000"]}));
    c.await_exits(&ended);
    drop(c);
    // The first stop writes every file: each session's desired state becomes `down`.
    assert_eq!(d.terminate(), Some(0));

    let canonical = respell(&session_file(&d, "respelled"));
    let all = ["busy", "idle", "respelled"];
    let held = Held::now(&d, &all);
    d.restart_wrapped(&[], ARGS);
    assert_eq!(
        held.replaced(),
        ["respelled"],
        "a start writes only the file it would spell otherwise"
    );
    let written = std::fs::read(session_file(&d, "respelled")).unwrap();
    assert_eq!(written, canonical);
    let record = decode_session(&written).unwrap();
    assert_eq!(encode_session(&record).unwrap(), written);

    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let r = c.ok(json!({"op": "spawn", "session": "busy", "argv": ["sleep", "1000"]}));
    let busy = r["gen"].as_u64().unwrap();
    c.spawned_pid(busy);
    let held = Held::now(&d, &all);
    drop(c);
    // The stop ends `busy` (its record changes); the others are as they were.
    assert_eq!(d.terminate(), Some(0));
    assert_eq!(
        held.replaced(),
        ["busy"],
        "a stop writes only what it changed"
    );
    let record = decode_session(&std::fs::read(session_file(&d, "busy")).unwrap()).unwrap();
    assert_eq!(record.last_gen, Some(busy));
    assert!(record.current.is_none() && record.last_end.is_some());

    let held = Held::now(&d, &all);
    d.restart_wrapped(&[], ARGS);
    let list = d.client().ok(json!({"op": "list"}));
    assert_eq!(list["sessions"].as_array().unwrap().len(), 3, "{list}");
    assert_eq!(d.terminate(), Some(0));
    assert!(held.replaced().is_empty(), "{:?}", held.replaced());
}

/// The program an upgrade runs reads no session file: whatever changes from there on is
/// written all the same, and found by the daemon after a crash.
#[test]
fn what_changes_after_an_upgrade_is_written() {
    let mut d = Daemon::start("session-files-upgrade", ARGS);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let first = c.ok(json!({"op": "spawn", "session": "idle", "argv": ["true"]}));
    c.events_until(|m| m.is("exited", first["gen"].as_u64().unwrap()));
    c.ok(json!({"op": "upgrade"}));

    let held = Held::now(&d, &["idle"]);
    let mut gens = Vec::new();
    for name in ["idle", "later"] {
        let r = c.ok(json!({"op": "spawn", "session": name, "argv": ["true"]}));
        gens.push(r["gen"].as_u64().unwrap());
    }
    c.await_exits(&gens);
    assert_eq!(held.replaced(), ["idle"]);
    drop(c);

    d.crash_and_restart(ARGS);
    for (name, gen) in ["idle", "later"].into_iter().zip(gens) {
        let file = std::fs::read(session_file(&d, name)).unwrap();
        let record = decode_session(&file).unwrap();
        assert_eq!(record.last_gen, Some(gen), "{name}");
        let r = d.client().ok(json!({"op": "get", "session": name}));
        assert_eq!(r["session"]["last_end"]["gen"], json!(gen), "{r}");
    }
}

/// Many sessions that end in the same turns — each writes a line just before it exits, so
/// that output is delivered between their ends — have each end on disk before any client
/// hears of it: the records a turn's exits change are written together, and before
/// anything is told, wherever the clients are written to.
#[test]
fn each_end_is_on_disk_before_its_exited_event() {
    const SESSIONS: usize = 128;
    const ROUNDS: usize = 4;
    let d = Daemon::start("ends-on-disk", ARGS);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let names: Vec<String> = (0..SESSIONS).map(|i| format!("s{i}")).collect();
    for _ in 0..ROUNDS {
        for name in &names {
            let argv = json!(["sh", "-c", "read x; echo bye; exit 3"]);
            c.ok(json!({"op": "spawn", "session": name, "argv": argv}));
        }
        // Every input closed in one write: the programs read their end of file, write
        // and exit at about the same time.
        let closes: String = names
            .iter()
            .map(|name| format!("{}\n", json!({"op": "close_input", "session": name})))
            .collect();
        c.send_raw(closes.as_bytes());
        let mut ended = 0;
        while ended < SESSIONS {
            let m = c.read_msg();
            let v = m.json();
            if v["event"] != "exited" {
                continue;
            }
            ended += 1;
            let name = v["session"].as_str().unwrap();
            let gen = v["gen"].as_u64().unwrap();
            assert_eq!(v["code"], 3, "{v}");
            let bytes = std::fs::read(session_file(&d, name)).unwrap();
            let record = decode_session(&bytes).unwrap();
            assert_eq!(record.last_gen, Some(gen), "{name}: {record:?}");
            assert!(
                record.current.is_none() && record.last_end.is_some(),
                "{name}: `exited` of gen {gen} was sent before its record said so: {record:?}"
            );
        }
    }
}
