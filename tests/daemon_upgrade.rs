//! `upgrade`: the daemon replaces its program in place. A flood through a subscriber
//! crosses a hundred upgrades byte-exact with contiguous positions; generation numbers,
//! pids, pending `wait`s and half-sent requests survive; a process that ends while the
//! program is being replaced, and one that ends after, are reported with their exact
//! codes; an attached shell keeps answering; descriptors and memory come back to where
//! they were; a program that cannot take over is refused or rolled back with the daemon
//! serving throughout; and while a program is being checked, the daemon keeps serving,
//! refuses a second upgrade, and a shutdown kills and reaps the program.

mod util;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::thread;

use genward::testkit::proc;
use serde_json::{json, Value};
use util::cli::gw_ok;
use util::daemon::{daemon_binary, fifo, release, Client, Daemon, Msg, PATIENCE};
use util::tmux::Tmux;

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("a generation number")
}

/// Spawns `req` through `c` and returns its generation once it has started (its
/// `spawned` event, awaited on a connection of its own): a listing taken then names its
/// pid. The connection is returned unsubscribed, for the test to keep: closing it would
/// change the daemon's descriptors at a moment the test does not know.
fn spawn_started(d: &Daemon, c: &mut Client, req: Value) -> (u64, Client) {
    let mut events = d.client();
    events.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(req));
    events.events_until(|m| m.is("spawned", gen));
    events.ok(json!({"op": "unsubscribe", "all": true}));
    (gen, events)
}

/// Asks for an upgrade (to `binary`, or the program the daemon runs) on `c` and returns
/// the answer.
fn upgrade(c: &mut Client, binary: Option<&Path>) -> Value {
    match binary {
        Some(b) => c.request(json!({"op": "upgrade", "binary": b})),
        None => c.request(json!({"op": "upgrade"})),
    }
}

/// `(session, current gen, its pid)` of every listed session (0 for none).
fn listing(c: &mut Client) -> Vec<(String, u64, u64)> {
    let list = c.ok(json!({"op": "list"}));
    let mut rows: Vec<_> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let current = s["current"].as_u64().unwrap_or(0);
            let pid = s["generations"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["gen"].as_u64() == Some(current))
                .and_then(|g| g["pid"].as_u64())
                .unwrap_or(0);
            (s["name"].as_str().unwrap().to_owned(), current, pid)
        })
        .collect();
    rows.sort();
    rows
}

/// What the daemon's descriptors refer to, other than its output journal's segments
/// (their number follows how much output the logs retain, not how often the program was
/// replaced), sorted.
fn fds_besides_journal(pid: u32) -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| !target.contains("/output/"))
        // The signal handlers' pipes are made afresh by each program.
        .map(|target| {
            if target.starts_with("pipe:") {
                "pipe".to_string()
            } else {
                target
            }
        })
        .collect();
    fds.sort();
    fds
}

/// A shell script at `path` that runs `body` and then execs the daemon's program with
/// its arguments.
fn wrapper(path: &Path, body: &str) {
    let mut f = std::fs::File::create(path).unwrap();
    writeln!(
        f,
        "#!/bin/sh\n{body}\nexec '{}' \"$@\"",
        daemon_binary().to_str().unwrap()
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A program at `path` that, asked for its image version, first writes its pid to
/// `pid_file` and waits for a line on `gate`, and otherwise (or then) is the daemon's
/// program: an upgrade to it is held in its check until the test releases it.
fn held_at_check(path: &Path, pid_file: &Path, gate: &Path) {
    let body = format!(
        "if [ \"$1\" = __image-version ]; then echo $$ > '{}'; read line < '{}'; fi",
        pid_file.display(),
        gate.display()
    );
    wrapper(path, &body);
}

/// The pid `held_at_check` wrote once its check started.
fn checked_pid(pid_file: &Path) -> u32 {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(pid_file).unwrap_or_default();
        if let Ok(pid) = text.trim().parse() {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the program's check did not start"
        );
        thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Sends an `upgrade` to `binary` on `c` without waiting for its answer (read later with
/// [`answer_to`]).
fn send_upgrade(c: &mut Client, binary: &Path, id: &str) {
    let mut line =
        serde_json::to_vec(&json!({"id": id, "op": "upgrade", "binary": binary})).unwrap();
    line.push(b'\n');
    c.send_raw(&line);
}

/// The answer to request `id` on `c`, events skipped.
fn answer_to(c: &mut Client, id: &str) -> Value {
    loop {
        if let Msg::Json(v) = c.read_msg() {
            if v.get("event").is_none() && v["id"] == json!(id) {
                return v;
            }
        }
    }
}

#[test]
fn a_flood_crosses_a_hundred_upgrades_byte_exact() {
    let d = Daemon::start("upgrade-flood", &[]);
    let mut c = d.client();
    // Numbered lines, in bursts, for as long as the test upgrades.
    let (flood, _started) = spawn_started(
        &d,
        &mut c,
        json!({"op": "spawn", "session": "flood",
        "buffer": 4 << 20,
        "argv": ["sh", "-c",
            "i=0; while :; do seq $i $((i+499)); i=$((i+500)); sleep 0.002; done"]}),
    );
    let (idle, _started_too) = spawn_started(
        &d,
        &mut c,
        json!({"op": "spawn", "session": "idle",
        "argv": ["sleep", "1000"]}),
    );
    let before = listing(&mut c);

    // The subscriber reads on its own thread, as a live client would.
    let mut sub = d.client();
    sub.ok(json!({"op": "subscribe", "session": "flood", "from_start": true}));
    let reader = {
        thread::spawn(move || {
            let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut dropped = Vec::new();
            loop {
                match sub.next_event() {
                    Msg::Output(v, data) => frames.push((v["pos"].as_u64().unwrap(), data)),
                    Msg::Json(v) if v["event"] == "dropped" => dropped.push(v),
                    Msg::Json(v) if v["event"] == "exited" && v["gen"] == json!(flood) => break,
                    Msg::Json(_) => {}
                }
            }
            (frames, dropped)
        })
    };

    c.ok(json!({"op": "hello"}));
    let fds_before = fds_besides_journal(d.pid);
    let rss_before = proc::status_number(d.pid, "RssAnon").unwrap();
    let mut fds_after_first = Vec::new();
    let mut rss_after_first = 0;
    for i in 0..100 {
        let answer = upgrade(&mut c, None);
        assert_eq!(answer["ok"], json!(true), "upgrade {i}: {answer}");
        assert_eq!(answer["version"], json!(env!("CARGO_PKG_VERSION")));
        assert_eq!(answer["pid"], json!(d.pid), "the daemon's pid stays");
        if i == 0 {
            // A round trip first: the resumed loop has finished its first turns.
            c.ok(json!({"op": "hello"}));
            fds_after_first = fds_besides_journal(d.pid);
            rss_after_first = proc::status_number(d.pid, "RssAnon").unwrap();
        }
    }
    c.ok(json!({"op": "hello"}));
    let fds = fds_besides_journal(d.pid);
    let rss = proc::status_number(d.pid, "RssAnon").unwrap();
    let mut c = d.client();
    assert_eq!(listing(&mut c), before, "generations and pids unchanged");
    c.ok(json!({"op": "stop", "session": "flood"}));
    let (frames, dropped) = reader.join().unwrap();

    assert!(dropped.is_empty(), "nothing dropped: {dropped:?}");
    let mut pos = frames.first().map_or(0, |f| f.0);
    assert_eq!(pos, 0, "the replay starts at the first byte");
    let mut text = Vec::new();
    for (at, data) in &frames {
        assert_eq!(*at, pos, "contiguous positions");
        pos += data.len() as u64;
        text.extend_from_slice(data);
    }
    let text = String::from_utf8(text).unwrap();
    let numbers: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert!(
        numbers.len() > 1000,
        "the flood ran: {} lines",
        numbers.len()
    );
    for (i, n) in numbers.iter().enumerate() {
        assert_eq!(*n, i as u64, "line {i} byte-exact");
    }
    // Each upgrade starts the program afresh: nothing accumulates.
    println!(
        "descriptors {} before, {} after the first upgrade, {} after 100; anonymous memory {rss_before} / {rss_after_first} / {rss} kB",
        fds_before.len(),
        fds_after_first.len(),
        fds.len()
    );
    // Exactly what the first resumed program held; against the program started first, no
    // more (it may still be closing a connection of its start-up when first looked at).
    assert_eq!(fds, fds_after_first, "descriptors back to where they were");
    assert!(
        fds.iter().all(|f| fds_before.contains(f)) && fds.len() <= fds_before.len(),
        "no descriptor the first program did not have: {fds_before:?} then {fds:?}"
    );
    // Anonymous memory: retained output is read back by mapping the journal, not copied,
    // so nothing but allocator noise may grow.
    assert!(
        rss <= rss_after_first + 2 * 1024,
        "anonymous memory {rss} kB after 100 upgrades, {rss_after_first} kB after the first"
    );
    c.ok(json!({"op": "stop", "session": "idle"}));
    let _ = idle;
}

#[test]
fn queues_of_stalled_subscribers_cross_an_upgrade_by_reference() {
    let d = Daemon::start("upgrade-stalled", &[]);
    let mut c = d.client();
    let gen = gen_of(
        &c.ok(json!({"op": "spawn", "session": "out", "buffer": 16 << 20,
        "argv": ["sh", "-c", "read go; seq 1 1000000; read x"]})),
    );
    // Twenty subscribers that read nothing while 7 MB are written: more than their
    // sockets hold, less than their queues and the log.
    let mut subs: Vec<Client> = (0..20).map(|_| d.client()).collect();
    for s in &mut subs {
        s.ok(json!({"op": "subscribe", "session": "out"}));
    }
    c.ok(json!({"op": "subscribe", "session": "out"}));
    c.ok(json!({"op": "write", "session": "out", "data": "go\n"}));
    c.output_until(gen, "\n1000000\n");
    let answer = upgrade(&mut c, None);
    assert_eq!(answer["ok"], json!(true), "{answer}");
    // The frames they are owed are in the image once each, not once per subscriber.
    let image = answer["image_bytes"].as_u64().unwrap();
    println!("image: {image} bytes");
    assert!(image < 1 << 20, "image of {image} bytes");
    c.ok(json!({"op": "write", "session": "out", "data": "x\n"}));
    for s in &mut subs {
        let mut text = Vec::new();
        let mut pos = 0;
        let msgs = s.events_until(|m| m.is("exited", gen));
        for m in &msgs {
            match m {
                Msg::Output(v, data) => {
                    assert_eq!(v["pos"], json!(pos), "contiguous");
                    pos += data.len() as u64;
                    text.extend_from_slice(data);
                }
                Msg::Json(v) => assert_ne!(v["event"], json!("dropped"), "{v}"),
            }
        }
        let want: String = (1..=1000000).map(|i| format!("{i}\n")).collect();
        assert!(text == want.as_bytes(), "{} bytes, byte-exact", text.len());
    }
}

#[test]
fn waits_half_sent_requests_and_exit_codes_cross_an_upgrade() {
    waits_and_exit_codes(&[]);
}

/// The same without pidfds: exits are learned from SIGCHLD, which stays pending (blocked)
/// while the program is replaced.
#[test]
fn waits_and_exit_codes_cross_an_upgrade_with_the_fallback_reaper() {
    waits_and_exit_codes(&["--reaper", "fallback"]);
}

fn waits_and_exit_codes(extra: &[&str]) {
    let d = Daemon::start("upgrade-waits", extra);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    // Ends when told, with the code it reads.
    let reader = gen_of(&c.ok(json!({"op": "spawn", "session": "reader",
        "argv": ["sh", "-c", "read code; exit $code"]})));
    // Ends while the program is being replaced (see the wrapper below).
    let flag = d.dir.join("go");
    let pidfile = d.dir.join("pid");
    let during = gen_of(&c.ok(json!({"op": "spawn", "session": "during",
        "argv": ["sh", "-c", format!(
            "echo $$ > {p}.tmp && mv {p}.tmp {p}; while [ ! -e {f} ]; do sleep 0.01; done; exit 9",
            p = pidfile.display(), f = flag.display())]})));
    while !pidfile.exists() {
        thread::yield_now();
    }
    let during_pid = std::fs::read_to_string(&pidfile).unwrap();

    // A wait for the reader, answered by the next program.
    let mut waiter = d.client();
    waiter.send_raw(
        format!("{{\"id\":\"w\",\"op\":\"wait\",\"session\":\"reader\",\"gen\":{reader}}}\n")
            .as_bytes(),
    );
    // Half a request, finished after the upgrade.
    let mut half = d.client();
    half.send_raw(b"{\"id\":\"h\",\"op\":\"li");
    // Make sure the wait was registered before the upgrade (requests on one connection
    // are answered in order).
    waiter.ok(json!({"op": "hello"}));

    // The new program is started by a script that first lets `during` end and waits until
    // it is a zombie: it ended while no program served.
    let script = d.dir.join("upgrade-during");
    wrapper(
        &script,
        // Shell builtins only: a command the script ran would be a child of the daemon's
        // process, and the shell's `wait` for it could reap the daemon's children too.
        &format!(
            "if [ \"$1\" = __resume ]; then\n  : > {f}\n  read -r p < {p}\n  while read -r _ _ state _ < /proc/$p/stat; [ \"$state\" != Z ]; do :; done\nfi",
            f = flag.display(),
            p = pidfile.display()
        ),
    );
    let answer = upgrade(&mut c, Some(&script));
    assert_eq!(answer["ok"], json!(true), "{answer}");

    let ended = c.events_until(|m| m.is("exited", during));
    let exit = ended.last().unwrap().json();
    assert_eq!(
        exit["code"],
        json!(9),
        "exact code of the end during the upgrade: {exit}"
    );
    assert_eq!(exit["cause"], json!("exited"), "{exit}");
    assert!(!during_pid.trim().is_empty());

    half.send_raw(b"st\"}\n");
    let listed = half.read_msg();
    assert_eq!(listed.json()["id"], json!("h"), "{:?}", listed);
    assert_eq!(listed.json()["ok"], json!(true), "{:?}", listed);

    c.ok(json!({"op": "write", "session": "reader", "data": "42\n"}));
    let answer = loop {
        match waiter.read_msg() {
            Msg::Json(v) if v["id"] == json!("w") => break v,
            _ => {}
        }
    };
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert_eq!(
        answer["end"]["code"],
        json!(42),
        "exact code after: {answer}"
    );
    assert_eq!(answer["end"]["gen"], json!(reader));

    // Generation numbers continue from where they were.
    let next = gen_of(&c.ok(json!({"op": "spawn", "session": "next", "argv": ["true"]})));
    assert!(next > during && next > reader, "{next}");
}

/// A stop under way keeps its escalation: the core's clock continues across the exec, so
/// SIGKILL comes when the grace given before the upgrade runs out.
#[test]
fn a_stop_under_way_still_escalates_after_an_upgrade() {
    let d = Daemon::start("upgrade-stop", &[]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "stubborn",
        "argv": ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"]})));
    c.output_until(gen, "ready");
    c.ok(json!({"op": "stop", "session": "stubborn", "grace": "500ms"}));
    let answer = upgrade(&mut c, None);
    assert_eq!(answer["ok"], json!(true), "{answer}");
    let end = c.events_until(|m| m.is("exited", gen));
    let end = end.last().unwrap().json();
    assert_eq!(end["cause"], json!("killed"), "{end}");
    assert_eq!(end["code"], json!(137), "{end}");
}

#[test]
fn an_attached_shell_keeps_answering_across_an_upgrade() {
    let Some(t) = Tmux::start("upgrade_attached_shell", 90, 20) else {
        return;
    };
    let d = Daemon::start("upgrade-attach", &[]);
    gw_ok(
        &d,
        &[
            "run", "sh", "--pty", "--grace", "100ms", "--env", "PS1=gw$ ", "--", "sh", "-i",
        ],
    );
    t.type_line(&format!(
        "{} --socket {} attach sh",
        env!("CARGO_BIN_EXE_genward"),
        d.socket.display()
    ));
    t.await_screen("the session's prompt", |s| s.contains("gw$"));
    t.type_line("echo before$((40+2))");
    t.await_screen("an answer before", |s| s.contains("before42"));
    let answer = upgrade(&mut d.client(), None);
    assert_eq!(answer["ok"], json!(true), "{answer}");
    t.type_line("echo after$((40+3))");
    t.await_screen("an answer after", |s| s.contains("after43"));
    t.resize(100, 30);
    t.type_line("stty size");
    t.await_screen("a resize after", |s| {
        s.lines().any(|l| l.trim_end() == "30 100")
    });
    assert!(!t.screen().contains("genward:"), "{}", t.screen());
}

#[test]
fn a_program_that_cannot_take_over_is_refused_or_rolled_back() {
    let d = Daemon::start("upgrade-refused", &[]);
    let mut c = d.client();
    let (gen, _started) = spawn_started(
        &d,
        &mut c,
        json!({"op": "spawn", "session": "s", "argv": ["sleep", "1000"]}),
    );
    let before = listing(&mut c);
    let cases: Vec<(std::path::PathBuf, &str)> = {
        let not_genward = d.dir.join("not-genward");
        std::fs::write(&not_genward, "#!/bin/sh\necho hello\n").unwrap();
        std::fs::set_permissions(&not_genward, std::fs::Permissions::from_mode(0o755)).unwrap();
        let newer = d.dir.join("newer");
        std::fs::write(&newer, "#!/bin/sh\necho genward-image 99 99 9.9.9\n").unwrap();
        std::fs::set_permissions(&newer, std::fs::Permissions::from_mode(0o755)).unwrap();
        let not_exec = d.dir.join("not-executable");
        std::fs::write(&not_exec, "x").unwrap();
        // Its own status, not the daemon's kill.
        let silent = d.dir.join("silent");
        std::fs::write(&silent, "#!/bin/sh\nexit 3\n").unwrap();
        std::fs::set_permissions(&silent, std::fs::Permissions::from_mode(0o755)).unwrap();
        vec![
            (d.dir.join("missing"), "No such file"),
            (not_exec, "not executable"),
            (not_genward, "does not answer as genward"),
            (newer, "reads image formats 99 to 99"),
            (silent, "it said nothing (exit status: 3)"),
        ]
    };
    for (binary, why) in &cases {
        let answer = upgrade(&mut c, Some(binary));
        assert_eq!(answer["error"]["code"], json!("upgrade_failed"), "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{why}: {message}");
        assert!(message.contains("runs on unchanged"), "{message}");
        assert_eq!(listing(&mut c), before, "still serving, unchanged");
    }

    // Accepted, executed, and then unable to resume: the previous program runs again.
    let faulty = d.dir.join("faulty");
    wrapper(&faulty, "export GENWARD_TEST_RESUME_FAULT=1");
    let answer = upgrade(&mut c, Some(&faulty));
    assert_eq!(answer["error"]["code"], json!("upgrade_failed"), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("could not resume"), "{message}");
    assert_eq!(listing(&mut c), before, "the rolled-back daemon serves");
    assert_eq!(listing(&mut d.client()), before, "and accepts connections");

    // And a good upgrade still works afterwards.
    let answer = upgrade(&mut c, None);
    assert_eq!(answer["ok"], json!(true), "{answer}");
    c.ok(json!({"op": "stop", "session": "s", "if_gen": gen}));
}

/// A process taken back without its I/O after a crash (not the daemon's child) crosses an
/// upgrade still adopted, and its end is still seen and reported.
#[test]
fn an_adopted_process_crosses_an_upgrade() {
    let mut d = Daemon::start("upgrade-adopted", &["--no-keeper"]);
    let mut c = d.client();
    // Started (and so described) before the crash: the restart takes back a process.
    let (gen, _started) = spawn_started(
        &d,
        &mut c,
        json!({"op": "spawn", "session": "job", "on_recover": "keep",
        "argv": ["sleep", "1000"]}),
    );
    let before = listing(&mut c);
    drop(c);
    d.crash_and_restart(&["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let answer = upgrade(&mut c, None);
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert_eq!(listing(&mut c), before, "the same generation and pid");
    let got = c.ok(json!({"op": "get", "session": "job"}));
    assert_eq!(
        got["session"]["generations"][0]["adopted"]["io_lost"],
        json!(true),
        "{got}"
    );
    c.ok(json!({"op": "stop", "session": "job"}));
    let end = c.events_until(|m| m.is("exited", gen));
    let end = end.last().unwrap().json();
    assert_eq!(end["cause"], json!("stopped"), "{end}");
}

/// The check of a program does not pause the daemon: while the program takes its time to
/// answer, other clients are served and a second upgrade is refused `busy`; once it
/// answers, the upgrade goes on as ever.
#[test]
fn the_daemon_serves_while_a_program_is_checked() {
    let d = Daemon::start("upgrade-check-serves", &[]);
    let mut c = d.client();
    let (gen, _started) = spawn_started(
        &d,
        &mut c,
        json!({"op": "spawn", "session": "s", "argv": ["sleep", "1000"]}),
    );
    let before = listing(&mut c);
    let slow = d.dir.join("slow");
    let pid_file = d.dir.join("slow.pid");
    let gate = fifo(&d, "gate");
    held_at_check(&slow, &pid_file, &gate);

    let mut requester = d.client();
    send_upgrade(&mut requester, &slow, "up");
    let checked = checked_pid(&pid_file);
    // The program is still waiting for the gate: its check is under way.
    assert!(proc::stat(checked).is_some(), "the checked program runs");
    let mut other = d.client();
    let hello = other.ok(json!({"op": "hello"}));
    assert_eq!(hello["pid"], json!(d.pid), "{hello}");
    assert_eq!(listing(&mut other), before, "served during the check");
    let busy = other.err(json!({"op": "upgrade"}), "busy");
    assert!(
        busy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already under way"),
        "{busy}"
    );
    c.ok(json!({"op": "spawn", "session": "t", "argv": ["true"]}));

    release(&gate);
    let answer = answer_to(&mut requester, "up");
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert_eq!(answer["pid"], json!(d.pid), "{answer}");
    let after = listing(&mut other);
    assert!(after.contains(&before[0]), "{after:?}");
    c.ok(json!({"op": "stop", "session": "s", "if_gen": gen}));
}

/// A shutdown while a program is being checked refuses the upgrade, and the program is
/// killed and reaped by the daemon, which is still stopping its sessions.
#[test]
fn a_shutdown_ends_a_check_under_way() {
    let d = Daemon::start("upgrade-check-shutdown", &[]);
    let mut c = d.client();
    // A session that outlives the shutdown's first stop: the daemon runs on meanwhile.
    spawn_started(
        &d,
        &mut c,
        json!({"op": "spawn", "session": "stubborn", "grace": "60s",
        "argv": ["sh", "-c", "trap '' TERM; exec sleep 1000"]}),
    );
    let slow = d.dir.join("slow");
    let pid_file = d.dir.join("slow.pid");
    let gate = fifo(&d, "gate");
    held_at_check(&slow, &pid_file, &gate);

    let mut requester = d.client();
    send_upgrade(&mut requester, &slow, "up");
    let checked = checked_pid(&pid_file);
    c.ok(json!({"op": "shutdown"}));
    let answer = answer_to(&mut requester, "up");
    assert_eq!(answer["error"]["code"], json!("upgrade_failed"), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("shutting down"), "{message}");
    // Killed and reaped (not left a zombie) while the daemon still runs.
    let deadline = std::time::Instant::now() + PATIENCE;
    while proc::stat(checked).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the checked program is still there: {:?}",
            proc::stat(checked)
        );
        thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        proc::stat(d.pid).is_some_and(|s| !s.is_zombie()),
        "still stopping"
    );
}
