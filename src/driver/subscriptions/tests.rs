use super::*;
use crate::driver::ring::Lookup;

fn frame(n: usize) -> Vec<u8> {
    vec![b'x'; n]
}

#[test]
fn a_stalled_subscriber_gets_one_dropped_then_resumes() {
    let mut ring = Ring::new(4096);
    let mut cursor = start_cursor(&ring, Replay::Now);
    let mut outbox = Outbox::new(1024);
    for _ in 0..100 {
        ring.push_output(1, 100, frame(100), None);
    }
    // The subscriber had not read anything: the ring moved past it.
    let done = pump("s", &ring, &mut cursor, &mut outbox);
    assert!(!done, "outbox limit stops the pump");
    let mut sink = Vec::new();
    outbox.flush_to(&mut sink, usize::MAX).unwrap();
    let text = String::from_utf8_lossy(&sink);
    assert!(
        text.starts_with(r#"{"event":"dropped","session":"s","from":0,"to":"#),
        "{text}"
    );
    // Keep draining until caught up; exactly one dropped in total.
    while !pump("s", &ring, &mut cursor, &mut outbox) {
        outbox.flush_to(&mut sink, usize::MAX).unwrap();
    }
    outbox.flush_to(&mut sink, usize::MAX).unwrap();
    let text = String::from_utf8_lossy(&sink);
    assert_eq!(text.matches("dropped").count(), 1);
    assert_eq!(cursor.pos, 100 * 100);
    assert_eq!(cursor.seq, ring.end_seq());
}

#[test]
fn replaying_from_an_evicted_position_reports_the_gap() {
    let mut ring = Ring::new(1024);
    for _ in 0..100 {
        ring.push_output(1, 100, frame(100), None);
    }
    let mut cursor = start_cursor(&ring, Replay::Pos(50));
    let mut outbox = Outbox::new(1 << 20);
    pump("s", &ring, &mut cursor, &mut outbox);
    let mut sink = Vec::new();
    outbox.flush_to(&mut sink, usize::MAX).unwrap();
    let first_pos = match ring.lookup(ring.first_seq(), 0) {
        Lookup::Record(r) => r.pos,
        other => panic!("{other:?}"),
    };
    let expected = format!(r#"{{"event":"dropped","session":"s","from":50,"to":{first_pos}}}"#);
    assert!(String::from_utf8_lossy(&sink).starts_with(&expected));
}

#[test]
fn a_follower_behind_the_record_it_is_given_is_told_of_the_gap() {
    let mut ring = Ring::new(1024);
    for _ in 0..100 {
        ring.push_output(1, 100, frame(100), None);
    }
    let first_pos = match ring.lookup(ring.first_seq(), 0) {
        Lookup::Record(r) => r.pos,
        other => panic!("{other:?}"),
    };
    // A position carried from a log that held more (as across an upgrade), on a record
    // that is still there.
    let mut cursor = Cursor {
        seq: ring.first_seq(),
        pos: 50,
    };
    let mut outbox = Outbox::new(1 << 20);
    assert!(pump("s", &ring, &mut cursor, &mut outbox));
    let mut sink = Vec::new();
    outbox.flush_to(&mut sink, usize::MAX).unwrap();
    let expected = format!(r#"{{"event":"dropped","session":"s","from":50,"to":{first_pos}}}"#);
    let text = String::from_utf8_lossy(&sink);
    assert!(text.starts_with(&expected), "{text}");
    assert_eq!(text.matches("dropped").count(), 1);
    assert_eq!(cursor.pos, 100 * 100);
}

#[test]
fn replay_positions() {
    let mut ring = Ring::new(1 << 16);
    ring.push_output(1, 3, b"abc".to_vec(), None);
    ring.push_event(1, b"E".to_vec(), None);
    ring.push_output(2, 3, b"def".to_vec(), None);
    let c = start_cursor(&ring, Replay::Tail(3));
    assert_eq!(c, Cursor { seq: 2, pos: 3 });
    let c = start_cursor(&ring, Replay::Start);
    assert_eq!(c, Cursor { seq: 0, pos: 0 });
    let c = start_cursor(&ring, Replay::Now);
    assert_eq!(c, Cursor { seq: 3, pos: 6 });
}

#[test]
fn a_log_that_replays_nothing_starts_every_new_cursor_at_its_end() {
    let mut ring = Ring::new(0);
    assert!(!ring.replays(), "buffer 0 replays nothing");
    ring.push_output(1, 5, frame(5), None);
    assert_eq!(ring.records().count(), 1, "the newest record is still kept");
    for replay in [
        Replay::Start,
        Replay::Tail(100),
        Replay::Gen(1),
        Replay::Now,
    ] {
        let mut cursor = start_cursor(&ring, replay);
        assert_eq!((cursor.seq, cursor.pos), (1, 5), "{replay:?}");
        let mut outbox = Outbox::new(1 << 20);
        assert!(pump("s", &ring, &mut cursor, &mut outbox));
        assert!(outbox.is_empty(), "{replay:?}");
    }
    // A position before the end: gone, and said so.
    let mut cursor = start_cursor(&ring, Replay::Pos(2));
    let mut outbox = Outbox::new(1 << 20);
    assert!(pump("s", &ring, &mut cursor, &mut outbox));
    let mut sink = Vec::new();
    outbox.flush_to(&mut sink, usize::MAX).unwrap();
    let text = String::from_utf8(sink).unwrap();
    assert!(
        text.contains(r#""event":"dropped""#) && text.contains(r#""from":2,"to":5"#),
        "{text}"
    );
    assert_eq!(cursor.pos, 5);
    // The same with a queue that has no room when it starts: not at the end while the
    // `dropped` is owed (so pumped again once there is room, before anything after it).
    let mut cursor = start_cursor(&ring, Replay::Pos(2));
    let mut full = Outbox::new(1);
    full.push(b"x");
    assert!(
        !pump("s", &ring, &mut cursor, &mut full),
        "a dropped is owed"
    );
    let mut room = Outbox::new(1 << 20);
    assert!(pump("s", &ring, &mut cursor, &mut room));
    let mut sink = Vec::new();
    room.flush_to(&mut sink, usize::MAX).unwrap();
    assert!(String::from_utf8(sink)
        .unwrap()
        .contains(r#""from":2,"to":5"#));
    // With a buffer again, what is retained is replayed.
    ring.set_replays(true);
    assert_eq!(start_cursor(&ring, Replay::Start).seq, 0);
}

/// A log whose positions went on past its newest record (a restarted daemon's reserved
/// ceiling): resuming from a position in that range is told it was dropped, up to the
/// end, and nothing retained is replayed again.
#[test]
fn resuming_between_the_newest_record_and_a_raised_end_reports_the_gap() {
    for records in [0, 3] {
        let mut ring = Ring::new(1 << 16);
        for _ in 0..records {
            ring.push_output(1, 10, frame(10), None);
        }
        ring.continue_at(1000);
        let mut cursor = start_cursor(&ring, Replay::Pos(500));
        let mut outbox = Outbox::new(1 << 20);
        assert!(pump("s", &ring, &mut cursor, &mut outbox));
        let mut sink = Vec::new();
        outbox.flush_to(&mut sink, usize::MAX).unwrap();
        let text = String::from_utf8_lossy(&sink);
        assert_eq!(
            text, "{\"event\":\"dropped\",\"session\":\"s\",\"from\":500,\"to\":1000}\n",
            "{records} records"
        );
        assert_eq!(cursor.pos, 1000);
    }
}
