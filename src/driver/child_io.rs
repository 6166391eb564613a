//! Moving bytes and exits between children and the core: output reads, input writes,
//! leader exits and emptied process groups.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use mio::Token;

use super::daemon::{unwatch, Daemon};
use crate::core::{ExitStatus, Input};
use crate::sys::fd::{read_nonblocking, write_nonblocking, ReadOutcome, WriteOutcome};
use crate::sys::process::Exit;

/// Reads per readiness before other sources get a turn (64 KiB each): a child writing
/// flat out cannot starve the loop; the source is revisited before the next sleep.
const READS_PER_TURN: usize = 16;

/// The byte a PTY's line discipline turns into end-of-file (VEOF, Ctrl-D).
const PTY_EOF: u8 = 0x04;

impl Daemon {
    /// Reads a generation's output descriptor until it would block (bounded per turn).
    pub(super) fn read_output(&mut self, gen: u64, token: Token) {
        let mut buf = std::mem::take(&mut self.read_buf);
        for _ in 0..READS_PER_TURN {
            let Some(child) = self.children.get(&gen) else {
                break;
            };
            let Some(out) = child.outputs.iter().find(|o| o.token == token) else {
                break;
            };
            let stream = out.stream;
            match read_nonblocking(out.fd.as_fd(), &mut buf) {
                Ok(ReadOutcome::Data(n)) => {
                    let now = self.now();
                    self.core.handle(
                        now,
                        Input::Output {
                            gen,
                            stream,
                            len: n,
                        },
                    );
                    self.run_actions(Some((gen, stream, &buf[..n])));
                }
                Ok(ReadOutcome::WouldBlock) => {
                    self.read_buf = buf;
                    return;
                }
                Ok(ReadOutcome::Eof) => {
                    self.close_output(gen, token);
                    self.feed(Input::Eof { gen, stream });
                    self.read_buf = buf;
                    return;
                }
                Err(e) => {
                    log::warn!(
                        "gen {gen}: read {}: {e}; treating as end of file",
                        stream.as_str()
                    );
                    self.close_output(gen, token);
                    self.feed(Input::Eof { gen, stream });
                    self.read_buf = buf;
                    return;
                }
            }
        }
        self.read_buf = buf;
        if self.sources.contains_key(&token) {
            self.again.push(token);
        }
    }

    fn close_output(&mut self, gen: u64, token: Token) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        if let Some(i) = child.outputs.iter().position(|o| o.token == token) {
            let out = child.outputs.remove(i);
            unwatch(&self.poll, &mut self.sources, out.fd.as_raw_fd(), token);
            if out.stream == crate::core::Stream::Pty {
                child.pty = false;
                child.input.clear();
            }
        }
    }

    /// Writes queued input as far as the descriptor accepts.
    pub(super) fn flush_input(&mut self, gen: u64) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        let Some(raw) = child.input_fd() else {
            if !child.input.is_empty() {
                let n = child.input.len();
                child.input.clear();
                self.feed(Input::InputWritten { gen, len: n });
            }
            return;
        };
        // SAFETY: `raw` belongs to an OwnedFd held by `child`, which outlives this borrow
        // (nothing below removes the child before the last use of `fd`).
        let fd = unsafe { BorrowedFd::borrow_raw(raw) };
        let mut written = 0;
        let mut closed = false;
        while !child.input.is_empty() {
            match write_nonblocking(fd, &child.input) {
                Ok(WriteOutcome::Written(n)) => {
                    child.input.drain(..n);
                    written += n;
                }
                Ok(WriteOutcome::WouldBlock) => break,
                Ok(WriteOutcome::Closed) | Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        let eof_now = !closed && child.input.is_empty() && child.close_after_input;
        if eof_now {
            child.close_after_input = false;
            if child.stdin.is_none() && child.pty {
                // A PTY has no write side to close: send the line discipline's EOF.
                let _ = write_nonblocking(fd, &[PTY_EOF]);
            }
        }
        if closed {
            child.input.clear();
        }
        if eof_now || closed {
            self.drop_stdin(gen);
        }
        if written > 0 {
            self.feed(Input::InputWritten { gen, len: written });
        }
        if closed {
            log::info!("gen {gen}: input closed by the child");
            self.feed(Input::InputError { gen });
        }
    }

    /// Asks whether a generation's leader exited (without reaping it) and tells the core.
    pub(super) fn check_exit(&mut self, gen: u64) {
        let Some(child) = self.children.get_mut(&gen) else {
            return;
        };
        if child.exit_seen {
            return;
        }
        let exit = match child.process.exit_status_nowait() {
            Ok(Some(exit)) => exit,
            Ok(None) => return,
            Err(e) => {
                // ECHILD and friends: the process can no longer be observed or reaped by
                // us. Report it lost rather than leave it "running" forever.
                log::error!("gen {gen}: waitid: {e}; reporting the generation lost");
                child.exit_seen = true;
                self.feed(Input::Lost { gen });
                return;
            }
        };
        child.exit_seen = true;
        child.awaiting_group = child.kill_group;
        let status = match exit {
            Exit::Code(c) => ExitStatus::Code(c),
            Exit::Signal { signal, .. } => ExitStatus::Signal(signal),
            Exit::Unknown => {
                // Only for processes that are not our children (adopted): no status to
                // read, and never counted as a success.
                log::warn!("gen {gen}: exit status unknown; reporting the generation lost");
                self.feed(Input::Lost { gen });
                return;
            }
        };
        self.feed(Input::LeaderExited { gen, status });
        // Usually the group is already empty: look at the end of this turn (one scan for
        // every leader that exited in it) rather than a tick later.
        self.group_check_due = true;
    }

    /// Tells the core about every waiting generation whose process group emptied (one pair
    /// of `/proc` scans for all of them); callers throttle this to one run per
    /// [`super::daemon::GROUP_CHECK`].
    pub(super) fn check_groups(&mut self) {
        let waiting: Vec<(u64, i32)> = self
            .children
            .iter()
            .filter(|(_, c)| c.awaiting_group)
            .map(|(g, c)| (*g, c.process.pid()))
            .collect();
        if waiting.is_empty() {
            return;
        }
        let pgids: Vec<i32> = waiting.iter().map(|(_, pgid)| *pgid).collect();
        let empty = match crate::sys::procscan::empty_groups(&pgids) {
            Ok(empty) => empty,
            Err(e) => {
                log::warn!("scanning /proc for process groups: {e}; waiting for kill deadlines");
                for (gen, _) in &waiting {
                    if let Some(c) = self.children.get_mut(gen) {
                        c.awaiting_group = false;
                    }
                }
                return;
            }
        };
        for (gen, pgid) in waiting {
            if empty.contains(&pgid) {
                if let Some(c) = self.children.get_mut(&gen) {
                    c.awaiting_group = false;
                }
                self.feed(Input::GroupEmpty { gen });
            }
        }
    }
}
