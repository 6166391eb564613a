//! Keystroke round trips while other sessions flood, side by side with dtach in one run.
//!
//! A person types into a PTY session through `genward attach` while K other PTY sessions
//! of the same daemon run `yes` as fast as they can (nobody reading them). The typed-into
//! session runs `cat` with its terminal raw and without echo, so what comes back is what
//! the program wrote, as with a shell's line editor. One key at a time: the time from
//! writing the key into the attaching terminal to reading it back from there, through the
//! client, the daemon, the session's PTY, the program, and back. The baseline is the same
//! through dtach: each flood in its own `dtach -n`, the typed-into session in another,
//! reached with `dtach -a` (no client reads the floods either).
//!
//! Rows for K = 0, 4 and 16: p50, p99 and max of each side, their ratios, and the floods'
//! total throughput through genward while the keys were typed (bytes the daemon read,
//! from `list`'s offsets). Sides alternate within a round; `--rounds N` repeats (default
//! 3) and the summary gives min/median/max of the ratios over rounds.
//!
//! A second table has both sides typed into in turn under the same floods at once (K
//! sessions flooding in genward and K dtach masters flooding): what the rounds of the first
//! table differ by, other load on the machine, then meets both alike.
//!
//! Run with `cargo bench --bench interactive` (`make bench`). Needs dtach for the baseline
//! (a SKIP line otherwise).

#[path = "../tests/util/daemon.rs"]
mod daemon;
#[path = "util/rounds.rs"]
mod rounds;

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daemon::Daemon;
use serde_json::json;

/// The program typed into: raw terminal, no echo, every byte written back as it comes.
const ECHOER: &str = "stty raw -echo; exec cat";

struct Sizes {
    keys: usize,
    floods: &'static [usize],
    rounds: usize,
}

const FULL: Sizes = Sizes {
    keys: 1000,
    floods: &[0, 4, 16],
    rounds: 3,
};

const SMOKE: Sizes = Sizes {
    keys: 20,
    floods: &[0, 1],
    rounds: 1,
};

/// A terminal the benchmark types into: the master side stays here, the slave becomes the
/// attaching client's controlling terminal.
struct Terminal {
    master: File,
}

fn open_terminal() -> (Terminal, OwnedFd) {
    let mut master = -1;
    let mut slave = -1;
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: both out-pointers are valid; name and termios may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // Raw from the start: a key echoed by this terminal's own line discipline (before the
    // client has set it raw) would come back without going anywhere.
    // SAFETY: a valid descriptor and a termios read from it before being changed.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(slave.as_raw_fd(), &mut t), 0);
        libc::cfmakeraw(&mut t);
        assert_eq!(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t), 0);
    }
    (Terminal { master }, slave)
}

/// Starts `cmd` with `slave` as its controlling terminal and standard streams.
fn start_on_terminal(mut cmd: Command, slave: OwnedFd) -> Child {
    let fd = slave.as_raw_fd();
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe calls (setsid, ioctl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            if libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("start the attaching client")
}

impl Terminal {
    /// Types `key` and waits until the program's copy of it comes back; the time taken.
    fn round_trip(&mut self, key: u8) -> Duration {
        let t = Instant::now();
        self.master.write_all(&[key]).expect("type a key");
        self.await_byte(key, t + Duration::from_secs(20));
        t.elapsed()
    }

    /// Reads until `key` arrives (anything else — a client's greeting, a redraw — is
    /// skipped), or panics at `deadline`.
    fn await_byte(&mut self, key: u8, deadline: Instant) {
        assert!(
            self.seen_by(key, deadline),
            "key {:?} never came back",
            key as char
        );
    }

    /// Whether `key` arrives by `deadline`.
    fn seen_by(&mut self, key: u8, deadline: Instant) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut pfd = libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32) };
            if n <= 0 {
                continue;
            }
            let got = self.master.read(&mut buf).expect("read the terminal");
            if buf[..got].contains(&key) {
                return true;
            }
        }
    }

    /// Types keys until one comes back: the client is attached and the program reading.
    fn await_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.master.write_all(b"z").unwrap();
            let t = Instant::now() + Duration::from_millis(200);
            if self.seen_by(b'z', t.min(deadline)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the attached program never answered"
            );
        }
    }

    /// `keys` round trips (letters in turn, so a late copy of one is never taken for the
    /// next), sorted.
    fn type_keys(&mut self, keys: usize) -> Vec<Duration> {
        let mut times: Vec<Duration> = (0..keys)
            .map(|i| self.round_trip(b'a' + (i % 26) as u8))
            .collect();
        times.sort();
        times
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

struct Side {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

fn side(times: &[Duration]) -> Side {
    Side {
        p50: percentile(times, 0.50),
        p99: percentile(times, 0.99),
        max: *times.last().unwrap(),
    }
}

impl Side {
    /// `p50 / p99 / max`, in milliseconds.
    fn text(&self) -> String {
        format!("{} / {} / {}", ms(self.p50), ms(self.p99), ms(self.max))
    }

    /// This side's p50 and p99 over `other`'s.
    fn ratios(&self, other: &Side) -> (f64, f64) {
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        (r(self.p50, other.p50), r(self.p99, other.p99))
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Bytes the daemon has read from every generation of the floods (sessions `flood*`),
/// every stream.
fn flood_bytes(c: &mut daemon::Client) -> u64 {
    let list = c.ok(json!({"op": "list"}));
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("flood"))
        .flat_map(|s| s["generations"].as_array().unwrap().iter())
        .flat_map(|g| g["offsets"].as_object().unwrap().values())
        .map(|n| n.as_u64().unwrap())
        .sum()
}

/// A genward daemon with `floods` flooding sessions and one typed into through `attach`.
struct GenwardRig {
    d: Daemon,
    c: daemon::Client,
    term: Terminal,
    client: Child,
}

impl GenwardRig {
    fn start(floods: usize) -> GenwardRig {
        let d = Daemon::start("bench-interactive", &[]);
        let mut c = d.client();
        for i in 0..floods {
            c.ok(json!({"op": "spawn", "session": format!("flood{i}"), "argv": ["yes"], "pty": true}));
        }
        c.ok(json!({"op": "spawn", "session": "typed", "argv": ["sh", "-c", ECHOER], "pty": true}));
        let (mut term, slave) = open_terminal();
        let mut cmd = Command::new(daemon::daemon_binary());
        cmd.arg("--socket").arg(&d.socket).args([
            "attach",
            "typed",
            "--detach-key",
            "none",
            "--redraw",
            "none",
        ]);
        let client = start_on_terminal(cmd, slave);
        term.await_ready();
        GenwardRig { d, c, term, client }
    }

    fn stop(mut self) {
        let _ = self.client.kill();
        let _ = self.client.wait();
        drop(self.d);
    }
}

/// genward's side: returns the sorted round trips and the floods' MiB/s meanwhile.
fn genward_side(floods: usize, keys: usize) -> (Vec<Duration>, f64) {
    let mut rig = GenwardRig::start(floods);
    let before = (Instant::now(), flood_bytes(&mut rig.c));
    let times = rig.term.type_keys(keys);
    let read = flood_bytes(&mut rig.c) - before.1;
    let rate = read as f64 / (1 << 20) as f64 / before.0.elapsed().as_secs_f64();
    rig.stop();
    (times, rate)
}

/// `floods` dtach masters flooding and one more typed into through `dtach -a`.
struct DtachRig {
    dir: std::path::PathBuf,
    term: Terminal,
    client: Child,
}

impl DtachRig {
    fn start(scratch: &Path, floods: usize) -> DtachRig {
        // A directory of its own per call: a dtach socket's path is refused while it exists.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = scratch.join(format!("d{n}"));
        std::fs::create_dir(&dir).expect("a directory for dtach's sockets");
        let dtach = |args: &[&OsString]| {
            let st = Command::new("dtach")
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run dtach");
            assert!(st.success(), "dtach {args:?}: {st}");
        };
        let sock = |name: &str| dir.join(name).into_os_string();
        let n = OsString::from("-n");
        for i in 0..floods {
            dtach(&[&n, &sock(&format!("flood{i}")), &"yes".into()]);
        }
        let typed = sock("typed");
        dtach(&[&n, &typed, &"sh".into(), &"-c".into(), &ECHOER.into()]);
        let (mut term, slave) = open_terminal();
        let mut cmd = Command::new("dtach");
        cmd.arg("-a").arg(&typed).args(["-E", "-r", "none"]);
        let client = start_on_terminal(cmd, slave);
        term.await_ready();
        DtachRig { dir, term, client }
    }

    fn stop(mut self) {
        let _ = self.client.kill();
        let _ = self.client.wait();
        // Each dtach master runs until its program ends; end the masters (their programs
        // get the terminal's hangup).
        let _ = Command::new("pkill")
            .arg("-f")
            .arg(format!("dtach -n {}", self.dir.display()))
            .status();
    }
}

/// dtach's side, or `None` when dtach is not installed.
fn dtach_side(scratch: &Path, floods: usize, keys: usize) -> Option<Vec<Duration>> {
    let mut rig = DtachRig::start(scratch, floods);
    let times = rig.term.type_keys(keys);
    rig.stop();
    Some(times)
}

/// Both at once under the same floods: `floods` sessions flooding in genward *and*
/// `floods` dtach masters flooding, keys typed into each in turn (which goes first
/// alternating), so both sides meet exactly the same machine — the measure least moved
/// by what else the machine does between rounds. Sorted round trips of genward and dtach.
fn shared_side(scratch: &Path, floods: usize, keys: usize) -> (Vec<Duration>, Vec<Duration>) {
    let mut g = GenwardRig::start(floods);
    let mut t = DtachRig::start(scratch, floods);
    let (mut ours, mut theirs) = (Vec::with_capacity(keys), Vec::with_capacity(keys));
    for i in 0..keys {
        let key = b'a' + (i % 26) as u8;
        if i % 2 == 0 {
            ours.push(g.term.round_trip(key));
            theirs.push(t.term.round_trip(key));
        } else {
            theirs.push(t.term.round_trip(key));
            ours.push(g.term.round_trip(key));
        }
    }
    g.stop();
    t.stop();
    ours.sort();
    theirs.sort();
    (ours, theirs)
}

/// The ratios' min / median / max per flood count, headed `floods`.
fn print_summary(floods: &str, ratios: Vec<(usize, Vec<f64>, Vec<f64>)>) {
    println!();
    println!("| {floods} | p50 ratio min / median / max | p99 ratio min / median / max |");
    println!("|---:|---|---|");
    for (k, p50s, p99s) in ratios {
        println!(
            "| {k} | {} | {} |",
            rounds::min_med_max(p50s),
            rounds::min_med_max(p99s)
        );
    }
}

fn main() {
    rounds::state_on_tmpfs();
    let (full, asked) = rounds::run_kind();
    let mut z = if full { FULL } else { SMOKE };
    z.rounds = asked.unwrap_or(z.rounds);
    let dtach = rounds::installed("dtach");
    if !dtach {
        println!("SKIP interactive baseline: dtach not installed (genward measured alone)");
    }
    let scratch = genward::testkit::scratch::ScratchDir::new("bench-dtach");
    println!("| floods | round | genward p50 / p99 / max | dtach p50 / p99 / max | p50 ratio | p99 ratio | floods through genward |");
    println!("|---:|---:|---|---|---:|---:|---:|");
    let mut ratios: Vec<(usize, Vec<f64>, Vec<f64>)> = Vec::new();
    for &floods in z.floods {
        let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
        for round in 0..z.rounds {
            // Alternate which side goes first.
            let (ours, theirs) = if round % 2 == 0 {
                let g = genward_side(floods, z.keys);
                let t = dtach
                    .then(|| dtach_side(&scratch, floods, z.keys))
                    .flatten();
                (g, t)
            } else {
                let t = dtach
                    .then(|| dtach_side(&scratch, floods, z.keys))
                    .flatten();
                (genward_side(floods, z.keys), t)
            };
            let g = side(&ours.0);
            let (theirs_txt, r50, r99) = match theirs {
                Some(t) => {
                    let t = side(&t);
                    let (r50, r99) = g.ratios(&t);
                    p50s.push(r50);
                    p99s.push(r99);
                    (t.text(), format!("{r50:.2}"), format!("{r99:.2}"))
                }
                None => ("SKIP".into(), "-".into(), "-".into()),
            };
            println!(
                "| {floods} | {} | {} | {theirs_txt} | {r50} | {r99} | {:.0} MiB/s |",
                round + 1,
                g.text(),
                ours.1
            );
        }
        ratios.push((floods, p50s, p99s));
    }
    if dtach {
        print_summary("floods", ratios);
    }
    if dtach {
        // The same, both sides under the same floods at once (see `shared_side`).
        println!();
        println!("Under the same floods (K in genward and K in dtach at once, keys in turn):");
        println!();
        println!("| floods (each) | round | genward p50 / p99 / max | dtach p50 / p99 / max | p50 ratio | p99 ratio |");
        println!("|---:|---:|---|---|---:|---:|");
        let mut shared: Vec<(usize, Vec<f64>, Vec<f64>)> = Vec::new();
        for &floods in z.floods {
            let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
            for round in 0..z.rounds {
                let (ours, theirs) = shared_side(&scratch, floods, z.keys);
                let (g, t) = (side(&ours), side(&theirs));
                let (r50, r99) = g.ratios(&t);
                p50s.push(r50);
                p99s.push(r99);
                println!(
                    "| {floods} | {} | {} | {} | {r50:.2} | {r99:.2} |",
                    round + 1,
                    g.text(),
                    t.text()
                );
            }
            shared.push((floods, p50s, p99s));
        }
        print_summary("floods (each)", shared);
    }
}
