//! How `logs` prints output frames: each stream to its own descriptor, byte-exact, or —
//! with `--timestamps` — each line prefixed with the time its first byte was read; and
//! with `-n` only the last lines, held (bounded by what the daemon replays) until the
//! replay ends. Between two generations' output a marker line goes to standard error,
//! `[genward: SESSION gen G]` — with `-n`, only between lines that are shown; when
//! following, a generation's start told as `[genward: SESSION gen G started, pid P]`
//! marks it instead (one marker per generation start).
//!
//! With `--timestamps` every line printed starts with its timestamp, whichever stream it
//! is on, so that the two streams merged (a terminal, `2>&1`) never show one inside a
//! line: when a line starts on one stream while the other's last line is unfinished,
//! that unfinished line is ended there (a newline is added), and its rest, when it comes,
//! is printed as a line of its own with the time its first byte was read.

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
    /// Its number among the lines held, so that a continuation finds its line.
    seq: u64,
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
    /// Per stream: the held line its next bytes continue, unless they start a line. With
    /// `--timestamps`, a line that starts on the other stream ends it, as printing in
    /// full ends it, so `-n N` shows the last N lines of what the full view prints.
    held_open: [Option<u64>; 2],
    /// The `seq` of the next line held.
    next_seq: u64,
    /// Per stream (stdout, stderr): whether the next byte read starts a line.
    at_line_start: [bool; 2],
    /// Per stream: whether what was printed last on it is an unfinished line.
    printed_open: [bool; 2],
    /// `--json`: frames (and events) as JSON lines; with `-n N`, the last N frames, and
    /// the events that came after the one before them, are held until the replay ends
    /// (frames, not lines: a frame is printed whole). Each is held with whether it is a
    /// frame.
    json: bool,
    held_frames: VecDeque<(bool, Object)>,
    /// How many of `held_frames` are frames.
    held_frame_count: usize,
    /// The session named in the markers between generations; `None`: no markers (one
    /// generation asked for).
    markers: Option<String>,
    /// The generation whose output was printed last.
    shown_gen: Option<u64>,
    /// Where frame bytes go: [`emit`], to standard output or error.
    out: Emit,
}

/// Writes bytes to standard error (`true`) or output.
type Emit = fn(bool, &[u8]) -> Result<(), CommandError>;

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
            held_open: [None; 2],
            next_seq: 0,
            at_line_start: [true; 2],
            printed_open: [false; 2],
            json,
            held_frames: VecDeque::new(),
            held_frame_count: 0,
            markers,
            shown_gen: None,
            out: emit,
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

    /// Generation `gen` was announced as started (`[genward: SESSION gen G started,
    /// ...]`): that marks where its output begins, so its first output adds no marker of
    /// its own.
    pub fn announced(&mut self, gen: u64) {
        self.shown_gen = Some(gen);
    }

    /// Prints (or, with `-n`, holds) one frame as a JSON line.
    pub fn json_frame(&mut self, frame: &OutputFrame<'_>) -> Result<(), CommandError> {
        let obj = event_object(&WireEvent::Output(frame.clone()));
        let Some(n) = self.tail else {
            return json_out::print(obj);
        };
        self.held_frames.push_back((true, obj));
        self.held_frame_count += 1;
        // Past N frames the oldest goes, with the events before it.
        while self.held_frame_count > n {
            while let Some((frame, _)) = self.held_frames.pop_front() {
                if frame {
                    self.held_frame_count -= 1;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Prints (or, with `-n`, holds in its place among the frames) an event as a JSON
    /// line, so that a generation's `spawned`, output and end come out in their order.
    pub fn json_event(&mut self, obj: Object) -> Result<(), CommandError> {
        if self.tail.is_none() {
            return json_out::print(obj);
        }
        self.held_frames.push_back((false, obj));
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
                if let Some(&last) = data.last() {
                    self.at_line_start[err as usize] = last == b'\n';
                }
                return (self.out)(err, data);
            }
        }
        for piece in data.split_inclusive(|&b| b == b'\n') {
            let start = std::mem::replace(
                &mut self.at_line_start[err as usize],
                piece.ends_with(b"\n"),
            );
            match self.tail {
                Some(n) => self.hold(gen, err, t, piece, start, n),
                None => self.timestamped(err, t, piece)?,
            }
        }
        Ok(())
    }

    /// Prints `bytes` on stream `err`, read at `t`, with a timestamp if they begin a
    /// line as printed: the other stream's unfinished line is ended first.
    fn timestamped(&mut self, err: bool, t: Option<u64>, bytes: &[u8]) -> Result<(), CommandError> {
        if !self.printed_open[err as usize] {
            let other = !err;
            if std::mem::take(&mut self.printed_open[other as usize]) {
                (self.out)(other, b"\n")?;
            }
            (self.out)(err, self.prefix(t).as_bytes())?;
        }
        (self.out)(err, bytes)?;
        self.printed_open[err as usize] = !bytes.ends_with(b"\n");
        Ok(())
    }

    fn prefix(&self, t: Option<u64>) -> String {
        match t {
            Some(t) => format!("{} ", format_utc(t)),
            None => "????-??-??T??:??:??.???Z ".to_string(),
        }
    }

    /// Keeps the last `n` lines: a piece that does not start a line continues its
    /// stream's unfinished line — with `--timestamps`, only while no line of the other
    /// stream started since, as [`Printer::timestamped`] prints them: else its rest is a
    /// line of its own, with its own time.
    fn hold(&mut self, gen: u64, err: bool, t: Option<u64>, piece: &[u8], start: bool, n: usize) {
        let i = err as usize;
        let open = self.held_open[i]
            .filter(|_| !start)
            .and_then(|seq| self.held.iter_mut().rev().find(|l| l.seq == seq));
        let seq = match open {
            Some(line) => {
                line.bytes.extend_from_slice(piece);
                line.seq
            }
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                if self.timestamps {
                    self.held_open[!err as usize] = None;
                }
                self.held.push_back(Line {
                    seq,
                    gen,
                    err,
                    t,
                    bytes: piece.to_vec(),
                });
                seq
            }
        };
        self.held_open[i] = Some(seq).filter(|_| !piece.ends_with(b"\n"));
        while self.held.len() > n {
            self.held.pop_front();
        }
    }

    /// Output was dropped here (a `dropped` event): an unfinished line is ended, so that
    /// what comes after the gap starts a line of its own instead of being joined to bytes
    /// it never followed (the gap itself is told on standard error).
    pub fn gap(&mut self) -> Result<(), CommandError> {
        if self.json {
            return Ok(());
        }
        for err in [false, true] {
            let i = err as usize;
            if std::mem::replace(&mut self.at_line_start[i], true) {
                continue;
            }
            match self.tail {
                // The held line is closed: the next piece starts another.
                Some(_) => {
                    let open = self.held_open[i].take();
                    if let Some(line) = self.held.iter_mut().rev().find(|l| Some(l.seq) == open) {
                        line.bytes.push(b'\n');
                    }
                }
                // With `--timestamps`, a line the other stream's already ended (its
                // newline printed) gets no second one: that would print an empty line.
                None => {
                    if std::mem::take(&mut self.printed_open[i]) || !self.timestamps {
                        (self.out)(err, b"\n")?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The replay is over: the held last lines are printed, and from now on frames are
    /// printed as they come.
    pub fn end_of_replay(&mut self) -> Result<(), CommandError> {
        let Some(n) = self.tail.take() else {
            return Ok(());
        };
        if self.json {
            // Held to at most `n` frames already (see `json_frame`).
            self.held_frame_count = 0;
            for (_, obj) in std::mem::take(&mut self.held_frames) {
                json_out::print(obj)?;
            }
            return Ok(());
        }
        let skip = self.held.len().saturating_sub(n);
        for line in std::mem::take(&mut self.held).into_iter().skip(skip) {
            self.mark(line.gen)?;
            if self.timestamps {
                self.timestamped(line.err, line.t, &line.bytes)?;
            } else {
                (self.out)(line.err, &line.bytes)?;
            }
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

    thread_local! {
        static PRINTED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Both streams merged, as on a terminal, with `E:` before what went to stderr.
    fn merged(err: bool, bytes: &[u8]) -> Result<(), CommandError> {
        PRINTED.with(|p| {
            let mut p = p.borrow_mut();
            if err {
                p.extend_from_slice(b"E:");
            }
            p.extend_from_slice(bytes);
        });
        Ok(())
    }

    fn printed() -> String {
        PRINTED.with(|p| String::from_utf8(std::mem::take(&mut *p.borrow_mut())).unwrap())
    }

    /// Bytes after a gap never continue the line before it: `xxx` then, after output
    /// was dropped, `done` prints as two lines, with or without timestamps or `-n`.
    #[test]
    fn output_after_a_gap_starts_a_line_of_its_own() {
        for (timestamps, tail) in [(false, None), (true, None), (false, Some(5))] {
            let mut p = Printer::new(timestamps, tail, false, None);
            p.out = merged;
            p.frame(1, Stream::Stdout, None, b"full\nxxx").unwrap();
            p.gap().unwrap();
            p.frame(1, Stream::Stdout, None, b"done\n").unwrap();
            p.gap().unwrap();
            p.end_of_replay().unwrap();
            let lines: Vec<String> = printed()
                .lines()
                .map(|l| l.rsplit(' ').next().unwrap().to_string())
                .collect();
            assert_eq!(lines, ["full", "xxx", "done"], "{timestamps} {tail:?}");
        }
    }

    #[test]
    fn a_timestamp_never_lands_inside_a_line_of_the_other_stream() {
        for tail in [None, Some(10)] {
            let mut p = Printer::new(true, tail, false, None);
            p.out = merged;
            p.frame(1, Stream::Stdout, Some(0), b"partial").unwrap();
            p.frame(1, Stream::Stderr, Some(1000), b"err\n").unwrap();
            p.end_of_replay().unwrap();
            p.frame(1, Stream::Stdout, Some(2000), b"rest\nnext")
                .unwrap();
            p.frame(1, Stream::Stdout, Some(3000), b" more\n").unwrap();
            assert_eq!(
                printed(),
                "1970-01-01T00:00:00.000Z partial\n\
                 E:1970-01-01T00:00:01.000Z E:err\n\
                 1970-01-01T00:00:02.000Z rest\n\
                 1970-01-01T00:00:02.000Z next more\n",
                "{tail:?}"
            );
        }
    }

    /// With `--timestamps`, `-n N` prints the last N lines of what the full view prints:
    /// a line interrupted by the other stream's is split there in both.
    #[test]
    fn the_last_timestamped_lines_are_split_as_in_full() {
        let feed = |p: &mut Printer| {
            p.frame(1, Stream::Stdout, Some(0), b"out-part").unwrap();
            p.frame(1, Stream::Stderr, Some(1000), b"err-line\n")
                .unwrap();
            // A gap after a line the other stream ended already adds no empty line.
            p.gap().unwrap();
            p.frame(1, Stream::Stdout, Some(2000), b" out-rest\nlast")
                .unwrap();
            p.frame(1, Stream::Stderr, Some(3000), b"e2").unwrap();
            p.frame(1, Stream::Stdout, Some(4000), b" more\n").unwrap();
            p.end_of_replay().unwrap();
        };
        let mut p = Printer::new(true, None, false, None);
        p.out = merged;
        feed(&mut p);
        let full = printed();
        let lines: Vec<&str> = full.split_inclusive('\n').collect();
        assert_eq!(lines.len(), 6, "{full}");
        for n in 0..=7 {
            let mut p = Printer::new(true, Some(n), false, None);
            p.out = merged;
            feed(&mut p);
            let want: String = lines[lines.len().saturating_sub(n)..].concat();
            // The first line shown may be the unfinished end of a stream: it is ended
            // by the line after it in both.
            assert_eq!(printed(), want, "-n {n}");
        }
    }

    /// `-n` with `--json`: the last N frames, and the events after the frame before
    /// them, in their order.
    #[test]
    fn the_last_json_frames_are_held_with_the_events_among_them() {
        let mut p = Printer::new(false, Some(1), true, None);
        let frame = |gen: u64| OutputFrame {
            session: "s".into(),
            gen,
            stream: Stream::Stdout,
            offset: 0,
            pos: gen,
            t: None,
            data: b"x".as_slice().into(),
        };
        let event = |name: &str| {
            let mut o = Object::new();
            o.insert("event", name);
            o
        };
        p.json_event(event("spawned 1")).unwrap();
        p.json_frame(&frame(1)).unwrap();
        p.json_event(event("exited 1")).unwrap();
        p.json_frame(&frame(2)).unwrap();
        p.json_event(event("exited 2")).unwrap();
        let held: Vec<String> = p
            .held_frames
            .iter()
            .map(|(_, o)| {
                let name = o.get("event").and_then(|v| v.as_str()).unwrap_or("");
                match o.get("gen").and_then(|v| v.as_u64()) {
                    Some(gen) => format!("{name} {gen}"),
                    None => name.to_string(),
                }
            })
            .collect();
        assert_eq!(held, ["exited 1", "output 2", "exited 2"]);
        assert_eq!(p.held_frame_count, 1);
    }

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
