//! State files a restarted daemon cannot use — one it may not open, one naming a
//! generation number beyond what it can watch, a descriptor copied under another number,
//! a well-formed record the protocol would refuse — are set aside into `bad/` one by one:
//! the daemon starts, takes back everything else, and numbers on usably.

mod util;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};
use util::daemon::{output_of, Client, Daemon};
use util::recorded::{self, KillMarkedOnDrop};

fn gen_of(v: &Value) -> u64 {
    v["gen"].as_u64().expect("gen")
}

/// Spawns `argv` as `session` and waits until it is reported running.
fn running(c: &mut Client, session: &str, argv: &[&str]) -> u64 {
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": session, "argv": argv})));
    let seen = c.events_until(|m| m.is("spawned", gen) || m.is("spawn_failed", gen));
    let last = seen.last().unwrap().json().clone();
    assert_eq!(last["event"], json!("spawned"), "{last}");
    gen
}

/// The names in `state/bad`.
fn set_aside(state: &Path) -> Vec<String> {
    std::fs::read_dir(state.join("bad"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[track_caller]
fn assert_set_aside(state: &Path, prefix: &str) {
    let bad = set_aside(state);
    assert!(
        bad.iter().any(|n| n.starts_with(prefix)),
        "{prefix}* not in bad/: {bad:?}"
    );
}

/// Writes a state file as the daemon would (mode 0600).
fn place(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// How to start a daemon that cannot open a file of mode 000: as root, one without the
/// capabilities that override file modes (dropped from the bounding set before `sh`
/// execs, so the daemon, its child, never has them); as anyone else, as it is.
fn without_mode_override() -> Vec<&'static str> {
    if rustix::process::geteuid().is_root() {
        vec![
            "setpriv",
            "--bounding-set",
            "-dac_override,-dac_read_search",
            "sh",
            "-c",
            "\"$@\"; :",
            "sh",
        ]
    } else {
        Vec::new()
    }
}

/// A session record, a descriptor and the high-water mark the daemon may not open (mode
/// 000: an admin's slip, or a file another user left) no longer stop it from starting
/// ("reading sessions: ...: Permission denied"): each is set aside, and every other
/// session is taken back with its process.
#[test]
fn a_state_file_the_daemon_cannot_open_is_set_aside() {
    let wrapper = without_mode_override();
    if !wrapper.is_empty()
        && !std::process::Command::new("setpriv")
            .args(["--bounding-set", "-dac_override", "true"])
            .status()
            .is_ok_and(|s| s.success())
    {
        util::daemon::skip_because(
            "a_state_file_the_daemon_cannot_open_is_set_aside: no setpriv to drop CAP_DAC_OVERRIDE",
        );
        return;
    }
    let mut d = Daemon::start("unopenable", &["--no-keeper"]);
    let state = d.dir.join("state");
    let _cleanup = KillMarkedOnDrop(recorded::dir_id(&state));
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let a = running(&mut c, "a", &["sleep", "1000"]);
    let b = running(&mut c, "b", &["sleep", "1000"]);
    drop(c);
    d.kill();
    for file in ["sessions/b.json", &format!("gens/{b}.json"), "highwater"] {
        std::fs::set_permissions(state.join(file), std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    d.restart_wrapped(&wrapper, &["--no-keeper"]);
    let mut c = d.client();
    let got = c.ok(json!({"op": "get", "session": "a"}));
    assert_eq!(got["session"]["current"], json!(a), "{got}");
    let taken = &got["session"]["generations"][0]["adopted"]["verified"];
    assert_eq!(taken, &json!(true), "{got}");
    c.err(json!({"op": "get", "session": "b"}), "no_such_session");
    assert_set_aside(&state, "sessions.b.json.bad-");
    assert_set_aside(&state, &format!("gens.{b}.json.bad-"));
    assert_set_aside(&state, "state.highwater.bad-");
    c.ok(json!({"op": "subscribe", "all": true}));
    let next = running(&mut c, "c", &["true"]);
    assert!(next > b, "numbering went back: {next} after {b}");
    c.ok(json!({"op": "shutdown"}));
}

/// A high-water mark at 2^59 (the most the loop can watch) and a descriptor naming a
/// generation just below it: accepted, numbering went past 2^59 and every later start in
/// the directory failed (`EOVERFLOW`). Both are set aside; spawns work.
#[test]
fn a_generation_number_beyond_what_the_daemon_can_use_is_set_aside() {
    let mut d = Daemon::start("beyond-gens", &["--no-keeper"]);
    let state = d.dir.join("state");
    let _cleanup = KillMarkedOnDrop(recorded::dir_id(&state));
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let a = running(&mut c, "a", &["sleep", "1000"]);
    drop(c);
    d.kill();
    let near = (1u64 << 59) - 488;
    let text = std::fs::read_to_string(state.join("gens").join(format!("{a}.json"))).unwrap();
    let copy = text.replace(&format!("\"gen\":{a},"), &format!("\"gen\":{near},"));
    assert_ne!(copy, text);
    place(&state.join("gens").join(format!("{near}.json")), &copy);
    let ceiling = format!(
        "{{\"genward_state\":1,\"kind\":\"highwater\"}}\n{{\"ceiling\":{}}}\n",
        1u64 << 59
    );
    place(&state.join("highwater"), &ceiling);
    d.restart_wrapped(&[], &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let got = c.ok(json!({"op": "get", "session": "a"}));
    assert_eq!(got["session"]["current"], json!(a), "{got}");
    let next = running(&mut c, "t", &["true"]);
    assert!(next < 1 << 59, "{next}");
    assert_set_aside(&state, "state.highwater.bad-");
    assert_set_aside(&state, &format!("gens.{near}.json.bad-"));
    c.ok(json!({"op": "shutdown"}));
}

/// A descriptor copied under another generation's number names the same process: taken
/// back twice, that process was listed as two generations and its one end reported as
/// two. The copy is set aside; the session keeps the one its record names.
#[test]
fn a_descriptor_copied_under_another_number_is_set_aside() {
    let mut d = Daemon::start("copied-descriptor", &["--no-keeper"]);
    let state = d.dir.join("state");
    let _cleanup = KillMarkedOnDrop(recorded::dir_id(&state));
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let a = running(&mut c, "a", &["sleep", "1000"]);
    drop(c);
    d.kill();
    let copy_gen = a + 1000;
    let text = std::fs::read_to_string(state.join("gens").join(format!("{a}.json"))).unwrap();
    let copy = text.replace(&format!("\"gen\":{a},"), &format!("\"gen\":{copy_gen},"));
    assert_ne!(copy, text);
    place(&state.join("gens").join(format!("{copy_gen}.json")), &copy);
    d.restart_wrapped(&[], &["--no-keeper"]);
    let mut c = d.client();
    let got = c.ok(json!({"op": "get", "session": "a"}));
    assert_eq!(got["session"]["current"], json!(a), "{got}");
    let gens: Vec<u64> = got["session"]["generations"]
        .as_array()
        .unwrap()
        .iter()
        .map(gen_of)
        .collect();
    assert_eq!(gens, [a], "{got}");
    assert_set_aside(&state, &format!("gens.{copy_gen}.json.bad-"));
    c.ok(json!({"op": "shutdown"}));
}

/// Well-formed records the protocol would refuse — no argv, a dependency on itself, one
/// closing a dependency cycle, a current generation that is another session's — are not
/// restored and are set aside (they were left in `sessions/`, warned about at every
/// start, or restored as they were); the rest is taken back.
#[test]
fn records_the_protocol_would_refuse_are_set_aside() {
    let mut d = Daemon::start("refused-records", &["--no-keeper"]);
    let state = d.dir.join("state");
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let ctl = running(&mut c, "ctl", &["true"]);
    c.events_until(|m| m.is("exited", ctl));
    c.ok(json!({"op": "shutdown"}));
    assert_eq!(d.exit_code(), Some(0));

    let sessions = state.join("sessions");
    let text = std::fs::read_to_string(sessions.join("ctl.json")).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    let body: Value = serde_json::from_str(body.trim_end()).unwrap();
    let write = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut r = body.clone();
        r["name"] = json!(name);
        for key in ["last_gen", "last_end", "current"] {
            r[key] = Value::Null;
        }
        r["recent_ends"] = json!([]);
        edit(&mut r);
        place(
            &sessions.join(format!("{name}.json")),
            &format!("{header}\n{r}\n"),
        );
    };
    write("argv0", &|r| r["spec"]["argv"] = json!([]));
    write("self", &|r| {
        r["spec"]["depends_on"] = json!({"self": "started"})
    });
    write("cyc1", &|r| {
        r["spec"]["depends_on"] = json!({"cyc2": "started"})
    });
    write("cyc2", &|r| {
        r["spec"]["depends_on"] = json!({"cyc1": "started"})
    });
    write("cur", &|r| r["current"] = json!(ctl));

    d.restart_wrapped(&[], &["--no-keeper"]);
    let mut c = d.client();
    for name in ["argv0", "self", "cyc2", "cur"] {
        c.err(json!({"op": "get", "session": name}), "no_such_session");
        assert!(!sessions.join(format!("{name}.json")).exists(), "{name}");
        assert_set_aside(&state, &format!("sessions.{name}.json.bad-"));
    }
    for name in ["ctl", "cyc1"] {
        c.ok(json!({"op": "get", "session": name}));
    }
    c.ok(json!({"op": "shutdown"}));
}

/// A `buffer` smaller than one read kept nothing of it: the read was one record too large
/// to stay once the exit followed it. Reads are bounded by the buffer, so what a long
/// write sent is retained as its tail.
#[test]
fn a_buffer_smaller_than_a_write_keeps_its_tail() {
    let d = Daemon::start("small-buffer", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let script = "import os; os.write(1, b'x' * 4999 + b'y')";
    let gen = gen_of(&c.ok(json!({"op": "spawn", "session": "s",
        "argv": ["python3", "-c", script], "buffer": 4096})));
    c.events_until(|m| m.is("exited", gen));
    let mut r = d.client();
    r.ok(json!({"op": "subscribe", "session": "s", "from_start": true}));
    let replay = r.events_until(|m| m.is("exited", gen));
    let out = output_of(&replay, gen);
    assert!(!out.is_empty(), "nothing of the write retained");
    assert!(out.len() < 5000, "{} bytes retained", out.len());
    assert!(out.ends_with(b"y"), "not the write's tail");
    assert!(out[..out.len() - 1].iter().all(|b| *b == b'x'));
    c.ok(json!({"op": "shutdown"}));
}
