//! The counters in Redis, shared by every replica.
//!
//! - One Lua script call per admit (all of a request's checks: atomic, and
//!   nothing is taken when one refuses) and one per settle. A budget counter
//!   that does not exist yet costs one more call: the script names it, the
//!   recorded spend is fetched, and the script runs again with it as a seed.
//! - Redis's clock (`TIME` in the scripts), not the replicas': rates and
//!   periods agree across replicas whatever their clocks say.
//! - Keys under the prefix: `rl:{p|k}:ID:{r|t}` holds a bucket as
//!   `LIMIT:TAT` (see `gcra.rs`) and expires once the bucket is full again;
//!   `bd:{p|k}:ID:{d|m}:PERIOD` holds a period's spend in USD and expires a
//!   day after the period ends.
//! - One connection per worker thread (and runtime), made on first use
//!   there: a connection's driver task belongs to the runtime that made it,
//!   and every worker runs its own. Short timeouts (250 ms).
//! - Fail open: when Redis does not answer, the in-process counters decide,
//!   Redis is left alone for a second, one warning is logged per outage and
//!   one info line when it is back; then the spend counted in process during
//!   the outage is added to Redis's budget counters that still exist (a
//!   counter Redis lost starts again from the database, which has it). Rate
//!   buckets resume from Redis.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, RedisResult, Script};

use super::local::Local;
use super::{
    Admitted, Estimate, Item, Limit, LimitsError, Refused, Reservation, SpendSource, Verdict,
    conclude, spendable,
};

/// How long Redis may take to connect or answer before the request is
/// decided in process.
const TIMEOUT: Duration = Duration::from_millis(250);
/// How long after a failure Redis is left alone (no per-request timeouts
/// during an outage).
const BACKOFF_US: i64 = 1_000_000;

static FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many Redis calls have failed (timeouts, refused connections, errors)
/// since the process started.
pub fn redis_failures() -> u64 {
    FAILURES.load(Ordering::Relaxed)
}

/// Shared by the scripts: the rate clock in units (see `gcra.rs`) and the
/// budget periods (see `budget.rs`), in Lua 5.1, where numbers are doubles:
/// times count from 2025-01-01 to keep them well inside 2^53.
const HELPERS: &str = r"
local EPOCH = 1735689600
local PERIOD = 60000000
-- See gcra.rs: a limit's clock reads limit * scale units a minute.
local function scale(limit) return math.max(math.ceil(60000 / limit), 1) end
local function rate(limit) return limit * scale(limit) end
local function units(us, limit) return math.floor(us * rate(limit) / PERIOD) end
local function time_of(u, limit) return math.ceil(u * PERIOD / rate(limit)) end
local function fmt(x) return string.format('%.0f', x) end
local function load_tat(key, limit, now_us)
  local nu = units(now_us, limit)
  local v = redis.call('GET', key)
  if not v then return nu end
  local sep = string.find(v, ':', 1, true)
  if not sep then return nu end
  local old = tonumber(string.sub(v, 1, sep - 1))
  local tat = tonumber(string.sub(v, sep + 1))
  if not old or not tat or old <= 0 then return nu end
  if old == limit then return math.max(tat, nu) end
  local backlog = math.max(tat - units(now_us, old), 0)
  return nu + math.ceil(backlog * rate(limit) / rate(old))
end
local function store_tat(key, limit_arg, limit, tat, now_us)
  local ttl = math.ceil((time_of(tat, limit) - now_us) / 1000) + 1000
  if ttl < 1000 then ttl = 1000 end
  redis.call('SET', key, limit_arg .. ':' .. fmt(tat), 'PX', fmt(ttl))
end
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m + 9
  if m > 2 then mp = m - 3 end
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp - 9
  if mp < 10 then m = mp + 3 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end
-- A budget period at Unix second `sec`: id, start ms, end ms.
local function period(kind, sec)
  local day = math.floor(sec / 86400)
  if kind == 'd' then return day, day * 86400000, (day + 1) * 86400000 end
  local y, m = civil_from_days(day)
  local ny, nm = y, m + 1
  if nm == 13 then ny, nm = y + 1, 1 end
  return y * 12 + m - 1, days_from_civil(y, m, 1) * 86400000, days_from_civil(ny, nm, 1) * 86400000
end
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now_us = (sec - EPOCH) * 1000000 + tonumber(t[2])
local now_ms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
";

/// KEYS: one per item (a budget's without its period). ARGV: the estimated
/// tokens and cost to reserve, then per item its kind (`r`, `t`, `d`, `m`),
/// its limit and a seed (`''`, or `START_MS:USD` for a budget counter to
/// create, `START_MS:-` to pass it this once as 0 without creating it).
/// Returns `{0, a, b, ...}` (per item: a rate's remaining and reset µs; a
/// budget's period and 1 if the cost was reserved there, else 0),
/// `{1, item, retry_after_us}` or `{2, item, start_ms, ...}` (budget
/// counters to seed). Nothing is written unless all items pass, but seeds.
const ADMIT: &str = r"
local est_tokens, est_cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {0}
local refused, refused_retry = nil, -1
local missing = {}
local writes = {}
local reserves = {}
for i = 1, #KEYS do
  local kind, limit_arg, seed = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  local limit = tonumber(limit_arg)
  local a, b = 0, 0
  if kind == 'r' or kind == 't' then
    local take = 1
    if kind == 't' then take = est_tokens end
    local nu = units(now_us, limit)
    local tat = load_tat(KEYS[i], limit, now_us)
    local cap, cost = rate(limit), scale(limit)
    local need = math.max(math.min(take, limit), 1) * cost
    if tat - nu + need > cap then
      local retry = math.max(time_of(tat + need - cap, limit) - now_us, 1)
      if retry > refused_retry then refused, refused_retry = i, retry end
    else
      if take > 0 then
        tat = tat + take * cost
        writes[#writes + 1] = {i, tat}
      end
      a = math.floor((cap - (tat - nu)) / cost)
      b = math.max(time_of(tat, limit) - now_us, 0)
    end
  else
    local id, start_ms, end_ms = period(kind, sec)
    local key = KEYS[i] .. ':' .. kind .. ':' .. id
    local v = redis.call('GET', key)
    local counted = v ~= false
    if not v and seed ~= '' then
      local sep = string.find(seed, ':', 1, true)
      if sep and tonumber(string.sub(seed, 1, sep - 1)) == start_ms then
        local usd = string.sub(seed, sep + 1)
        if usd == '-' then
          v = '0'
        else
          redis.call('SET', key, usd, 'PXAT', fmt(end_ms + 86400000))
          v = usd
          counted = true
        end
      end
    end
    if not v then
      missing[#missing + 1] = i
      missing[#missing + 1] = start_ms
    elseif tonumber(v) >= limit then
      local retry = (end_ms - now_ms) * 1000
      if retry > refused_retry then refused, refused_retry = i, retry end
    elseif counted and est_cost > 0 then
      reserves[#reserves + 1] = key
      a, b = id, 1
    else
      a = id
    end
  end
  out[#out + 1] = a
  out[#out + 1] = b
end
if #missing > 0 then
  table.insert(missing, 1, 2)
  return missing
end
if refused then return {1, refused, refused_retry} end
for _, w in ipairs(writes) do
  local i = w[1]
  store_tat(KEYS[i], ARGV[3 * i + 1], tonumber(ARGV[3 * i + 1]), w[2], now_us)
end
for _, key in ipairs(reserves) do
  redis.call('INCRBYFLOAT', key, ARGV[2])
end
return out
";

/// KEYS: one per item. ARGV: the tokens consumed beyond those reserved (may
/// be negative), the cost, the reserved cost, then per item its kind, its
/// limit and the period its cost was reserved in (`''`: none). Books the
/// tokens in token buckets; the cost, less what was reserved, in the budget
/// counters that exist (the reservation's period, else the current one).
const SETTLE: &str = r"
local delta = tonumber(ARGV[1])
local cost, reserved = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, #KEYS do
  local kind, limit_arg, pid = ARGV[3 * i + 1], ARGV[3 * i + 2], ARGV[3 * i + 3]
  if kind == 't' and delta ~= 0 then
    local limit = tonumber(limit_arg)
    local tat = load_tat(KEYS[i], limit, now_us) + delta * scale(limit)
    store_tat(KEYS[i], limit_arg, limit, math.max(tat, units(now_us, limit)), now_us)
  elseif kind == 'd' or kind == 'm' then
    local key, add
    if pid ~= '' then
      key, add = KEYS[i] .. ':' .. kind .. ':' .. pid, cost - reserved
    else
      key, add = KEYS[i] .. ':' .. kind .. ':' .. period(kind, sec), cost
    end
    if add ~= 0 and redis.call('EXISTS', key) == 1 then
      if tonumber(redis.call('INCRBYFLOAT', key, string.format('%.17g', add))) < 0 then
        redis.call('SET', key, '0', 'KEEPTTL')
      end
    end
  end
end
return 0
";

/// KEYS: budget counters with their period; ARGV: USD to add to each that
/// exists.
const RESYNC: &str = r"
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBYFLOAT', KEYS[i], ARGV[i]) end
end
return 0
";

thread_local! {
    /// This thread's connections, one per backend and runtime.
    static CONNECTIONS: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
}

struct Cached {
    /// The backend's liveness token: a dropped backend's connections go.
    owner: Weak<()>,
    runtime: tokio::runtime::Id,
    conn: MultiplexedConnection,
}

pub(crate) struct RedisBackend {
    client: redis::Client,
    prefix: String,
    alive: Arc<()>,
    admit: Script,
    settle: Script,
    resync: Script,
    started: Instant,
    /// µs since `started` before which Redis is not tried again.
    retry_at_us: AtomicI64,
    down: AtomicBool,
    /// This backend's failed calls and outages (the global count is
    /// [`redis_failures`]).
    failures: AtomicU64,
    outages: AtomicU64,
    /// Spend counted in process while Redis was down, by full counter name.
    pending: Mutex<HashMap<String, f64>>,
}

/// What the admission script answered.
enum Answer {
    Pass(Vec<i64>),
    Refuse { item: usize, retry_after_us: i64 },
    Seed(Vec<(usize, i64)>),
}

impl RedisBackend {
    pub(crate) fn new(url: &str, prefix: &str) -> Result<RedisBackend, LimitsError> {
        let client =
            redis::Client::open(url).map_err(|e| LimitsError::InvalidUrl(e.to_string()))?;
        Ok(RedisBackend {
            client,
            prefix: prefix.to_owned(),
            alive: Arc::new(()),
            admit: Script::new(&format!("{HELPERS}{ADMIT}")),
            settle: Script::new(&format!("{HELPERS}{SETTLE}")),
            resync: Script::new(RESYNC),
            started: Instant::now(),
            retry_at_us: AtomicI64::new(0),
            down: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            outages: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
        })
    }

    fn mono_us(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// Whether Redis may be tried now (not within a second of a failure).
    /// During an outage, one caller a second probes Redis (the one that
    /// moves the retry time on); the others keep counting in process rather
    /// than each paying a timeout.
    fn available(&self) -> bool {
        let now = self.mono_us();
        let retry_at = self.retry_at_us.load(Ordering::Relaxed);
        if now < retry_at {
            return false;
        }
        !self.down.load(Ordering::Relaxed)
            || self
                .retry_at_us
                .compare_exchange(
                    retry_at,
                    now + BACKOFF_US,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// This thread's connection, made on first use.
    async fn connection(&self) -> RedisResult<MultiplexedConnection> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| RedisError::from(std::io::Error::other(e.to_string())))?
            .id();
        let found = CONNECTIONS.with(|cached| {
            let mut cached = cached.borrow_mut();
            cached.retain(|c| c.owner.strong_count() > 0);
            cached
                .iter()
                .find(|c| self.owns(c) && c.runtime == runtime)
                .map(|c| c.conn.clone())
        });
        if let Some(conn) = found {
            return Ok(conn);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        CONNECTIONS.with(|cached| {
            let mut cached = cached.borrow_mut();
            cached.retain(|c| !(self.owns(c) && c.runtime == runtime));
            cached.push(Cached {
                owner: Arc::downgrade(&self.alive),
                runtime,
                conn: conn.clone(),
            });
        });
        Ok(conn)
    }

    fn owns(&self, cached: &Cached) -> bool {
        std::ptr::eq(cached.owner.as_ptr(), Arc::as_ptr(&self.alive))
    }

    /// Drops this thread's connection: the next try makes a new one.
    fn forget_connection(&self) {
        CONNECTIONS.with(|cached| cached.borrow_mut().retain(|c| !self.owns(c)));
    }

    /// Runs a script invocation with the timeout around all of it,
    /// connecting included.
    async fn run<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        let call = async {
            let mut conn = self.connection().await?;
            invocation.invoke_async(&mut conn).await
        };
        // The connection's own timeouts apply per step; this bounds the
        // whole (connect, then EVALSHA, then EVAL after a NOSCRIPT).
        match tokio::time::timeout(TIMEOUT * 2, call).await {
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "redis call timed out",
            ))),
        }
    }

    fn failed(&self, e: &RedisError) {
        FAILURES.fetch_add(1, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.forget_connection();
        self.retry_at_us
            .store(self.mono_us() + BACKOFF_US, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::Relaxed) {
            self.outages.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "limits: Redis unreachable ({e}): counting in this process until it is back"
            );
        }
    }

    async fn succeeded(&self, fallback: &Local) {
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed) {
            tracing::info!("limits: Redis is back: counting in Redis again");
            // The next outage starts again from the database, not from
            // counters that missed what Redis counted meanwhile.
            fallback.clear();
            self.resync().await;
        }
    }

    /// Adds the spend counted in process during the outage to Redis.
    async fn resync(&self) {
        let pending: Vec<(String, f64)> = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.drain().collect()
        };
        if pending.is_empty() {
            return;
        }
        let mut invocation = self.resync.prepare_invoke();
        for (key, usd) in &pending {
            invocation.key(key).arg(usd.to_string());
        }
        if let Err(e) = self.run::<i64>(&invocation).await {
            self.failed(&e);
            self.add_pending(pending);
        }
    }

    fn add_pending(&self, spend: impl IntoIterator<Item = (String, f64)>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, usd) in spend {
            *pending.entry(key).or_insert(0.0) += usd;
        }
    }

    /// Remembers spend settled in process while Redis is down: for each budget
    /// counter, the cost less what `reservation` holds in it (its period), or
    /// the whole cost in the period at `now_us` (this process's clock).
    pub(crate) fn remember_outage_spend(
        &self,
        items: &[Item<'_>],
        reservation: &Reservation,
        cost_usd: f64,
        now_us: i64,
    ) {
        let now_ms = now_us.div_euclid(1000);
        let spend = items.iter().enumerate().filter_map(|(i, item)| {
            let period = item.period()?;
            let (id, usd) = match reservation.period_of(i) {
                Some(id) => (id, cost_usd - reservation.estimate.cost_usd),
                None => (period.at(now_ms).id, cost_usd),
            };
            let key = format!("{}{}:{}", self.prefix, item.counter(), period.suffix(id));
            (usd != 0.0).then_some((key, usd))
        });
        self.add_pending(spend.collect::<Vec<_>>());
    }

    fn kind(limit: Limit) -> (&'static str, String) {
        match limit {
            Limit::RequestsPerMinute(n) => ("r", n.to_string()),
            Limit::TokensPerMinute(n) => ("t", n.to_string()),
            Limit::DailyBudgetUsd(usd) => ("d", usd.to_string()),
            Limit::MonthlyBudgetUsd(usd) => ("m", usd.to_string()),
        }
    }

    /// `None`: Redis did not answer (or is being left alone); the caller
    /// decides in process.
    pub(crate) async fn admit(
        &self,
        items: &[Item<'_>],
        spend: &dyn SpendSource,
        estimate: Estimate,
        fallback: &Local,
    ) -> Option<Result<(Admitted, Reservation), Refused>> {
        if !self.available() {
            return None;
        }
        let keys: Vec<String> = items
            .iter()
            .map(|item| format!("{}{}", self.prefix, item.counter()))
            .collect();
        let mut seeds = vec![String::new(); items.len()];
        // A period may turn over between a seed and its use: try again with
        // the new period's seed, a bounded number of times.
        for _ in 0..3 {
            let mut invocation = self.admit.prepare_invoke();
            invocation
                .arg(estimate.tokens.to_string())
                .arg(estimate.cost_usd.to_string());
            for ((item, key), seed) in items.iter().zip(&keys).zip(&seeds) {
                let (kind, limit) = Self::kind(item.limit);
                invocation.key(key).arg(kind).arg(limit).arg(seed);
            }
            let answer = match self.run::<Vec<i64>>(&invocation).await {
                Ok(values) => {
                    self.succeeded(fallback).await;
                    parse(&values, items.len())
                }
                Err(e) => {
                    self.failed(&e);
                    return None;
                }
            };
            match answer {
                Some(Answer::Pass(values)) => {
                    let verdicts: Vec<Verdict> = items
                        .iter()
                        .zip(values.chunks_exact(2))
                        .map(|(item, v)| match item.limit {
                            Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_) => {
                                Verdict::Rate {
                                    remaining: v[0].max(0) as u64,
                                    reset_us: v[1],
                                }
                            }
                            _ => Verdict::Budget {
                                reserved_in: (v[1] == 1).then_some(v[0]),
                            },
                        })
                        .collect();
                    return Some(conclude(items, &verdicts, estimate, true));
                }
                Some(Answer::Refuse {
                    item,
                    retry_after_us,
                }) => return Some(Err(items[item].refused(retry_after_us))),
                Some(Answer::Seed(missing)) => {
                    for (i, start_ms) in missing {
                        seeds[i] = match spend.spent_since(items[i].subject, start_ms).await {
                            Ok(usd) => format!("{start_ms}:{}", spendable(usd)),
                            Err(e) => {
                                tracing::warn!("limits: no recorded spend for {}: {e}", keys[i]);
                                format!("{start_ms}:-")
                            }
                        };
                    }
                }
                None => {
                    self.failed(&RedisError::from(std::io::Error::other(
                        "unexpected answer from the admission script",
                    )));
                    return None;
                }
            }
        }
        None
    }

    /// `false`: Redis did not take it; the caller counts it in process.
    pub(crate) async fn settle(
        &self,
        items: &[Item<'_>],
        reservation: &Reservation,
        tokens: u64,
        cost_usd: f64,
        fallback: &Local,
    ) -> bool {
        if !self.available() {
            return false;
        }
        let delta = i128::from(tokens) - i128::from(reservation.estimate.tokens);
        let mut invocation = self.settle.prepare_invoke();
        invocation
            .arg(delta.to_string())
            .arg(cost_usd.to_string())
            .arg(reservation.estimate.cost_usd.to_string());
        for (i, item) in items.iter().enumerate() {
            let (kind, limit) = Self::kind(item.limit);
            let period = reservation
                .period_of(i)
                .map_or_else(String::new, |id| id.to_string());
            invocation
                .key(format!("{}{}", self.prefix, item.counter()))
                .arg(kind)
                .arg(limit)
                .arg(period);
        }
        match self.run::<i64>(&invocation).await {
            Ok(_) => {
                self.succeeded(fallback).await;
                true
            }
            Err(e) => {
                self.failed(&e);
                false
            }
        }
    }
}

/// Reads the admission script's answer (1-based item numbers).
fn parse(values: &[i64], items: usize) -> Option<Answer> {
    let index = |n: i64| usize::try_from(n - 1).ok().filter(|i| *i < items);
    match values.split_first()? {
        (0, rest) if rest.len() == items * 2 => Some(Answer::Pass(rest.to_vec())),
        (1, [item, retry]) => Some(Answer::Refuse {
            item: index(*item)?,
            retry_after_us: *retry,
        }),
        (2, rest) if rest.len() % 2 == 0 => rest
            .chunks_exact(2)
            .map(|pair| Some((index(pair[0])?, pair[1])))
            .collect::<Option<Vec<_>>>()
            .map(Answer::Seed),
        _ => None,
    }
}

#[cfg(test)]
impl RedisBackend {
    /// (failed calls, outages) of this backend.
    pub(crate) fn failure_counts(&self) -> (u64, u64) {
        (
            self.failures.load(Ordering::Relaxed),
            self.outages.load(Ordering::Relaxed),
        )
    }
}

/// The scripts' helpers, for tests that compare the Lua periods with Rust's.
#[cfg(test)]
pub(crate) const TEST_HELPERS: &str = HELPERS;
