//! Rate limits and spend budgets: the counting and the decisions. (And, on the same GCRA,
//! failed admin sign-ins per client address: [`SignInThrottle`].)
//!
//! Each request is checked against its project's and its key's [`LimitSet`]
//! before the plugin is called ([`Limiter::admit`]) and charged with what it
//! consumed afterwards ([`Limiter::settle`]). Counters live in this process
//! ([`Limiter::local`], exact for one replica) or in Redis
//! ([`Limiter::redis`], one limit for all replicas).
//!
//! # Rates: GCRA
//!
//! Requests and tokens per minute use the generic cell rate algorithm: a
//! token bucket stored as one number, the theoretical arrival time (TAT).
//! Over a fixed window it has no 2x burst at the window boundary (a fixed
//! minute lets N through at 0:59 and N more at 1:00), and over a sliding log
//! it needs O(1) state per subject (one Redis string) instead of one entry
//! per request. Admission counts are exact, and the wait until the next
//! admission (`Retry-After`) and until the bucket is full again (the reset
//! header) follow from the TAT directly.
//!
//! The TAT is counted in *units* of the limit (one unit = one request or one
//! token), with the clock advancing `limit` units per minute, so every
//! admission decision is integer arithmetic: `limit` requests at once are
//! admitted and the next one is not, whatever the limit, with no rounding of
//! a per-request interval. The bucket starts full. A request takes one unit.
//! A changed limit keeps the bucket's backlog as a share of the bucket.
//!
//! # Reservations
//!
//! Tokens and cost are known only after the call, so a request reserves its
//! [`Estimate`] when it is admitted and `settle` books the difference between
//! what it consumed and what it reserved (a request that ends without usage
//! gives its reservation back). Without reservations, every request admitted
//! while the first ones were still running would pass the same check: 50
//! parallel requests under a budget that allows two all went through. With
//! them, requests in flight count against the limit, and the overshoot is
//! bounded by one request's estimate error, whatever the concurrency.
//!
//! - Tokens per minute: a request is admitted when the bucket has room for
//!   its estimated tokens (a request estimated at more than the whole bucket
//!   needs a full bucket, and leaves it in debt that later requests wait out).
//! - Budgets, per UTC calendar day and month: a request is refused once the
//!   period's spend, reservations included, has reached the budget. When no
//!   counter exists (a fresh process, a period that just began, a Redis that
//!   lost its keys), it starts from the spend recorded in the database since
//!   the period began ([`SpendSource`]); `settle` adds to a counter only if one
//!   exists, so a settle never creates a counter that would hide the
//!   database's spend. A reservation is settled in the period it was made in.
//!
//! # Several checks
//!
//! A request is checked against all its subjects at once: all must pass, and
//! when one refuses nothing is taken from the others (one lock in process,
//! one Lua script in Redis).
//!
//! # Redis
//!
//! `redis.rs`: one script call per admit and per settle, Redis's clock,
//! expiring keys, one connection per worker thread, and fail open to the
//! in-process counters while Redis is unreachable ([`redis_failures`]
//! counts the failed calls). `settle` waits for Redis's answer (one round
//! trip, ~50 µs on a local network), and the flow settles a plain answer
//! before sending it: the caller's next request, on any replica, is then
//! checked against what this one consumed. A settle sent and forgotten
//! could be lost with its runtime at shutdown, or land after that next
//! admission.
//!
//! With leases (`lease.rs`, `limit_leases`, off by default) a replica takes a
//! block of each limit with a request that asks Redis, and admits from it in
//! process until it is used or a second old: never beyond a limit, not exact
//! at every instant across replicas.

mod budget;
mod gcra;
mod lease;
mod local;
mod redis;
mod signin;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use self::budget::Period;
pub use self::signin::{Attempt, FAILURES_PER_MINUTE, SignInThrottle, Throttled};
pub use crate::redis_link::redis_failures;

/// One subject's limits, as stored (project or key). `None` = no limit; a
/// zero (or, for budgets, a non-positive or non-finite value) is treated as
/// no limit too, as the CLI's "0 clears".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitSet {
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub daily_budget_usd: Option<f64>,
    pub monthly_budget_usd: Option<f64>,
}

impl LimitSet {
    /// Whether a request under these limits reserves tokens or cost when it is admitted.
    pub fn reserves(&self) -> bool {
        self.tpm.is_some_and(|n| n > 0)
            || budget(self.daily_budget_usd).is_some()
            || budget(self.monthly_budget_usd).is_some()
    }
}

/// What a request is expected to consume: reserved against tokens-per-minute limits and
/// budgets when it is admitted, corrected by what it reports once it is over.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    pub tokens: u64,
    /// In USD; 0 when the model's price is unknown.
    pub cost_usd: f64,
}

/// A budget as stored, if it is one: a zero, negative or non-finite value is none.
fn budget(usd: Option<f64>) -> Option<f64> {
    usd.filter(|usd| usd.is_finite() && *usd > 0.0)
}

/// An amount of USD as counters may add it: a negative or non-finite one counts as 0.
fn spendable(usd: f64) -> f64 {
    if usd.is_finite() { usd.max(0.0) } else { 0.0 }
}

/// What an admission took beyond its one request, for its settle to correct.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reservation {
    estimate: Estimate,
    /// Whether the counters that hold it are Redis's (else this process's).
    in_redis: bool,
    /// By item (as [`Item::all`] lists them): the period whose budget counter holds the
    /// reserved cost; `None` where nothing was reserved.
    budget_periods: Vec<Option<i64>>,
}

impl Reservation {
    /// Whether settling without usage would change nothing.
    pub fn is_empty(&self) -> bool {
        self.estimate.tokens == 0 && self.budget_periods.iter().all(Option::is_none)
    }

    /// What was reserved: the request's estimated tokens and cost.
    pub fn estimate(&self) -> Estimate {
        self.estimate
    }

    /// The period of item `i`'s reserved cost, if any.
    fn period_of(&self, i: usize) -> Option<i64> {
        self.budget_periods.get(i).copied().flatten()
    }

    /// What a settle books on budget item `i`: its period, the period's id (the one its cost
    /// was reserved in, else the one at `now_ms`) and the USD (the cost less what was reserved
    /// there, else the whole cost). `None`: not a budget.
    fn budget_booking(
        &self,
        i: usize,
        item: &Item<'_>,
        cost_usd: f64,
        now_ms: i64,
    ) -> Option<(budget::Period, i64, f64)> {
        let period = item.period()?;
        Some(match self.period_of(i) {
            Some(id) => (period, id, cost_usd - self.estimate.cost_usd),
            None => (period, period.at(now_ms).id, cost_usd),
        })
    }

    /// This reservation for the items `keep` marks, in their order.
    fn only(&self, keep: &[bool]) -> Reservation {
        Reservation {
            budget_periods: keep
                .iter()
                .enumerate()
                .filter(|(_, keep)| **keep)
                .map(|(i, _)| self.period_of(i))
                .collect(),
            ..self.clone()
        }
    }
}

/// Whose limits these are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject<'a> {
    Project(&'a str),
    /// The key's stored prefix, unique enough as an id.
    Key(&'a str),
}

impl Subject<'_> {
    pub fn scope(&self) -> Scope {
        match self {
            Subject::Project(_) => Scope::Project,
            Subject::Key(_) => Scope::Key,
        }
    }
}

/// One subject and its limits, as checked for one request.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    pub subject: Subject<'a>,
    pub limits: LimitSet,
}

/// Where budgets start from when no counter exists yet: the spend recorded
/// since `since_ms` (Unix ms). A boxed future keeps it object-safe.
pub trait SpendSource: Send + Sync {
    fn spent_since<'a>(
        &'a self,
        subject: &'a Subject<'a>,
        since_ms: i64,
    ) -> Pin<Box<dyn Future<Output = Result<f64, String>> + Send + 'a>>;
}

/// A [`SpendSource`] with no recorded spend (tests, or no database).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSpend;

impl SpendSource for NoSpend {
    fn spent_since<'a>(
        &'a self,
        _subject: &'a Subject<'a>,
        _since_ms: i64,
    ) -> Pin<Box<dyn Future<Output = Result<f64, String>> + Send + 'a>> {
        Box::pin(async { Ok(0.0) })
    }
}

/// Whether `url` is one [`Limiter::redis`] can use (checked when the config is read).
pub fn check_redis_url(url: &str) -> Result<(), LimitsError> {
    ::redis::Client::open(url)
        .map(drop)
        .map_err(|e| LimitsError::InvalidUrl(e.to_string()))
}

#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    #[error("not a Redis URL: {0}")]
    InvalidUrl(String),
}

/// Whose limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Project,
    Key,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::Key => "key",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which limit refused a request, with its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    RequestsPerMinute(u32),
    TokensPerMinute(u64),
    DailyBudgetUsd(f64),
    MonthlyBudgetUsd(f64),
}

/// A request refused by a limit; its `Display` is the error message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refused {
    /// Until the request would be admitted: whole seconds, rounded up, at
    /// least 1 (what `Retry-After` carries). For budgets, until the period
    /// ends.
    pub retry_after: Duration,
    pub scope: Scope,
    pub limit: Limit,
}

impl Refused {
    /// `Retry-After`'s value.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs()
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = self.scope;
        match self.limit {
            Limit::RequestsPerMinute(n) => {
                write!(f, "{scope} rate limit of {n} requests per minute reached")
            }
            Limit::TokensPerMinute(n) => {
                write!(f, "{scope} rate limit of {n} tokens per minute reached")
            }
            Limit::DailyBudgetUsd(usd) => {
                write!(f, "{scope} daily budget of ${} reached", Dollars(usd))
            }
            Limit::MonthlyBudgetUsd(usd) => {
                write!(f, "{scope} monthly budget of ${} reached", Dollars(usd))
            }
        }
    }
}

impl std::error::Error for Refused {}

/// An amount of dollars as people write it: in cents (`5.00`, `0.25`), or with every digit it
/// has when it has fractions of a cent (`0.015`, not a rounded `0.01` that would misstate the
/// limit).
struct Dollars(f64);

impl fmt::Display for Dollars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cents = self.0 * 100.0;
        if (cents - cents.round()).abs() < 1e-6 {
            write!(f, "{:.2}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// One rate window as the headers describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: u64,
    pub remaining: u64,
    /// Until the bucket is full again.
    pub reset: Duration,
}

/// An admitted request: the tightest applicable window of each kind (the
/// one with the fewest remaining), for the response headers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admitted {
    pub requests: Option<Window>,
    pub tokens: Option<Window>,
}

impl Admitted {
    /// OpenAI's rate-limit headers, for the kinds of limit that apply.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        if let Some(w) = self.requests {
            headers.push(("x-ratelimit-limit-requests", w.limit.to_string()));
            headers.push(("x-ratelimit-remaining-requests", w.remaining.to_string()));
            headers.push(("x-ratelimit-reset-requests", format_reset(w.reset)));
        }
        if let Some(w) = self.tokens {
            headers.push(("x-ratelimit-limit-tokens", w.limit.to_string()));
            headers.push(("x-ratelimit-remaining-tokens", w.remaining.to_string()));
            headers.push(("x-ratelimit-reset-tokens", format_reset(w.reset)));
        }
        headers
    }

    /// Keeps the tighter of the current and the new window of a kind.
    fn tighten(slot: &mut Option<Window>, new: Window) {
        match slot {
            Some(old)
                if (old.remaining, std::cmp::Reverse(old.reset))
                    <= (new.remaining, std::cmp::Reverse(new.reset)) => {}
            _ => *slot = Some(new),
        }
    }
}

/// A duration as OpenAI's reset headers write it (Go's duration format, to
/// the millisecond): "120ms", "6s", "1.5s", "1m30s", "6m0s", "1h0m0s".
pub fn format_reset(d: Duration) -> String {
    // Rounded up: a client waiting the advertised time must find it reset.
    let ms = d.as_nanos().div_ceil(1_000_000);
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let hours = ms / 3_600_000;
    let minutes = ms / 60_000 % 60;
    let secs = ms / 1000 % 60;
    let frac = ms % 1000;
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&secs.to_string());
    if frac > 0 {
        let frac = format!("{frac:03}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('s');
    out
}

/// Counts requests, tokens and spend, in this process or in Redis. Cheap to
/// clone (one `Arc`).
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    /// The counters without Redis, and Redis's stand-in while it is down.
    local: local::Local,
    redis: Option<redis::RedisBackend>,
    /// With `limit_leases`: the blocks of Redis's limits this replica holds.
    leases: Option<lease::Leases>,
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("redis", &self.inner.redis.is_some())
            .field("leases", &self.inner.leases.is_some())
            .finish()
    }
}

impl Limiter {
    /// Counters in this process: exact for one replica.
    pub fn local() -> Limiter {
        Limiter::with_local(local::Local::new(local::system_clock()), None)
    }

    /// Counters in Redis under `key_prefix`, shared by every replica using
    /// the same Redis and prefix. Does not connect: Redis need not be up.
    pub fn redis(url: &str, key_prefix: &str) -> Result<Limiter, LimitsError> {
        let backend = redis::RedisBackend::new(url, key_prefix)?;
        Ok(Limiter::with_local(
            local::Local::new(local::system_clock()),
            Some(backend),
        ))
    }

    /// [`Limiter::redis`] with leases (`limit_leases`): this replica takes a block of each
    /// limit ahead of its requests and decides them in process until it is used (`lease.rs`
    /// says the bound).
    pub fn redis_leased(url: &str, key_prefix: &str) -> Result<Limiter, LimitsError> {
        let backend = redis::RedisBackend::new(url, key_prefix)?;
        Ok(Limiter {
            inner: Arc::new(Inner {
                local: local::Local::new(local::system_clock()),
                redis: Some(backend),
                leases: Some(lease::Leases::new()),
            }),
        })
    }

    fn with_local(local: local::Local, redis: Option<redis::RedisBackend>) -> Limiter {
        Limiter {
            inner: Arc::new(Inner {
                local,
                redis,
                leases: None,
            }),
        }
    }

    /// Gives back to Redis what this replica's leases hold unused (the gateway is stopping).
    pub async fn release(&self) {
        if let (Some(redis), Some(leases)) = (&self.inner.redis, &self.inner.leases) {
            redis.give_back(&leases.drain()).await;
        }
    }

    /// Before the plugin is called, reserving `estimate`. `Err` => the request must not
    /// reach a plugin; nothing was taken from any counter.
    pub async fn admit(
        &self,
        checks: &[Check<'_>],
        spend: &dyn SpendSource,
        estimate: Estimate,
    ) -> Result<(Admitted, Reservation), Refused> {
        let items = Item::all(checks);
        if items.is_empty() {
            return Ok((Admitted::default(), Reservation::default()));
        }
        let estimate = Estimate {
            tokens: estimate.tokens,
            cost_usd: spendable(estimate.cost_usd),
        };
        if let Some(redis) = &self.inner.redis {
            let local = &self.inner.local;
            let answer = match &self.inner.leases {
                Some(leases) => {
                    redis
                        .admit_leased(leases, &items, spend, estimate, local)
                        .await
                }
                None => redis.admit(&items, spend, estimate, local).await,
            };
            if let Some(answer) = answer {
                return answer;
            }
        }
        self.inner.local.admit(&items, spend, estimate).await
    }

    /// After the call: what it consumed (prompt + completion tokens as reported; the exact
    /// cost in USD, possibly 0), booked against what its admission reserved.
    pub async fn settle(
        &self,
        checks: &[Check<'_>],
        reservation: &Reservation,
        tokens: u64,
        cost_usd: f64,
    ) {
        let cost_usd = spendable(cost_usd);
        let items = Item::all(checks);
        if (tokens == 0 && cost_usd == 0.0 && reservation.is_empty())
            || !items.iter().any(Item::counts_usage)
        {
            return;
        }
        let local = &self.inner.local;
        let Some(redis) = &self.inner.redis else {
            local.settle(&items, reservation, tokens, cost_usd);
            return;
        };
        if reservation.in_redis {
            let Some(leases) = &self.inner.leases else {
                Self::settle_in_redis(redis, local, &items, reservation, tokens, cost_usd).await;
                return;
            };
            let (booked, returns) =
                leases.settle(&items, reservation, tokens, cost_usd, local.now_us());
            redis.give_back(&returns).await;
            if booked.iter().all(|booked| *booked) {
                return;
            }
            // What no lease held (given back meanwhile, or never taken) is Redis's to book.
            let rest: Vec<bool> = booked.iter().map(|booked| !booked).collect();
            let items: Vec<Item<'_>> = (items.iter().zip(&rest))
                .filter(|(_, rest)| **rest)
                .map(|(item, _)| *item)
                .collect();
            let reservation = reservation.only(&rest);
            Self::settle_in_redis(redis, local, &items, &reservation, tokens, cost_usd).await;
        } else {
            // Admitted in process while Redis was down: the reservation is here, the spend
            // belongs in Redis too.
            local.settle(&items, reservation, tokens, cost_usd);
            let none = Reservation::default();
            if !redis.settle(&items, &none, tokens, cost_usd, local).await {
                redis.remember_outage_spend(&items, &none, cost_usd, local.now_us());
            }
        }
    }

    /// Books a call admitted in Redis there; while Redis is down, here and in Redis once it is
    /// back.
    async fn settle_in_redis(
        redis: &redis::RedisBackend,
        local: &local::Local,
        items: &[Item<'_>],
        reservation: &Reservation,
        tokens: u64,
        cost_usd: f64,
    ) {
        if redis
            .settle(items, reservation, tokens, cost_usd, local)
            .await
        {
            return;
        }
        // Counted here while Redis is down, and booked in Redis when it is back.
        local.settle(items, &Reservation::default(), tokens, cost_usd);
        redis.remember_outage_spend(items, reservation, cost_usd, local.now_us());
    }
}

/// One limit of one subject, in the order the checks and their limits come.
#[derive(Debug, Clone, Copy)]
struct Item<'a> {
    subject: &'a Subject<'a>,
    limit: Limit,
}

impl<'a> Item<'a> {
    fn all(checks: &'a [Check<'a>]) -> Vec<Item<'a>> {
        let mut items = Vec::new();
        for check in checks {
            let limits = &check.limits;
            let subject = &check.subject;
            let mut push = |limit| items.push(Item { subject, limit });
            if let Some(n) = limits.rpm.filter(|n| *n > 0) {
                push(Limit::RequestsPerMinute(n));
            }
            if let Some(n) = limits.tpm.filter(|n| *n > 0) {
                push(Limit::TokensPerMinute(n));
            }
            if let Some(usd) = budget(limits.daily_budget_usd) {
                push(Limit::DailyBudgetUsd(usd));
            }
            if let Some(usd) = budget(limits.monthly_budget_usd) {
                push(Limit::MonthlyBudgetUsd(usd));
            }
        }
        items
    }

    /// Whether this item counts what a call consumed (tokens or cost), not only requests.
    fn counts_usage(&self) -> bool {
        !matches!(self.limit, Limit::RequestsPerMinute(_))
    }

    /// The period of a budget item.
    fn period(&self) -> Option<budget::Period> {
        match self.limit {
            Limit::DailyBudgetUsd(_) => Some(budget::Period::Day),
            Limit::MonthlyBudgetUsd(_) => Some(budget::Period::Month),
            _ => None,
        }
    }

    /// The counter's name without the prefix (and, for budgets, without the
    /// period): `rl:p:ID:r`, `rl:k:PREFIX:t`, `bd:p:ID`.
    fn counter(&self) -> String {
        let mut name = String::with_capacity(48);
        self.write_counter(&mut name);
        name
    }

    /// Appends [`Item::counter`] to `out` (a script call names 8 counters; each
    /// is written into one buffer, not allocated).
    fn write_counter(&self, out: &mut String) {
        out.push_str(match self.limit {
            Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_) => "rl:",
            Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => "bd:",
        });
        let (kind, id) = match self.subject {
            Subject::Project(id) => ("p:", id),
            Subject::Key(prefix) => ("k:", prefix),
        };
        out.push_str(kind);
        out.push_str(id);
        out.push_str(match self.limit {
            Limit::RequestsPerMinute(_) => ":r",
            Limit::TokensPerMinute(_) => ":t",
            Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_) => "",
        });
    }

    fn refused(&self, retry_after_us: i64) -> Refused {
        // Whole seconds, rounded up, at least 1: a client retrying after
        // Retry-After must be admitted.
        let secs = (retry_after_us.max(1) as u64).div_ceil(1_000_000).max(1);
        Refused {
            retry_after: Duration::from_secs(secs),
            scope: self.subject.scope(),
            limit: self.limit,
        }
    }
}

/// What one admission decided, by item, before it is turned into
/// [`Admitted`] or [`Refused`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// A rate item passed: its window after this request.
    Rate {
        remaining: u64,
        reset_us: i64,
    },
    /// A budget item passed; its reserved cost went to the counter of this period.
    Budget {
        reserved_in: Option<i64>,
    },
    Refuse {
        retry_after_us: i64,
    },
}

/// Turns per-item verdicts into the answer: the longest wait among the
/// refusals, or the tightest windows.
fn conclude(
    items: &[Item<'_>],
    verdicts: &[Verdict],
    estimate: Estimate,
    in_redis: bool,
) -> Result<(Admitted, Reservation), Refused> {
    let refusal = items
        .iter()
        .zip(verdicts)
        .filter_map(|(item, verdict)| match verdict {
            Verdict::Refuse { retry_after_us } => Some((*retry_after_us, item)),
            _ => None,
        })
        // The longest wait: before it ends, another limit would refuse.
        .max_by_key(|(retry, _)| *retry);
    if let Some((retry, item)) = refusal {
        return Err(item.refused(retry));
    }
    let mut admitted = Admitted::default();
    let budget_periods = verdicts
        .iter()
        .map(|verdict| match verdict {
            Verdict::Budget { reserved_in } => *reserved_in,
            _ => None,
        })
        .collect();
    let reserves_tokens = items
        .iter()
        .any(|item| matches!(item.limit, Limit::TokensPerMinute(_)));
    let reservation = Reservation {
        estimate: Estimate {
            tokens: if reserves_tokens { estimate.tokens } else { 0 },
            cost_usd: estimate.cost_usd,
        },
        in_redis,
        budget_periods,
    };
    for (item, verdict) in items.iter().zip(verdicts) {
        if let Verdict::Rate {
            remaining,
            reset_us,
        } = *verdict
        {
            let reset = Duration::from_micros(reset_us.max(0) as u64);
            match item.limit {
                Limit::RequestsPerMinute(n) => Admitted::tighten(
                    &mut admitted.requests,
                    Window {
                        limit: u64::from(n),
                        remaining,
                        reset,
                    },
                ),
                Limit::TokensPerMinute(n) => Admitted::tighten(
                    &mut admitted.tokens,
                    Window {
                        limit: n,
                        remaining,
                        reset,
                    },
                ),
                _ => {}
            }
        }
    }
    Ok((admitted, reservation))
}

#[cfg(test)]
mod tests;
