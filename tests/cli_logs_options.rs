//! `genward logs` options against a real daemon: `-n` (the last lines), `--since` and
//! `--timestamps` (from the time each output frame was read, kept with the output),
//! `--gen` refusing a generation the session never had, a marker between generations,
//! and `-f` ending with the generation followed unless `--follow-restarts`.

mod util;

use std::process::Stdio;

use util::cli::{command, gw, gw_ok, Streaming};
use util::daemon::Daemon;

fn finished(d: &Daemon, session: &str, args: &[&str]) -> String {
    let gen = gw_ok(d, &[&["run", session, "--"][..], args].concat());
    assert_eq!(gw(d, &["wait", session, "--gen", &gen]).code, Some(0));
    gen
}

#[test]
fn the_last_lines_across_reads_and_streams() {
    let d = Daemon::start("cli-logs-n", &[]);
    finished(&d, "p", &["sh", "-c", "seq 1 5000; printf 'no newline'"]);
    let out = gw(&d, &["logs", "p", "-n", "3"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "4999\n5000\nno newline");
    assert_eq!(gw(&d, &["logs", "p", "--lines", "0"]).ok(), "");
    let bad = gw(&d, &["logs", "p", "-n", "many"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    // Without following nothing waits for the reader: refused, not silently ignored.
    let bad = gw(&d, &["logs", "p", "--lossless"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(
        bad.stderr
            .contains("`--lossless` needs -f or --follow-restarts"),
        "{bad:?}"
    );
}

#[test]
fn timestamps_and_since_come_from_when_the_output_was_read() {
    let d = Daemon::start("cli-logs-time", &[]);
    finished(&d, "p", &["sh", "-c", "echo one; echo two >&2; echo three"]);
    let out = gw(&d, &["logs", "p", "--timestamps"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (text, want) in [
        (&out.stdout, ["one", "three"].as_slice()),
        (&out.stderr, &["two"]),
    ] {
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), want.len(), "{text}");
        for (line, word) in lines.iter().zip(want.iter()) {
            let (stamp, rest) = line.split_once(' ').unwrap();
            assert_eq!(rest, *word);
            // 2026-12-02T05:30:01.123Z: this year's, to the millisecond.
            assert_eq!(stamp.len(), 24, "{stamp}");
            assert!(
                stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
                "{stamp}"
            );
            let year: u64 = stamp[..4].parse().unwrap();
            assert!(year >= 1970 + now / 31_557_600 - 1, "{stamp}");
        }
    }
    // Everything was read within the last hour; nothing in the future.
    assert_eq!(gw(&d, &["logs", "p", "--since", "1h"]).ok(), "one\nthree\n");
    assert_eq!(
        gw(&d, &["logs", "p", "--since", &format!("@{}", now + 3600)]).ok(),
        ""
    );
    let bad = gw(&d, &["logs", "p", "--since", "yesterday"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("--since"), "{bad:?}");
}

#[test]
fn an_unknown_generation_is_an_error_and_generations_are_marked() {
    let d = Daemon::start("cli-logs-gens", &[]);
    let first = finished(&d, "p", &["echo", "first"]);
    let second = finished(&d, "p", &["echo", "second"]);
    let out = gw(&d, &["logs", "p", "--gen", "999999"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no generation 999999"), "{out:?}");
    assert!(
        out.stderr.contains(&first) && out.stderr.contains(&second),
        "{out:?}"
    );
    let out = gw(&d, &["logs", "p"]);
    assert_eq!(out.stdout, "first\nsecond\n");
    assert_eq!(out.stderr, format!("[genward: p gen {second}]\n"));
    // With `-n`, markers only between the lines shown.
    let third = finished(&d, "p", &["echo", "third"]);
    let out = gw(&d, &["logs", "p", "-n", "2"]);
    assert_eq!(out.stdout, "second\nthird\n");
    assert_eq!(out.stderr, format!("[genward: p gen {third}]\n"));
    for n in ["1", "0"] {
        let out = gw(&d, &["logs", "p", "-n", n]);
        assert_eq!(out.stderr, "", "-n {n}: no marker for lines not shown");
    }
}

#[test]
fn following_ends_with_the_generation_unless_restarts_are_followed() {
    let d = Daemon::start("cli-logs-follow", &[]);
    let gen = gw_ok(&d, &["run", "c", "--", "cat"]);
    let mut plain = Streaming::start(&d, &["logs", "c", "-f"]);
    let mut restarts = Streaming::start(&d, &["logs", "c", "--follow-restarts"]);
    gw(&d, &["send", "c", "one\n"]).ok();
    plain.until(|l| l == "one");
    restarts.until(|l| l == "one");
    let next = gw_ok(&d, &["run", "c", "--", "sh", "-c", "echo two; exec cat"]);
    assert!(next.parse::<u64>().unwrap() > gen.parse::<u64>().unwrap());
    // The plain follower ended with the generation it followed.
    assert_eq!(plain.finish(), Some(0));
    restarts.until(|l| l == "two");
    gw(&d, &["rm", "c"]).ok();
    assert_eq!(restarts.finish(), Some(0));
}

/// Following restarts, a new generation's start is marked once, by `[genward: c gen N
/// started, pid P]`: its output does not add the marker between generations as well.
#[test]
fn a_followed_restart_is_marked_once() {
    let d = Daemon::start("cli-logs-restart-marker", &[]);
    gw_ok(&d, &["run", "c", "--", "cat"]);
    let mut cmd = command(&d, &["logs", "c", "--follow-restarts"]);
    cmd.stderr(Stdio::piped());
    let mut restarts = Streaming::start_cmd(cmd);
    gw(&d, &["send", "c", "one\n"]).ok();
    restarts.until(|l| l == "one");
    let next = gw_ok(&d, &["run", "c", "--", "sh", "-c", "echo two; exec cat"]);
    restarts.until(|l| l == "two");
    gw(&d, &["rm", "c"]).ok();
    let (code, stderr) = restarts.finish_stderr();
    assert_eq!(code, Some(0), "{stderr}");
    let started = format!("[genward: c gen {next} started, pid ");
    let between = format!("[genward: c gen {next}]");
    let marks: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with(&started) || *l == between)
        .collect();
    assert_eq!(marks.len(), 1, "{stderr}");
}

/// `logs --timestamps -n N` is the last N lines of `logs --timestamps`, both streams
/// merged: a line of one stream that starts while the other's is unfinished ends that
/// one there, and its rest is a line of its own, in `-n` as in the full view.
#[test]
fn the_last_timestamped_lines_are_those_of_the_full_view() {
    let d = Daemon::start("cli-logs-n-split", &[]);
    // Each part is read on its own: the next is written once the test saw the last.
    let script = "printf out-part; read x; echo err-line >&2; read x; printf ' out-rest\\nlast\\n'";
    gw_ok(&d, &["run", "p", "--", "sh", "-c", script]);
    let mut frames = Streaming::start(&d, &["logs", "p", "-f", "--json"]);
    frames.until(|l| l.contains(r#""stream":"stdout""#));
    gw(&d, &["send", "p", "\n"]).ok();
    frames.until(|l| l.contains(r#""stream":"stderr""#));
    gw(&d, &["send", "p", "\n"]).ok();
    frames.until(|l| l.contains(r#""event":"exited""#));
    assert_eq!(frames.finish(), Some(0));

    // Both streams on one, as on a terminal.
    let merged = |extra: &[&str]| {
        let mut cmd = std::process::Command::new("sh");
        let script = "g=$1 s=$2; shift 2; \"$g\" --socket \"$s\" logs p --timestamps \"$@\" 2>&1";
        cmd.args(["-c", script, "sh", env!("CARGO_BIN_EXE_genward")])
            .arg(&d.socket)
            .args(extra);
        let out = util::cli::run_cmd(cmd, b"");
        assert_eq!(out.code, Some(0), "{out:?}");
        out.stdout
    };
    let full = merged(&[]);
    let text: Vec<&str> = full.lines().map(|l| l.split_once(' ').unwrap().1).collect();
    assert_eq!(
        text,
        ["out-part", "err-line", " out-rest", "last"],
        "{full}"
    );
    let lines: Vec<&str> = full.lines().collect();
    for n in 0..=5 {
        let tail = merged(&["-n", &n.to_string()]);
        let want = &lines[lines.len().saturating_sub(n)..];
        assert_eq!(
            tail.lines().collect::<Vec<_>>(),
            want,
            "-n {n}:\n{tail}\nfull:\n{full}"
        );
    }
}
