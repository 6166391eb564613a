//! Running out of descriptors: a connection that arrives while the daemon has none left is
//! told so at once (`limit`), never left hanging, and service resumes once descriptors
//! free up.

mod util;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serde_json::{json, Value};
use util::daemon::{Daemon, PATIENCE};

/// What a new connection got in answer to `hello`.
#[derive(Debug, PartialEq)]
enum Answer {
    Served,
    Refused(String),
    /// The daemon closed it (refused) before its reason could be read.
    Closed,
}

fn hello(stream: &UnixStream) -> Answer {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    // A refused connection may already be closed: its reason is still readable.
    let _ = writer.write_all(b"{\"id\":1,\"op\":\"hello\"}\n");
    let mut line = String::new();
    match BufReader::new(stream).read_line(&mut line) {
        Ok(0) => Answer::Closed,
        Ok(_) => {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["ok"] == json!(true) {
                Answer::Served
            } else {
                Answer::Refused(v["error"]["code"].as_str().unwrap_or("").to_owned())
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Answer::Closed,
        Err(e) => panic!("no answer within {PATIENCE:?}: the connection hangs ({e})"),
    }
}

#[test]
fn connections_beyond_the_descriptor_limit_are_refused_not_left_hanging() {
    // A shell that lowers the hard limit (so the daemon cannot raise it) and runs the
    // daemon as its child.
    let wrapper = ["sh", "-c", "ulimit -n 48 && \"$@\"; :", "sh"];
    let d = Daemon::start_wrapped("emfile", &wrapper, &[], None);
    let mut served = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        let stream = UnixStream::connect(&d.socket).unwrap();
        match hello(&stream) {
            Answer::Served => served.push(stream),
            Answer::Refused(code) => {
                assert_eq!(code, "limit");
                refused += 1;
            }
            Answer::Closed => refused += 1,
        }
        if refused >= 5 {
            break;
        }
    }
    assert!(
        refused >= 5,
        "never ran out of descriptors ({} served)",
        served.len()
    );
    assert!(!served.is_empty());
    drop(served);
    // Descriptors are free again: a new connection is served. (The daemon notices the
    // closed connections as it serves this one; retry until it has.)
    for attempt in 0.. {
        let stream = UnixStream::connect(&d.socket).unwrap();
        match hello(&stream) {
            Answer::Served => break,
            other => assert!(
                attempt < 100,
                "still refused once descriptors are free: {other:?}"
            ),
        }
    }
}
