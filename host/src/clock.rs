//! Wall-clock time as the gateway reads, writes and parses it: Unix milliseconds, RFC 3339
//! text, report ranges (`--since`, `--until`) and key expiries (`--expires`, the admin API's
//! `expires`). A leaf: the store, keys, reports, plugins and the admin API all use it.

/// Now, in Unix ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Unix ms as RFC 3339 with milliseconds, UTC (`2026-05-01T12:30:00.250Z`).
pub fn format_time_ms(ms: i64) -> String {
    // RFC 3339 has four-digit years: humantime refuses (and `to_string` would panic on) a time
    // after 9999, which a stored value may still be (an expiry stored before it was capped).
    const LAST_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let ms = ms.clamp(0, LAST_MS) as u64;
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(time).to_string()
}

/// A `--since` / `--until` value as Unix ms: `YYYY-MM-DD` is that day's UTC midnight; anything
/// else is an RFC 3339 time (`2026-05-01T12:30:00Z`, `2026-05-01T14:30:00.250+02:00`; without
/// a zone, UTC), to the millisecond.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let bad = || {
        format!(
            "{text:?} is neither a date (2026-05-01, UTC) nor an RFC 3339 time \
             (2026-05-01T12:30:00Z, 2026-05-01T14:30:00+02:00)"
        )
    };
    let unix_ms = |time: std::time::SystemTime| {
        time.duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    };
    if text.len() == "YYYY-MM-DD".len() {
        return humantime::parse_rfc3339(&format!("{text}T00:00:00Z"))
            .map(unix_ms)
            .map_err(|_| bad());
    }
    // RFC 3339 allows a lower-case `t` and `z`; humantime does not.
    let text_upper = text.to_ascii_uppercase();
    let (time, offset_ms) = split_offset(&text_upper).ok_or_else(bad)?;
    humantime::parse_rfc3339_weak(time)
        .map(|utc| unix_ms(utc) - offset_ms)
        .map_err(|_| bad())
}

/// A time and its numeric zone offset (`+HH:MM`, `-HH:MM`) in ms east of UTC, taken off the
/// end (humantime reads UTC only); offset 0 when it has none. `None`: an offset that is no
/// valid one, or one after a `Z`.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    let Some(split) = text.len().checked_sub("+HH:MM".len()) else {
        return Some((text, 0));
    };
    let (Some(time), Some(zone)) = (text.get(..split), text.get(split..)) else {
        return Some((text, 0));
    };
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return Some((text, 0)),
    };
    let digits = |part: &str| {
        (part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<i64>().ok())
            .flatten()
    };
    let (hours, minutes) = (digits(&zone[1..3])?, digits(zone.get(4..)?)?);
    if zone.as_bytes()[3] != b':' || hours > 23 || minutes > 59 || time.ends_with('Z') {
        return None;
    }
    Some((time, sign * (hours * 60 + minutes) * 60_000))
}

/// When a key given `--expires TEXT` (or the admin API's `expires`) stops
/// working, in Unix ms: a duration from `now_ms` (`30d`, `12h`, `1w`), a
/// date (`2026-12-31`: the key works through that UTC day), or an RFC 3339
/// time (`2026-12-31T18:00:00Z`); at most [`MAX_EXPIRY_DAYS`] ahead.
pub fn parse_expiry(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    let at = |time: std::time::SystemTime| {
        time.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    };
    let expires = if let Ok(duration) = humantime::parse_duration(text) {
        now_ms.saturating_add(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
    } else if let Ok(day) = humantime::parse_rfc3339(&format!("{text}T00:00:00Z")) {
        at(day) + 24 * 3600 * 1000
    } else if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        at(time)
    } else {
        return Err(format!(
            "{text:?} is neither a duration (30d, 12h), a date (2026-12-31) nor a time \
             (2026-12-31T18:00:00Z)"
        ));
    };
    if expires <= now_ms {
        return Err(format!("{text:?} is not in the future"));
    }
    if expires > now_ms.saturating_add(MAX_EXPIRY_DAYS * 86_400_000) {
        return Err(format!(
            "{text:?} is more than 100 years ahead ({MAX_EXPIRY_DAYS}d), the most an expiry may \
             be; a key that should not expire is made without one"
        ));
    }
    Ok(expires)
}

/// How far ahead a key's expiry may be: 100 years. Anything later is a stand-in for "never"
/// (which is no expiry at all), and could not be written as an RFC 3339 time past year 9999.
pub const MAX_EXPIRY_DAYS: i64 = 36_500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_past_year_9999_are_written_as_its_last_millisecond() {
        assert_eq!(format_time_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time_ms(-5), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_time_ms(4_102_444_800_000),
            "2100-01-01T00:00:00.000Z"
        );
        for ms in [253_402_300_800_000, i64::MAX] {
            assert_eq!(format_time_ms(ms), "9999-12-31T23:59:59.999Z");
        }
    }

    #[test]
    fn dates_are_utc_midnight_and_times_are_rfc_3339() {
        // 2026-05-01T00:00:00Z
        let midnight = 1_777_593_600_000;
        assert_eq!(parse_time("2026-05-01"), Ok(midnight));
        assert_eq!(parse_time(" 2026-05-01 "), Ok(midnight));
        assert_eq!(parse_time("2026-05-01T00:00:00Z"), Ok(midnight));
        assert_eq!(parse_time("2026-05-01t00:00:00z"), Ok(midnight));
        assert_eq!(parse_time("2026-05-01T00:00:00+00:00"), Ok(midnight));
        assert_eq!(
            parse_time("2026-05-01T00:00:00"),
            Ok(midnight),
            "no zone: UTC"
        );
        assert_eq!(
            parse_time("2026-05-01T12:30:00.250Z"),
            Ok(midnight + 12 * 3_600_000 + 30 * 60_000 + 250)
        );
        assert_eq!(
            parse_time("2026-05-01T02:00:00+02:00"),
            Ok(midnight),
            "east of UTC"
        );
        assert_eq!(
            parse_time("2026-04-30T18:30:00.5-05:30"),
            Ok(midnight + 500),
            "west of UTC"
        );
        assert_eq!(parse_time("2024-02-29"), Ok(1_709_164_800_000));
    }

    #[test]
    fn what_is_no_date_or_time_is_refused_saying_so() {
        for text in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-02-30",
            "2025-02-29",
            "2026-5-1",
            "01/05/2026",
            "2026-05-01T25:00:00Z",
            "2026-05-01T12:00:00+2:00",
            "2026-05-01T12:00:00+24:00",
            "2026-05-01T12:00:00Z+02:00",
            "2026-05-01T12:00:00+02:xx",
            "2026-05-01T12:00",
            "1969-12-31",
            "2026-05-01T12:00:00é",
            "éééééééééé",
        ] {
            let error = parse_time(text).expect_err(text);
            assert!(error.contains("neither a date"), "{text}: {error}");
        }
    }

    #[test]
    fn expiry_forms() {
        let now = 1_700_000_000_000;
        assert_eq!(parse_expiry("30d", now), Ok(now + 30 * 86_400_000));
        assert_eq!(parse_expiry("12h", now), Ok(now + 12 * 3_600_000));
        // 2099-12-31 ends at 2100-01-01T00:00:00Z.
        assert_eq!(parse_expiry("2099-12-31", now), Ok(4_102_444_800_000));
        assert_eq!(
            parse_expiry("2099-12-31T18:00:00Z", now),
            Ok(4_102_444_800_000 - 6 * 3_600_000)
        );
        assert!(parse_expiry("2001-01-01", now).is_err());
        assert!(parse_expiry("soon", now).is_err());
        assert!(parse_expiry("0s", now).is_err());
        // At most 100 years ahead: the maximum is an expiry, a millisecond more is not.
        assert_eq!(
            parse_expiry("36500d", now),
            Ok(now + MAX_EXPIRY_DAYS * 86_400_000)
        );
        for far in ["36500d 1ms", "8000y", "9999-12-31", "9999-12-31T23:59:59Z"] {
            let refused = parse_expiry(far, now).unwrap_err();
            assert!(refused.contains("100 years"), "{far}: {refused}");
        }
    }
}
