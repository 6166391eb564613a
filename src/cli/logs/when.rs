//! Times for `logs`: reading `--since` and writing `--timestamps`, in UTC, from the Unix
//! milliseconds output frames carry (`t`). Civil dates are computed here (Howard
//! Hinnant's days-from-civil algorithm) rather than with a date library: genward keeps its
//! dependencies to the few it has.

use std::time::Duration;

use crate::proto::duration::parse_duration;

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `2026-12-02T05:30:01.123Z`.
pub fn format_utc(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        unix_ms % 1000
    )
}

/// Reads `--since`: a duration back from `now_ms` (`10m`, `1h30m`, `250ms`), `@SECONDS`
/// since the Unix epoch, or an RFC 3339 time (`2026-12-02T05:30:00Z`, with `Z` or an
/// offset such as `+01:00`, seconds and fractions optional) or date (`2026-12-02`, midnight
/// UTC). Returns Unix milliseconds.
pub fn parse_since(text: &str, now_ms: u64) -> Result<u64, String> {
    const WHAT: &str =
        "expected a duration (10m), @UNIX_SECONDS, or a time such as 2026-12-02T05:30:00Z";
    if let Some(secs) = text.strip_prefix('@') {
        return secs
            .parse::<u64>()
            .map(|s| s.saturating_mul(1000))
            .map_err(|_| WHAT.to_string());
    }
    if text.as_bytes().first().is_some_and(u8::is_ascii_digit) && text.contains('-') {
        return match parse_rfc3339(text) {
            Rfc3339::Ms(ms) => Ok(ms),
            Rfc3339::NoSuchDay => Err(format!(
                "there is no such day (a month has no day 0, and no more days than 28 to 31); {WHAT}"
            )),
            Rfc3339::BeforeEpoch => {
                Err("the time is before 1970-01-01T00:00:00Z, the earliest there is".to_string())
            }
            Rfc3339::Malformed => Err(WHAT.to_string()),
        };
    }
    let back: Duration = parse_duration(text).map_err(|e| format!("{e}; {WHAT}"))?;
    Ok(now_ms.saturating_sub(back.as_millis() as u64))
}

fn num(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// What an RFC 3339 time or date reads as.
#[derive(Debug, PartialEq, Eq)]
enum Rfc3339 {
    /// Unix milliseconds.
    Ms(u64),
    /// A well-formed date that is not in the calendar (`2026-02-30`).
    NoSuchDay,
    /// A time before the Unix epoch (`1970-01-01T00:00:00+05:00`).
    BeforeEpoch,
    Malformed,
}

fn parse_rfc3339(text: &str) -> Rfc3339 {
    let Some(days) = date_days(text) else {
        return Rfc3339::Malformed;
    };
    let Some(days) = days else {
        return Rfc3339::NoSuchDay;
    };
    match time_ms(text, days) {
        None => Rfc3339::Malformed,
        Some(total) => u64::try_from(total).map_or(Rfc3339::BeforeEpoch, Rfc3339::Ms),
    }
}

/// The days since 1970-01-01 of the date `text` starts with; `Some(None)` for a date in
/// the right form that does not exist.
fn date_days(text: &str) -> Option<Option<i64>> {
    let date = text.split_once(['T', 't', ' ']).map_or(text, |(d, _)| d);
    let mut parts = date.splitn(3, '-');
    let (y, m, d) = (
        num(parts.next()?)?,
        num(parts.next()?)?,
        num(parts.next()?)?,
    );
    if !(1..=12).contains(&m) || d > 31 {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, d);
    // Day 0, or a day past the month's end, comes out as another month's.
    Some((civil_from_days(days) == (i64::from(y), m, d)).then_some(days))
}

/// `text`'s time as Unix milliseconds (before the epoch: negative), on day `days`.
fn time_ms(text: &str, days: i64) -> Option<i64> {
    let time = text.split_once(['T', 't', ' ']).map(|(_, t)| t);
    let (mut secs, mut ms, mut offset) = (0i64, 0i64, 0i64);
    if let Some(time) = time {
        let (clock, zone) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
            (c, 0)
        } else if let Some(i) = time.rfind(['+', '-']) {
            let (c, z) = time.split_at(i);
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let (hh, mm) = z[1..].split_once(':')?;
            (
                c,
                sign * (i64::from(num(hh)?) * 3600 + i64::from(num(mm)?) * 60),
            )
        } else {
            return None;
        };
        offset = zone;
        let (hms, frac) = match clock.split_once('.') {
            Some((h, f)) => (h, Some(f)),
            None => (clock, None),
        };
        let mut hms = hms.split(':');
        let h = num(hms.next()?)?;
        let mi = num(hms.next()?)?;
        let s = hms.next().map_or(Some(0), num)?;
        if hms.next().is_some() || h > 23 || mi > 59 || s > 60 {
            return None;
        }
        secs = i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
        if let Some(f) = frac {
            let digits: String = f.chars().take(3).collect();
            let scale = 10i64.pow(3 - digits.len() as u32);
            ms = i64::from(num(&digits)?) * scale;
        }
    }
    Some((days * 86_400 + secs - offset) * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_and_parse_back() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(1_764_653_401_123), "2025-12-02T05:30:01.123Z");
        for ms in [0, 951_782_400_000, 1_764_653_401_123, 4_102_444_799_999] {
            assert_eq!(parse_since(&format_utc(ms), 0).unwrap(), ms, "{ms}");
        }
    }

    #[test]
    fn since_reads_every_documented_form() {
        let now = 1_764_653_401_000;
        assert_eq!(parse_since("10m", now).unwrap(), now - 600_000);
        assert_eq!(parse_since("@1764653401", now).unwrap(), 1_764_653_401_000);
        assert_eq!(
            parse_since("2025-12-02T06:30:01+01:00", now).unwrap(),
            1_764_653_401_000
        );
        assert_eq!(parse_since("2025-12-02", now).unwrap(), 1_764_633_600_000);
        assert_eq!(
            parse_since("2025-12-02T05:30Z", now).unwrap(),
            1_764_653_400_000
        );
        for bad in ["yesterday", "2025-13-01", "2025-12-02T25:00Z", "@x", ""] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
        assert_eq!(parse_since("2024-02-29", now).unwrap(), 1_709_164_800_000);
        assert_eq!(parse_since("1970-01-01T05:00:00+05:00", now).unwrap(), 0);
    }

    #[test]
    fn a_day_not_in_the_calendar_or_a_time_before_1970_is_refused_as_such() {
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-02-29",
            "2025-04-31",
            "2026-02-00",
        ] {
            let e = parse_since(bad, 0).unwrap_err();
            assert!(e.contains("no such day"), "{bad}: {e}");
        }
        let e = parse_since("1970-01-01T00:00:00+05:00", 0).unwrap_err();
        assert!(e.contains("before 1970-01-01T00:00:00Z"), "{e}");
    }
}
