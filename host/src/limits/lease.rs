//! Leases (`limit_leases`, off by default): a replica takes a block of each Redis limit ahead
//! of its requests and decides them in process until the block is used up, instead of two
//! script calls per request (issue 25 step 4: those calls are most of the production shape's
//! cost).
//!
//! - A request that finds a lease holding its whole need (a request, its estimated tokens, its
//!   estimated cost) for every one of its limits takes it from them under one lock: no Redis
//!   call. One that does not asks Redis for the limits it lacks, with its own need plus
//!   [`SHARE`] of each limit beyond it (less where the limit has less room: near a limit a
//!   lease shrinks to the request alone, and the count is Redis's, exact). The admission
//!   script takes the request and the block in one step, atomic as before: all of the
//!   request's limits pass or nothing is taken.
//! - Settles book a call's usage against the lease that holds its limit. One that would leave
//!   a lease in debt gives the lease back at once, its debt charged in Redis (spend is never
//!   held back from the other replicas); one that would leave it holding more than Redis
//!   granted it (a reservation made in Redis, unused) gives the excess back at once.
//! - A lease serves requests for [`LIFE_US`] at most, so that a request counted ahead is
//!   counted within a second of its real time; what it did not use is given back to Redis when
//!   the replica next asks Redis for that limit, in a sweep of the expired leases at most once
//!   a lease's life, or when the gateway stops.
//!
//! The bound: no replica admits beyond a limit (every unit a lease holds was taken from
//! Redis's count first); a replica may refuse a request while the others hold up to
//! [`SHARE`] of that limit each in leases they have not used; a replica killed holds its
//! unused leases until a rate's bucket refills (a minute) or a budget's period ends.
//! Rate-limit headers are this replica's view: Redis's count when its lease was taken, plus
//! what the lease has left.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::budget::Period;
use super::{Estimate, Item, Limit, Reservation, Verdict};

/// How long a lease serves requests after Redis granted it, in µs.
pub(crate) const LIFE_US: i64 = 1_000_000;

/// The share of a limit a lease asks for beyond the request that takes it.
pub(crate) const SHARE: f64 = 0.01;

pub(crate) struct Leases {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// By lease key ([`write_key`]).
    table: HashMap<String, Lease>,
    /// Each lease taken gets the next number: a take given back finds its own lease, not one
    /// that replaced it meanwhile.
    serial: u64,
    last_sweep_us: i64,
}

struct Lease {
    serial: u64,
    limit: Limit,
    /// A budget's period (the counter the block was taken from); none for rates.
    period: Option<i64>,
    /// Requests, tokens or USD taken from Redis and not used yet.
    left: f64,
    /// What Redis granted: more than this left (a call admitted from Redis itself, whose
    /// reservation it did not use, booked here) goes back at once, so that no replica holds
    /// more than a block unused.
    block: f64,
    taken_us: i64,
    /// What Redis reported when it was taken: the window's remaining after the block, and
    /// when the bucket is full again (this process's µs).
    remaining: u64,
    reset_at_us: i64,
}

/// What a lease gives back to Redis (negative: charges), counter by counter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Giveback {
    /// The counter name without the prefix; a budget's with its period (`bd:p:ID:d:20000`).
    pub(crate) counter: String,
    pub(crate) limit: Limit,
    pub(crate) amount: f64,
}

/// A request's look at the leases: by item, the verdict of those that covered it (their need
/// taken from them), and the leases it found unusable, removed to be given back.
pub(crate) struct Taken {
    pub(crate) covered: Vec<Option<(Verdict, u64)>>,
    pub(crate) returns: Vec<Giveback>,
}

impl Taken {
    pub(crate) fn all_covered(&self) -> bool {
        self.covered.iter().all(Option::is_some)
    }
}

/// What one item of a request takes: a request, its estimated tokens, its estimated cost.
fn need(item: &Item<'_>, estimate: Estimate) -> f64 {
    match item.limit {
        Limit::RequestsPerMinute(_) => 1.0,
        Limit::TokensPerMinute(_) => estimate.tokens as f64,
        Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => estimate.cost_usd,
    }
}

/// What a lease of `limit` asks for beyond its first request: whole requests and tokens.
pub(crate) fn ask(limit: Limit) -> f64 {
    match limit {
        Limit::RequestsPerMinute(n) => (f64::from(n) * SHARE).floor(),
        Limit::TokensPerMinute(n) => (n as f64 * SHARE).floor(),
        Limit::DailyBudgetUsd(usd) | Limit::MonthlyBudgetUsd(usd) => usd * SHARE,
    }
}

/// A lease's key: the counter's name without the prefix, a budget's with its kind but not
/// its period (`rl:p:ID:r`, `bd:p:ID:d`): a day's and a month's budget are two leases.
fn write_key(item: &Item<'_>, out: &mut String) {
    out.clear();
    item.write_counter(out);
    match item.limit {
        Limit::DailyBudgetUsd(_) => out.push_str(":d"),
        Limit::MonthlyBudgetUsd(_) => out.push_str(":m"),
        Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_) => {}
    }
}

fn period_now(item: &Item<'_>, now_us: i64) -> Option<i64> {
    let period: Period = item.period()?;
    Some(period.at(now_us.div_euclid(1000)).id)
}

impl Lease {
    fn giveback(&self, key: &str) -> Giveback {
        self.giveback_of(key, self.left)
    }

    /// `key`: the lease's (see [`write_key`]).
    fn giveback_of(&self, key: &str, amount: f64) -> Giveback {
        let counter = match self.period {
            Some(id) => format!("{key}:{id}"),
            None => key.to_owned(),
        };
        Giveback {
            counter,
            limit: self.limit,
            amount,
        }
    }

    fn expired(&self, now_us: i64) -> bool {
        now_us.saturating_sub(self.taken_us) >= LIFE_US || now_us < self.taken_us
    }

    /// Whether a request needing `need` of `item` may take it from this lease now.
    fn covers(&self, item: &Item<'_>, need: f64, now_us: i64) -> bool {
        if self.limit != item.limit || self.expired(now_us) {
            return false;
        }
        match item.limit {
            Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_) => self.left >= need.max(1.0),
            // The request's whole reservation, as Redis would hold it: a lease never admits
            // on less than the request reserves.
            Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => {
                self.period == period_now(item, now_us) && self.left > 0.0 && self.left >= need
            }
        }
    }

    fn verdict(&self, now_us: i64) -> Verdict {
        match self.limit {
            Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_) => Verdict::Rate {
                remaining: self.remaining.saturating_add(self.left.max(0.0) as u64),
                reset_us: self.reset_at_us.saturating_sub(now_us).max(0),
            },
            Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => Verdict::Budget {
                reserved_in: self.period,
            },
        }
    }
}

impl Leases {
    pub(crate) fn new() -> Leases {
        Leases {
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Consistent between statements: a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes each item's need from its lease where one covers it, and removes the leases that
    /// cannot serve this request (expired, another limit, another period, too little left),
    /// to be given back before new ones are asked for. Where the request is not covered
    /// whole, the expired leases of other counters go back too, once a lease's life.
    pub(crate) fn take(&self, items: &[Item<'_>], estimate: Estimate, now_us: i64) -> Taken {
        let mut state = self.lock();
        let mut covered = Vec::with_capacity(items.len());
        let mut returns = Vec::new();
        let mut key = String::with_capacity(48);
        for item in items {
            write_key(item, &mut key);
            let need = need(item, estimate);
            let verdict = match state.table.get_mut(key.as_str()) {
                Some(lease) if lease.covers(item, need, now_us) => {
                    lease.left -= need;
                    Some((lease.verdict(now_us), lease.serial))
                }
                Some(_) => {
                    if let Some(lease) = state.table.remove(key.as_str())
                        && lease.left != 0.0
                    {
                        returns.push(lease.giveback(&key));
                    }
                    None
                }
                None => None,
            };
            covered.push(verdict);
        }
        let taken = Taken { covered, returns };
        if taken.all_covered() || now_us.saturating_sub(state.last_sweep_us) < LIFE_US {
            return taken;
        }
        state.last_sweep_us = now_us;
        let Taken {
            covered,
            mut returns,
        } = taken;
        state.table.retain(|key, lease| {
            if !lease.expired(now_us) {
                return true;
            }
            if lease.left != 0.0 {
                returns.push(lease.giveback(key));
            }
            false
        });
        Taken { covered, returns }
    }

    /// Gives back what [`Leases::take`] took for a request that was not admitted after all,
    /// to the leases it took it from (a lease given back meanwhile gave back without it).
    pub(crate) fn untake(&self, items: &[Item<'_>], estimate: Estimate, taken: &Taken) {
        let mut state = self.lock();
        let mut key = String::with_capacity(48);
        for (item, covered) in items.iter().zip(&taken.covered) {
            let Some((_, serial)) = covered else {
                continue;
            };
            write_key(item, &mut key);
            if let Some(lease) = state.table.get_mut(key.as_str())
                && lease.serial == *serial
            {
                lease.left += need(item, estimate);
            }
        }
    }

    /// Keeps the blocks Redis granted beside the items it admitted: `granted[i]` is item
    /// `i`'s block (requests, tokens or USD) and `verdicts[i]` its verdict.
    pub(crate) fn keep(
        &self,
        items: &[Item<'_>],
        verdicts: &[Verdict],
        granted: &[f64],
        now_us: i64,
    ) -> Vec<Giveback> {
        let mut state = self.lock();
        let mut replaced = Vec::new();
        for ((item, verdict), block) in items.iter().zip(verdicts).zip(granted) {
            let (remaining, reset_us, period) = match *verdict {
                Verdict::Rate {
                    remaining,
                    reset_us,
                } => (remaining, reset_us, None),
                // Nothing reserved: the counter does not exist (its spend could not be read).
                Verdict::Budget { reserved_in: None } => continue,
                Verdict::Budget {
                    reserved_in: Some(id),
                } => (0, 0, Some(id)),
                Verdict::Refuse { .. } => continue,
            };
            if *block <= 0.0 {
                continue;
            }
            state.serial += 1;
            let lease = Lease {
                serial: state.serial,
                limit: item.limit,
                period,
                left: *block,
                block: *block,
                taken_us: now_us,
                remaining,
                reset_at_us: now_us.saturating_add(reset_us),
            };
            let mut key = String::with_capacity(48);
            write_key(item, &mut key);
            // Another request of this replica took a lease for it meanwhile: the older one
            // goes back.
            if let Some(old) = state.table.insert(key.clone(), lease)
                && old.left != 0.0
            {
                replaced.push(old.giveback(&key));
            }
        }
        replaced
    }

    /// Books a call's usage against the leases of its limits, by item: `true` where a lease
    /// took it (or there was nothing to book); the rest is Redis's to book. A lease the usage
    /// would leave in debt is removed and returned with it (its amount negative: a charge).
    pub(crate) fn settle(
        &self,
        items: &[Item<'_>],
        reservation: &Reservation,
        tokens: u64,
        cost_usd: f64,
        now_us: i64,
    ) -> (Vec<bool>, Vec<Giveback>) {
        let mut state = self.lock();
        let mut booked = Vec::with_capacity(items.len());
        let mut returns = Vec::new();
        let mut key = String::with_capacity(48);
        for (i, item) in items.iter().enumerate() {
            let (period, amount) = match item.limit {
                Limit::RequestsPerMinute(_) => {
                    booked.push(true);
                    continue;
                }
                Limit::TokensPerMinute(_) => {
                    (None, tokens as f64 - reservation.estimate.tokens as f64)
                }
                Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => {
                    let now_ms = now_us.div_euclid(1000);
                    match reservation.budget_booking(i, item, cost_usd, now_ms) {
                        Some((_, id, usd)) => (Some(id), usd),
                        None => (None, 0.0),
                    }
                }
            };
            if amount == 0.0 {
                booked.push(true);
                continue;
            }
            write_key(item, &mut key);
            let Some(lease) = state.table.get_mut(key.as_str()) else {
                booked.push(false);
                continue;
            };
            if lease.limit != item.limit || lease.period != period {
                booked.push(false);
                continue;
            }
            lease.left -= amount;
            if lease.left > lease.block {
                returns.push(lease.giveback_of(&key, lease.left - lease.block));
                lease.left = lease.block;
            } else if lease.left < 0.0
                && let Some(lease) = state.table.remove(key.as_str())
            {
                returns.push(lease.giveback(&key));
            }
            booked.push(true);
        }
        (booked, returns)
    }

    /// Every lease, removed to be given back (the gateway is stopping).
    pub(crate) fn drain(&self) -> Vec<Giveback> {
        let mut state = self.lock();
        state
            .table
            .drain()
            .filter(|(_, lease)| lease.left != 0.0)
            .map(|(key, lease)| lease.giveback(&key))
            .collect()
    }
}
