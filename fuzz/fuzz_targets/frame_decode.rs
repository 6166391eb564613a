//! Framed output cut into arbitrary chunks must reassemble exactly; arbitrary bytes fed to
//! the decoder and the line splitter must never panic or exceed their bounds.
#![no_main]

use arbitrary::Arbitrary;
use genward::core::Stream;
use genward::proto::framing::{FrameDecoder, LineSplitter, Message, OutputFrame};
use genward::proto::json::ObjWriter;
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
                expected.push(Message::Json(value));
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
                    data: data.as_slice().into(),
                };
                frame.write(&mut bytes);
                expected.push(Message::Output(frame.into_owned()));
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
