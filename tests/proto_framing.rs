//! Framing under arbitrary chunking: the output-frame decoder must give the same result
//! however the byte stream is cut (the line splitter's own tests do the same for it).

use genward::core::{ExitCause, Stream};
use genward::proto::event::WireEvent;
use genward::proto::framing::{FrameDecoder, Message, OutputFrame};
use genward::proto::json::{parse, Value};

fn sample_stream() -> (Vec<u8>, Vec<Message>) {
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    let response = br#"{"id":1,"ok":true,"gen":3}"#;
    bytes.extend_from_slice(response);
    bytes.push(b'\n');
    let response = parse(response).unwrap().as_object().unwrap().clone();
    expected.push(Message::Response(response));
    // Payloads that look like frame syntax, are not UTF-8, or are empty.
    for (gen, data) in [
        (3u64, &b"\n{\"event\":\"output\"}\n"[..]),
        (3, b"\xff\xfe\x00\r\n"),
        (4, b""),
        (4, b"\n"),
    ] {
        let frame = OutputFrame {
            session: "web".into(),
            gen,
            stream: Stream::Stdout,
            offset: 10 * gen,
            pos: 100 * gen,
            t: None,
            data: data.into(),
        };
        frame.write(&mut bytes);
        expected.push(Message::Event(WireEvent::Output(frame.into_owned())));
    }
    let event = WireEvent::Exited {
        session: "web".into(),
        gen: 3,
        code: Some(143),
        signal: Some(libc::SIGTERM),
        cause: ExitCause::Stopped,
        discarded: 0,
        truncated: false,
    };
    event.write(&mut bytes);
    expected.push(Message::Event(event));
    (bytes, expected)
}

fn decode(chunks: &[&[u8]]) -> Vec<Message> {
    let mut d = FrameDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c);
        while let Some(m) = d.next_message() {
            out.push(m.expect("valid stream"));
        }
    }
    assert_eq!(d.buffered(), 0);
    out
}

#[test]
fn frame_decoder_reassembles_at_every_split_point() {
    let (bytes, expected) = sample_stream();
    assert_eq!(decode(&[&bytes]), expected);
    for i in 0..=bytes.len() {
        for j in (i..=bytes.len()).step_by(7) {
            let got = decode(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
            assert_eq!(got, expected, "split at {i} and {j}");
        }
    }
    let ones: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(decode(&ones), expected);
}

#[test]
fn frame_header_fields_are_what_the_writer_wrote() {
    let mut bytes = Vec::new();
    let frame = OutputFrame {
        session: "a.b-c_1".into(),
        gen: u64::MAX,
        stream: Stream::Pty,
        offset: u64::MAX - 1,
        pos: u64::MAX - 2,
        t: None,
        data: (&b"x"[..]).into(),
    };
    frame.write(&mut bytes);
    let header_line = &bytes[..bytes.iter().position(|&b| b == b'\n').unwrap()];
    let v = parse(header_line).unwrap();
    let o = v.as_object().unwrap();
    assert_eq!(o.get("event"), Some(&Value::from("output")));
    assert_eq!(o.req_u64("gen").unwrap(), u64::MAX);
    assert_eq!(o.req_u64("pos").unwrap(), u64::MAX - 2);
    assert_eq!(o.req_u64("len").unwrap(), 1);
    assert_eq!(o.req_str("stream").unwrap(), "pty");
}
