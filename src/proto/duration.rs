//! Durations as people write them: `5s`, `500ms`, `1m30s`, `1.5s`, `2h`, plain `5`.
//!
//! Part of the wire format (a request's `grace`, `drain`, ... may be such a string) and
//! of the command line (`--grace 1.5s`), so both read a duration the same way — except
//! a plain number: seconds on the command line, refused in a wire string (where a bare
//! JSON number means milliseconds; see `proto::request::fields`).
//!
//! Parsing is exact integer arithmetic on nanoseconds (no floating point), so `0.1s` is
//! exactly 100ms and a huge value is reported as too large instead of silently wrapping
//! or saturating: a duration is at most [`MAX_DURATION`], 2^64−1 milliseconds, what the
//! wire's integer form (milliseconds) can say too. Formatting is the compact two-unit form used in `genward ls` tables.

use std::fmt;
use std::time::Duration;

use crate::proto::json::{write_str, write_u64};

const NS_PER_SEC: u128 = 1_000_000_000;

/// Units from largest to smallest: a compound value must use them in this order, each at
/// most once, so `1m30s` is accepted and the ambiguous-looking `30s1m` is not.
const UNITS: &[(&str, u128)] = &[
    ("d", 86_400 * NS_PER_SEC),
    ("h", 3_600 * NS_PER_SEC),
    ("m", 60 * NS_PER_SEC),
    ("s", NS_PER_SEC),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// Input longer than this is refused before any arithmetic: no sane duration needs it.
pub const MAX_INPUT_LEN: usize = 64;

/// The longest duration taken: 2^64−1 ms (some 584 million years), the most the wire's
/// integer milliseconds can say, so that a string and a number have the same range and
/// every duration taken is shown back in milliseconds.
pub const MAX_DURATION: Duration = Duration::from_millis(u64::MAX);

/// Why a duration was refused. `Display` gives a message that says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing was given.
    Empty,
    /// A leading `-`: a negative wait or grace period has no meaning.
    Negative(String),
    /// The value is above [`MAX_DURATION`].
    TooLarge(String),
    /// Longer than any sensible duration is written; refused before looking at it.
    TooLong,
    /// A number followed by a unit we do not know.
    UnknownUnit { input: String, unit: String },
    /// A number without a unit inside a compound value (`1m30`).
    MissingUnit(String),
    /// A unit repeated or out of order (`1s1m`, `1s2s`).
    UnitOrder(String),
    /// Anything else that is not `<number><unit>...`.
    Malformed(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const EXAMPLES: &str = "e.g. 5s, 500ms, 1m30s, 2h";
        match self {
            Self::Empty => write!(f, "empty duration; give one, {EXAMPLES}"),
            Self::Negative(s) => write!(f, "negative duration `{s}`; durations are 0 or more"),
            Self::TooLarge(s) => write!(
                f,
                "duration `{s}` is too large; at most {}ms (2^64-1 milliseconds)",
                u64::MAX
            ),
            Self::TooLong => write!(
                f,
                "duration longer than {MAX_INPUT_LEN} characters; {EXAMPLES}"
            ),
            Self::UnknownUnit { input, unit } => write!(
                f,
                "unknown unit `{unit}` in `{input}`; use d, h, m, s, ms, us or ns ({EXAMPLES})"
            ),
            Self::MissingUnit(s) => write!(
                f,
                "missing unit in `{s}`; only a lone number may omit it (meaning seconds)"
            ),
            Self::UnitOrder(s) => write!(
                f,
                "units in `{s}` must go from largest to smallest, each once ({EXAMPLES})"
            ),
            Self::Malformed(s) => write!(f, "`{s}` is not a duration; {EXAMPLES}"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a command-line duration.
///
/// Accepted: a lone number meaning seconds (`5`, `0`, `1.5`), or one or more
/// `<number><unit>` parts with units `d h m s ms us ns` from largest to smallest
/// (`1m30s`, `1.5s`, `500ms`). Numbers may have a fraction (`.5s`, `1.25h`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use genward::proto::duration::parse_duration;
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// ```
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let owned = || input.to_string();
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    if input.starts_with('-') {
        return Err(DurationError::Negative(owned()));
    }
    if input.len() > MAX_INPUT_LEN {
        return Err(DurationError::TooLong);
    }
    let mut rest = input;
    let mut total: u128 = 0;
    let mut next_unit = 0; // index into UNITS of the largest unit still allowed
    let mut parts = 0;
    while !rest.is_empty() {
        let (int, frac, after) =
            split_number(rest).ok_or_else(|| DurationError::Malformed(owned()))?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit = &after[..unit_len];
        rest = &after[unit_len..];
        parts += 1;
        let scale = if unit.is_empty() {
            if parts > 1 || !rest.is_empty() {
                return Err(DurationError::MissingUnit(owned()));
            }
            NS_PER_SEC
        } else {
            let index = UNITS
                .iter()
                .position(|(name, _)| *name == unit)
                .ok_or_else(|| DurationError::UnknownUnit {
                    input: owned(),
                    unit: unit.to_string(),
                })?;
            if index < next_unit {
                return Err(DurationError::UnitOrder(owned()));
            }
            next_unit = index + 1;
            UNITS[index].1
        };
        let part = scaled(int, frac, scale).ok_or_else(|| DurationError::TooLarge(owned()))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| DurationError::TooLarge(owned()))?;
    }
    if total > MAX_DURATION.as_nanos() {
        return Err(DurationError::TooLarge(owned()));
    }
    let secs = u64::try_from(total / NS_PER_SEC).map_err(|_| DurationError::TooLarge(owned()))?;
    Ok(Duration::new(secs, (total % NS_PER_SEC) as u32))
}

/// Splits a leading `digits[.digits]` off `s`; at least one digit on either side of the
/// point. Returns the integer digits, the fraction digits and the remainder.
fn split_number(s: &str) -> Option<(&str, &str, &str)> {
    let int_len = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (int, after) = s.split_at(int_len);
    let (frac, after) = match after.strip_prefix('.') {
        Some(f) => {
            let frac_len = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
            f.split_at(frac_len)
        }
        None => ("", after),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    Some((int, frac, after))
}

/// `int.frac × scale` in nanoseconds, truncated; `None` on overflow. Fraction digits past
/// the 18th are below a nanosecond even for days, so they are ignored.
fn scaled(int: &str, frac: &str, scale: u128) -> Option<u128> {
    let mut whole: u128 = 0;
    for d in int.bytes() {
        whole = whole.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
    }
    let mut numerator: u128 = 0;
    let mut denominator: u128 = 1;
    for d in frac.bytes().take(18) {
        numerator = numerator * 10 + u128::from(d - b'0');
        denominator *= 10;
    }
    whole
        .checked_mul(scale)?
        .checked_add(numerator * scale / denominator)
}

/// Appends `d` as a request writes a duration: integer milliseconds when that is exact
/// (what people and other clients write, and what older clients sent), else a string
/// exact to the nanosecond, so a decoded duration always encodes back to itself.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use genward::proto::duration::write_wire;
/// let wire = |d| {
///     let mut out = Vec::new();
///     write_wire(d, &mut out);
///     String::from_utf8(out).unwrap()
/// };
/// assert_eq!(wire(Duration::from_millis(1500)), "1500");
/// assert_eq!(wire(Duration::from_nanos(1_500_000_001)), r#""1s500000001ns""#);
/// ```
pub fn write_wire(d: Duration, out: &mut Vec<u8>) {
    if d.subsec_nanos() % 1_000_000 == 0 {
        if let Ok(ms) = u64::try_from(d.as_millis()) {
            write_u64(ms, out);
            return;
        }
    }
    let text = match (d.as_secs(), d.subsec_nanos()) {
        (0, nanos) => format!("{nanos}ns"),
        (secs, 0) => format!("{secs}s"),
        (secs, nanos) => format!("{secs}s{nanos}ns"),
    };
    write_str(&text, out);
}

/// Formats a duration in at most two units, truncated, for table columns:
/// `450ms`, `3s`, `2m05s`, `1h02m`, `3d04h`. Zero is `0s`.
pub fn format_compact(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        let ms = d.subsec_millis();
        return if ms == 0 {
            "0s".to_string()
        } else {
            format!("{ms}ms")
        };
    }
    let (days, hours, mins, s) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    if days > 0 {
        format!("{days}d{hours:02}h")
    } else if hours > 0 {
        format!("{hours}h{mins:02}m")
    } else if mins > 0 {
        format!("{mins}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Duration {
        parse_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn accepts_single_units() {
        assert_eq!(ok("5s"), Duration::from_secs(5));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1m"), Duration::from_secs(60));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("1d"), Duration::from_secs(86_400));
        assert_eq!(ok("7us"), Duration::from_micros(7));
        assert_eq!(ok("9ns"), Duration::from_nanos(9));
    }

    #[test]
    fn lone_numbers_are_seconds() {
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("5"), Duration::from_secs(5));
        assert_eq!(ok("1.5"), Duration::from_millis(1500));
        assert_eq!(ok("007"), Duration::from_secs(7));
    }

    #[test]
    fn compound_and_fractions_are_exact() {
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1h2m3s4ms"), Duration::from_millis(3_723_004));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("0.1s"), Duration::from_millis(100));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("1.5m"), Duration::from_secs(90));
        assert_eq!(ok("0.000000001s"), Duration::from_nanos(1));
        assert_eq!(
            ok("0.0000000019s"),
            Duration::from_nanos(1),
            "truncates, never rounds up"
        );
        assert_eq!(ok("1.0000000000000000000000009s"), Duration::from_secs(1));
    }

    #[test]
    fn rejects_empty_negative_and_junk() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration("-5s"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_duration("-0"),
            Err(DurationError::Negative(_))
        ));
        for junk in [
            "s", ".", ".s", "5 s", " 5s", "+5s", "1..5s", "5s ", "1e3s", "٣s",
        ] {
            assert!(parse_duration(junk).is_err(), "{junk:?} accepted");
        }
        assert!(matches!(
            parse_duration("s5"),
            Err(DurationError::Malformed(_))
        ));
    }

    #[test]
    fn rejects_unknown_units_naming_them() {
        let err = parse_duration("5x").unwrap_err();
        assert_eq!(
            err,
            DurationError::UnknownUnit {
                input: "5x".into(),
                unit: "x".into()
            }
        );
        assert!(
            err.to_string().contains("unknown unit `x` in `5x`"),
            "{err}"
        );
        assert!(matches!(
            parse_duration("5sec"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("5S"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("5é"),
            Err(DurationError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn compound_needs_units_in_order_once() {
        assert!(matches!(
            parse_duration("1m30"),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            parse_duration("30s1m"),
            Err(DurationError::UnitOrder(_))
        ));
        assert!(matches!(
            parse_duration("1s2s"),
            Err(DurationError::UnitOrder(_))
        ));
        assert!(matches!(
            parse_duration("1ms1s"),
            Err(DurationError::UnitOrder(_))
        ));
    }

    #[test]
    fn rejects_overflow_instead_of_wrapping() {
        let over = format!("{}0", u64::MAX);
        assert!(matches!(
            parse_duration(&over),
            Err(DurationError::TooLarge(_))
        ));
        assert!(matches!(
            parse_duration("99999999999999999999999d"),
            Err(DurationError::TooLarge(_))
        ));
        let huge = "9".repeat(200) + "s";
        assert_eq!(parse_duration(&huge), Err(DurationError::TooLong));
    }

    /// Up to 2^64−1 ms, however written, and not a nanosecond more: what a bare number of
    /// milliseconds can say too.
    #[test]
    fn takes_up_to_the_most_milliseconds_a_u64_holds() {
        for at_most in [
            "18446744073709551615ms",
            "18446744073709551.615s",
            "213503982334d14h25m51.615s",
            "18446744073709551615000000ns",
        ] {
            assert_eq!(ok(at_most), MAX_DURATION, "{at_most}");
        }
        for above in [
            "18446744073709551616ms",
            "18446744073709551615000001ns",
            "18446744073709551.6150001s",
            "213503982334601d",
            "18446744073709551615",
            "18446744073709551615s",
        ] {
            let err = parse_duration(above).unwrap_err();
            assert_eq!(err, DurationError::TooLarge(above.into()));
            let msg = err.to_string();
            assert!(msg.contains("at most 18446744073709551615ms"), "{msg}");
        }
        // Exactly 64 characters is still read; one more is refused unread.
        let longest = format!("{}s", "0".repeat(MAX_INPUT_LEN - 2) + "5");
        assert_eq!(longest.len(), MAX_INPUT_LEN);
        assert_eq!(ok(&longest), Duration::from_secs(5));
        assert_eq!(
            parse_duration(&format!("0{longest}")),
            Err(DurationError::TooLong)
        );
    }

    #[test]
    fn messages_say_what_to_write() {
        let msg = parse_duration("").unwrap_err().to_string();
        assert!(msg.contains("5s"), "{msg}");
        let msg = parse_duration("-1s").unwrap_err().to_string();
        assert!(msg.contains("negative"), "{msg}");
    }

    #[test]
    fn formats_two_units_truncated() {
        let f = |secs| format_compact(Duration::from_secs(secs));
        assert_eq!(format_compact(Duration::ZERO), "0s");
        assert_eq!(format_compact(Duration::from_millis(450)), "450ms");
        assert_eq!(format_compact(Duration::from_millis(1999)), "1s");
        assert_eq!(f(3), "3s");
        assert_eq!(f(59), "59s");
        assert_eq!(f(60), "1m00s");
        assert_eq!(f(125), "2m05s");
        assert_eq!(f(3_720), "1h02m");
        assert_eq!(f(3 * 86_400 + 4 * 3_600 + 59), "3d04h");
        assert_eq!(f(400 * 86_400), "400d00h");
        let (days, hours) = (u64::MAX / 86_400, u64::MAX / 3_600 % 24);
        assert_eq!(format_compact(Duration::MAX), format!("{days}d{hours:02}h"));
    }

    /// Every string of up to five characters from an alphabet of digits, units and junk:
    /// no panic, errors that mention the input, and results that only grow when a digit
    /// is appended to the leading number.
    #[test]
    fn small_inputs_exhaustively() {
        let alphabet: Vec<char> = "09.smhdn-x".chars().collect();
        let mut inputs = vec![String::new()];
        let mut start = 0;
        for _ in 0..5 {
            let end = inputs.len();
            for i in start..end {
                for &c in &alphabet {
                    inputs.push(format!("{}{c}", inputs[i]));
                }
            }
            start = end;
        }
        let mut accepted = 0;
        for input in &inputs {
            match parse_duration(input) {
                Ok(d) => {
                    accepted += 1;
                    assert!(!input.contains('-') && !input.contains('x'), "{input}");
                    let _ = format_compact(d);
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        input.is_empty() || msg.contains(input.as_str()),
                        "{input}: {msg}"
                    );
                }
            }
        }
        assert!(accepted > 500, "only {accepted} accepted");
    }

    #[test]
    fn wire_durations_parse_back_exactly() {
        for d in [
            Duration::ZERO,
            Duration::from_millis(1),
            Duration::from_nanos(1),
            Duration::from_micros(1500),
            Duration::new(5, 1),
            MAX_DURATION,
            MAX_DURATION - Duration::from_nanos(1),
        ] {
            let mut out = Vec::new();
            write_wire(d, &mut out);
            let text = String::from_utf8(out).unwrap();
            let back = match text.strip_prefix('"') {
                Some(quoted) => parse_duration(quoted.trim_end_matches('"')).unwrap(),
                None => Duration::from_millis(text.parse().unwrap()),
            };
            assert_eq!(back, d, "{text}");
        }
    }

    #[test]
    fn formatted_values_parse_back_to_the_same_truncation() {
        for secs in [0, 1, 59, 61, 3_599, 3_661, 90_061] {
            let text = format_compact(Duration::from_secs(secs));
            assert!(parse_duration(&text).is_ok(), "{text}");
        }
    }
}
