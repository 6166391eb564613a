//! Damage to a retained-output segment is found and said, never read silently: a record
//! whose frame names another session (one changed byte) is refused rather than replayed
//! as that session's output, and a record whose nonce was damaged does not hide the
//! committed records after it. Either way the segment is set aside (`bad/`) with a
//! warning, after what can be read of it is taken back.

mod util;

use std::path::Path;

use serde_json::json;
use util::daemon::{Client, Daemon, Msg};

/// Runs sessions a, b and c in turn, each printing `out-<name>-1`, and waits for each to
/// end; returns each one's generation.
fn three_sessions(d: &Daemon) -> Vec<u64> {
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let mut gens = Vec::new();
    for name in ["a", "b", "c"] {
        let argv = json!(["sh", "-c", format!("echo out-{name}-1")]);
        let r = c.ok(json!({"op": "spawn", "session": name, "argv": argv}));
        let gen = r["gen"].as_u64().unwrap();
        c.await_exits(&[gen]);
        gens.push(gen);
    }
    gens
}

/// Session `name`'s replayed output: (generation, bytes) of each frame.
fn replay(c: &mut Client, name: &str) -> Vec<(u64, String)> {
    c.ok(json!({"op": "subscribe", "session": name, "from_start": true}));
    // Everything retained is queued before the answer to a request sent after it.
    let id = c.request(json!({"op": "hello"}));
    assert_eq!(id["ok"], json!(true));
    let mut out = Vec::new();
    while let Some(m) = c.backlog.pop_front() {
        if let Msg::Output(v, data) = m {
            out.push((
                v["gen"].as_u64().unwrap(),
                String::from_utf8_lossy(&data).into_owned(),
            ));
        }
    }
    out
}

/// The segment's bytes and where b's first output frame starts.
fn segment_with_b(state: &Path) -> (std::path::PathBuf, Vec<u8>, usize) {
    let path = state.join("output").join("1.seg");
    let bytes = std::fs::read(&path).unwrap();
    let out = find(&bytes, b"out-b-1", bytes.len());
    let frame = find_back(&bytes, b"{\"event\":\"output\"", out);
    (path, bytes, frame)
}

fn find(bytes: &[u8], needle: &[u8], before: usize) -> usize {
    bytes[..before]
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{} not in the segment", String::from_utf8_lossy(needle)))
}

fn find_back(bytes: &[u8], needle: &[u8], before: usize) -> usize {
    bytes[..before]
        .windows(needle.len())
        .rposition(|w| w == needle)
        .unwrap_or_else(|| panic!("{} not in the segment", String::from_utf8_lossy(needle)))
}

fn set_aside(state: &Path) -> usize {
    std::fs::read_dir(state.join("bad"))
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("output.1.seg")
            })
            .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_record_naming_another_session_is_refused_not_replayed_as_its() {
    let mut d = Daemon::start("seg-session", &["--no-keeper"]);
    let gens = three_sessions(&d);
    let mut old = d.crash_daemon_edit_and_restart_logged(
        |state| {
            let (path, mut bytes, frame) = segment_with_b(state);
            let name = frame + find(&bytes[frame..], b"\"session\":\"b\"", bytes.len() - frame);
            bytes[name + 11] = b'a';
            std::fs::write(path, bytes).unwrap();
        },
        "warn",
        &["--no-keeper"],
    );
    let _ = old.wait();
    let mut c = d.client();
    let a = replay(&mut c, "a");
    assert_eq!(a, [(gens[0], "out-a-1\n".to_owned())], "a's output only");
    let log = d.log();
    assert!(
        log.contains(&format!(
            "names gen {} of session b under session a",
            gens[1]
        )),
        "{log}"
    );
    assert_eq!(set_aside(&d.dir.join("state")), 1, "{log}");
    // What came after it in the segment is still there.
    assert_eq!(replay(&mut c, "c"), [(gens[2], "out-c-1\n".to_owned())]);
}

#[test]
fn a_damaged_nonce_does_not_hide_the_records_after_it() {
    let mut d = Daemon::start("seg-nonce", &["--no-keeper"]);
    let gens = three_sessions(&d);
    let mut old = d.crash_daemon_edit_and_restart_logged(
        |state| {
            let (path, mut bytes, frame) = segment_with_b(state);
            // The record header (len, nonce, seq, pos) is just before its frame.
            bytes[frame - 24] ^= 1;
            std::fs::write(path, bytes).unwrap();
        },
        "warn",
        &["--no-keeper"],
    );
    let _ = old.wait();
    let mut c = d.client();
    assert_eq!(replay(&mut c, "c"), [(gens[2], "out-c-1\n".to_owned())]);
    assert_eq!(replay(&mut c, "a"), [(gens[0], "out-a-1\n".to_owned())]);
    assert!(
        replay(&mut c, "b").is_empty(),
        "the damaged record is not read"
    );
    let log = d.log();
    assert!(log.contains("committed records follow"), "{log}");
    assert_eq!(set_aside(&d.dir.join("state")), 1, "{log}");
}
