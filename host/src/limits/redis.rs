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
//! - Connections, timeouts and outages are [`RedisLink`]'s.
//! - Fail open: when Redis does not answer, the in-process counters decide
//!   (Redis is left alone for a second, one warning is logged per outage and
//!   one info line when it is back); then the spend counted in process during
//!   the outage is added to Redis's budget counters that still exist (a
//!   counter Redis lost starts again from the database, which has it). Rate
//!   buckets resume from Redis.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use redis::{Cmd, ErrorKind, RedisError, RedisResult, Script, ServerErrorKind};

use super::lease::{self, Giveback, Leases};
use super::local::Local;
use super::{
    Admitted, Estimate, Item, Limit, LimitsError, Refused, Reservation, SpendSource, Verdict,
    conclude, spendable,
};
use crate::redis_link::{CALL_TIMEOUT, RedisLink};

/// Shared by the scripts: the rate clock in units (see `gcra.rs`) and the
/// budget periods (see `budget.rs`), in Lua 5.1, where numbers are doubles:
/// times count from 2025-01-01 to keep them well inside 2^53.
///
/// The scripts are most of Redis's CPU per request (callgrind: libc's
/// `strtod` and `printf` took a fifth of it), hence: the numbers this
/// process sends are read with `x + 0`, which parses a string once where
/// `tonumber` parses it twice (`tonumber` stays for what Redis holds, which
/// may not be a number); whole numbers are written with `%d`, not `%.0f`'s
/// multi-precision path; a bucket whose stored limit is the same string is
/// not parsed for it; the period of a kind is found once per call.
const HELPERS: &str = r"
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local find, sub, format = string.find, string.sub, string.format
local EPOCH = 1735689600
local PERIOD = 60000000
-- See gcra.rs: a limit's clock reads limit * scale units a minute.
local function scale(limit) return max(ceil(60000 / limit), 1) end
local function units(us, rate) return floor(us * rate / PERIOD) end
local function time_of(u, rate) return ceil(u * PERIOD / rate) end
-- The bucket's TAT in units of a limit of `rate` units a minute, at `nu` units now.
local function load_tat(key, limit_arg, rate, nu, now_us)
  local v = redis.call('GET', key)
  if not v then return nu end
  local sep = find(v, ':', 1, true)
  if not sep then return nu end
  local tat = tonumber(sub(v, sep + 1))
  if not tat then return nu end
  local old_arg = sub(v, 1, sep - 1)
  if old_arg == limit_arg then return max(tat, nu) end
  local old = tonumber(old_arg)
  if not old or old <= 0 then return nu end
  local old_rate = old * scale(old)
  local backlog = max(tat - units(now_us, old_rate), 0)
  return nu + ceil(backlog * rate / old_rate)
end
local function store_tat(key, limit_arg, rate, tat, now_us)
  local ttl = ceil((time_of(tat, rate) - now_us) / 1000) + 1000
  if ttl < 1000 then ttl = 1000 end
  redis.call('SET', key, limit_arg .. ':' .. format('%d', tat), 'PX', format('%d', ttl))
end
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = m + 9
  if m > 2 then mp = m - 3 end
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp - 9
  if mp < 10 then m = mp + 3 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end
-- A budget period at Unix second `sec`: id, start ms, end ms.
local function period(kind, sec)
  local day = floor(sec / 86400)
  if kind == 'd' then return day, day * 86400000, (day + 1) * 86400000 end
  local y, m = civil_from_days(day)
  local ny, nm = y, m + 1
  if nm == 13 then ny, nm = y + 1, 1 end
  return y * 12 + m - 1, days_from_civil(y, m, 1) * 86400000, days_from_civil(ny, nm, 1) * 86400000
end
local t = redis.call('TIME')
local sec, usec = t[1] + 0, t[2] + 0
local now_us = (sec - EPOCH) * 1000000 + usec
local now_ms = sec * 1000 + floor(usec / 1000)
-- The current period of a kind, computed once per call: id, the id as
-- counter names have it, start ms, end ms.
local periods = {}
local function current(kind)
  local p = periods[kind]
  if not p then
    local id, start_ms, end_ms = period(kind, sec)
    p = {id, format('%d', id), start_ms, end_ms}
    periods[kind] = p
  end
  return p[1], p[2], p[3], p[4]
end
-- Books `add` units in a bucket (negative: gives them back), never before now: a full bucket
-- stays full. A settle's tokens, a lease's requests or tokens given back.
local function book_units(key, limit_arg, add)
  local limit = limit_arg + 0
  local step = scale(limit)
  local cap = limit * step
  local nu = units(now_us, cap)
  local tat = load_tat(key, limit_arg, cap, nu, now_us) + add * step
  store_tat(key, limit_arg, cap, max(tat, nu), now_us)
end
-- Books `add` USD in a budget counter that exists (one Redis lost starts again from the
-- database), never below 0. A settle's cost, a lease's USD given back.
local function book_usd(key, add)
  if redis.call('EXISTS', key) == 1 then
    if tonumber(redis.call('INCRBYFLOAT', key, format('%.17g', add))) < 0 then
      redis.call('SET', key, '0', 'KEEPTTL')
    end
  end
end
";

/// KEYS: one per item (a budget's without its period). ARGV: the estimated
/// tokens and cost to reserve, then per item its kind (`r`, `t`, `d`, `m`),
/// its limit, a seed (`''`, or `START_MS:USD` for a budget counter to
/// create, `START_MS:-` to pass it this once as 0 without creating it) and,
/// with leases (`lease.rs`), a fourth: the block to take beyond the request
/// (requests, tokens or USD), granted as far as the limit has room.
/// Returns `{0, a, b, ...}` (per item: a rate's remaining and reset µs; a
/// budget's period and 1 if the cost was reserved there, else 0; with leases
/// a third, the block granted: units, or a budget's nano-USD),
/// `{1, item, retry_after_us}` or `{2, item, start_ms, ...}` (budget
/// counters to seed). Nothing is written unless all items pass, but seeds.
const ADMIT: &str = r"
local est_tokens, est_cost = ARGV[1] + 0, ARGV[2] + 0
local stride = (#ARGV - 2) / #KEYS
local out = {0}
local n = 1
local refused, refused_retry = nil, -1
local missing = {}
local writes = {}
local reserves = {}
for i = 1, #KEYS do
  local j = stride * (i - 1) + 3
  local kind, limit_arg, seed = ARGV[j], ARGV[j + 1], ARGV[j + 2]
  local extra = 0
  if stride == 4 then extra = ARGV[j + 3] + 0 end
  local limit = limit_arg + 0
  local a, b, c = 0, 0, 0
  if kind == 'r' or kind == 't' then
    local take = 1
    if kind == 't' then take = est_tokens end
    local step = scale(limit)
    local cap = limit * step
    local nu = units(now_us, cap)
    local tat = load_tat(KEYS[i], limit_arg, cap, nu, now_us)
    local need = max(min(take, limit), 1) * step
    if tat - nu + need > cap then
      local retry = max(time_of(tat + need - cap, cap) - now_us, 1)
      if retry > refused_retry then refused, refused_retry = i, retry end
    else
      if extra > 0 then
        local room = floor((cap - (tat - nu)) / step) - take
        if extra > room then extra = max(room, 0) end
        c = extra
      end
      if take + extra > 0 then
        tat = tat + (take + extra) * step
        writes[#writes + 1] = {i, tat, cap, limit_arg}
      end
      a = floor((cap - (tat - nu)) / step)
      b = max(time_of(tat, cap) - now_us, 0)
    end
  else
    local id, name, start_ms, end_ms = current(kind)
    local key = KEYS[i] .. ':' .. kind .. ':' .. name
    local v = redis.call('GET', key)
    local counted = v ~= false
    if not v and seed ~= '' then
      local sep = find(seed, ':', 1, true)
      if sep and tonumber(sub(seed, 1, sep - 1)) == start_ms then
        local usd = sub(seed, sep + 1)
        if usd == '-' then
          v = '0'
        else
          redis.call('SET', key, usd, 'PXAT', format('%d', end_ms + 86400000))
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
    elseif counted and (est_cost > 0 or extra > 0) then
      local amount = ARGV[2]
      if extra > 0 then
        local nano = floor(max(min(extra, limit - tonumber(v) - est_cost), 0) * 1e9)
        if nano > 0 then
          c = nano
          amount = format('%.17g', est_cost + nano / 1e9)
        end
      end
      reserves[#reserves + 1] = {key, amount}
      a, b = id, 1
    else
      a = id
    end
  end
  out[n + 1] = a
  out[n + 2] = b
  n = n + 2
  if stride == 4 then
    out[n + 1] = c
    n = n + 1
  end
end
if #missing > 0 then
  table.insert(missing, 1, 2)
  return missing
end
if refused then return {1, refused, refused_retry} end
for _, w in ipairs(writes) do
  store_tat(KEYS[w[1]], w[4], w[3], w[2], now_us)
end
for _, r in ipairs(reserves) do
  redis.call('INCRBYFLOAT', r[1], r[2])
end
return out
";

/// Leases given back (`lease.rs`). KEYS: counters (a budget's with its
/// period). ARGV: per key its kind, its limit and the amount given back
/// (requests, tokens or USD; negative: used beyond the lease, charged).
/// A bucket's TAT moves back by its units (never before now: a full bucket
/// stays full); a budget counter that exists gives back its USD (never
/// below 0).
const RETURN: &str = r"
for i = 1, #KEYS do
  local j = 3 * i - 2
  local kind, limit_arg, amount = ARGV[j], ARGV[j + 1], ARGV[j + 2] + 0
  if kind == 'r' or kind == 't' then
    book_units(KEYS[i], limit_arg, -amount)
  else
    book_usd(KEYS[i], -amount)
  end
end
return 0
";

/// KEYS: one per item that counts usage (not request rates). ARGV: the
/// tokens consumed beyond those reserved (may be negative), the cost, the
/// reserved cost, then per item its kind, its limit and the period its cost
/// was reserved in (`''`: none). Books the
/// tokens in token buckets; the cost, less what was reserved, in the budget
/// counters that exist (the reservation's period, else the current one).
const SETTLE: &str = r"
local delta = ARGV[1] + 0
local cost, reserved = ARGV[2] + 0, ARGV[3] + 0
for i = 1, #KEYS do
  local j = 3 * i + 1
  local kind, limit_arg, pid = ARGV[j], ARGV[j + 1], ARGV[j + 2]
  if kind == 't' then
    if delta ~= 0 then book_units(KEYS[i], limit_arg, delta) end
  elseif kind == 'd' or kind == 'm' then
    local key, add
    if pid ~= '' then
      key, add = KEYS[i] .. ':' .. kind .. ':' .. pid, cost - reserved
    else
      local _, name = current(kind)
      key, add = KEYS[i] .. ':' .. kind .. ':' .. name, cost
    end
    if add ~= 0 then book_usd(key, add) end
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

pub(crate) struct RedisBackend {
    link: RedisLink,
    prefix: String,
    admit: Lua,
    settle: Lua,
    give_back: Lua,
    resync: Lua,
    /// Spend counted in process while Redis was down, by full counter name.
    pending: Mutex<HashMap<String, f64>>,
    /// Script calls made, for tests that count them.
    #[cfg(test)]
    calls: std::sync::atomic::AtomicU64,
}

/// What the admission script answered.
enum Answer {
    Pass(Vec<i64>),
    Refuse { item: usize, retry_after_us: i64 },
    Seed(Vec<(usize, i64)>),
}

impl RedisBackend {
    pub(crate) fn new(url: &str, prefix: &str) -> Result<RedisBackend, LimitsError> {
        let link = RedisLink::new(url, "limits", "counting in this process")
            .map_err(|e| LimitsError::InvalidUrl(e.to_string()))?;
        Ok(RedisBackend {
            link,
            prefix: prefix.to_owned(),
            admit: Lua::new(format!("{HELPERS}{ADMIT}")),
            settle: Lua::new(format!("{HELPERS}{SETTLE}")),
            give_back: Lua::new(format!("{HELPERS}{RETURN}")),
            resync: Lua::new(RESYNC.to_owned()),
            pending: Mutex::new(HashMap::new()),
            #[cfg(test)]
            calls: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Runs a script call (see [`Lua::call`]) with the timeout around all
    /// of it, connecting included.
    async fn run<T: redis::FromRedisValue>(&self, lua: &Lua, call: &Cmd) -> RedisResult<T> {
        #[cfg(test)]
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let answer = async {
            let mut conn = self.link.connection().await?;
            match call.query_async(&mut conn).await {
                // A Redis restarted (or flushed) has forgotten its scripts.
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(&lua.code)
                        .query_async::<String>(&mut conn)
                        .await?;
                    call.query_async(&mut conn).await
                }
                answer => answer,
            }
        };
        // Bounds the whole: connect, then EVALSHA, then SCRIPT LOAD and EVALSHA after a
        // NOSCRIPT.
        RedisLink::timed(tokio::time::timeout(CALL_TIMEOUT, answer).await)
    }

    fn failed(&self, e: &RedisError) {
        self.link.failed(e);
    }

    async fn succeeded(&self, fallback: &Local) {
        if self.link.answered() {
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
        let mut call = self.resync.call(pending.len());
        for (key, _) in &pending {
            call.arg(key);
        }
        for (_, usd) in &pending {
            call.arg(usd.to_string());
        }
        if let Err(e) = self.run::<i64>(&self.resync, &call).await {
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
            let (period, id, usd) = reservation.budget_booking(i, item, cost_usd, now_ms)?;
            let key = format!("{}{}:{}", self.prefix, item.counter(), period.suffix(id));
            (usd != 0.0).then_some((key, usd))
        });
        self.add_pending(spend.collect::<Vec<_>>());
    }

    /// Adds an item's key: the prefix and its counter's name (see [`Item::counter`]).
    fn key(&self, call: &mut Cmd, item: &Item<'_>, buf: &mut String) {
        buf.clear();
        buf.push_str(&self.prefix);
        item.write_counter(buf);
        call.arg(buf.as_str());
    }

    /// Adds an item's kind (`r`, `t`, `d`, `m`) and limit, as the scripts read them.
    fn kind(call: &mut Cmd, limit: Limit, buf: &mut String) {
        match limit {
            Limit::RequestsPerMinute(n) => call.arg("r").arg(n),
            Limit::TokensPerMinute(n) => call.arg("t").arg(n),
            Limit::DailyBudgetUsd(usd) => call.arg("d").arg(decimal(buf, usd)),
            Limit::MonthlyBudgetUsd(usd) => call.arg("m").arg(decimal(buf, usd)),
        };
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
        if !self.link.available() {
            return None;
        }
        let answer = self
            .admit_items(items, spend, estimate, None, fallback)
            .await?;
        Some(answer.and_then(|(verdicts, _)| conclude(items, &verdicts, estimate, true)))
    }

    /// [`RedisBackend::admit`] with leases: the items the replica's leases cover are decided
    /// here, the others in Redis, each taking a block for the next requests.
    pub(crate) async fn admit_leased(
        &self,
        leases: &Leases,
        items: &[Item<'_>],
        spend: &dyn SpendSource,
        estimate: Estimate,
        fallback: &Local,
    ) -> Option<Result<(Admitted, Reservation), Refused>> {
        if !self.link.available() {
            return None;
        }
        let now_us = fallback.now_us();
        let taken = leases.take(items, estimate, now_us);
        if taken.all_covered() {
            let verdicts: Vec<Verdict> = taken.covered.iter().flatten().map(|c| c.0).collect();
            return Some(conclude(items, &verdicts, estimate, true));
        }
        self.give_back(&taken.returns).await;
        let asked: Vec<Item<'_>> = items
            .iter()
            .zip(&taken.covered)
            .filter(|(_, covered)| covered.is_none())
            .map(|(item, _)| *item)
            .collect();
        let blocks: Vec<f64> = asked.iter().map(|item| lease::ask(item.limit)).collect();
        let answer = self
            .admit_items(&asked, spend, estimate, Some(&blocks), fallback)
            .await;
        let (asked_verdicts, granted) = match answer {
            Some(Ok(answer)) => answer,
            Some(Err(refused)) => {
                leases.untake(items, estimate, &taken);
                return Some(Err(refused));
            }
            None => {
                leases.untake(items, estimate, &taken);
                return None;
            }
        };
        let replaced = leases.keep(&asked, &asked_verdicts, &granted, now_us);
        self.give_back(&replaced).await;
        let mut asked_verdicts = asked_verdicts.into_iter();
        let verdicts: Vec<Verdict> = taken
            .covered
            .iter()
            .filter_map(|covered| match covered {
                Some((verdict, _)) => Some(*verdict),
                None => asked_verdicts.next(),
            })
            .collect();
        Some(conclude(items, &verdicts, estimate, true))
    }

    /// Gives leases back (or charges what they were used beyond); a charge Redis did not take
    /// (or, while it is left alone, was not sent) is booked when it is back, as an outage's
    /// spend is.
    pub(crate) async fn give_back(&self, returns: &[Giveback]) {
        if returns.is_empty() {
            return;
        }
        if self.link.available() {
            let mut buf = String::with_capacity(64);
            let mut call = self.give_back.call(returns.len());
            for giveback in returns {
                buf.clear();
                buf.push_str(&self.prefix);
                buf.push_str(&giveback.counter);
                call.arg(buf.as_str());
            }
            for giveback in returns {
                Self::kind(&mut call, giveback.limit, &mut buf);
                call.arg(decimal(&mut buf, giveback.amount));
            }
            match self.run::<i64>(&self.give_back, &call).await {
                Ok(_) => return,
                Err(e) => self.failed(&e),
            }
        }
        let charges = returns.iter().filter(|giveback| {
            giveback.amount < 0.0
                && matches!(
                    giveback.limit,
                    Limit::DailyBudgetUsd(_) | Limit::MonthlyBudgetUsd(_)
                )
        });
        self.add_pending(
            charges
                .map(|charge| (format!("{}{}", self.prefix, charge.counter), -charge.amount))
                .collect::<Vec<_>>(),
        );
    }

    /// The admission script for `items`, with a block to take beyond the request for each
    /// (`blocks`, with leases): per item its verdict and the block granted (requests, tokens
    /// or USD). `None`: Redis did not answer.
    async fn admit_items(
        &self,
        items: &[Item<'_>],
        spend: &dyn SpendSource,
        estimate: Estimate,
        blocks: Option<&[f64]>,
        fallback: &Local,
    ) -> Option<Result<(Vec<Verdict>, Vec<f64>), Refused>> {
        let width = if blocks.is_some() { 3 } else { 2 };
        let mut seeds = vec![String::new(); items.len()];
        let mut buf = String::with_capacity(64);
        // A period may turn over between a seed and its use: try again with
        // the new period's seed, a bounded number of times.
        for _ in 0..3 {
            let mut call = self.admit.call(items.len());
            for item in items {
                self.key(&mut call, item, &mut buf);
            }
            call.arg(estimate.tokens)
                .arg(decimal(&mut buf, estimate.cost_usd));
            for (i, (item, seed)) in items.iter().zip(&seeds).enumerate() {
                Self::kind(&mut call, item.limit, &mut buf);
                call.arg(seed);
                if let Some(blocks) = blocks {
                    let block = blocks.get(i).copied().unwrap_or(0.0);
                    match item.limit {
                        Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_) => {
                            call.arg(block as u64)
                        }
                        _ => call.arg(decimal(&mut buf, block)),
                    };
                }
            }
            let answer = match self.run::<Vec<i64>>(&self.admit, &call).await {
                Ok(values) => {
                    self.succeeded(fallback).await;
                    parse(&values, items.len(), width)
                }
                Err(e) => {
                    self.failed(&e);
                    return None;
                }
            };
            match answer {
                Some(Answer::Pass(values)) => {
                    let mut verdicts = Vec::with_capacity(items.len());
                    let mut granted = Vec::with_capacity(items.len());
                    for (item, v) in items.iter().zip(values.chunks_exact(width)) {
                        let rate = matches!(
                            item.limit,
                            Limit::RequestsPerMinute(_) | Limit::TokensPerMinute(_)
                        );
                        verdicts.push(if rate {
                            Verdict::Rate {
                                remaining: v[0].max(0) as u64,
                                reset_us: v[1],
                            }
                        } else {
                            Verdict::Budget {
                                reserved_in: (v[1] == 1).then_some(v[0]),
                            }
                        });
                        let block = v.get(2).copied().unwrap_or(0).max(0) as f64;
                        granted.push(if rate { block } else { block / 1e9 });
                    }
                    return Some(Ok((verdicts, granted)));
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
                                tracing::warn!(
                                    "limits: no recorded spend for {}{}: {e}",
                                    self.prefix,
                                    items[i].counter()
                                );
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
        if !self.link.available() {
            return false;
        }
        // Request rates have nothing to settle: the script is not handed them.
        let counted = || {
            items
                .iter()
                .enumerate()
                .filter(|(_, item)| item.counts_usage())
        };
        let delta = i128::from(tokens) - i128::from(reservation.estimate.tokens);
        let mut buf = String::with_capacity(64);
        let mut call = self.settle.call(counted().count());
        for (_, item) in counted() {
            self.key(&mut call, item, &mut buf);
        }
        call.arg(delta)
            .arg(decimal(&mut buf, cost_usd))
            .arg(decimal(&mut buf, reservation.estimate.cost_usd));
        for (i, item) in counted() {
            Self::kind(&mut call, item.limit, &mut buf);
            match reservation.period_of(i) {
                Some(id) => call.arg(id),
                None => call.arg(""),
            };
        }
        match self.run::<i64>(&self.settle, &call).await {
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

/// A script, called by its hash: loaded once per Redis, on the first
/// `NOSCRIPT` answer. Its calls are built as one command (one buffer for all
/// arguments) rather than through redis-rs's `ScriptInvocation`, which
/// allocates each argument and then copies it into a command.
struct Lua {
    hash: String,
    code: String,
}

impl Lua {
    fn new(code: String) -> Lua {
        let hash = Script::new(&code).get_hash().to_owned();
        Lua { hash, code }
    }

    /// `EVALSHA` for `keys` keys: the caller adds the keys, then the arguments.
    fn call(&self, keys: usize) -> Cmd {
        let mut call = redis::cmd("EVALSHA");
        call.arg(&self.hash).arg(keys);
        call
    }
}

/// `usd` as the scripts read it (Rust's shortest decimal, no exponent), in `buf`.
fn decimal(buf: &mut String, usd: f64) -> &str {
    use std::fmt::Write;
    buf.clear();
    let _ = write!(buf, "{usd}");
    buf
}

/// Reads the admission script's answer (1-based item numbers; `width` values an item when
/// it passes).
fn parse(values: &[i64], items: usize, width: usize) -> Option<Answer> {
    let index = |n: i64| usize::try_from(n - 1).ok().filter(|i| *i < items);
    match values.split_first()? {
        (0, rest) if rest.len() == items * width => Some(Answer::Pass(rest.to_vec())),
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
        self.link.failure_counts()
    }

    /// Script calls made so far.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The scripts' helpers, for tests that compare the Lua periods with Rust's.
#[cfg(test)]
pub(crate) const TEST_HELPERS: &str = HELPERS;
