//! The key that detaches `genward attach` from a session, as written on the command line.
//!
//! The spellings follow tmux and dtach (`C-a`, `^\`) and Emacs-style `ctrl-a`; the default
//! is Ctrl-\ (0x1c) as in dtach, because it is rarely needed inside programs and is not one
//! of the keys shells and editors bind. `none` disables detaching by key.

use std::fmt;

/// Ctrl-\, the default detach key.
pub const DEFAULT_DETACH_KEY: u8 = 0x1c;

/// A detach key we could not understand. `Display` lists the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachKeyError(pub String);

impl fmt::Display for DetachKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown detach key `{}`; write a control key as ^\\, ^a, C-a or ctrl-a, or `none`",
            self.0
        )
    }
}

impl std::error::Error for DetachKeyError {}

/// Parses a detach key: `^X`, `C-X`, `ctrl-X` or `ctrl+X` (any case) for a control key,
/// or `none` for no detach key (`Ok(None)`).
///
/// `X` is a letter or one of `@ [ \ ] ^ _ ?`; the result is the byte the terminal sends
/// for that key (`X & 0x1f`, and 0x7f for `?`).
///
/// # Examples
///
/// ```
/// use genward::cli::detach_key::parse_detach_key;
/// assert_eq!(parse_detach_key("^\\"), Ok(Some(0x1c)));
/// assert_eq!(parse_detach_key("C-a"), Ok(Some(0x01)));
/// assert_eq!(parse_detach_key("none"), Ok(None));
/// ```
pub fn parse_detach_key(input: &str) -> Result<Option<u8>, DetachKeyError> {
    if input.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let lower = input.to_ascii_lowercase();
    let key = ["^", "c-", "ctrl-", "ctrl+"]
        .iter()
        .find_map(|prefix| lower.strip_prefix(prefix).map(|_| &input[prefix.len()..]));
    let mut chars = key.unwrap_or("").chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => control_byte(c)
            .map(Some)
            .ok_or_else(|| DetachKeyError(input.to_string())),
        _ => Err(DetachKeyError(input.to_string())),
    }
}

fn control_byte(c: char) -> Option<u8> {
    match c.to_ascii_uppercase() {
        '?' => Some(0x7f),
        c @ ('@'..='_') => Some(c as u8 & 0x1f),
        _ => None,
    }
}

/// How to show a detach key to the user, e.g. in "detach with ^\": caret notation.
pub fn describe_detach_key(key: Option<u8>) -> String {
    match key {
        None => "none".to_string(),
        Some(0x7f) => "^?".to_string(),
        Some(b @ 0..=0x1f) => format!("^{}", char::from(b | 0x40)),
        Some(b) => format!("0x{b:02x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_ctrl_backslash() {
        for s in ["^\\", "C-\\", "c-\\", "ctrl-\\", "Ctrl-\\", "CTRL+\\"] {
            assert_eq!(parse_detach_key(s), Ok(Some(DEFAULT_DETACH_KEY)), "{s}");
        }
    }

    #[test]
    fn letters_any_case() {
        for s in ["^a", "^A", "C-a", "C-A", "ctrl-a"] {
            assert_eq!(parse_detach_key(s), Ok(Some(0x01)), "{s}");
        }
        assert_eq!(parse_detach_key("^z"), Ok(Some(0x1a)));
        assert_eq!(parse_detach_key("^]"), Ok(Some(0x1d)));
        assert_eq!(parse_detach_key("^@"), Ok(Some(0x00)));
        assert_eq!(parse_detach_key("^_"), Ok(Some(0x1f)));
        assert_eq!(parse_detach_key("^?"), Ok(Some(0x7f)));
    }

    #[test]
    fn exactly_the_control_keys_after_a_caret() {
        for c in (0u8..=127).map(char::from) {
            let expected = match c {
                '?' => Some(0x7f),
                '@'..='_' => Some(c as u8 - 0x40),
                'a'..='z' => Some(c as u8 - 0x60),
                _ => None,
            };
            assert_eq!(
                parse_detach_key(&format!("^{c}")).ok().flatten(),
                expected,
                "{c:?}"
            );
        }
    }

    #[test]
    fn none_disables() {
        assert_eq!(parse_detach_key("none"), Ok(None));
        assert_eq!(parse_detach_key("NONE"), Ok(None));
    }

    #[test]
    fn junk_is_an_error_naming_the_input() {
        for s in [
            "", "^", "C-", "a", "\\", "^ab", "C-1", "^é", "ctrl-", "meta-a", "^^^", "x-a",
        ] {
            let err = parse_detach_key(s).expect_err(s);
            assert_eq!(err.0, s);
        }
        assert!(parse_detach_key("C-1")
            .unwrap_err()
            .to_string()
            .contains("`C-1`"));
    }

    #[test]
    fn description_round_trips() {
        for b in (0u8..=0x1f).chain([0x7f]) {
            let text = describe_detach_key(Some(b));
            assert_eq!(parse_detach_key(&text), Ok(Some(b)), "{text}");
        }
        assert_eq!(describe_detach_key(Some(0x1c)), "^\\");
        assert_eq!(describe_detach_key(None), "none");
        assert_eq!(describe_detach_key(Some(b'a')), "0x61");
    }
}
