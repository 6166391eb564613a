//! The output journal read back as strictly as a client reads the daemon: records round
//! trip per session in order; a record a crash left uncommitted is ignored, and so are the
//! old bytes of a spare segment written over; a corrupt record, a foreign file, a newer
//! segment, a frame filed under the wrong position or too large a file never crash the
//! read, keep what was good before the fault, and are moved aside; so are a record naming
//! another session's generation (refused) and a damaged nonce with committed records after
//! it (which are read).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use genward::core::{SessionState, Stream};
use genward::proto::encode;
use genward::proto::event::WireEvent;
use genward::store::aside::BAD_DIR;
use genward::store::journal::{
    segment_file, Journal, NONCE_BYTES, OUTPUT_DIR, RECORD_HEADER, SEGMENT_BYTES,
};
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

/// Writes one record; returns its segment.
fn put(j: &mut Journal, seq: u64, pos: u64, frame: &[u8]) -> u64 {
    j.append(seq, pos, &[frame]).expect("written").map.seg()
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
    let seg = put(&mut j, 0, 0, &frame("a", 1, 0, b"one"));
    put(&mut j, 0, 0, &frame("b", 2, 0, b"x"));
    put(&mut j, 1, 3, &frame("a", 1, 3, b"two"));
    let mut event = Vec::new();
    WireEvent::State {
        session: "a".into(),
        gen: Some(1),
        state: SessionState::Stopped,
    }
    .write(&mut event);
    put(&mut j, 2, 6, &event);
    dir.join(OUTPUT_DIR).join(segment_file(seg))
}

#[test]
fn records_round_trip_per_session_in_order() {
    let dir = ScratchDir::new("journal-round-trip");
    written(&dir);
    let loaded = open(&dir).load(all, HashMap::new());
    let a = &loaded.sessions["a"];
    assert_eq!(a.iter().map(|r| r.seq).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(a[1].pos, 3);
    assert_eq!(a[1].out_len, 3);
    assert_eq!(a[1].frame.bytes(), frame("a", 1, 3, b"two"));
    assert_eq!(a[2].out_len, 0);
    assert_eq!(loaded.sessions["b"].len(), 1);
    assert_eq!(loaded.bad, 0);
    // Sessions not asked for are skipped, not kept.
    let only_b = open(&dir).load(|s| (s == "b").then_some(1 << 20), HashMap::new());
    assert!(!only_b.sessions.contains_key("a"));
    assert_eq!(only_b.skipped, 3);
}

#[test]
fn a_record_a_crash_left_uncommitted_is_ignored_and_the_rest_kept() {
    let dir = ScratchDir::new("journal-uncommitted");
    let path = written(&dir);
    let bytes = std::fs::read(&path).unwrap();
    // The last record is an event line; its nonce is what commits it. A crash leaves it
    // without one, whole or cut anywhere (the file is allocated whole: zeros follow).
    let (start, end) = last_record(&bytes);
    for cut in [end, end - 1, start + RECORD_HEADER, start + 6] {
        let mut torn = bytes.clone();
        torn[cut..end].fill(0);
        torn[start + 4..start + 12].fill(0);
        place_file(&path, &torn);
        let loaded = open(&dir).load(all, HashMap::new());
        assert_eq!(loaded.bad, 0, "a cut at {cut} is a crash, not corruption");
        assert_eq!(loaded.sessions["a"].len(), 2, "cut at {cut}");
        assert_eq!(entries(&dir.join(BAD_DIR)), 0);
    }
}

/// Where the last committed record of a segment written by [`written`] starts and ends.
fn last_record(bytes: &[u8]) -> (usize, usize) {
    let body = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let nonce = &bytes[body..body + NONCE_BYTES];
    let mut at = body + NONCE_BYTES;
    let mut last = (at, at);
    while &bytes[at + 4..at + 12] == nonce {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        last = (at, at + 4 + len);
        at += 4 + len;
    }
    last
}

#[test]
fn a_spare_written_over_never_brings_back_its_old_records() {
    let dir = ScratchDir::new("journal-spare");
    let mut j = open(&dir);
    let big = vec![b'o'; 512 << 10];
    let mut pos = 0;
    let mut seq = 0;
    let mut write = |j: &mut Journal, session: &str| {
        let seg = put(j, seq, pos, &frame(session, 1, pos, &big));
        seq += 1;
        pos += big.len() as u64;
        seg
    };
    // Fill segment 1 with `old`, give it up, fill segment 2 with `new`: segment 3 is
    // written over segment 1's pages.
    let per_segment = SEGMENT_BYTES.div_ceil(big.len() as u64 + 256);
    for _ in 0..per_segment {
        assert_eq!(write(&mut j, "old"), 1);
    }
    assert_eq!(write(&mut j, "new"), 2);
    assert!(!j.give_up(1), "nothing else held segment 1");
    let out = dir.join(OUTPUT_DIR);
    assert!(out.join("1.spare").exists());
    let mut last = 2;
    for _ in 0..per_segment + 1 {
        last = write(&mut j, "new");
    }
    assert_eq!(last, 3);
    assert!(!out.join("1.spare").exists(), "the spare became segment 3");
    drop(j);
    let loaded = open(&dir).load(|_| Some(64 << 20), HashMap::new());
    assert_eq!(loaded.bad, 0);
    assert!(
        !loaded.sessions.contains_key("old"),
        "nothing of the spare's past"
    );
    let new = &loaded.sessions["new"];
    assert!(new.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
    assert_eq!(new.len() as u64, per_segment + 2);
}

#[test]
fn a_segment_given_up_while_a_frame_in_it_is_held_is_not_written_over() {
    let dir = ScratchDir::new("journal-held");
    let mut j = open(&dir);
    let held = j.append(0, 0, &[&frame("a", 1, 0, b"held")]).unwrap();
    let big = vec![b'x'; 512 << 10];
    let mut pos = 4;
    let mut seq = 1;
    while j.current() == Some(1) {
        put(&mut j, seq, pos, &frame("a", 1, pos, &big));
        seq += 1;
        pos += big.len() as u64;
    }
    assert!(j.give_up(1), "still referenced");
    assert!(!dir.join(OUTPUT_DIR).join("1.spare").exists());
    // Its bytes stay readable for whoever holds them.
    assert_eq!(
        held.map.bytes(held.start, held.len),
        &frame("a", 1, 0, b"held")[..]
    );
}

#[test]
fn a_corrupt_record_keeps_what_came_before_and_moves_the_segment_aside() {
    let dir = ScratchDir::new("journal-corrupt");
    let path = written(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    // The second record's frame: one byte of its JSON header changed.
    let header_len = bytes.iter().position(|&b| b == b'\n').unwrap() + 1 + NONCE_BYTES;
    let first = frame("a", 1, 0, b"one").len() + RECORD_HEADER;
    bytes[header_len + first + RECORD_HEADER + 2] = b'X';
    place_file(&path, &bytes);
    let loaded = open(&dir).load(all, HashMap::new());
    assert_eq!(loaded.bad, 1);
    assert_eq!(loaded.sessions["a"].len(), 1, "the record before the fault");
    assert!(!loaded.sessions.contains_key("b"));
    assert!(!path.exists(), "moved aside");
    assert_eq!(entries(&dir.join(BAD_DIR)), 1);
}

#[test]
fn a_frame_filed_at_another_position_is_refused() {
    let dir = ScratchDir::new("journal-wrong-pos");
    let seg = put(&mut open(&dir), 0, 7, &frame("a", 1, 0, b"one"));
    let loaded = open(&dir).load(all, HashMap::new());
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
    lying.extend_from_slice(&7u64.to_le_bytes()); // the segment's nonce
    lying.extend_from_slice(&u32::MAX.to_le_bytes());
    lying.extend_from_slice(&7u64.to_le_bytes());
    lying.extend_from_slice(&[0; 64]);
    place_file(&out.join(segment_file(5)), &lying);
    let mut j = open(&dir);
    let loaded = j.load(all, HashMap::new());
    assert!(loaded.sessions.is_empty());
    assert_eq!(loaded.bad, 5);
    assert_eq!(entries(&out), 0, "everything moved aside");
    assert_eq!(entries(&dir.join(BAD_DIR)), 6);
    // Appending goes on, in a segment numbered past every one seen.
    assert!(put(&mut j, 0, 0, &frame("a", 1, 0, b"new")) > 5);
}

#[test]
fn a_segment_given_up_is_deleted_and_the_one_written_is_kept() {
    let dir = ScratchDir::new("journal-delete");
    let first = written(&dir);
    let mut j = open(&dir);
    j.load(all, HashMap::new());
    let seg = put(&mut j, 0, 0, &frame("c", 3, 0, b"z"));
    assert!(first.exists());
    j.give_up(1);
    assert!(!first.exists());
    assert_eq!(j.segment_numbers(), [seg]);
    // The segment being written is never given up.
    assert!(!j.give_up(seg));
    assert_eq!(j.segment_numbers(), [seg]);
}

#[test]
fn an_event_for_a_name_no_session_can_have_is_refused() {
    let dir = ScratchDir::new("journal-bad-name");
    let seg = put(&mut open(&dir), 0, 0, &frame("|", 1, 0, b"x"));
    let loaded = open(&dir).load(all, HashMap::new());
    assert_eq!(loaded.bad, 1);
    assert!(loaded.sessions.is_empty());
    assert!(!dir.join(OUTPUT_DIR).join(segment_file(seg)).exists());
}

#[test]
fn records_read_back_refer_to_their_segments_mapping() {
    let dir = ScratchDir::new("journal-mapped");
    written(&dir);
    let loaded = open(&dir).load(all, HashMap::new());
    let a = &loaded.sessions["a"];
    for r in a.iter().chain(&loaded.sessions["b"]) {
        assert_eq!(r.frame.map.seg(), r.seg);
        assert!(!r.frame.map.is_writable(), "read back, never written");
    }
    assert!(std::rc::Rc::ptr_eq(&a[0].frame.map, &a[2].frame.map));
    assert_eq!(a[0].frame.bytes(), frame("a", 1, 0, b"one"));
}

#[test]
fn a_segment_read_back_is_released_while_held_and_never_made_a_spare() {
    let dir = ScratchDir::new("journal-read-give-up");
    let out = dir.join(OUTPUT_DIR);
    // Segment 1, read back; a frame of it still held (queued for a client) when it goes.
    written(&dir);
    let mut j = open(&dir);
    let held = j.load(all, HashMap::new()).sessions["a"][1].frame.clone();
    put(&mut j, 0, 0, &frame("c", 3, 0, b"z"));
    assert!(
        j.give_up(1),
        "still referenced: its memory goes with the frame"
    );
    assert!(!out.join(segment_file(1)).exists());
    assert!(!out.join("1.spare").exists());
    assert_eq!(held.bytes(), frame("a", 1, 3, b"two"));
    drop((held, j));

    // Nothing held: deleted, not kept to be written over (its mapping is read-only).
    let mut j = open(&dir);
    j.load(all, HashMap::new());
    let seg = put(&mut j, 0, 0, &frame("d", 4, 0, b"w"));
    drop(j);
    let mut j = open(&dir);
    j.load(all, HashMap::new());
    put(&mut j, 0, 0, &frame("e", 5, 0, b"v"));
    assert!(!j.give_up(seg));
    assert_eq!(entries(&out), 2, "segments {:?}", j.segment_numbers());
    assert!(!out.join(format!("{seg}.spare")).exists());
}

/// Where the `n`th record (from 0) of a segment written by [`written`] starts.
fn record_start(bytes: &[u8], n: usize) -> usize {
    let body = bytes.iter().position(|&b| b == b'\n').unwrap() + 1 + NONCE_BYTES;
    let mut at = body;
    for _ in 0..n {
        at += 4 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    at
}

/// One byte of a frame's session name changed (`b` → `a`): session b's output, of b's
/// generation, would be replayed as a's — in place of a's own record of that number. It
/// is refused (the generation is b's, as the session records say, or as an earlier
/// record of b's generation said), and the segment set aside after the rest is read.
#[test]
fn a_record_naming_another_sessions_generation_is_refused() {
    let dir = ScratchDir::new("journal-other-gen");
    let path = written(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let b = record_start(&bytes, 1);
    let name = b
        + RECORD_HEADER
        + bytes[b + RECORD_HEADER..]
            .windows(13)
            .position(|w| w == b"\"session\":\"b\"")
            .unwrap();
    bytes[name + 11] = b'a';
    place_file(&path, &bytes);
    let owners = HashMap::from([(1, Arc::from("a")), (2, Arc::from("b"))]);
    let loaded = open(&dir).load(all, owners);
    let a = &loaded.sessions["a"];
    assert_eq!(a.len(), 3, "a's own records, and nothing of b's");
    assert_eq!(a[0].frame.bytes(), frame("a", 1, 0, b"one"));
    assert!(a.iter().all(|r| r.gen == 1));
    assert_eq!(loaded.bad, 1);
    assert!(!path.exists(), "moved aside");

    // No session record names the generation: an earlier record of it tells.
    let dir = ScratchDir::new("journal-other-gen-learned");
    let mut j = open(&dir);
    let seg = put(&mut j, 0, 0, &frame("a", 1, 0, b"one"));
    put(&mut j, 0, 0, &frame("b", 2, 0, b"x"));
    put(&mut j, 1, 1, &frame("a", 2, 1, b"y"));
    put(&mut j, 1, 3, &frame("a", 1, 3, b"two"));
    drop(j);
    let loaded = open(&dir).load(all, HashMap::new());
    let a = &loaded.sessions["a"];
    assert_eq!(a.iter().map(|r| r.gen).collect::<Vec<_>>(), [1, 1]);
    assert_eq!(loaded.bad, 1);
    assert!(!dir.join(OUTPUT_DIR).join(segment_file(seg)).exists());
}

/// One bit of a record's nonce flipped: the records committed after it are read all the
/// same (a crash only ever leaves the last one uncommitted), the damaged one is not, and
/// the segment is set aside with a warning rather than read as if it ended there.
#[test]
fn a_damaged_nonce_before_committed_records_is_found() {
    let dir = ScratchDir::new("journal-bad-nonce");
    let path = written(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let b = record_start(&bytes, 1);
    bytes[b + 4] ^= 1;
    place_file(&path, &bytes);
    let loaded = open(&dir).load(all, HashMap::new());
    assert_eq!(
        loaded.sessions["a"].len(),
        3,
        "the records after it are read"
    );
    assert!(!loaded.sessions.contains_key("b"), "the damaged one is not");
    assert_eq!(loaded.bad, 1);
    assert!(!path.exists(), "moved aside");
    assert_eq!(entries(&dir.join(BAD_DIR)), 1);

    // Its length damaged too: found all the same.
    let dir = ScratchDir::new("journal-bad-nonce-len");
    let path = written(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let b = record_start(&bytes, 1);
    bytes[b + 4] ^= 1;
    bytes[b..b + 4].copy_from_slice(&7u32.to_le_bytes());
    place_file(&path, &bytes);
    let loaded = open(&dir).load(all, HashMap::new());
    assert_eq!(loaded.sessions["a"].len(), 3);
    assert_eq!(loaded.bad, 1);
}
