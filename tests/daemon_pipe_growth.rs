//! A generation's output pipe stays at the kernel's default size until data comes through
//! it (most short-lived children write nothing, and growing a pipe costs the daemon), and
//! is grown to 1 MiB once the daemon has read its first data, so that a child that writes
//! keeps writing while the daemon serves others.

mod util;

use std::process::{Command, Stdio};

use serde_json::json;
use util::daemon::{output_of, skip_because, Daemon};

/// Prints its stdout pipe's size, then, after each line of input, again.
const SIZES: &str = "import fcntl, sys
F_GETPIPE_SZ = 1032
print('size=%d' % fcntl.fcntl(1, F_GETPIPE_SZ), flush=True)
for _ in sys.stdin:
    print('size=%d' % fcntl.fcntl(1, F_GETPIPE_SZ), flush=True)
";

#[test]
fn an_output_pipe_is_grown_once_its_first_data_is_read() {
    let python = Command::new("python3")
        .args(["-c", ""])
        .stdin(Stdio::null())
        .status();
    if !python.is_ok_and(|s| s.success()) {
        skip_because("an_output_pipe_is_grown_once_its_first_data_is_read: no python3");
        return;
    }
    let d = Daemon::start("pipe-growth", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "p", "argv": ["python3", "-c", SIZES]}))["gen"]
        .as_u64()
        .unwrap();
    let text =
        |seen: &[util::daemon::Msg]| String::from_utf8_lossy(&output_of(seen, gen)).into_owned();
    let mut out = String::new();
    c.events_until(|m| {
        out.push_str(&text(std::slice::from_ref(m)));
        out.contains('\n')
    });
    // Written before the daemon read anything from it: the default size (64 KiB, or
    // less for a user over its pipe pages).
    let first: usize = out.lines().next().unwrap()["size=".len()..]
        .parse()
        .unwrap();
    assert!(first <= 65536, "{out}");
    c.ok(json!({"op": "write", "session": "p", "if_gen": gen, "data": "again\n"}));
    c.events_until(|m| {
        out.push_str(&text(std::slice::from_ref(m)));
        out.lines().count() >= 2 && out.ends_with('\n')
    });
    assert_eq!(
        out.lines().nth(1),
        Some("size=1048576"),
        "grown after the first read: {out}"
    );
    c.ok(json!({"op": "stop", "session": "p"}));
    c.events_until(|m| m.is("exited", gen));
}
