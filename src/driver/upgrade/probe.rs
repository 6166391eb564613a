//! Asking a program, before it replaces the daemon, which upgrade images it reads: it is
//! run once with `__image-version` and must answer, within [`PROBE_TIMEOUT`],
//!
//! ```text
//! genward-image <oldest> <newest> <version>
//! ```
//!
//! A program that cannot be executed, answers anything else, or cannot read this daemon's
//! image format is refused while the daemon still runs unchanged.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::store::image::IMAGE_VERSION;

/// Longest wait for a program's answer. The loop does not serve meanwhile: an upgrade is
/// an operator's request, and a program that takes longer to say its version would not
/// resume a daemon promptly either.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The answer's first word.
pub const PROBE_MAGIC: &str = "genward-image";

/// What the probed program said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    /// Its version (`CARGO_PKG_VERSION`).
    pub version: String,
}

/// The answer this build gives to `__image-version`.
pub fn answer() -> String {
    format!(
        "{PROBE_MAGIC} {} {IMAGE_VERSION} {}\n",
        crate::store::image::OLDEST_IMAGE_VERSION,
        env!("CARGO_PKG_VERSION")
    )
}

/// Parses an answer; `Err` says why it will not do.
pub fn parse_answer(text: &str) -> Result<Probed, String> {
    let mut words = text.split_whitespace();
    if words.next() != Some(PROBE_MAGIC) {
        let shown: String = text.chars().take(80).collect();
        return Err(format!(
            "it does not answer as genward does (said {shown:?})"
        ));
    }
    let num = |w: Option<&str>| w.and_then(|w| w.parse::<u32>().ok());
    let (Some(oldest), Some(newest), Some(version)) =
        (num(words.next()), num(words.next()), words.next())
    else {
        return Err("its answer about image formats is malformed".into());
    };
    if !(oldest..=newest).contains(&IMAGE_VERSION) {
        return Err(format!(
            "it reads image formats {oldest} to {newest}; this daemon writes {IMAGE_VERSION}"
        ));
    }
    Ok(Probed {
        version: version.to_owned(),
    })
}

/// Runs the program open at `program` once with `__image-version`.
pub fn probe(program: BorrowedFd<'_>) -> Result<Probed, String> {
    let path = crate::sys::reexec::fd_path(program.as_fd());
    // Inherited by the probe (a script's interpreter reads its file through the path),
    // and close-on-exec again at once: the loop starts nothing else meanwhile.
    let _ = crate::sys::reexec::set_close_on_exec(program, false);
    let spawned = Command::new(&path)
        .arg("__image-version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let _ = crate::sys::reexec::set_close_on_exec(program, true);
    let mut child = spawned.map_err(|e| format!("it cannot be run: {e}"))?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let mut out = Vec::new();
    let result = match child.stdout.take() {
        Some(mut stdout) => read_until(&mut stdout, &mut out, deadline),
        None => Err("no output".into()),
    };
    let _ = child.kill();
    let status = child.wait();
    result?;
    let text = String::from_utf8_lossy(&out);
    if text.is_empty() {
        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
        return Err(format!("it said nothing ({status})"));
    }
    parse_answer(&text)
}

/// Reads `src` to its end, at most 4 KiB, until `deadline`.
fn read_until(
    src: &mut std::process::ChildStdout,
    out: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let fd = src.as_raw_fd();
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "it did not answer within {} s",
                PROBE_TIMEOUT.as_secs()
            ));
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("waiting for its answer: {e}"));
        }
        if rc == 0 {
            continue;
        }
        match src.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() > 4096 {
                    return Err("its answer is too long".into());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading its answer: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_answer_is_accepted() {
        let p = parse_answer(&answer()).unwrap();
        assert_eq!(p.version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn other_answers_are_refused_with_why() {
        assert!(parse_answer("hello").unwrap_err().contains("genward"));
        assert!(parse_answer("genward-image x")
            .unwrap_err()
            .contains("malformed"));
        let newer = format!("genward-image {0} {0} 9.9.9", IMAGE_VERSION + 1);
        assert!(parse_answer(&newer).unwrap_err().contains("writes"));
    }
}
