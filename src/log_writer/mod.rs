//! The log writer: a small process of the daemon's own (the same binary,
//! `genward __log-writer`) that writes the sessions' output to their log files and, with
//! `daemon --output-to-stdout`, to the daemon's standard output — so that a slow disk or
//! a full pipe to `docker logs` blocks it, never the daemon's loop. In the manner of
//! s6-log, fed through a pipe.
//!
//! Its whole life:
//!
//! 1. Started by the daemon with the read end of a pipe as its standard input, the
//!    daemon's standard output and error as its own, in a session of its own (a
//!    terminal's signals to the daemon do not reach it).
//! 2. Reads records ([`wire`]) and does what each says: appends to a log file (opened
//!    on first use, rotated by size, see [`file`]), or writes whole lines to its standard
//!    output. A file that cannot be opened or written is reported on standard error once
//!    and its records dropped (counted) until it can be opened again, tried at most once
//!    a second.
//! 3. At end of file (the daemon closed its end: it exited, crashed, or replaced itself
//!    with a new program) it has written everything it received; it closes its files
//!    and exits. A stream out of step (a record out of bounds) ends it too, with status 1:
//!    the daemon starts another.

pub mod wire;

mod file;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use file::LogFile;
use wire::{Kind, Record};

/// The hidden subcommand that runs a log writer.
pub const SUBCOMMAND: &str = "__log-writer";

/// Most files kept open at once; the least recently written is closed for another.
const MAX_OPEN: usize = 256;

/// How long a file that failed is left alone before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How often an open file is checked to be still the one at its path (a log deleted,
/// or renamed by logrotate, is then opened again at its path, as `tail -F` follows it).
const CHECK_PATH_EVERY: Duration = Duration::from_secs(1);

/// `genward __log-writer`: writes what it reads until end of file.
pub fn main(args: &[std::ffi::OsString]) -> ExitCode {
    if !args.is_empty() {
        eprintln!("genward log writer: takes no arguments");
        return ExitCode::from(2);
    }
    // A log file that reaches the file-size limit fails its writes (as a full disk does)
    // instead of ending the writer.
    crate::sys::file_size_limit::ignore_signal();
    let mut writer = Writer::default();
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0u8; 4 * wire::MAX_DATA];
    let mut filled = 0;
    loop {
        let n = match stdin.read(&mut buf[filled..]) {
            Ok(0) => return writer.finish(filled),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("genward log writer: reading from the daemon: {e}");
                return ExitCode::from(1);
            }
        };
        filled += n;
        let mut at = 0;
        loop {
            match Record::decode(&buf[at..filled]) {
                Ok(Some((record, used))) => {
                    writer.handle(&record, Instant::now());
                    at += used;
                }
                Ok(None) => break,
                Err(why) => {
                    eprintln!("genward log writer: the daemon's stream is out of step: {why}");
                    return ExitCode::from(1);
                }
            }
        }
        buf.copy_within(at..filled, 0);
        filled -= at;
    }
}

/// A log file: open, or failed and left alone until a time.
#[derive(Debug)]
enum Slot {
    Open {
        file: LogFile,
        used: u64,
        checked_at: Instant,
    },
    Failed {
        retry_at: Instant,
        dropped: u64,
    },
}

/// Every log file the writer has open or failed on, and its standard output.
#[derive(Debug, Default)]
struct Writer {
    files: HashMap<Vec<u8>, Slot>,
    /// A counter for "least recently written".
    writes: u64,
    /// Standard output failed (the daemon's reader went away): its records are dropped.
    stdout_failed: bool,
}

impl Writer {
    /// Writes record `r`, read at `now` (given, so that the retries and the checks of
    /// the path can be tested without waiting for them).
    fn handle(&mut self, r: &Record<'_>, now: Instant) {
        if r.kind == Kind::Stdout {
            return self.stdout(r.data);
        }
        self.writes += 1;
        let reopen = match self.files.get_mut(r.path) {
            None => true,
            Some(Slot::Failed { retry_at, .. }) => now >= *retry_at,
            Some(Slot::Open {
                file, checked_at, ..
            }) => {
                if now >= *checked_at + CHECK_PATH_EVERY {
                    *checked_at = now;
                    !file.still_at_path()
                } else {
                    false
                }
            }
        };
        if reopen {
            self.open(r, now);
        }
        let writes = self.writes;
        let path = r.path;
        let Some(slot) = self.files.get_mut(path) else {
            return;
        };
        let failed = match slot {
            Slot::Failed { dropped, .. } => {
                *dropped += r.data.len() as u64;
                return;
            }
            Slot::Open { file, used, .. } => {
                *used = writes;
                file.configure(r.max_size, r.keep);
                let result = match r.kind {
                    Kind::Note => file.note(r.data),
                    _ => file.append(r.data),
                };
                match result {
                    Ok(()) => return,
                    Err(e) => e,
                }
            }
        };
        report(path, &failed);
        *slot = Slot::Failed {
            retry_at: now + RETRY_AFTER,
            dropped: r.data.len() as u64,
        };
    }

    /// Opens the file of `r` into its slot (closing the least recently written one if
    /// too many are open), or marks it failed.
    fn open(&mut self, r: &Record<'_>, now: Instant) {
        let dropped_before = match self.files.get(r.path) {
            Some(Slot::Failed { dropped, .. }) => *dropped,
            _ => 0,
        };
        if self.files.len() >= MAX_OPEN && !self.files.contains_key(r.path) {
            let oldest = self
                .files
                .iter()
                .min_by_key(|(_, s)| match s {
                    Slot::Open { used, .. } => *used,
                    Slot::Failed { .. } => 0,
                })
                .map(|(p, _)| p.clone());
            if let Some(p) = oldest {
                self.files.remove(&p);
            }
        }
        let opened = LogFile::open(r.path, r.max_size, r.keep).and_then(|mut file| {
            // The gap is noted before anything else is written; a note that cannot be
            // written (the disk still full) leaves the file failed, its count kept.
            if dropped_before > 0 {
                let line = format!("genward: dropped {dropped_before} bytes\n");
                file.note(line.as_bytes())?;
            }
            Ok(file)
        });
        let slot = match opened {
            Ok(file) => Slot::Open {
                file,
                used: self.writes,
                checked_at: now,
            },
            Err(e) => {
                if dropped_before == 0 {
                    report(r.path, &e);
                }
                Slot::Failed {
                    retry_at: now + RETRY_AFTER,
                    dropped: dropped_before,
                }
            }
        };
        self.files.insert(r.path.to_vec(), slot);
    }

    fn stdout(&mut self, data: &[u8]) {
        if self.stdout_failed {
            return;
        }
        let mut out = io::stdout().lock();
        if let Err(e) = out.write_all(data).and_then(|()| out.flush()) {
            eprintln!("genward log writer: standard output: {e}; the sessions' output is no longer written there");
            self.stdout_failed = true;
        }
    }

    /// The end: everything received was handled (a partial record left at end of file
    /// is reported).
    fn finish(self, partial: usize) -> ExitCode {
        for (path, slot) in &self.files {
            if let Slot::Failed { dropped, .. } = slot {
                if *dropped > 0 {
                    eprintln!(
                        "genward log writer: {}: {dropped} bytes dropped",
                        String::from_utf8_lossy(path)
                    );
                }
            }
        }
        if partial > 0 {
            eprintln!(
                "genward log writer: the daemon's stream ended inside a record ({partial} bytes)"
            );
        }
        ExitCode::SUCCESS
    }
}

fn report(path: &[u8], e: &io::Error) {
    eprintln!(
        "genward log writer: {}: {e}; its output is dropped until it can be written",
        String::from_utf8_lossy(path)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record<'a>(path: &'a [u8], data: &'a [u8]) -> Record<'a> {
        Record {
            kind: Kind::Append,
            path,
            max_size: 1 << 20,
            keep: 1,
            data,
        }
    }

    #[test]
    fn a_log_deleted_or_renamed_while_open_is_written_again_at_its_path() {
        let dir = std::env::temp_dir().join(format!("gw-writer-moved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("web.log");
        let p = path.as_os_str().as_encoded_bytes();
        let mut w = Writer::default();
        let start = Instant::now();
        w.handle(&record(p, b"one\n"), start);
        // logrotate (create mode, no copytruncate) renames it; an operator deletes it.
        std::fs::rename(&path, dir.join("web.log.rotated")).unwrap();
        w.handle(&record(p, b"two\n"), start + CHECK_PATH_EVERY);
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        std::fs::remove_file(&path).unwrap();
        w.handle(&record(p, b"three\n"), start + 2 * CHECK_PATH_EVERY);
        assert_eq!(std::fs::read(&path).unwrap(), b"three\n");
        assert_eq!(
            std::fs::read(dir.join("web.log.rotated")).unwrap(),
            b"one\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
