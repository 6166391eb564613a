//! What the daemon sends its log writer over the pipe: a stream of records, each a fixed
//! header then the log's path then the bytes.
//!
//! ```text
//! kind u8 | path_len u16 | keep u32 | max_size u64 | data_len u32 | path | data
//! ```
//!
//! Integers are little-endian. Every record names its log in full (path, size, count),
//! so the writer keeps no configuration: one started again after a death picks up with
//! the next record. Bounds are checked on both sides; a record out of bounds means the
//! stream is out of step, and the writer stops (the daemon starts another).

use crate::core::LogFile;

/// Bytes before the path.
pub const HEADER_BYTES: usize = 1 + 2 + 4 + 8 + 4;

/// Most bytes of data in one record; the daemon splits longer output.
pub const MAX_DATA: usize = 256 * 1024;

/// What a record asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Append the bytes to the file at `path`, rotating it by size.
    Append,
    /// Append the bytes (a line of genward's own, such as a drop count) to the file at
    /// `path`, starting a line first if the file's last byte was not a newline.
    Note,
    /// Write the bytes (whole, prefixed lines) to the writer's standard output.
    Stdout,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Append => 1,
            Kind::Note => 2,
            Kind::Stdout => 3,
        }
    }

    fn of(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Append),
            2 => Some(Kind::Note),
            3 => Some(Kind::Stdout),
            _ => None,
        }
    }
}

/// One record, borrowed from the stream it was read from (or the spec it is made from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// What to do with `data`.
    pub kind: Kind,
    /// The log file (empty for [`Kind::Stdout`]).
    pub path: &'a [u8],
    /// Its largest size.
    pub max_size: u64,
    /// Rotated files kept.
    pub keep: u32,
    /// The bytes.
    pub data: &'a [u8],
}

impl<'a> Record<'a> {
    /// A record for the log file `log`.
    pub fn file(kind: Kind, log: &'a LogFile, data: &'a [u8]) -> Record<'a> {
        Record {
            kind,
            path: &log.path,
            max_size: log.max_size,
            keep: log.keep,
            data,
        }
    }

    /// A record for the writer's standard output.
    pub fn stdout(data: &'a [u8]) -> Record<'a> {
        Record {
            kind: Kind::Stdout,
            path: &[],
            max_size: 0,
            keep: 0,
            data,
        }
    }

    /// The record's length on the wire.
    pub fn wire_len(&self) -> usize {
        HEADER_BYTES + self.path.len() + self.data.len()
    }

    /// Appends the record to `out`. The caller keeps `data` within [`MAX_DATA`] and the
    /// path within [`LogFile::MAX_PATH`] (a validated spec's).
    pub fn encode(&self, out: &mut Vec<u8>) {
        debug_assert!(self.data.len() <= MAX_DATA && self.path.len() <= LogFile::MAX_PATH);
        out.reserve(self.wire_len());
        out.push(self.kind.byte());
        out.extend_from_slice(&(self.path.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.keep.to_le_bytes());
        out.extend_from_slice(&self.max_size.to_le_bytes());
        out.extend_from_slice(&(self.data.len() as u32).to_le_bytes());
        out.extend_from_slice(self.path);
        out.extend_from_slice(self.data);
    }

    /// The first record of `buf` and its length, `Ok(None)` if `buf` holds only part of
    /// one, or why the bytes are not a record.
    pub fn decode(buf: &'a [u8]) -> Result<Option<(Record<'a>, usize)>, String> {
        if buf.len() < HEADER_BYTES {
            return Ok(None);
        }
        let kind = Kind::of(buf[0]).ok_or_else(|| format!("unknown record kind {}", buf[0]))?;
        let path_len = u16::from_le_bytes([buf[1], buf[2]]) as usize;
        let keep = u32::from_le_bytes(buf[3..7].try_into().expect("4 bytes"));
        let max_size = u64::from_le_bytes(buf[7..15].try_into().expect("8 bytes"));
        let data_len = u32::from_le_bytes(buf[15..19].try_into().expect("4 bytes")) as usize;
        if path_len > LogFile::MAX_PATH || data_len > MAX_DATA {
            return Err(format!(
                "record of {path_len} path and {data_len} data bytes is out of bounds"
            ));
        }
        let end = HEADER_BYTES + path_len + data_len;
        if buf.len() < end {
            return Ok(None);
        }
        let path = &buf[HEADER_BYTES..HEADER_BYTES + path_len];
        if kind != Kind::Stdout {
            let log = LogFile {
                path: path.to_vec(),
                max_size,
                keep,
            };
            log.validate().map_err(|e| e.message)?;
        }
        let record = Record {
            kind,
            path,
            max_size,
            keep,
            data: &buf[HEADER_BYTES + path_len..end],
        };
        Ok(Some((record, end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_arrive_in_pieces() {
        let log = LogFile::new(b"/var/log/web.log".to_vec());
        let mut out = Vec::new();
        Record::file(Kind::Append, &log, b"hello\n").encode(&mut out);
        Record::stdout(b"web | hello\n").encode(&mut out);
        for cut in 0..HEADER_BYTES + log.path.len() + 6 {
            assert_eq!(Record::decode(&out[..cut]), Ok(None), "cut at {cut}");
        }
        let (first, used) = Record::decode(&out).unwrap().unwrap();
        assert_eq!(first, Record::file(Kind::Append, &log, b"hello\n"));
        let (second, rest) = Record::decode(&out[used..]).unwrap().unwrap();
        assert_eq!(second.kind, Kind::Stdout);
        assert_eq!(second.data, b"web | hello\n");
        assert_eq!(used + rest, out.len());
    }

    #[test]
    fn records_out_of_bounds_are_refused() {
        let mut out = Vec::new();
        Record::stdout(b"x").encode(&mut out);
        out[0] = 9;
        assert!(Record::decode(&out).is_err());
        let bad = LogFile {
            path: b"relative".to_vec(),
            max_size: 4096,
            keep: 1,
        };
        let mut out = Vec::new();
        Record::file(Kind::Append, &bad, b"x").encode(&mut out);
        assert!(Record::decode(&out).is_err());
        let mut out = Vec::new();
        Record::stdout(b"x").encode(&mut out);
        out[15..19].copy_from_slice(&(MAX_DATA as u32 + 1).to_le_bytes());
        assert!(Record::decode(&out).is_err());
    }
}
