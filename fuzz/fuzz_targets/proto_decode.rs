//! Arbitrary bytes into the JSON parser and the request decoder: nothing may panic, every
//! accepted value must survive write → parse unchanged, and every request the daemon
//! accepts must survive the client's encoder: encode → decode gives the same operation.
#![no_main]

use genward::proto::envelope::Request;
use genward::proto::json::{parse_with, Limits};
use genward::proto::request;
use libfuzzer_sys::fuzz_target;

const TIGHT: Limits = Limits {
    max_len: 4096,
    max_depth: 4,
    max_string_len: 16,
    max_elements: 64,
};

fuzz_target!(|data: &[u8]| {
    for limits in [Limits::DEFAULT, TIGHT] {
        if let Ok(value) = parse_with(data, &limits) {
            // Written floats may be longer than their input (`1e5` → `100000.0`).
            let reparse = Limits {
                max_len: usize::MAX,
                ..limits
            };
            let written = value.to_bytes();
            assert_eq!(parse_with(&written, &reparse).as_ref(), Ok(&value));
        }
    }
    if let Ok(req) = Request::decode(data, &Limits::DEFAULT) {
        assert!(req.args.get("id").is_none() && req.args.get("op").is_none());
        if let Ok(op) = request::decode(&req.op, &req.args) {
            let mut line = Vec::new();
            request::encode(&req.id, &op, &mut line).expect("a decoded operation encodes");
            assert_eq!(line.pop(), Some(b'\n'));
            // Durations are written as milliseconds (`"1d"` as 86400000): longer lines.
            let relaxed = Limits {
                max_len: usize::MAX,
                ..Limits::DEFAULT
            };
            let again = Request::decode(&line, &relaxed).expect("an encoded request decodes");
            assert_eq!(again.id, req.id);
            assert_eq!(request::decode(&again.op, &again.args).as_ref(), Ok(&op));
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(bytes) = genward::proto::base64::decode(text) {
            assert_eq!(genward::proto::base64::encode(&bytes), text);
        }
    }
});
