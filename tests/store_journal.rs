//! The output journal read back as strictly as a client reads the daemon: records round
//! trip per session in order; a record cut short by a crash is ignored; a corrupt record,
//! a foreign file, a newer segment, a frame filed under the wrong position or too large a
//! file never crash the read, keep what was good before the fault, and are moved aside.

use std::path::Path;

use genward::core::{SessionState, Stream};
use genward::proto::encode;
use genward::proto::event::WireEvent;
use genward::store::aside::BAD_DIR;
use genward::store::journal::{segment_file, Journal, OUTPUT_DIR, RECORD_HEADER};
use genward::store::Store;
use genward::testkit::scratch::ScratchDir;
use genward::testkit::state::place_file;

fn frame(session: &str, gen: u64, pos: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode::output_frame(session, gen, Stream::Stdout, pos, pos, data, &mut out);
    out
}

fn open(dir: &Path) -> Journal {
    Journal::open(&Store::open(dir).unwrap()).unwrap()
}

fn all(_: &str) -> Option<usize> {
    Some(1 << 20)
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// Writes three records of `a` and one of `b` in one segment; returns its path.
fn written(dir: &Path) -> std::path::PathBuf {
    let mut j = open(dir);
    let seg = j.append(0, 0, &frame("a", 1, 0, b"one")).unwrap();
    j.append(0, 0, &frame("b", 2, 0, b"x")).unwrap();
    j.append(1, 3, &frame("a", 1, 3, b"two")).unwrap();
    let mut event = Vec::new();
    WireEvent::State {
        session: "a".into(),
        gen: Some(1),
        state: SessionState::Stopped,
    }
    .write(&mut event);
    j.append(2, 6, &event).unwrap();
    dir.join(OUTPUT_DIR).join(segment_file(seg))
}

#[test]
fn records_round_trip_per_session_in_order() {
    let dir = ScratchDir::new("journal-round-trip");
    written(&dir);
    let loaded = open(&dir).load(all);
    let a = &loaded.sessions["a"];
    assert_eq!(a.iter().map(|r| r.seq).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(a[1].pos, 3);
    assert_eq!(a[1].out_len, 3);
    assert_eq!(a[1].frame, frame("a", 1, 3, b"two"));
    assert_eq!(a[2].out_len, 0);
    assert_eq!(loaded.sessions["b"].len(), 1);
    assert_eq!(loaded.bad, 0);
    // Sessions not asked for are skipped, not kept.
    let only_b = open(&dir).load(|s| (s == "b").then_some(1 << 20));
    assert!(!only_b.sessions.contains_key("a"));
    assert_eq!(only_b.skipped, 3);
}

#[test]
fn a_record_cut_short_by_a_crash_is_ignored_and_the_rest_kept() {
    let dir = ScratchDir::new("journal-truncated");
    let path = written(&dir);
    let bytes = std::fs::read(&path).unwrap();
    for cut in [bytes.len() - 1, bytes.len() - 30, bytes.len() - 60] {
        place_file(&path, &bytes[..cut]);
        let loaded = open(&dir).load(all);
        assert_eq!(loaded.bad, 0, "a cut at {cut} is a crash, not corruption");
        assert!(!loaded.sessions["a"].is_empty());
        assert_eq!(entries(&dir.join(BAD_DIR)), 0);
    }
}

#[test]
fn a_corrupt_record_keeps_what_came_before_and_moves_the_segment_aside() {
    let dir = ScratchDir::new("journal-corrupt");
    let path = written(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    // The second record's frame: one byte of its JSON header changed.
    let header_len = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let first = frame("a", 1, 0, b"one").len() + RECORD_HEADER;
    bytes[header_len + first + RECORD_HEADER + 2] = b'X';
    place_file(&path, &bytes);
    let loaded = open(&dir).load(all);
    assert_eq!(loaded.bad, 1);
    assert_eq!(loaded.sessions["a"].len(), 1, "the record before the fault");
    assert!(!loaded.sessions.contains_key("b"));
    assert!(!path.exists(), "moved aside");
    assert_eq!(entries(&dir.join(BAD_DIR)), 1);
}

#[test]
fn a_frame_filed_at_another_position_is_refused() {
    let dir = ScratchDir::new("journal-wrong-pos");
    let seg = {
        let mut j = open(&dir);
        j.append(0, 7, &frame("a", 1, 0, b"one")).unwrap()
    };
    let loaded = open(&dir).load(all);
    assert_eq!(loaded.bad, 1);
    assert!(loaded.sessions.is_empty());
    assert!(!dir.join(OUTPUT_DIR).join(segment_file(seg)).exists());
}

#[test]
fn foreign_newer_oversized_and_lying_files_are_moved_aside() {
    let dir = ScratchDir::new("journal-foreign");
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(dir.join(OUTPUT_DIR))
        .unwrap();
    let out = dir.join(OUTPUT_DIR);
    place_file(&out.join("notes.txt"), b"hello");
    place_file(&out.join(segment_file(1)), b"GIF89a not ours");
    place_file(
        &out.join(segment_file(2)),
        b"{\"genward_state\":99,\"kind\":\"output\"}\n\x00\x01",
    );
    place_file(
        &out.join(segment_file(3)),
        b"{\"genward_state\":1,\"kind\":\"session\"}\n",
    );
    let mut huge = b"{\"genward_state\":1,\"kind\":\"output\"}\n".to_vec();
    huge.resize(64 << 20, 0);
    place_file(&out.join(segment_file(4)), &huge);
    // A record announcing a length beyond any frame.
    let mut lying = b"{\"genward_state\":1,\"kind\":\"output\"}\n".to_vec();
    lying.extend_from_slice(&u32::MAX.to_le_bytes());
    lying.extend_from_slice(&[0; 64]);
    place_file(&out.join(segment_file(5)), &lying);
    let mut j = open(&dir);
    let loaded = j.load(all);
    assert!(loaded.sessions.is_empty());
    assert_eq!(loaded.bad, 5);
    assert_eq!(entries(&out), 0, "everything moved aside");
    assert_eq!(entries(&dir.join(BAD_DIR)), 6);
    // Appending goes on, in a segment numbered past every one seen.
    let seg = j.append(0, 0, &frame("a", 1, 0, b"new")).unwrap();
    assert!(seg > 5);
}

#[test]
fn segments_below_the_oldest_needed_are_deleted() {
    let dir = ScratchDir::new("journal-delete");
    let first = written(&dir);
    let mut j = open(&dir);
    j.load(all);
    let seg = j.append(0, 0, &frame("c", 3, 0, b"z")).unwrap();
    assert!(first.exists());
    j.delete_below(seg);
    assert!(!first.exists());
    assert_eq!(j.segments(), 1);
    assert_eq!(j.oldest(), Some(seg));
}
