//! Budget periods: UTC calendar days and months. The Redis script computes
//! the same periods in Lua from Redis's clock (`redis.rs`).

/// A budget's period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Month,
}

/// One period: its number (days since 1970-01-01, or `year * 12 + month - 1`)
/// and its bounds in Unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub id: i64,
    pub start_ms: i64,
    pub end_ms: i64,
}

const DAY_MS: i64 = 86_400_000;

impl Period {
    /// When the period containing `now_ms` began, in Unix ms.
    pub fn start_ms(self, now_ms: i64) -> i64 {
        self.at(now_ms).start_ms
    }

    /// The period containing `now_ms`.
    pub(crate) fn at(self, now_ms: i64) -> Bounds {
        let day = now_ms.div_euclid(DAY_MS);
        match self {
            Period::Day => Bounds {
                id: day,
                start_ms: day * DAY_MS,
                end_ms: (day + 1) * DAY_MS,
            },
            Period::Month => {
                let (y, m, _) = civil_from_days(day);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                Bounds {
                    id: y * 12 + m - 1,
                    start_ms: days_from_civil(y, m, 1) * DAY_MS,
                    end_ms: days_from_civil(ny, nm, 1) * DAY_MS,
                }
            }
        }
    }

    /// The counter's suffix for period `id`: `d:ID` or `m:ID`.
    pub(crate) fn suffix(self, id: i64) -> String {
        match self {
            Period::Day => format!("d:{id}"),
            Period::Month => format!("m:{id}"),
        }
    }
}

/// (year, month 1-12, day 1-31) of a day number (days since 1970-01-01),
/// after Howard Hinnant's `civil_from_days`.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The day number of a date, after Howard Hinnant's `days_from_civil`.
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
