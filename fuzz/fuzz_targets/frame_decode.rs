//! Responses, events and output frames, written by the protocol's own encoders and cut
//! into arbitrary chunks, must decode to exactly what was written; arbitrary bytes fed to
//! the decoder and the line splitter must never panic or exceed their bounds.
#![no_main]

use arbitrary::Arbitrary;
use genward::core::{ExitCause, SessionState, Stream};
use genward::proto::event::{Demotion, WireEvent};
use genward::proto::framing::{FrameDecoder, LineSplitter, Message, OutputFrame};
use genward::proto::json::{ObjWriter, Value};
use genward::proto::names::WireName;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Item {
    Response {
        id: u64,
        note: String,
    },
    Output {
        session: String,
        gen: u64,
        stream: u8,
        offset: u64,
        pos: u64,
        data: Vec<u8>,
    },
    Event {
        kind: u8,
        session: String,
        gen: u64,
        n: u64,
        code: Option<i32>,
        flag: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    items: Vec<Item>,
    cuts: Vec<u16>,
    raw: Vec<u8>,
}

fn stream_of(i: u8) -> Stream {
    match i % 3 {
        0 => Stream::Stdout,
        1 => Stream::Stderr,
        _ => Stream::Pty,
    }
}

/// One of the daemon's JSON events, its fields drawn from the input.
fn event(
    kind: u8,
    session: &str,
    gen: u64,
    n: u64,
    code: Option<i32>,
    flag: bool,
) -> WireEvent<'static> {
    let session = session.to_owned().into();
    let pick = |len: usize| n as usize % len;
    match kind % 6 {
        0 => WireEvent::Spawned {
            session,
            gen,
            pid: n as u32,
        },
        1 => WireEvent::Exited {
            session,
            gen,
            code,
            signal: flag.then_some(genward::core::signal::SIGKILL),
            cause: ExitCause::ALL[pick(ExitCause::ALL.len())],
            discarded: n,
            truncated: flag,
        },
        2 => WireEvent::State {
            session,
            gen: flag.then_some(gen),
            state: SessionState::ALL[pick(SessionState::ALL.len())],
        },
        3 => WireEvent::Unkillable { session, gen },
        4 => WireEvent::Demoted {
            session,
            pos: n,
            reason: if flag {
                Demotion::Removing
            } else {
                Demotion::Stalled
            },
        },
        _ => WireEvent::Dropped {
            session,
            from: gen,
            to: n,
        },
    }
}

fuzz_target!(|input: Input| {
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    for item in &input.items {
        match item {
            Item::Response { id, note } => {
                let start = bytes.len();
                let mut w = ObjWriter::new(&mut bytes);
                w.u64("id", *id).bool("ok", true).str("note", note);
                w.finish();
                let line = bytes[start..].to_vec();
                bytes.push(b'\n');
                let value = genward::proto::json::parse(&line).expect("writer output parses");
                let Value::Object(response) = value else {
                    panic!("a response is an object")
                };
                expected.push(Message::Response(response));
            }
            Item::Output {
                session,
                gen,
                stream,
                offset,
                pos,
                data,
            } => {
                let frame = OutputFrame {
                    session: session.as_str().into(),
                    gen: *gen,
                    stream: stream_of(*stream),
                    offset: *offset,
                    pos: *pos,
                    t: None,
                    data: data.as_slice().into(),
                };
                frame.write(&mut bytes);
                expected.push(Message::Event(WireEvent::Output(frame.into_owned())));
            }
            Item::Event {
                kind,
                session,
                gen,
                n,
                code,
                flag,
            } => {
                let ev = event(*kind, session, *gen, *n, *code, *flag);
                ev.write(&mut bytes);
                expected.push(Message::Event(ev));
            }
        }
    }

    // Cut the stream at the given points (taken modulo its length, sorted).
    let mut cuts: Vec<usize> = input
        .cuts
        .iter()
        .map(|&c| {
            if bytes.is_empty() {
                0
            } else {
                c as usize % (bytes.len() + 1)
            }
        })
        .collect();
    cuts.sort_unstable();
    let mut decoder = FrameDecoder::new();
    let mut got = Vec::new();
    let mut prev = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        decoder.feed(&bytes[prev..cut]);
        prev = cut;
        while let Some(m) = decoder.next_message() {
            got.push(m.expect("a well-formed stream decodes"));
        }
    }
    assert_eq!(got, expected);
    assert_eq!(decoder.buffered(), 0);

    // Arbitrary bytes: no panic, bounded buffers, and a fatal error ends the decoder.
    let mut decoder = FrameDecoder::with_limits(256, 256);
    let mut splitter = LineSplitter::new(64);
    for chunk in input.raw.chunks(7) {
        decoder.feed(chunk);
        while let Some(m) = decoder.next_message() {
            if m.is_err() && decoder.is_failed() {
                assert!(decoder.next_message().is_none());
                break;
            }
        }
        splitter.feed(chunk, |line| {
            if let Ok(line) = line {
                assert!(line.len() <= 64 && !line.contains(&b'\n'));
            }
        });
        assert!(splitter.buffered() <= 64);
    }
});
