//! A session's retained output survives the daemon: after a crash, `subscribe from_start`
//! and `from_pos` replay what the previous daemon had read, at the same positions, and
//! new output continues the positions; the journal on disk stays bounded by what the
//! logs retain; the restarted daemon replays a big log from the journal's pages, without
//! a copy of it on its heap.

mod util;

use genward::store::journal::{MAX_SPARES, SEGMENT_BYTES};
use genward::testkit::proc;
use serde_json::{json, Value};
use util::daemon::{Daemon, Msg};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("a generation number")
}

/// `(pos, bytes)` of every output frame among `msgs`, for `session`.
fn frames(msgs: &[Msg], session: &str) -> Vec<(u64, Vec<u8>)> {
    msgs.iter()
        .filter_map(|m| match m {
            Msg::Output(v, data) if v["session"] == session => {
                Some((v["pos"].as_u64().unwrap(), data.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The event lines (not output) among `msgs`, for `session`.
fn events(msgs: &[Msg], session: &str) -> Vec<Value> {
    msgs.iter()
        .filter_map(|m| match m {
            Msg::Json(v) if v["session"] == session && v.get("event").is_some() => Some(v.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn output_and_events_are_replayed_at_the_same_positions_after_a_crash() {
    let mut d = Daemon::start("output-survives", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let done = gen_of(&c.ok(json!({"op": "spawn", "session": "done",
        "argv": ["sh", "-c", "printf 'one\\n'; printf 'two\\n' >&2; exit 3"]})));
    let before = c.events_until(|m| m.is("exited", done));
    let running = gen_of(&c.ok(json!({"op": "spawn", "session": "running",
        "on_recover": "keep", "argv": ["sh", "-c", "echo still-here; exec sleep 1000"]})));
    let before_running = c.output_until(running, "still-here");
    drop(c);
    let done_frames = frames(&before, "done");
    let done_events = events(&before, "done");
    assert!(!done_frames.is_empty());

    d.crash_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "done", "from_start": true}));
    let replay = c.events_until(|m| m.is("exited", done));
    assert_eq!(
        frames(&replay, "done"),
        done_frames,
        "same bytes at the same positions"
    );
    assert_eq!(
        events(&replay, "done"),
        done_events,
        "the same events, in order"
    );

    // From a position: the first frame of `running` is found where it was.
    let first = frames(&before_running, "running")[0].clone();
    c.ok(json!({"op": "subscribe", "session": "running", "from_pos": first.0}));
    let seen = c.output_until(running, "still-here");
    assert_eq!(frames(&seen, "running")[0], first);

    // New output goes on from where the old daemon's positions ended.
    let end = done_frames
        .iter()
        .map(|(pos, data)| pos + data.len() as u64)
        .max()
        .unwrap();
    c.ok(json!({"op": "subscribe", "session": "done"}));
    let again = gen_of(&c.ok(json!({"op": "spawn", "session": "done",
        "argv": ["sh", "-c", "echo three"]})));
    assert!(again > done);
    let seen = c.events_until(|m| m.is("exited", again));
    let new_frames = frames(&seen, "done");
    assert_eq!(new_frames[0].0, end, "{new_frames:?}");
}

#[test]
fn a_flood_keeps_the_journal_bounded_and_the_newest_output_survives() {
    let mut d = Daemon::start("output-flood", &[]);
    let mut c = d.client();
    // A quiet session with one old record, which would otherwise pin the oldest segment.
    c.ok(json!({"op": "subscribe", "all": true}));
    let quiet = gen_of(&c.ok(json!({"op": "spawn", "session": "quiet",
        "argv": ["sh", "-c", "echo quiet-line; exec sleep 1000"]})));
    c.output_until(quiet, "quiet-line");
    c.ok(json!({"op": "unsubscribe", "all": true}));
    // 40 MiB through a 1 MiB log: several journal segments come and go.
    let flood = gen_of(&c.ok(json!({"op": "spawn", "session": "flood",
        "argv": ["sh", "-c", "head -c 41943040 /dev/zero; echo; echo flood-done"]})));
    c.ok(json!({"op": "wait", "session": "flood", "gen": flood}));
    let on_disk = output_bytes(&d);
    // About twice what the two logs retain, two segments of slack, the one being
    // written, and the spares kept to be written over.
    let bound = 2 * (2 << 20) + (3 + MAX_SPARES as u64) * SEGMENT_BYTES;
    assert!(
        on_disk <= bound,
        "the journal holds {on_disk} bytes for about 1 MiB retained"
    );
    drop(c);

    d.crash_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "flood", "from_start": true}));
    let replay = c.events_until(|m| m.is("exited", flood));
    let got = frames(&replay, "flood");
    // Consecutive positions up to the very end of the stream.
    for pair in got.windows(2) {
        assert_eq!(pair[0].0 + pair[0].1.len() as u64, pair[1].0);
    }
    let last = got.last().unwrap();
    assert_eq!(
        last.0 + last.1.len() as u64,
        41943040 + "\nflood-done\n".len() as u64
    );
    assert!(String::from_utf8_lossy(&last.1).ends_with("flood-done\n"));
    let retained: usize = got.iter().map(|(_, data)| data.len()).sum();
    assert!(retained <= 1 << 20, "{retained}");

    c.ok(json!({"op": "subscribe", "session": "quiet", "from_start": true}));
    let seen = c.output_until(quiet, "quiet-line");
    assert_eq!(frames(&seen, "quiet")[0].0, 0);
}

/// Bytes of every file in the state directory's `output/`.
fn output_bytes(d: &Daemon) -> u64 {
    std::fs::read_dir(d.dir.join("state").join("output"))
        .expect("the output journal")
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn a_session_removed_and_made_again_replays_only_its_own_output_after_a_crash() {
    let mut d = Daemon::start("output-reuse", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // The first session of the name writes more records than the second will.
    let old = gen_of(&c.ok(json!({"op": "spawn", "session": "reuse",
        "argv": ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo old-$i; sleep 0.01; done"]})));
    c.events_until(|m| m.is("exited", old));
    c.ok(json!({"op": "remove", "session": "reuse"}));
    let new = gen_of(&c.ok(json!({"op": "spawn", "session": "reuse",
        "argv": ["sh", "-c", "echo new-1"]})));
    c.events_until(|m| m.is("exited", new));
    drop(c);

    d.crash_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "session": "reuse", "from_start": true}));
    let replay = c.events_until(|m| m.is("exited", new));
    let text: Vec<u8> = frames(&replay, "reuse")
        .into_iter()
        .flat_map(|(_, b)| b)
        .collect();
    assert_eq!(String::from_utf8_lossy(&text), "new-1\n");
    assert!(
        replay.iter().all(|m| m.json()["gen"] != json!(old)),
        "nothing of the removed session: {replay:?}"
    );
}

/// The daemon's anonymous (heap and stack) resident memory, KiB.
fn anon_kib(d: &Daemon) -> u64 {
    proc::status_number(d.pid, "RssAnon").expect("the daemon's RssAnon")
}

#[test]
fn a_big_log_is_replayed_from_the_journal_not_copied_onto_the_heap() {
    const LOG: u64 = 16 << 20;
    let mut d = Daemon::start("output-mapped", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "list"}));
    let idle = anon_kib(&d);
    let big = gen_of(&c.ok(json!({"op": "spawn", "session": "big", "buffer": LOG,
        "argv": ["sh", "-c", format!("head -c {LOG} /dev/zero; echo; echo big-done")]})));
    c.ok(json!({"op": "wait", "session": "big", "gen": big}));
    drop(c);

    d.crash_and_restart(&[]);
    let mut c = d.client();
    c.ok(json!({"op": "list"}));
    let restarted = anon_kib(&d);
    eprintln!(
        "RssAnon {idle} KiB idle, {restarted} KiB after a restart with a {} MiB log; \
         RssFile {:?} KiB, RssShmem {:?} KiB",
        LOG >> 20,
        proc::status_number(d.pid, "RssFile"),
        proc::status_number(d.pid, "RssShmem"),
    );
    // A heap copy of the log would be all of it; the slack is for everything else.
    assert!(
        restarted < idle + (LOG >> 10) / 2,
        "anonymous memory grew from {idle} KiB to {restarted} KiB"
    );

    // And the log is all there, at its positions, up to its very end.
    c.ok(json!({"op": "subscribe", "session": "big", "from_start": true}));
    let replay = c.events_until(|m| m.is("exited", big));
    let got = frames(&replay, "big");
    for pair in got.windows(2) {
        assert_eq!(pair[0].0 + pair[0].1.len() as u64, pair[1].0);
    }
    let retained: u64 = got.iter().map(|(_, data)| data.len() as u64).sum();
    assert!(retained > LOG - (1 << 20), "{retained} bytes replayed");
    let last = got.last().unwrap();
    assert_eq!(
        last.0 + last.1.len() as u64,
        LOG + "\nbig-done\n".len() as u64
    );
}
