//! The state directory's names: its fixed files and subdirectories, and the file name of
//! each session and generation, both ways.
//!
//! A record's file name is checked against what the record says inside, so a file copied
//! or renamed by hand is refused rather than taken for another session or generation.

use crate::core::is_valid_session_name;

/// One file per session.
pub const SESSIONS_DIR: &str = "sessions";

/// One file per live generation.
pub const GENS_DIR: &str = "gens";

const SUFFIX: &str = ".json";

/// `sessions/<name>.json`. Session names are safe file names by construction.
pub fn session_file(name: &str) -> String {
    format!("{name}{SUFFIX}")
}

/// The session a file name in `sessions/` is for, if it is one the daemon writes.
pub fn session_of_file(file: &str) -> Option<&str> {
    file.strip_suffix(SUFFIX)
        .filter(|name| is_valid_session_name(name))
}

/// `gens/<gen>.json`.
pub fn gen_file(gen: u64) -> String {
    format!("{gen}{SUFFIX}")
}

/// The generation a file name in `gens/` is for, if it is one the daemon writes.
pub fn gen_of_file(file: &str) -> Option<u64> {
    parse_decimal(file.strip_suffix(SUFFIX)?)
}

/// A `u64` in its one canonical decimal spelling: digits only, no sign, no leading zero.
pub fn parse_decimal(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_only_ours_are_accepted() {
        assert_eq!(session_of_file(&session_file("web.1")), Some("web.1"));
        assert_eq!(gen_of_file(&gen_file(u64::MAX)), Some(u64::MAX));
        for bad in [".x.json", "x", "x.json.bad-1", "a b.json", ".json"] {
            assert_eq!(session_of_file(bad), None, "{bad}");
        }
        for bad in [
            "07.json",
            "7",
            "-7.json",
            "18446744073709551616.json",
            ".json",
        ] {
            assert_eq!(gen_of_file(bad), None, "{bad}");
        }
        assert_eq!(parse_decimal("0"), Some(0));
    }
}
