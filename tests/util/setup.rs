//! The example application of `examples/` (a database stand-in, a web server that starts
//! once the database is ready, a worker that crashes) run under a real init system or
//! service manager, and watched from outside through the daemon's socket: what every
//! `tests/setup_*.rs` checks the same way.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use genward::testkit::proc;
use serde_json::{json, Value};

use super::daemon::{output_of, Client, Msg, PATIENCE};

/// A path under the repository's `examples/`.
pub fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(path)
}

/// Whether `program` can be run here (found on PATH); says so with a SKIP line if not.
pub fn have(test: &str, program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", "command -v \"$1\" >/dev/null", "sh", program])
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        super::sys::skip(test, &format!("{program} is not installed"));
    }
    found
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// The environment a setup's supervisor is started with, so that what it runs finds this
/// build's `genward` (on PATH), the config to run (`GENWARD_CONFIG`, see
/// [`installed_config`]), a state directory of the test's own (`GENWARD_STATE_DIR`,
/// `GENWARD_SOCKET`), and stand-ins that start and crash quickly (the sessions inherit the
/// daemon's environment). `tag` is put in the environment as `GENWARD_SETUP_TAG`, which
/// every process of the setup inherits: see [`tagged`].
pub fn app_env(state: &Path, config: &Path, tag: &str) -> Vec<(String, OsString)> {
    let bin = Path::new(env!("CARGO_BIN_EXE_genward"));
    let mut path = OsString::from(bin.parent().expect("the binary's directory"));
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()));
    [
        ("PATH", path),
        ("GENWARD_CONFIG", config.into()),
        ("GENWARD_STATE_DIR", state.into()),
        ("GENWARD_SOCKET", state.join("genward.sock").into()),
        ("DB_STARTUP", "0.2".into()),
        ("WORKER_CRASH_AFTER", "0.2".into()),
        ("GENWARD_SETUP_TAG", tag.into()),
        (
            "RUST_LOG",
            std::env::var_os("RUST_LOG").unwrap_or_else(|| "warn".into()),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Where the setups' configs say the example application is installed, and the port they
/// give the web server.
const INSTALLED_APP: &str = "/srv/app";
const INSTALLED_PORT: &str = "8080";

/// A copy of `setup`'s `config/` directory in `dir/config`, as installed here: the
/// application's path pointed at the repository's `examples/app`, and the web server's
/// port at `port` (free for this test). The rest is the example's text, unchanged, so the
/// test runs the real config. Returns the copy's path.
pub fn installed_config(setup: &str, dir: &Path, port: u16) -> PathBuf {
    let app = example("app");
    let app = app.to_str().expect("a UTF-8 path");
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let source = example(&format!("{setup}/config"));
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text
            .replace(INSTALLED_APP, app)
            .replace(INSTALLED_PORT, &port.to_string());
        std::fs::write(config.join(path.file_name().unwrap()), text).unwrap();
    }
    config
}

/// A tag unique to this test run, for [`app_env`].
pub fn unique_tag(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// The processes (zombies left out) whose environment carries `GENWARD_SETUP_TAG=tag`.
pub fn tagged(tag: &str) -> Vec<u32> {
    let want = format!("GENWARD_SETUP_TAG={tag}");
    proc::pids()
        .into_iter()
        .filter(|&pid| proc::stat(pid).is_some_and(|s| !s.is_zombie()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == want.as_bytes()))
        })
        .collect()
}

/// Waits until no process but those in `except` carries `tag`. Processes end on their own
/// schedule after the supervisor that was awaited has gone; there is no event for the last
/// of them, so this polls, bounded by [`PATIENCE`].
#[track_caller]
pub fn await_none_tagged(tag: &str, except: &[u32]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left: Vec<u32> = tagged(tag)
            .into_iter()
            .filter(|p| !except.contains(p))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the setup left behind: {:?}",
            left.iter()
                .map(|p| (p, std::fs::read_to_string(format!("/proc/{p}/cmdline"))))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Connects to `socket` once the daemon listens on it. The daemon was started by a service
/// manager, not by this test, so there is no readiness pipe to read: the socket appearing
/// is the event, polled for at short intervals, bounded by [`PATIENCE`].
#[track_caller]
pub fn await_socket(socket: &Path) -> Client {
    let deadline = Instant::now() + PATIENCE;
    while UnixStream::connect(socket).is_err() {
        assert!(
            Instant::now() < deadline,
            "no daemon listening on {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Client::connect(socket)
}

/// The example application, watched through one subscription to every session from the
/// start of what is retained: each session's events arrive in order.
pub struct App {
    client: Client,
    seen: Vec<Msg>,
}

/// The generations the start step began, one per session.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    pub db: u64,
    pub web: u64,
    pub worker: u64,
}

impl App {
    /// Subscribes `client` to everything, from the start.
    pub fn watch(mut client: Client) -> App {
        client.ok(json!({"op": "subscribe", "all": true, "from_start": true}));
        App {
            client,
            seen: Vec::new(),
        }
    }

    /// The connection, for requests of the test's own.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Reads events until `pred` matches one (or one already read matches).
    #[track_caller]
    fn until(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Value {
        if let Some(m) = self.seen.iter().find(|m| pred(m.json())) {
            return m.json().clone();
        }
        let more = self.client.events_until(|m| pred(m.json()));
        let hit = more.last().expect("the matching event").json().clone();
        self.seen.extend(more);
        hit
    }

    /// Waits until the daemon has started all three sessions from its config and the
    /// database and the web server are ready (their `ready` events: db's output check, then
    /// web's TCP check), and checks the order `depends_on` asks for: web started only after
    /// db was ready. The replay of a subscription from the start comes session by session,
    /// so the order across sessions is checked by the daemon's clock: the time db's `ready`
    /// line was read, the time web's generation started.
    #[track_caller]
    pub fn await_started(&mut self) -> Started {
        let spawned = |session: &'static str| {
            move |v: &Value| v["event"] == "spawned" && v["session"] == session
        };
        let db = self.until(spawned("db"))["gen"].as_u64().unwrap();
        self.await_ready("db", db);
        let web = self.until(spawned("web"))["gen"].as_u64().unwrap();
        self.await_ready("web", web);
        let worker = self.until(spawned("worker"))["gen"].as_u64().unwrap();
        let ready_at = self.line_read_at(db, "ready");
        let got = self.client.ok(json!({"op": "get", "session": "web"}));
        let web_since = got["session"]["generations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["gen"] == web)
            .and_then(|g| g["since_unix_ms"].as_u64())
            .unwrap_or_else(|| panic!("web's generation {web}: {got}"));
        assert!(
            ready_at <= web_since,
            "web started at {web_since}, before db was ready at {ready_at}"
        );
        Started { db, web, worker }
    }

    /// Waits until a generation of `session` newer than `after` was spawned; returns it.
    #[track_caller]
    pub fn await_spawned(&mut self, session: &str, after: u64) -> u64 {
        let v = self.until(|v| {
            v["event"] == "spawned" && v["session"] == session && v["gen"].as_u64() > Some(after)
        });
        v["gen"].as_u64().unwrap()
    }

    /// The generation `session` runs now, and its spec, as `get` answers.
    #[track_caller]
    pub fn current(&mut self, session: &str) -> (u64, Value) {
        let got = self.client.ok(json!({"op": "get", "session": session}));
        let current = got["session"]["current"]
            .as_u64()
            .unwrap_or_else(|| panic!("{session} runs nothing: {got}"));
        (current, got["session"]["spec"].clone())
    }

    /// Waits for generation `gen` of `session` to be ready (its `ready` event); fails on
    /// `ready_failed` or its end.
    #[track_caller]
    fn await_ready(&mut self, session: &str, gen: u64) {
        let seen = self.until(|v| {
            v["session"] == session
                && v["gen"] == gen
                && matches!(
                    v["event"].as_str(),
                    Some("ready" | "ready_failed" | "exited" | "spawn_failed")
                )
        });
        assert_eq!(
            seen["event"], "ready",
            "{session} never became ready: {seen}"
        );
    }

    /// The daemon's time (`t`, Unix ms) of the output frame that completed the line `line`
    /// of generation `gen`.
    #[track_caller]
    fn line_read_at(&mut self, gen: u64, line: &str) -> u64 {
        let want = format!("{line}\n");
        let after_newline = format!("\n{want}");
        self.output_until(gen, |text| {
            text.starts_with(&want) || text.contains(&after_newline)
        })
    }

    /// Reads, from what was already seen and then what follows, until generation `gen`'s
    /// output put together satisfies `done`; returns the time (`t`, Unix ms) of the output
    /// frame that completed it.
    #[track_caller]
    fn output_until(&mut self, gen: u64, done: impl Fn(&str) -> bool) -> u64 {
        let mut text = Vec::new();
        let mut complete = |m: &Msg| {
            let piece = output_of(std::slice::from_ref(m), gen);
            text.extend_from_slice(&piece);
            !piece.is_empty() && done(&String::from_utf8_lossy(&text))
        };
        let time = |m: &Msg| m.json()["t"].as_u64().expect("an output frame's time");
        if let Some(m) = self.seen.iter().find(|m| complete(m)) {
            return time(m);
        }
        let more = self.client.events_until(complete);
        let t = time(more.last().unwrap());
        self.seen.extend(more);
        t
    }

    /// Waits until the web server listens, then fetches its index over HTTP.
    #[track_caller]
    pub fn await_web_serves(&mut self, gen: u64, port: u16) {
        self.output_until(gen, |text| text.contains("Serving HTTP"));
        let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect to web");
        conn.set_read_timeout(Some(PATIENCE)).unwrap();
        conn.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.0 200"),
            "web answered {answer:?}"
        );
    }

    /// Waits until the worker that crashes has been restarted at least `times` times, each
    /// after a backoff (the session in state `backoff` between the crash and the restart);
    /// checks that the session counts the restarts.
    #[track_caller]
    pub fn await_worker_restarted(&mut self, first: u64, times: usize) {
        let mut gen = first;
        for _ in 0..times {
            let end = self.until(|v| v["event"] == "exited" && v["gen"] == gen);
            assert_eq!(end["code"], 1, "the worker crashes with 1: {end}");
            assert_eq!(end["cause"], "exited", "{end}");
            self.until(|v| {
                v["event"] == "state" && v["session"] == "worker" && v["state"] == "backoff"
            });
            let next = self.until(|v| {
                v["event"] == "spawned" && v["session"] == "worker" && v["gen"].as_u64() > Some(gen)
            });
            gen = next["gen"].as_u64().unwrap();
            // The next backoff is another `state` event: forget the worker's.
            self.seen
                .retain(|m| m.json()["event"] != "state" || m.json()["session"] != "worker");
        }
        let got = self.client.ok(json!({"op": "get", "session": "worker"}));
        let restarts = got["session"]["restarts"].as_u64().unwrap();
        assert!(restarts >= times as u64, "restarts {restarts}: {got}");
    }

    /// Reads every event until the daemon closes the connection (it exits), then checks
    /// that every generation that started has ended exactly once, that the database's and
    /// the web server's ended by the stop (cause `stopped`), and that the stop went in
    /// reverse dependency order: db, which web depends on, began stopping (its `state`
    /// `stopping`, emitted as its stop signal is sent) only after web's `exited`. These
    /// events happen after the subscription caught up, so they arrive in the daemon's order.
    /// Returns each generation's end.
    #[track_caller]
    pub fn await_all_stopped(mut self, started: Started) -> BTreeMap<u64, Value> {
        while let Some(m) = self.client.read_msg_or_eof() {
            self.seen.push(m);
        }
        let mut spawned = Vec::new();
        let mut ends: HashMap<u64, Vec<Value>> = HashMap::new();
        for m in &self.seen {
            let v = m.json();
            let gen = v["gen"].as_u64();
            match (v["event"].as_str(), gen) {
                (Some("spawned"), Some(g)) => spawned.push(g),
                (Some("exited" | "spawn_failed"), Some(g)) => {
                    ends.entry(g).or_default().push(v.clone())
                }
                _ => {}
            }
        }
        let mut out = BTreeMap::new();
        for g in spawned {
            let e = ends.get(&g).map(Vec::as_slice).unwrap_or_default();
            assert_eq!(e.len(), 1, "generation {g} ended {} times: {e:?}", e.len());
            out.insert(g, e[0].clone());
        }
        for g in [started.db, started.web] {
            assert_eq!(out[&g]["cause"], "stopped", "generation {g}: {}", out[&g]);
        }
        let at = |what: &str, pred: &dyn Fn(&Value) -> bool| {
            self.seen
                .iter()
                .position(|m| pred(m.json()))
                .unwrap_or_else(|| panic!("no event: {what}"))
        };
        let web_exited = at("web exited", &|v| {
            v["event"] == "exited" && v["gen"] == started.web
        });
        let db_stopping = at("db stopping", &|v| {
            v["event"] == "state" && v["session"] == "db" && v["state"] == "stopping"
        });
        let db_exited = at("db exited", &|v| {
            v["event"] == "exited" && v["gen"] == started.db
        });
        assert!(
            web_exited < db_stopping && db_stopping < db_exited,
            "stop order: web exited at {web_exited}, db stopping at {db_stopping}, \
             db exited at {db_exited}"
        );
        out
    }
}
