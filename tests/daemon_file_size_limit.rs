//! A file-size limit below what the daemon's files need (`LimitFSIZE=`, `docker run
//! --ulimit fsize=`, `ulimit -f`): a write past it fails as on a full disk — output is
//! kept in memory — and never ends the daemon with `SIGXFSZ`.
//!
//! This test binary holds this one test: the limit is set on the whole process, which the
//! daemon it starts inherits.

mod util;

use serde_json::json;
use util::daemon::Daemon;

/// Below one journal segment (a little over 9 MiB, allocated whole when it is made).
const LIMIT: u64 = 4 << 20;

#[test]
fn output_beyond_the_file_size_limit_is_kept_and_the_daemon_lives_on() {
    let lim = libc::rlimit {
        rlim_cur: LIMIT,
        rlim_max: LIMIT,
    };
    // SAFETY: setrlimit with a valid resource and a pointer to a live struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) }, 0);
    let d = Daemon::start("fsize", &["--no-keeper"]);
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let argv = json!(["sh", "-c", "echo past the limit; sleep 1000"]);
    let r = c.ok(json!({"op": "spawn", "session": "big", "argv": argv}));
    let gen = r["gen"].as_u64().unwrap();
    c.output_until(gen, "past the limit");
    // Still there, and still serving.
    c.ok(json!({"op": "hello"}));
    let logs = c.ok(json!({"op": "get", "session": "big"}));
    assert_eq!(logs["session"]["state"], "running", "{logs}");
    c.ok(json!({"op": "stop", "session": "big"}));
    c.events_until(|m| m.is("exited", gen));
}
