//! GCRA on an integer clock. The clock of a limit of `limit` per minute
//! reads `limit * scale` units per minute, and one request (or one token)
//! costs `scale` units, where `scale` makes a unit at most a millisecond
//! (`ceil(60000 / limit)`, at least 1). Every decision is integer arithmetic,
//! so `limit` requests at once pass and the next does not, whatever the
//! limit; and a fresh bucket's first refill comes a whole emission interval
//! (less at most a millisecond) after it was emptied, not at the next tick
//! of a coarse clock. The Redis script (`redis.rs`) does the same in Lua.

/// The rate period: a minute.
pub(crate) const PERIOD_US: i128 = 60_000_000;

/// A bucket as stored: the limit its TAT is counted for, and the TAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub limit: u64,
    pub tat: i128,
}

/// An admission that passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub tat: i128,
    pub remaining: u64,
    /// Until the bucket is full again.
    pub reset_us: i64,
}

/// Units one request or token costs.
fn scale(limit: u64) -> i128 {
    i128::from(60_000u64.div_ceil(limit.max(1)).max(1))
}

/// Units per minute (the bucket's capacity).
fn rate(limit: u64) -> i128 {
    i128::from(limit.max(1)) * scale(limit)
}

/// The clock in units of `limit` at `now_us`.
pub(crate) fn now_units(now_us: i64, limit: u64) -> i128 {
    (i128::from(now_us) * rate(limit)).div_euclid(PERIOD_US)
}

/// The first instant (µs) at which the clock of `limit` reads `units`.
fn time_of(units: i128, limit: u64) -> i128 {
    -((-(units * PERIOD_US)).div_euclid(rate(limit)))
}

fn micros(d: i128) -> i64 {
    d.clamp(0, i128::from(i64::MAX)) as i64
}

/// The bucket's TAT at `now_us` for `limit` (at least now: a TAT in the past
/// is a full bucket). A bucket counted for another limit keeps its backlog's
/// share of the bucket.
pub(crate) fn current(stored: Option<Bucket>, limit: u64, now_us: i64) -> i128 {
    let now = now_units(now_us, limit);
    match stored {
        None => now,
        Some(b) if b.limit == limit => b.tat.max(now),
        Some(b) => {
            let backlog = (b.tat - now_units(now_us, b.limit)).max(0);
            let old = rate(b.limit);
            now + (backlog * rate(limit) + old - 1) / old
        }
    }
}

/// Admits a request that takes `take` units of the limit (1 for a request, its estimated
/// tokens for tokens) against a bucket whose TAT is `tat` (from [`current`]), or says how
/// long (µs) until it would be admitted. It needs room for what it takes, at least one
/// unit and at most the whole bucket: a take larger than the bucket needs a full bucket and
/// leaves it in debt.
pub(crate) fn admit(limit: u64, take: u64, tat: i128, now_us: i64) -> Result<Pass, i64> {
    let now = now_units(now_us, limit);
    let backlog = (tat - now).max(0);
    let (cap, cost) = (rate(limit), scale(limit));
    let need = i128::from(take.clamp(1, limit.max(1))) * cost;
    if backlog + need > cap {
        return Err(micros(time_of(tat + need - cap, limit) - i128::from(now_us)).max(1));
    }
    let tat = now + backlog + i128::from(take) * cost;
    Ok(Pass {
        tat,
        remaining: ((cap - (tat - now)) / cost).max(0) as u64,
        reset_us: micros(time_of(tat, limit) - i128::from(now_us)),
    })
}

/// The TAT after `delta` more tokens were consumed than were taken at admission (possibly
/// beyond the bucket: debt that later requests wait out; or fewer: given back).
pub(crate) fn adjust(tat: i128, limit: u64, delta: i128) -> i128 {
    tat + delta * scale(limit)
}

/// Whether the bucket is full at `now_us` (its state can be forgotten).
pub(crate) fn is_full(bucket: Bucket, now_us: i64) -> bool {
    bucket.tat <= now_units(now_us, bucket.limit)
}
