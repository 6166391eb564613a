//! A session's log file: where its output is also written, and how the file is rotated.
//! Pure data, validated with the rest of the spec; the writing is the driver's (through a
//! writer process, see `crate::log_writer`).

use super::error::Error;

/// Output also written to a file, rotated by size in the numbered scheme of s6-log and
/// logrotate: `web.log` is renamed `web.log.1` (older ones shifted up) when writing would
/// take it past `max_size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFile {
    /// The file, an absolute path (bytes: Unix paths need not be UTF-8).
    pub path: Vec<u8>,
    /// Largest size of the file, bytes; writing past it rotates.
    pub max_size: u64,
    /// Rotated files kept (`web.log.1` … `web.log.N`); 0 keeps none: the file is emptied
    /// and written again from the start.
    pub keep: u32,
}

impl LogFile {
    /// The default largest size: 10 MiB.
    pub const DEFAULT_MAX_SIZE: u64 = 10 << 20;
    /// The smallest `max_size` accepted: a rotation per few lines would be a mistake.
    pub const MIN_MAX_SIZE: u64 = 4096;
    /// The largest `max_size` accepted: 1 TiB.
    pub const MAX_MAX_SIZE: u64 = 1 << 40;
    /// The default number of rotated files kept.
    pub const DEFAULT_KEEP: u32 = 5;
    /// Most rotated files kept.
    pub const MAX_KEEP: u32 = 1000;
    /// Longest path, bytes (`PATH_MAX` less room for the rotation suffix).
    pub const MAX_PATH: usize = 4000;

    /// A log at `path` with the default size and count.
    pub fn new(path: Vec<u8>) -> LogFile {
        LogFile {
            path,
            max_size: Self::DEFAULT_MAX_SIZE,
            keep: Self::DEFAULT_KEEP,
        }
    }

    /// Checks every member, naming it (`log.path`, `log.max_size`, `log.keep`).
    pub fn validate(&self) -> Result<(), Error> {
        if self.path.first() != Some(&b'/') {
            return Err(Error::bad("log.path: not an absolute path"));
        }
        if self.path.contains(&0) {
            return Err(Error::bad("log.path: contains a NUL byte"));
        }
        if self.path.len() > Self::MAX_PATH {
            return Err(Error::bad(format!(
                "log.path: longer than {} bytes",
                Self::MAX_PATH
            )));
        }
        if self.path.ends_with(b"/") {
            return Err(Error::bad("log.path: names a directory, not a file"));
        }
        if !(Self::MIN_MAX_SIZE..=Self::MAX_MAX_SIZE).contains(&self.max_size) {
            return Err(Error::bad(format!(
                "log.max_size: {} bytes is not within {}..={}",
                self.max_size,
                Self::MIN_MAX_SIZE,
                Self::MAX_MAX_SIZE
            )));
        }
        if self.keep > Self::MAX_KEEP {
            return Err(Self::too_many_kept(self.keep.into()));
        }
        Ok(())
    }

    /// The refusal of a `keep` of `n`: also for a number sent that no spec can hold, so
    /// the message shows the number sent.
    pub fn too_many_kept(n: u64) -> Error {
        Error::bad(format!("log.keep: {n} is above {}", Self::MAX_KEEP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(log: LogFile, field: &str) {
        let e = log.validate().expect_err("refused");
        assert!(e.message.starts_with(field), "{}", e.message);
    }

    #[test]
    fn each_bad_member_is_refused_by_name() {
        assert!(LogFile::new(b"/var/log/web.log".to_vec())
            .validate()
            .is_ok());
        refused(LogFile::new(b"web.log".to_vec()), "log.path");
        refused(LogFile::new(b"/a\0b".to_vec()), "log.path");
        refused(LogFile::new(b"/var/log/".to_vec()), "log.path");
        refused(LogFile::new(vec![b'/'; 5000]), "log.path");
        let small = LogFile {
            max_size: 100,
            ..LogFile::new(b"/l".to_vec())
        };
        refused(small, "log.max_size");
        let many = LogFile {
            keep: 1001,
            ..LogFile::new(b"/l".to_vec())
        };
        refused(many, "log.keep");
    }
}
