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

/// `close_input` on a PTY ends the program's input even when the last line sent has no
/// newline: one end-of-file character only hands the partial line to the reader, so a
/// program reading to the end (`wc`) would wait forever.
#[test]
fn close_input_after_a_partial_line_ends_the_programs_input() {
    let d = Daemon::start("pty-eof-partial", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "stty -echo; echo ready; wc -c";
    let gen = c.ok(json!({"op": "spawn", "session": "wc", "pty": true,
        "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "ready");
    c.ok(json!({"op": "write", "session": "wc", "data": "abc"}));
    c.ok(json!({"op": "close_input", "session": "wc"}));
    c.output_until(gen, "3");
    let seen = c.events_until(|m| m.is("exited", gen));
    let end = seen.last().unwrap();
    assert_eq!(end.json()["code"], 0, "{end:?}");
}

/// In raw mode the end of input is one Ctrl-D byte, as documented, however the input
/// ended.
#[test]
fn close_input_in_raw_mode_sends_one_ctrl_d() {
    let d = Daemon::start("pty-eof-raw", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "stty raw -echo; echo ready; head -c 3 | od -An -c; sleep 1";
    let gen = c.ok(json!({"op": "spawn", "session": "raw", "pty": true,
        "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "ready");
    c.ok(json!({"op": "write", "session": "raw", "data": "ab"}));
    c.ok(json!({"op": "close_input", "session": "raw"}));
    c.output_until(gen, "a   b 004");
}

/// A program that closed every descriptor of its terminal takes no more input: a write is
/// told `input_closed` (and later writes refused), as for a stdin pipe it closed, instead
/// of bytes being accepted and dropped.
#[test]
fn input_to_a_terminal_the_program_closed_is_refused() {
    let d = Daemon::start("pty-closed-tty", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "echo bye; exec 0<&- 1>&- 2>&-; sleep 1000";
    let gen = c.ok(json!({"op": "spawn", "session": "closer", "pty": true,
    "argv": ["sh", "-c", script]}))["gen"]
        .as_u64()
        .unwrap();
    c.output_until(gen, "bye");
    // The daemon learns of the hang-up from the terminal, when it comes: writes before it
    // are the terminal's still. Asked until refused (the old daemon took them for ever,
    // until the request ran out of patience with the whole test).
    let deadline = std::time::Instant::now() + util::daemon::PATIENCE;
    loop {
        let r = c.request(json!({"op": "write", "session": "closer", "data": "x\n"}));
        if r["ok"] == false {
            assert_eq!(r["error"]["code"], "input_closed", "{r}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "writes still taken: {r}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    c.events_until(|m| m.is("input_closed", gen));
    c.ok(json!({"op": "stop", "session": "closer", "grace": 0}));
}
