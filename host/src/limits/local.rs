//! The counters in this process: exact for one replica, and Redis's stand-in
//! while it is unreachable. One lock over all of them makes a request's
//! checks atomic; it is never held across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use super::budget::Period;
use super::gcra::{self, Bucket};
use super::{
    Admitted, Estimate, Item, Limit, Refused, Reservation, SpendSource, Verdict, conclude,
    spendable,
};

/// Unix time in µs; injectable so tests can move time.
pub(crate) type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

pub(crate) fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    })
}

/// How many operations between sweeps of idle counters.
const SWEEP_EVERY: u32 = 4096;

pub(crate) struct Local {
    state: Mutex<State>,
    clock: Clock,
}

#[derive(Default)]
struct State {
    /// By counter name (`rl:p:ID:r`).
    rates: HashMap<String, Bucket>,
    /// By counter name with its period (`bd:p:ID:d:20000`).
    budgets: HashMap<String, Spent>,
    ops: u32,
}

struct Spent {
    period: Period,
    id: i64,
    usd: f64,
}

impl State {
    /// Forgets full buckets and past periods, now and then, so idle
    /// subjects do not accumulate.
    fn maybe_sweep(&mut self, now_us: i64) {
        self.ops = self.ops.wrapping_add(1);
        if !self.ops.is_multiple_of(SWEEP_EVERY) {
            return;
        }
        let now_ms = now_us.div_euclid(1000);
        self.rates
            .retain(|_, bucket| !gcra::is_full(*bucket, now_us));
        self.budgets
            .retain(|_, spent| spent.period.at(now_ms).id == spent.id);
    }
}

/// A budget item's counter name for the period at `now_ms`, and the period.
fn budget_key(item: &Item<'_>, period: Period, now_ms: i64) -> (String, super::budget::Bounds) {
    let bounds = period.at(now_ms);
    (
        format!("{}:{}", item.counter(), period.suffix(bounds.id)),
        bounds,
    )
}

impl Local {
    pub(crate) fn new(clock: Clock) -> Local {
        Local {
            state: Mutex::new(State::default()),
            clock,
        }
    }

    /// Forgets every counter.
    pub(crate) fn clear(&self) {
        let mut state = self.lock();
        state.rates.clear();
        state.budgets.clear();
    }

    pub(crate) fn now_us(&self) -> i64 {
        (self.clock)()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements, so a panic
        // elsewhere while it was held does not make it unusable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) async fn admit(
        &self,
        items: &[Item<'_>],
        spend: &dyn SpendSource,
        estimate: Estimate,
    ) -> Result<(Admitted, Reservation), Refused> {
        let now_us = self.now_us();
        let now_ms = now_us.div_euclid(1000);

        // Budgets without a counter start from the recorded spend, fetched
        // without holding the lock.
        let missing: Vec<(usize, String, i64)> = {
            let state = self.lock();
            items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let (key, bounds) = budget_key(item, item.period()?, now_ms);
                    (!state.budgets.contains_key(&key)).then_some((i, key, bounds.start_ms))
                })
                .collect()
        };
        for (i, key, start_ms) in missing {
            let item = &items[i];
            match spend.spent_since(item.subject, start_ms).await {
                Ok(usd) => {
                    let usd = spendable(usd);
                    let period = item.period().unwrap_or(Period::Day);
                    let id = period.at(now_ms).id;
                    self.lock()
                        .budgets
                        .entry(key)
                        .or_insert(Spent { period, id, usd });
                }
                Err(e) => {
                    // Fail open for this request; the next one tries again.
                    tracing::warn!("limits: no recorded spend for {key}: {e}");
                }
            }
        }

        let mut state = self.lock();
        let mut verdicts = Vec::with_capacity(items.len());
        let mut taken = Vec::new();
        let mut reserved = Vec::new();
        for item in items {
            let verdict = match item.limit {
                Limit::RequestsPerMinute(n) => {
                    rate(&state, item, u64::from(n), 1, now_us, &mut taken)
                }
                Limit::TokensPerMinute(n) => {
                    rate(&state, item, n, estimate.tokens, now_us, &mut taken)
                }
                Limit::DailyBudgetUsd(usd) | Limit::MonthlyBudgetUsd(usd) => {
                    let period = item.period().unwrap_or(Period::Day);
                    let (key, bounds) = budget_key(item, period, now_ms);
                    match state.budgets.get(&key).map(|s| s.usd) {
                        Some(spent) if spent >= usd => Verdict::Refuse {
                            retry_after_us: (bounds.end_ms - now_ms).saturating_mul(1000),
                        },
                        // No counter (the recorded spend could not be read): nothing to hold
                        // a reservation.
                        None => Verdict::Budget { reserved_in: None },
                        Some(_) if estimate.cost_usd <= 0.0 => {
                            Verdict::Budget { reserved_in: None }
                        }
                        Some(_) => {
                            reserved.push(key);
                            Verdict::Budget {
                                reserved_in: Some(bounds.id),
                            }
                        }
                    }
                }
            };
            verdicts.push(verdict);
        }
        let answer = conclude(items, &verdicts, estimate, false);
        if answer.is_ok() {
            for (key, bucket) in taken {
                state.rates.insert(key, bucket);
            }
            for key in reserved {
                if let Some(spent) = state.budgets.get_mut(&key) {
                    spent.usd += estimate.cost_usd;
                }
            }
        }
        state.maybe_sweep(now_us);
        answer
    }

    /// Books what a call consumed against what its admission reserved here
    /// (`reservation` empty: against nothing).
    pub(crate) fn settle(
        &self,
        items: &[Item<'_>],
        reservation: &Reservation,
        tokens: u64,
        cost_usd: f64,
    ) {
        let now_us = self.now_us();
        let now_ms = now_us.div_euclid(1000);
        let mut state = self.lock();
        for (i, item) in items.iter().enumerate() {
            match item.limit {
                Limit::RequestsPerMinute(_) => {}
                Limit::TokensPerMinute(n) => {
                    let delta = i128::from(tokens) - i128::from(reservation.estimate.tokens);
                    if delta == 0 {
                        continue;
                    }
                    let key = item.counter();
                    let tat = gcra::current(state.rates.get(&key).copied(), n, now_us);
                    let tat = gcra::adjust(tat, n, delta);
                    state.rates.insert(key, Bucket { limit: n, tat });
                }
                Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => {
                    let Some((period, id, delta)) =
                        reservation.budget_booking(i, item, cost_usd, now_ms)
                    else {
                        continue;
                    };
                    // Nothing reserved, nothing spent: nothing to book.
                    if delta == 0.0 {
                        continue;
                    }
                    let key = format!("{}:{}", item.counter(), period.suffix(id));
                    // No counter: the next admission starts one from the
                    // recorded spend, which includes this call.
                    if let Some(spent) = state.budgets.get_mut(&key) {
                        spent.usd = (spent.usd + delta).max(0.0);
                    }
                }
            }
        }
        state.maybe_sweep(now_us);
    }
}

/// One rate item's verdict for a request taking `take` units; the bucket it would leave
/// goes to `taken`.
fn rate(
    state: &State,
    item: &Item<'_>,
    limit: u64,
    take: u64,
    now_us: i64,
    taken: &mut Vec<(String, Bucket)>,
) -> Verdict {
    let key = item.counter();
    let tat = gcra::current(state.rates.get(&key).copied(), limit, now_us);
    match gcra::admit(limit, take, tat, now_us) {
        Ok(pass) => {
            if take > 0 {
                taken.push((
                    key,
                    Bucket {
                        limit,
                        tat: pass.tat,
                    },
                ));
            }
            Verdict::Rate {
                remaining: pass.remaining,
                reset_us: pass.reset_us,
            }
        }
        Err(retry_after_us) => Verdict::Refuse { retry_after_us },
    }
}
