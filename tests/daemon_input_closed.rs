//! A child that closes its stdin pipe is told at once (`input_closed`), from the pipe's
//! own report that nobody reads it any more — not at the next write, which used to be
//! answered `ok` and its data dropped. The keeper drops its copy of that stdin too, and a
//! leader's own end is not announced as a closed input.

mod util;

use std::path::Path;
use std::time::Instant;

use genward::store::keeper_file::{decode_keeper, KEEPER_FILE};
use serde_json::json;
use util::daemon::{fifo, release, Daemon, PATIENCE};

/// The keeper's pid, as its record in the state directory says.
fn keeper_pid(state: &Path) -> u32 {
    let bytes = std::fs::read(state.join(KEEPER_FILE)).expect("the keeper's record");
    decode_keeper(&bytes).expect("a well-formed record").pid
}

/// Whether process `pid` holds a descriptor of the open file `link` names (`pipe:[N]`).
fn holds(pid: u32, link: &str) -> bool {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the keeper's descriptors");
    dir.flatten()
        .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == link))
}

#[test]
fn a_child_closing_its_stdin_is_told_without_any_write() {
    let d = Daemon::start("input-closed", &[]);
    let keeper = keeper_pid(&d.dir.join("state"));
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Names its stdin pipe (`readlink` inherits it), closes it, and waits for the test.
    let script = r#"readlink /proc/self/fd/0; exec 0<&-; read x < "$1"; echo released"#;
    let gen = c.ok(json!({"op": "spawn", "session": "deaf",
        "argv": ["sh", "-c", script, "sh", go]}))["gen"]
        .as_u64()
        .unwrap();
    // Its output (read from another pipe) may come after the event, or before.
    let mut pipe = String::new();
    let mut closed = false;
    let seen = c.events_until(|m| {
        if let util::daemon::Msg::Output(v, data) = m {
            if v["gen"] == json!(gen) {
                pipe.push_str(&String::from_utf8_lossy(data));
            }
        }
        assert!(!m.is("exited", gen), "it ended before input_closed: {m:?}");
        closed |= m.is("input_closed", gen);
        closed && pipe.ends_with('\n')
    });
    assert!(seen.iter().any(|m| m.is("spawned", gen)));
    let pipe = pipe.trim().to_owned();
    assert!(pipe.starts_with("pipe:["), "its stdin: {pipe:?}");
    // Later writes are refused, the first one included.
    c.err(
        json!({"op": "write", "session": "deaf", "data": "anyone?\n"}),
        "input_closed",
    );
    // The keeper drops its copy of the pipe (a message it reads in its own time).
    let deadline = Instant::now() + PATIENCE;
    while holds(keeper, &pipe) {
        assert!(Instant::now() < deadline, "the keeper still holds {pipe}");
        std::thread::yield_now();
    }
    // It was running all along: released, it ends on its own.
    release(&go);
    let seen = c.events_until(|m| m.is("exited", gen));
    let exited = seen.last().unwrap().json();
    assert_eq!(exited["code"], 0, "{exited}");
    assert_eq!(exited["cause"], "exited", "{exited}");
    assert!(
        !seen.iter().any(|m| m.is("input_closed", gen)),
        "told twice"
    );
}

/// A program that closes every descriptor of its terminal is told as soon as the terminal
/// hangs up, without a write (which used to be taken and dropped, the next one refused).
#[test]
fn a_program_closing_its_terminal_is_told_without_any_write() {
    let d = Daemon::start("input-closed-pty", &[]);
    let go = fifo(&d, "go");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = r#"echo bye; exec 0<&- 1>&- 2>&-; read x < "$1""#;
    let gen = c.ok(json!({"op": "spawn", "session": "closer", "pty": true,
        "argv": ["sh", "-c", script, "sh", go]}))["gen"]
        .as_u64()
        .unwrap();
    c.events_until(|m| {
        assert!(!m.is("exited", gen), "it ended before input_closed: {m:?}");
        m.is("input_closed", gen)
    });
    c.err(
        json!({"op": "write", "session": "closer", "data": "x\n"}),
        "input_closed",
    );
    release(&go);
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["code"], 0);
}

/// A leader's end closes its input as well: that is its `exited`, not an `input_closed`.
#[test]
fn an_end_is_not_announced_as_a_closed_input() {
    let d = Daemon::start("input-closed-end", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let n = 200;
    let mut left = std::collections::HashSet::new();
    for i in 0..n {
        let argv = if i % 2 == 0 {
            json!(["true"])
        } else {
            json!(["sh", "-c", "echo hi"])
        };
        // Pipes, and a terminal, which hangs up as its program ends.
        let pty = i % 3 == 0;
        let req = json!({"op": "spawn", "session": format!("s{i}"), "argv": argv, "pty": pty});
        let gen = c.ok(req)["gen"].as_u64().unwrap();
        left.insert(gen);
    }
    let mut closed = 0;
    c.events_until(|m| {
        let v = m.json();
        if v["event"] == "input_closed" {
            closed += 1;
        }
        if v["event"] == "exited" {
            left.remove(&v["gen"].as_u64().unwrap());
        }
        left.is_empty()
    });
    assert_eq!(closed, 0, "input_closed announced for ends");
}
