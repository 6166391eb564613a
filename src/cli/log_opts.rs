//! `run --log PATH [--log-max-size SIZE] [--log-keep N]`: the spec's log file.

use std::path::Path;

use super::args::Matches;
use super::dispatch::CommandError;
use crate::core::{LogFile, Spec};

/// Sets `spec.log` from the command line: `--log` (relative to `cwd_now`) with its size
/// and count; the size and count alone are refused (they would be silently ignored).
pub fn set_log(m: &Matches<'_>, spec: &mut Spec, cwd_now: &Path) -> Result<(), CommandError> {
    let Some(path) = m.value("log") else {
        for opt in ["log-max-size", "log-keep"] {
            if let Some(v) = m.value(opt) {
                return Err(m.invalid(&format!("--{opt}"), v, "needs --log").into());
            }
        }
        return Ok(());
    };
    let path = cwd_now.join(path);
    let path = path
        .to_str()
        .ok_or_else(|| m.invalid("--log", &path.to_string_lossy(), "not valid UTF-8"))?;
    let mut log = LogFile::new(path.as_bytes().to_vec());
    if let Some(n) = m.value_with("log-max-size", parse_size)? {
        log.max_size = n;
    }
    if let Some(n) = m.value_with("log-keep", |v| v.parse::<u32>())? {
        log.keep = n;
    }
    spec.log = Some(log);
    Ok(())
}

/// A size in bytes, with an optional binary suffix: `4096`, `64K`, `10M`, `1G`.
pub fn parse_size(v: &str) -> Result<u64, String> {
    let (digits, unit) = match v.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => v.split_at(i),
        None => (v, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" | "KiB" => 10,
        "M" | "m" | "MiB" => 20,
        "G" | "g" | "GiB" => 30,
        _ => return Err("expected bytes, or a number with K, M or G".into()),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| "expected bytes, or a number with K, M or G".to_string())?;
    n.checked_mul(1 << shift).ok_or_else(|| "too large".into())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("10X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("-1").is_err());
    }
}
