//! How `logs` prints output frames: each stream to its own descriptor, byte-exact, or —
//! with `--timestamps` — each line prefixed with the time its first byte was read; and
//! with `-n` only the last lines, held (bounded by what the daemon replays) until the
//! replay ends. Between two generations' output a marker line goes to standard error,
//! `[genward: SESSION gen G]` — with `-n`, only between lines that are shown.

use std::collections::VecDeque;

use super::when::format_utc;
use crate::cli::dispatch::{write_stderr, write_stdout, CommandError};
use crate::cli::events::event_object;
use crate::cli::json_out;
use crate::proto::event::Stream;
use crate::proto::event::WireEvent;
use crate::proto::framing::OutputFrame;
use crate::proto::json::Object;

/// One line (or the unfinished end of a stream), with where it goes and when it began.
#[derive(Debug)]
struct Line {
    gen: u64,
    err: bool,
    t: Option<u64>,
    bytes: Vec<u8>,
}

/// Prints frames as `logs` was asked to.
#[derive(Debug)]
pub struct Printer {
    timestamps: bool,
    /// `-n`: keep only this many lines until [`Printer::end_of_replay`].
    tail: Option<usize>,
    held: VecDeque<Line>,
    /// Per stream (stdout, stderr): whether the next byte starts a line.
    at_line_start: [bool; 2],
    /// `--json`: frames as JSON lines; with `-n N`, the last N frames are held until the
    /// replay ends (frames, not lines: a frame is printed whole).
    json: bool,
    held_frames: VecDeque<Object>,
    /// The session named in the markers between generations; `None`: no markers (one
    /// generation asked for).
    markers: Option<String>,
    /// The generation whose output was printed last.
    shown_gen: Option<u64>,
}

impl Printer {
    pub fn new(
        timestamps: bool,
        tail: Option<usize>,
        json: bool,
        markers: Option<String>,
    ) -> Printer {
        Printer {
            timestamps,
            tail,
            held: VecDeque::new(),
            at_line_start: [true; 2],
            json,
            held_frames: VecDeque::new(),
            markers,
            shown_gen: None,
        }
    }

    /// Before output of `gen`: the marker, if the output printed last was another
    /// generation's.
    fn mark(&mut self, gen: u64) -> Result<(), CommandError> {
        let before = self.shown_gen.replace(gen);
        match &self.markers {
            Some(session) if before.is_some_and(|g| g != gen) => {
                write_stderr(format!("[genward: {session} gen {gen}]\n").as_bytes())
            }
            _ => Ok(()),
        }
    }

    /// Prints (or, with `-n`, holds) one frame as a JSON line.
    pub fn json_frame(&mut self, frame: &OutputFrame<'_>) -> Result<(), CommandError> {
        let obj = event_object(&WireEvent::Output(frame.clone()));
        let Some(n) = self.tail else {
            return json_out::print(obj);
        };
        self.held_frames.push_back(obj);
        while self.held_frames.len() > n {
            self.held_frames.pop_front();
        }
        Ok(())
    }

    /// Prints (or holds) one frame's bytes, of generation `gen`, read at `t`.
    pub fn frame(
        &mut self,
        gen: u64,
        stream: Stream,
        t: Option<u64>,
        data: &[u8],
    ) -> Result<(), CommandError> {
        let err = stream == Stream::Stderr;
        if self.tail.is_none() {
            self.mark(gen)?;
            if !self.timestamps {
                return emit(err, data);
            }
        }
        for piece in data.split_inclusive(|&b| b == b'\n') {
            let start = std::mem::replace(
                &mut self.at_line_start[err as usize],
                piece.ends_with(b"\n"),
            );
            match self.tail {
                Some(n) => self.hold(gen, err, t, piece, start, n),
                None => {
                    if start {
                        emit(err, self.prefix(t).as_bytes())?;
                    }
                    emit(err, piece)?;
                }
            }
        }
        Ok(())
    }

    fn prefix(&self, t: Option<u64>) -> String {
        match t {
            Some(t) => format!("{} ", format_utc(t)),
            None => "????-??-??T??:??:??.???Z ".to_string(),
        }
    }

    /// Keeps the last `n` lines: a piece that does not start a line continues its
    /// stream's unfinished line.
    fn hold(&mut self, gen: u64, err: bool, t: Option<u64>, piece: &[u8], start: bool, n: usize) {
        let open = self
            .held
            .iter_mut()
            .rev()
            .find(|l| l.err == err)
            .filter(|l| !start && !l.bytes.ends_with(b"\n"));
        match open {
            Some(line) => line.bytes.extend_from_slice(piece),
            None => self.held.push_back(Line {
                gen,
                err,
                t,
                bytes: piece.to_vec(),
            }),
        }
        while self.held.len() > n {
            self.held.pop_front();
        }
    }

    /// The replay is over: the held last lines are printed, and from now on frames are
    /// printed as they come.
    pub fn end_of_replay(&mut self) -> Result<(), CommandError> {
        let Some(n) = self.tail.take() else {
            return Ok(());
        };
        if self.json {
            let skip = self.held_frames.len().saturating_sub(n);
            for obj in std::mem::take(&mut self.held_frames).into_iter().skip(skip) {
                json_out::print(obj)?;
            }
            return Ok(());
        }
        let skip = self.held.len().saturating_sub(n);
        for line in std::mem::take(&mut self.held).into_iter().skip(skip) {
            self.mark(line.gen)?;
            if self.timestamps {
                emit(line.err, self.prefix(line.t).as_bytes())?;
            }
            emit(line.err, &line.bytes)?;
        }
        Ok(())
    }
}

fn emit(err: bool, bytes: &[u8]) -> Result<(), CommandError> {
    if err {
        write_stderr(bytes)
    } else {
        write_stdout(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lines_are_held_across_frames_and_streams() {
        let mut p = Printer::new(false, Some(2), false, None);
        p.frame(1, Stream::Stdout, Some(1), b"one\ntw").unwrap();
        p.frame(1, Stream::Stderr, Some(2), b"err\n").unwrap();
        p.frame(1, Stream::Stdout, Some(3), b"o\nthree").unwrap();
        let held: Vec<(bool, Option<u64>, &[u8])> = p
            .held
            .iter()
            .map(|l| (l.err, l.t, l.bytes.as_slice()))
            .collect();
        assert_eq!(
            held,
            [
                (true, Some(2), &b"err\n"[..]),
                (false, Some(3), &b"three"[..])
            ]
        );
    }
}
