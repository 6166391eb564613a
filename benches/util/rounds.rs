//! What the side-by-side benchmarks share: where daemons keep their state, whether a
//! baseline is installed, and the summary of a ratio over rounds.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};

/// How this run was asked for: a real run (`cargo bench` passes `--bench`) or the smoke
/// run `cargo test --all-targets` makes of every bench target, and `--rounds N` if given.
pub fn run_kind() -> (bool, Option<usize>) {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .map(|i| args[i + 1].parse().expect("--rounds N"));
    (full, rounds)
}

/// Daemons keep their state where the default puts it, in RAM (`/run` is a tmpfs on most
/// systems): scratch directories go to `/dev/shm` unless `TMPDIR` says otherwise. Call it
/// first thing in `main`.
pub fn state_on_tmpfs() {
    if std::env::var_os("TMPDIR").is_none() && Path::new("/dev/shm").is_dir() {
        // SAFETY: called first thing in main, before any thread exists.
        unsafe { std::env::set_var("TMPDIR", "/dev/shm") };
    }
}

/// Whether `program` can be run here (a baseline row is skipped, visibly, when not).
pub fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// `min / median / max` of ratios over rounds.
pub fn min_med_max(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!(
        "{:.2} / {:.2} / {:.2}",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1]
    )
}
