use std::sync::Arc;

use super::*;
use crate::core::{Containment, GenerationSnapshot, Lifecycle, SessionState, Stream, Time};
use crate::proto::framing::{FrameDecoder, Message};
use crate::proto::json::{parse_with, Limits, Value};
use crate::proto::names::WireName;

const CLOCK: Clock = Clock {
    epoch_unix_ms: 1_700_000_000_000,
};

/// A running session with one generation, shaped like the daemon's usual entries.
fn running(i: usize) -> SessionSnapshot {
    SessionSnapshot {
        name: Arc::from(format!("session-{i:05}")),
        state: SessionState::Running,
        current: Some(i as u64 + 1),
        restarts: 0,
        restart_at: None,
        last_end: None,
        generations: vec![GenerationSnapshot {
            gen: i as u64 + 1,
            pid: Some(100_000 + i as u32),
            lifecycle: Lifecycle::Running,
            since: Time::from_millis(5_000),
            since_unix_ms: None,
            superseded: false,
            stop: None,
            cause: None,
            ready: crate::core::ReadyState::Ready,
            offsets: vec![(Stream::Stdout, 0), (Stream::Stderr, 0)],
            discarded: 0,
            pending_input: 0,
            deadline: None,
            containment: Some(Containment::Session),
            adopted: None,
        }],
        detail: None,
        waiting: None,
    }
}

fn table(n: usize) -> Vec<SessionSnapshot> {
    (0..n).map(running).collect()
}

fn answer(out: &[u8]) -> Value {
    assert_eq!(out.last(), Some(&b'\n'));
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
    // A client's limits: any number of values within the line limit.
    let limits = Limits {
        max_elements: MAX_LINE,
        ..Limits::DEFAULT
    };
    parse_with(&out[..out.len() - 1], &limits).unwrap()
}

fn names(v: &Value) -> Vec<String> {
    let sessions = v.as_object().unwrap().get("sessions").unwrap();
    let sessions = sessions.as_array().unwrap();
    sessions
        .iter()
        .map(|s| {
            let name = s.as_object().unwrap().get("name").unwrap();
            name.as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn a_classic_answer_within_the_line_limit_is_read_whatever_its_values() {
    // 3,500 running sessions of the usual shape (some 285 bytes each) fit in one line and
    // hold more than the parser's default 65,536 values: the client's decoder reads it.
    let mut out = Vec::new();
    write_all(&RequestId::U64(1), &table(3_500), CLOCK, &mut out);
    assert!(out.len() <= MAX_LINE, "{} bytes", out.len());
    assert_eq!(names(&answer(&out)).len(), 3_500);
    let mut d = FrameDecoder::new();
    d.feed(&out);
    let Some(Ok(Message::Response(reply))) = d.next_message() else {
        panic!("the client could not read a {}-byte answer", out.len());
    };
    assert_eq!(reply.get("ok"), Some(&Value::Bool(true)));
}

#[test]
fn a_classic_answer_past_the_line_limit_is_a_limit_error_naming_pages() {
    let mut out = Vec::new();
    write_all(&RequestId::U64(7), &table(20_000), CLOCK, &mut out);
    assert!(out.len() < 1024, "{} bytes", out.len());
    let v = answer(&out);
    let v = v.as_object().unwrap();
    assert_eq!(v.get("ok"), Some(&Value::Bool(false)));
    let e = v.get("error").unwrap().as_object().unwrap();
    assert_eq!(e.get("code").unwrap().as_str(), Some("limit"));
    let message = e.get("message").unwrap().as_str().unwrap();
    assert!(message.contains("20000 sessions"), "{message}");
    assert!(message.contains(r#""op":"list","limit""#), "{message}");
}

#[test]
fn a_page_stops_at_its_byte_bound_and_names_where_to_go_on() {
    let sessions = table(PAGE_MAX);
    let mut out = Vec::new();
    write_page(&RequestId::U64(2), &sessions, false, CLOCK, &mut out);
    assert!(out.len() <= PAGE_BYTES + 1024, "{} bytes", out.len());
    let v = answer(&out);
    let shown = names(&v);
    assert!(
        !shown.is_empty() && shown.len() < PAGE_MAX,
        "{}",
        shown.len()
    );
    let next = v.as_object().unwrap().get("next").unwrap();
    assert_eq!(next.as_str(), shown.last().map(String::as_str));
}

#[test]
fn the_last_page_says_next_null_and_a_full_one_names_its_last_session() {
    let sessions = table(3);
    let mut out = Vec::new();
    write_page(&RequestId::U64(3), &sessions, false, CLOCK, &mut out);
    let v = answer(&out);
    assert_eq!(names(&v).len(), 3);
    assert_eq!(v.as_object().unwrap().get("next"), Some(&Value::Null));

    out.clear();
    write_page(&RequestId::U64(4), &sessions, true, CLOCK, &mut out);
    let v = answer(&out);
    let next = v.as_object().unwrap().get("next").unwrap();
    assert_eq!(next.as_str(), Some("session-00002"));

    out.clear();
    write_page(&RequestId::U64(5), &[], false, CLOCK, &mut out);
    let v = answer(&out);
    assert!(names(&v).is_empty());
    assert_eq!(v.as_object().unwrap().get("next"), Some(&Value::Null));
}

#[test]
fn no_session_takes_fewer_bytes_in_a_list_than_the_classic_bound_counts() {
    let mut least = SessionSnapshot {
        name: Arc::from("x"),
        state: SessionState::Failed,
        current: None,
        restarts: 0,
        restart_at: None,
        last_end: None,
        generations: Vec::new(),
        detail: None,
        waiting: None,
    };
    for &state in SessionState::ALL {
        least.state = state;
        let mut out = Vec::new();
        session(&least, CLOCK, &mut out);
        assert!(
            out.len() + 1 > MAX_LINE / CLASSIC_MOST,
            "{}",
            String::from_utf8_lossy(&out)
        );
    }
    let mut out = Vec::new();
    let table = vec![least; CLASSIC_MOST + 1];
    write_all(&RequestId::U64(1), &table, CLOCK, &mut out);
    assert!(String::from_utf8_lossy(&out).contains(r#""code":"limit""#));
}
