//! Input larger than a terminal takes at once is written as the program reads it: the
//! terminal is polled for room only while input waits, and that room writes the rest.

mod util;

use serde_json::json;
use util::daemon::Daemon;

#[test]
fn a_paste_larger_than_the_terminal_holds_reaches_the_program_whole() {
    let d = Daemon::start("pty-paste", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Raw and without echo (no line limit, nothing said back), then it counts what it reads.
    let script = "stty raw -echo; echo ready; head -c 300000 | wc -c";
    let gen = c.ok(json!({"op": "spawn", "session": "paste", "pty": true,
        "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "ready");
    // Far more than the terminal's buffers take before the program reads: the write is
    // held and finished as room comes, in two requests to also queue behind held input.
    let half = "x".repeat(150_000);
    c.ok(json!({"op": "write", "session": "paste", "data": half}));
    c.ok(json!({"op": "write", "session": "paste", "data": half}));
    c.output_until(gen, "300000");
    c.events_until(|m| m.is("exited", gen));
}
