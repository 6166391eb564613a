//! `genward attach` without a terminal (standard input a pipe): input forwarded, output
//! shown for the followed generation only, the child's status as the exit status, and a
//! replacement followed.

mod util;

use util::cli::{await_line, command, gw, gw_input, gw_ok, run_cmd, GatedSink, Streaming};
use util::daemon::Daemon;

#[test]
fn input_goes_in_output_comes_out_and_the_status_is_the_childs() {
    let d = Daemon::start("cli-attach-pipes", &[]);
    let gen = gw_ok(
        &d,
        &[
            "run",
            "job",
            "--",
            "sh",
            "-c",
            "echo ready; read x; echo got $x; exit 4",
        ],
    );
    let out = gw_input(&d, &["attach", "job"], b"abc\n");
    assert_eq!(out.code, Some(4), "{out:?}");
    assert_eq!(out.stdout, "ready\ngot abc\n");
    assert_eq!(out.stderr, format!("[genward: job gen {gen}: exit 4]\n"));
}

#[test]
fn piped_input_is_data_and_the_detach_key_byte_does_not_detach() {
    let d = Daemon::start("cli-attach-pipes-keybyte", &[]);
    gw_ok(
        &d,
        &[
            "run",
            "bin",
            "--",
            "sh",
            "-c",
            "n=$(head -c 9 | wc -c); echo got $n",
        ],
    );
    // Ctrl-\ (0x1c), alone and doubled, among the bytes: all 9 reach the process.
    let out = gw_input(&d, &["attach", "bin"], b"ab\x1ccd\x1c\x1cef");
    assert_eq!(out.stdout.trim(), "got 9", "{out:?}");
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn a_generation_that_already_ended_cannot_be_attached() {
    let d = Daemon::start("cli-attach-ended", &[]);
    let gen = gw_ok(&d, &["run", "done", "--", "true"]);
    assert_eq!(gw(&d, &["wait", "done", "--gen", &gen]).code, Some(0));
    let out = gw(&d, &["attach", "done"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("no process to attach to"), "{out:?}");
    assert!(out.stderr.contains("genward restart done"), "{out:?}");
}

#[test]
fn a_replacement_is_followed_and_the_old_output_is_not_shown_after_it() {
    let d = Daemon::start("cli-attach-follow", &[]);
    let old = gw_ok(
        &d,
        &["run", "s", "--", "sh", "-c", "echo old; exec sleep 600"],
    );
    // Standard input is empty: the attachment only watches.
    let mut attach = Streaming::start(&d, &["attach", "s"]);
    // Output is shown from the followed generation on, so seeing `old` means attached
    // to the old generation.
    attach.until(|l| l == "old");
    let new = gw_ok(
        &d,
        &["run", "s", "--", "sh", "-c", "echo new; read x; exit 3"],
    );
    let lines = attach.until(|l| l == "new");
    assert_eq!(
        lines,
        [
            format!("[genward: gen {old} replaced by gen {new}]"),
            "new".to_string()
        ]
    );
    // Input for the new generation ends it; the attachment ends with its status.
    gw(&d, &["send", "s", "go\n", "--if-gen", &new]).ok();
    assert_eq!(attach.finish(), Some(3));
}

#[test]
fn a_large_paste_during_a_flood_of_output_arrives_whole() {
    let d = Daemon::start("cli-attach-paste", &[]);
    // The child floods 16 MB of output while it reads 900 kB of input (under the daemon's
    // 1 MiB limit of queued input), then reports how much it read: every byte of input
    // arrives, and all output is read while input is being written.
    let script =
        "head -c 16000000 /dev/zero & n=$(head -c 900000 | wc -c); wait; echo; echo got $n";
    gw_ok(&d, &["run", "paste", "--", "sh", "-c", script]);
    let input = vec![b'x'; 900_000];
    let out = gw_input(&d, &["attach", "paste"], &input);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.ends_with("\ngot 900000\n"),
        "{:?}",
        &out.stdout[out.stdout.len().saturating_sub(100)..]
    );
}

#[test]
fn the_replay_starts_at_a_line_boundary() {
    let d = Daemon::start("cli-attach-replay-boundary", &[]);
    // More than the replay holds, written in blocks that end inside lines: the replay
    // (whole records) starts inside a line.
    let gen = gw_ok(
        &d,
        &[
            "run",
            "counter",
            "--",
            "sh",
            "-c",
            "seq 1 30000 | dd bs=997 status=none; echo ready; read x; exit 0",
        ],
    );
    await_line(&d, "counter", &gen, "ready");
    let out = gw_input(&d, &["attach", "counter"], b"x\n");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.last(), Some(&"ready"), "{}", out.stderr);
    let numbers: Vec<u32> = lines[..lines.len() - 1]
        .iter()
        .map(|l| {
            l.parse()
                .unwrap_or_else(|_| panic!("a partial line: {l:?}"))
        })
        .collect();
    assert!(numbers.len() > 1000, "{}", numbers.len());
    for pair in numbers.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "whole, consecutive lines");
    }
    assert_eq!(numbers.last(), Some(&30000));
}

/// Piped input beyond what the process's input queue holds (1 MiB) waits for room, as a
/// writer to a full pipe does: every byte arrives, in order — none refused and skipped
/// while what follows it goes in.
#[test]
fn piped_input_larger_than_the_input_queue_arrives_whole() {
    let d = Daemon::start("cli-attach-pipes-full", &[]);
    let sink = GatedSink::run(&d, "sink", 3 << 20);
    let attach = {
        let cmd = command(&d, &["attach", "sink"]);
        let input = sink.input.clone();
        std::thread::spawn(move || run_cmd(cmd, &input))
    };
    let done = sink.open_when_full(&d, attach);
    assert_eq!(done.code, Some(0), "{done:?}");
}

/// A shutdown stops the followed generation, then closes every connection: the
/// attachment ends with that generation's end and status (as `wait` does), not with
/// "lost the daemon".
#[test]
fn a_shutdown_ends_the_attachment_with_the_generations_status() {
    let d = Daemon::start("cli-attach-shutdown", &[]);
    let gen = gw_ok(
        &d,
        &["run", "s", "--", "sh", "-c", "echo up; exec sleep 600"],
    );
    let mut attach = Streaming::start(&d, &["attach", "s"]);
    attach.until(|l| l == "up");
    gw_ok(&d, &["shutdown"]);
    assert_eq!(attach.finish(), Some(143), "gen {gen}");
}

/// The end of piped input is passed on (`close_input`): a process reading to the end of
/// its input finishes, as it would reading the pipe itself, and the attachment ends with
/// its status.
#[test]
fn the_end_of_piped_input_ends_the_processs_input() {
    let d = Daemon::start("cli-attach-pipes-eof", &[]);
    let gen = gw_ok(
        &d,
        &[
            "run",
            "count",
            "--",
            "sh",
            "-c",
            "n=$(wc -c); echo got $n; exit 5",
        ],
    );
    let out = gw_input(&d, &["attach", "count"], b"hello");
    assert_eq!(out.code, Some(5), "{out:?}");
    assert_eq!(out.stdout, "got 5\n");
    assert_eq!(out.stderr, format!("[genward: count gen {gen}: exit 5]\n"));
}

/// The end of input is passed on to the generation it was read for and to no other: a
/// replacement followed afterwards never got this input, and still reads what is
/// written to it.
#[test]
fn the_end_of_input_goes_to_the_generation_it_was_read_for() {
    let d = Daemon::start("cli-attach-pipes-eof-gen", &[]);
    gw_ok(
        &d,
        &[
            "run",
            "s",
            "--",
            "sh",
            "-c",
            "echo up; cat; echo old-input-ended; exec sleep 600",
        ],
    );
    // Standard input is empty: its end is all there is to pass on.
    let mut attach = Streaming::start(&d, &["attach", "s"]);
    attach.until(|l| l == "old-input-ended");
    let new = gw_ok(
        &d,
        &[
            "run",
            "s",
            "--",
            "sh",
            "-c",
            "echo new; read x; echo read=$x; exit 3",
        ],
    );
    attach.until(|l| l == "new");
    let sent = gw(&d, &["send", "s", "hi\n", "--if-gen", &new]);
    assert_eq!(
        sent.code,
        Some(0),
        "the new generation's input was closed: {sent:?}"
    );
    let lines = attach.until(|l| l.starts_with("read="));
    assert_eq!(lines.last().map(String::as_str), Some("read=hi"));
    assert_eq!(attach.finish(), Some(3));
}
