//! Micro benchmark of the protocol's hot paths, through the same encoders and decoders the
//! daemon and the CLI use: decoding a typical request (envelope, then the typed
//! operation) and encoding it back, writing an output frame header, and decoding the
//! frame on the client side. Reports ns per operation.
//!
//! serde_json parsing the same bytes into its `Value` is measured alongside as a reference.
//!
//! `cargo bench --bench json` measures; under `cargo test` (no `--bench` argument) each
//! case runs once as a smoke test.

use std::hint::black_box;
use std::time::Instant;

use genward::core::Stream;
use genward::proto::envelope::{Request, RequestId};
use genward::proto::framing::{FrameDecoder, OutputFrame};
use genward::proto::json::{parse, Limits};
use genward::proto::request;

const REQUEST: &[u8] = br#"{"id":42,"op":"spawn","session":"agent-7","argv":["node","server.js","--port","8080"],"cwd":"/srv/app","env":{"NODE_ENV":"production","PORT":"8080"},"pty":{"rows":24,"cols":80},"on_busy":"replace","grace":5000}"#;

/// Runs `op` in five batches and reports the fastest batch, which is the least disturbed
/// by other work on the machine.
fn measure(name: &str, iterations: u64, mut op: impl FnMut()) {
    let batches = if iterations > 1 { 5 } else { 1 };
    let mut best = f64::INFINITY;
    for _ in 0..batches {
        let start = Instant::now();
        for _ in 0..iterations {
            op();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / iterations as f64);
    }
    if iterations > 1 {
        println!("{name:<40} {best:>9.1} ns/op");
    }
}

fn main() {
    let iterations = if std::env::args().any(|a| a == "--bench") {
        1_000_000
    } else {
        1
    };

    measure("decode spawn request (210 bytes)", iterations, || {
        let r = Request::decode(black_box(REQUEST), &Limits::DEFAULT);
        black_box(r.is_ok());
    });

    measure("  same, serde_json::Value (reference)", iterations, || {
        let v = serde_json::from_slice::<serde_json::Value>(black_box(REQUEST));
        black_box(v.is_ok());
    });

    let req = Request::decode(REQUEST, &Limits::DEFAULT).expect("the sample decodes");
    measure("  then its typed operation", iterations, || {
        let op = request::decode(black_box(&req.op), black_box(&req.args));
        black_box(op.is_ok());
    });

    let op = request::decode(&req.op, &req.args).expect("the sample is a valid spawn");
    let mut line = Vec::with_capacity(256);
    measure("encode the same spawn request", iterations, || {
        line.clear();
        request::encode(&RequestId::U64(42), black_box(&op), &mut line).expect("encodes");
        black_box(&line);
    });

    let mut out = Vec::with_capacity(256);
    let payload = vec![0u8; 65536];
    measure("write output frame header", iterations, || {
        out.clear();
        let frame = OutputFrame {
            session: black_box("agent-7").into(),
            gen: black_box(1234),
            stream: Stream::Stdout,
            offset: black_box(1 << 30),
            pos: black_box(3 << 30),
            t: None,
            data: black_box(&payload[..]).into(),
        };
        frame.write_header(&mut out);
        black_box(&out);
    });

    let header = out.clone();
    measure("parse output frame header", iterations, || {
        black_box(parse(black_box(&header[..header.len() - 1])).is_ok());
    });
    measure("  same, serde_json::Value (reference)", iterations, || {
        let v = serde_json::from_slice::<serde_json::Value>(black_box(&header[..header.len() - 1]));
        black_box(v.is_ok());
    });

    let mut frame = header.clone();
    frame.extend_from_slice(&payload);
    frame.push(b'\n');
    let mut decoder = FrameDecoder::new();
    measure(
        "decode a 64 KiB output frame",
        iterations.min(100_000),
        || {
            decoder.feed(black_box(&frame));
            black_box(decoder.next_message().expect("a whole frame").is_ok());
        },
    );

    // Worst cases a client can send in one line: what a 1 MiB line costs the daemon.
    let heavy = if iterations > 1 { 20 } else { 1 };
    let worst: [(&str, Vec<u8>); 4] = [
        (
            "1 MiB string of plain text",
            json_string(&"x".repeat((1 << 20) - 2)),
        ),
        (
            "1 MiB string of \\u escapes",
            json_string(&"\\u00e9".repeat(((1 << 20) - 2) / 6)),
        ),
        ("1 MiB array of 0 (hits value limit)", zeros((1 << 20) - 2)),
        ("1 MiB object, distinct keys", many_keys(1 << 20)),
    ];
    for (name, doc) in &worst {
        measure(name, heavy, || {
            black_box(parse(black_box(doc)).is_ok());
        });
    }
}

fn json_string(body: &str) -> Vec<u8> {
    format!("\"{body}\"").into_bytes()
}

fn zeros(len: usize) -> Vec<u8> {
    let mut doc = b"[0".to_vec();
    while doc.len() + 3 <= len {
        doc.extend_from_slice(b",0");
    }
    doc.push(b']');
    doc
}

fn many_keys(len: usize) -> Vec<u8> {
    let mut doc = b"{".to_vec();
    let mut i = 0u64;
    while doc.len() + 24 < len && i < 60_000 {
        doc.extend_from_slice(format!("\"key{i:0>10}\":{i},").as_bytes());
        i += 1;
    }
    doc.extend_from_slice(b"\"end\":0}");
    doc
}
