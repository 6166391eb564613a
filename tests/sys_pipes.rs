//! Pipes mode: large output byte-exact, stdin round trip, EOF on close, stderr modes.

mod util;

use std::os::fd::AsFd;
use std::time::Instant;

use genward::sys::fd::{read_nonblocking, write_nonblocking, ReadOutcome, WriteOutcome};
use genward::sys::process::Exit;
use genward::sys::spawn::{spawn, IoMode, StderrMode};
use genward::testkit::rng::SplitMix64;
use genward::testkit::scratch::ScratchDir;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use util::sys::*;

/// FNV-1a, enough to tell a reordered, dropped or duplicated byte.
fn fnv(hash: &mut u64, data: &[u8]) {
    for &b in data {
        *hash ^= b as u64;
        *hash = hash.wrapping_mul(0x100_0000_01b3);
    }
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Deterministic pseudo-random bytes.
fn pattern(len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    SplitMix64::new(len as u64).fill(&mut out);
    out
}

#[test]
fn sixty_four_mib_of_output_arrive_byte_exact() {
    const LEN: usize = 64 * 1024 * 1024;
    let data = pattern(LEN);
    let mut expected = FNV_START;
    fnv(&mut expected, &data);
    let dir = ScratchDir::new("64mib");
    let path = dir.join("data");
    std::fs::write(&path, &data).unwrap();
    drop(data);

    let mut child = spawn(&request(&["cat", path.to_str().unwrap()])).unwrap();
    drop(child.stdin.take());
    let out = child.stdout.take().unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let (mut hash, mut total) = (FNV_START, 0usize);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match read_nonblocking(out.as_fd(), &mut buf).unwrap() {
            ReadOutcome::Data(n) => {
                fnv(&mut hash, &buf[..n]);
                total += n;
            }
            ReadOutcome::WouldBlock => {
                assert!(readable(out.as_fd(), deadline), "stalled at {total}")
            }
            ReadOutcome::Eof => break,
        }
    }
    assert_eq!(total, LEN);
    assert_eq!(hash, expected);
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn stdin_round_trips_through_cat() {
    // Written and read concurrently: more than a pipe buffer each way.
    let data = pattern(1024 * 1024);
    let mut child = spawn(&request(&["cat"])).unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stdin = Some(stdin);
    let (mut sent, mut got) = (0usize, Vec::with_capacity(data.len()));
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(w) = &stdin {
            if sent == data.len() {
                stdin = None; // close: cat sees EOF
                continue;
            }
            if let WriteOutcome::Written(n) = write_nonblocking(w.as_fd(), &data[sent..]).unwrap() {
                sent += n;
            }
        }
        match read_nonblocking(stdout.as_fd(), &mut buf).unwrap() {
            ReadOutcome::Data(n) => got.extend_from_slice(&buf[..n]),
            ReadOutcome::Eof => break,
            ReadOutcome::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                assert!(!left.is_zero(), "round trip stalled");
                let ts = Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: 0,
                };
                let mut fds = vec![PollFd::new(&stdout, PollFlags::IN)];
                if let Some(w) = &stdin {
                    fds.push(PollFd::new(w, PollFlags::OUT));
                }
                let _ = poll(&mut fds, Some(&ts));
            }
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "round trip changed the bytes");
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn closing_stdin_gives_the_child_eof() {
    let mut child = spawn(&request(&["sh", "-c", "cat >/dev/null; echo saw-eof"])).unwrap();
    write_all(child.stdin.as_ref().unwrap().as_fd(), b"some input\n");
    drop(child.stdin.take());
    let out = read_to_eof(child.stdout.as_ref().unwrap().as_fd());
    assert_eq!(lossy(&out), "saw-eof\n");
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

fn with_stderr(mode: StderrMode) -> (String, Option<String>) {
    let mut req = request(&["sh", "-c", "echo out; echo err >&2; echo out2"]);
    req.io = IoMode::Pipes { stderr: mode };
    let mut child = spawn(&req).unwrap();
    drop(child.stdin.take());
    let out = lossy(&read_to_eof(child.stdout.as_ref().unwrap().as_fd()));
    let err = child
        .stderr
        .as_ref()
        .map(|e| lossy(&read_to_eof(e.as_fd())));
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
    (out, err)
}

#[test]
fn stderr_pipe_is_separate() {
    assert_eq!(
        with_stderr(StderrMode::Pipe),
        ("out\nout2\n".to_owned(), Some("err\n".to_owned()))
    );
}

#[test]
fn stderr_merge_goes_into_stdout_in_order() {
    assert_eq!(
        with_stderr(StderrMode::Merge),
        ("out\nerr\nout2\n".to_owned(), None)
    );
}

#[test]
fn stderr_null_is_discarded() {
    assert_eq!(
        with_stderr(StderrMode::Null),
        ("out\nout2\n".to_owned(), None)
    );
}

#[test]
fn writing_to_an_exited_reader_is_closed_not_an_error() {
    let mut child = spawn(&request(&["true"])).unwrap();
    wait_reap(&mut child.process);
    let stdin = child.stdin.take().unwrap();
    assert_eq!(
        write_nonblocking(stdin.as_fd(), b"x").unwrap(),
        WriteOutcome::Closed
    );
}
