use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::budget::{Period, civil_from_days, days_from_civil};
use super::local::Local;
use super::*;

const MIN_US: i64 = 60_000_000;
/// 2026-03-15T12:00:00Z in µs.
const T0: i64 = 1_773_576_000_000_000;

impl Limiter {
    /// Admits without reserving anything (a request's one unit of its rpm aside).
    async fn admit_plain(
        &self,
        checks: &[Check<'_>],
        spend: &dyn SpendSource,
    ) -> Result<Admitted, Refused> {
        self.admit(checks, spend, Estimate::default())
            .await
            .map(|(admitted, _)| admitted)
    }

    /// Settles a call that reserved nothing.
    async fn settle_plain(&self, checks: &[Check<'_>], tokens: u64, cost_usd: f64) {
        self.settle(checks, &Reservation::default(), tokens, cost_usd)
            .await;
    }
}

/// A local limiter on a clock the test moves.
fn clocked() -> (Limiter, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(T0));
    let clock = now.clone();
    let local = Local::new(Arc::new(move || clock.load(Ordering::SeqCst)));
    (Limiter::with_local(local, None), now)
}

fn project(id: &str, limits: LimitSet) -> Check<'_> {
    Check {
        subject: Subject::Project(id),
        limits,
    }
}

fn key(prefix: &str, limits: LimitSet) -> Check<'_> {
    Check {
        subject: Subject::Key(prefix),
        limits,
    }
}

fn rpm(n: u32) -> LimitSet {
    LimitSet {
        rpm: Some(n),
        ..LimitSet::default()
    }
}

fn tpm(n: u64) -> LimitSet {
    LimitSet {
        tpm: Some(n),
        ..LimitSet::default()
    }
}

fn daily(usd: f64) -> LimitSet {
    LimitSet {
        daily_budget_usd: Some(usd),
        ..LimitSet::default()
    }
}

/// A spend source that answers a fixed amount and counts its calls.
struct FixedSpend {
    usd: f64,
    calls: AtomicUsize,
    since: Mutex<Vec<i64>>,
}

impl FixedSpend {
    fn new(usd: f64) -> FixedSpend {
        FixedSpend {
            usd,
            calls: AtomicUsize::new(0),
            since: Mutex::new(Vec::new()),
        }
    }
}

impl SpendSource for FixedSpend {
    fn spent_since<'a>(
        &'a self,
        _subject: &'a Subject<'a>,
        since_ms: i64,
    ) -> Pin<Box<dyn Future<Output = Result<f64, String>> + Send + 'a>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.since.lock().unwrap().push(since_ms);
        Box::pin(async move { Ok(self.usd) })
    }
}

async fn count_admitted(limiter: &Limiter, checks: &[Check<'_>], n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        if limiter.admit_plain(checks, &NoSpend).await.is_ok() {
            admitted += 1;
        }
    }
    admitted
}

#[tokio::test]
async fn exactly_n_of_3n_at_once() {
    for n in [1u32, 7, 10, 60, 1000, 59_999, 100_000] {
        let (limiter, _) = clocked();
        let checks = [project("p", rpm(n))];
        let admitted = count_admitted(&limiter, &checks, 3 * n as usize).await;
        assert_eq!(admitted, n as usize, "rpm {n}");
    }
}

#[tokio::test]
async fn retry_after_reset_and_recovery() {
    let (limiter, now) = clocked();
    let checks = [project("p", rpm(10))];
    let first = limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    let w = first.requests.unwrap();
    assert_eq!((w.limit, w.remaining), (10, 9));
    // Full again one emission interval (6 s) after one request.
    assert!(
        w.reset <= Duration::from_secs(6) && w.reset > Duration::from_millis(5990),
        "{w:?}"
    );
    for _ in 0..9 {
        limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    }
    let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
    assert_eq!(refused.retry_after, Duration::from_secs(6));
    assert_eq!(
        refused.to_string(),
        "project rate limit of 10 requests per minute reached"
    );

    // 4 s later: still 2 s to go, rounded up.
    now.fetch_add(4_000_000, Ordering::SeqCst);
    let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
    assert_eq!(refused.retry_after, Duration::from_secs(2));
    // 6 s after the burst: exactly one more.
    now.fetch_add(2_000_000, Ordering::SeqCst);
    let again = limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    assert_eq!(again.requests.unwrap().remaining, 0);
    assert!(limiter.admit_plain(&checks, &NoSpend).await.is_err());
    // A minute later: the whole bucket.
    now.fetch_add(MIN_US, Ordering::SeqCst);
    assert_eq!(count_admitted(&limiter, &checks, 30).await, 10);
    // Sustained: one per 6 s, never more.
    let mut admitted = 0;
    for _ in 0..600 {
        now.fetch_add(100_000, Ordering::SeqCst);
        admitted += count_admitted(&limiter, &checks, 1).await;
    }
    assert_eq!(admitted, 10, "60 s at one try per 100 ms");
}

#[tokio::test]
async fn retry_after_is_at_least_one_second() {
    let (limiter, _) = clocked();
    let checks = [project("p", rpm(100_000))];
    count_admitted(&limiter, &checks, 100_000).await;
    let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
    assert_eq!(refused.retry_after, Duration::from_secs(1));
}

#[tokio::test]
async fn tokens_go_into_debt_and_are_waited_out() {
    let (limiter, now) = clocked();
    let checks = [key("gw_abc", tpm(1000))];
    let first = limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    assert_eq!(first.tokens.unwrap().remaining, 1000);
    assert_eq!(first.requests, None);
    // The call used 2500 tokens: 1500 of debt.
    limiter.settle_plain(&checks, 2500, 0.0).await;
    let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "key rate limit of 1000 tokens per minute reached"
    );
    // Room for one token once 1501 tokens drained: 90.06 s.
    assert_eq!(refused.retry_after, Duration::from_secs(91));
    now.fetch_add(90_000_000, Ordering::SeqCst);
    assert!(limiter.admit_plain(&checks, &NoSpend).await.is_err());
    now.fetch_add(1_000_000, Ordering::SeqCst);
    let admitted = limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    let w = admitted.tokens.unwrap();
    // 91 s drained 1516.67 of the 2500: room for 16 tokens, full in 59 s.
    assert_eq!(w.remaining, 16);
    assert_eq!(w.reset, Duration::from_secs(59));
}

#[tokio::test]
async fn budget_refuses_at_the_budget_and_rolls_over() {
    let (limiter, now) = clocked();
    let checks = [project("p", daily(1.0))];
    let spend = FixedSpend::new(0.0);
    for _ in 0..3 {
        limiter.admit_plain(&checks, &spend).await.unwrap();
        limiter.settle_plain(&checks, 10, 0.25).await;
    }
    // 0.75 spent: admitted, and this call overshoots to 1.05.
    limiter.admit_plain(&checks, &spend).await.unwrap();
    limiter.settle_plain(&checks, 10, 0.30).await;
    let refused = limiter.admit_plain(&checks, &spend).await.unwrap_err();
    assert_eq!(refused.to_string(), "project daily budget of $1.00 reached");
    // T0 is noon: 12 h to the end of the day.
    assert_eq!(refused.retry_after, Duration::from_secs(12 * 3600));
    assert_eq!(refused.limit, Limit::DailyBudgetUsd(1.0));
    assert_eq!(refused.scope, Scope::Project);
    assert_eq!(spend.calls.load(Ordering::SeqCst), 1, "seeded once");
    // The next day starts again from the recorded spend of that day.
    now.fetch_add(12 * 3600 * 1_000_000, Ordering::SeqCst);
    limiter.admit_plain(&checks, &spend).await.unwrap();
    assert_eq!(spend.calls.load(Ordering::SeqCst), 2);
    let since = spend.since.lock().unwrap().clone();
    assert_eq!(since, vec![1_773_532_800_000, 1_773_619_200_000]);
}

#[tokio::test]
async fn exact_budget_refuses() {
    let (limiter, _) = clocked();
    let checks = [key("gw_k", daily(0.5))];
    limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    limiter.settle_plain(&checks, 0, 0.5).await;
    let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
    assert_eq!(refused.to_string(), "key daily budget of $0.50 reached");
}

#[tokio::test]
async fn budget_starts_from_the_recorded_spend() {
    let (limiter, _) = clocked();
    let monthly = LimitSet {
        monthly_budget_usd: Some(100.0),
        ..LimitSet::default()
    };
    let checks = [key("gw_k", monthly)];
    let spend = FixedSpend::new(100.0);
    let refused = limiter.admit_plain(&checks, &spend).await.unwrap_err();
    assert_eq!(refused.to_string(), "key monthly budget of $100.00 reached");
    // 2026-03-15 12:00 to 2026-04-01 00:00: 16.5 days.
    assert_eq!(
        refused.retry_after,
        Duration::from_secs(16 * 86400 + 12 * 3600)
    );
    // Seeded from the start of the month.
    assert_eq!(*spend.since.lock().unwrap(), vec![1_772_323_200_000]);
}

#[tokio::test]
async fn a_refused_key_takes_nothing_from_the_project() {
    let (limiter, _) = clocked();
    let project_limits = LimitSet {
        rpm: Some(10),
        daily_budget_usd: Some(5.0),
        ..LimitSet::default()
    };
    let checks = [project("p", project_limits), key("gw_k", rpm(3))];
    assert_eq!(count_admitted(&limiter, &checks, 10).await, 3);
    // The project still has 7: the 7 refusals by the key took nothing.
    let project_only = [project("p", project_limits)];
    let admitted = limiter.admit_plain(&project_only, &NoSpend).await.unwrap();
    assert_eq!(admitted.requests.unwrap().remaining, 6);
    // And the key's refusal names the key.
    let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
    assert_eq!(refused.scope, Scope::Key);
    assert_eq!(refused.limit, Limit::RequestsPerMinute(3));
}

#[tokio::test]
async fn the_tightest_window_is_reported() {
    let (limiter, _) = clocked();
    let checks = [
        project(
            "p",
            LimitSet {
                rpm: Some(100),
                tpm: Some(5000),
                ..LimitSet::default()
            },
        ),
        key(
            "gw_k",
            LimitSet {
                rpm: Some(20),
                tpm: Some(90_000),
                ..LimitSet::default()
            },
        ),
    ];
    let admitted = limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    assert_eq!(admitted.requests.unwrap().limit, 20);
    assert_eq!(admitted.requests.unwrap().remaining, 19);
    assert_eq!(admitted.tokens.unwrap().limit, 5000);
    assert_eq!(admitted.tokens.unwrap().remaining, 5000);
}

#[tokio::test]
async fn no_limits_no_headers() {
    let limiter = Limiter::local();
    let checks = [project("p", LimitSet::default()), key("k", rpm(0))];
    let admitted = limiter.admit_plain(&checks, &NoSpend).await.unwrap();
    assert!(admitted.headers().is_empty());
    limiter.settle_plain(&checks, 100, 1.0).await;
}

#[tokio::test]
async fn a_changed_limit_keeps_the_backlog_share() {
    let (limiter, _) = clocked();
    count_admitted(&limiter, &[project("p", rpm(10))], 5).await;
    // Half the bucket used; at 20 rpm, half of 20 is left.
    let checks = [project("p", rpm(20))];
    assert_eq!(count_admitted(&limiter, &checks, 40).await, 10);
}

fn estimate(tokens: u64, cost_usd: f64) -> Estimate {
    Estimate { tokens, cost_usd }
}

/// Admits `n` requests that reserve `each` and are all still in flight; returns the
/// reservations of those admitted.
async fn in_flight(
    limiter: &Limiter,
    checks: &[Check<'_>],
    spend: &dyn SpendSource,
    n: usize,
    each: Estimate,
) -> Vec<Reservation> {
    let mut admitted = Vec::new();
    for _ in 0..n {
        if let Ok((_, reservation)) = limiter.admit(checks, spend, each).await {
            admitted.push(reservation);
        }
    }
    admitted
}

#[tokio::test]
async fn a_budget_counts_the_calls_in_flight() {
    // The issue's case: $0.015 a day, $0.01 a call, 50 at once: two pass, not 50.
    let (limiter, _) = clocked();
    let checks = [key("gw_k", daily(0.015))];
    let spend = FixedSpend::new(0.0);
    let admitted = in_flight(&limiter, &checks, &spend, 50, estimate(10, 0.01)).await;
    assert_eq!(admitted.len(), 2);
    for reservation in &admitted {
        limiter.settle(&checks, reservation, 10, 0.01).await;
    }
    assert!(limiter.admit_plain(&checks, &spend).await.is_err());
    // Settled at what they cost: $0.02 spent, not $0.02 + the reservations.
    let loose = [key("gw_k", daily(0.0201))];
    assert!(limiter.admit_plain(&loose, &spend).await.is_ok());
}

#[tokio::test]
async fn a_tpm_limit_counts_the_tokens_in_flight() {
    let (limiter, _) = clocked();
    let checks = [project("p", tpm(25))];
    let admitted = in_flight(&limiter, &checks, &NoSpend, 50, estimate(10, 0.0)).await;
    assert_eq!(admitted.len(), 2, "10 + 10 fit in 25, a third does not");
    let (_, first) = (0, &admitted[0]);
    // Used 4 of the 10 reserved: 6 come back, so one more request of 10 fits (4 + 10 + 10).
    limiter.settle(&checks, first, 4, 0.0).await;
    let again = in_flight(&limiter, &checks, &NoSpend, 5, estimate(10, 0.0)).await;
    assert_eq!(again.len(), 1);
}

#[tokio::test]
async fn an_estimate_larger_than_the_bucket_needs_a_full_bucket() {
    let (limiter, now) = clocked();
    let checks = [project("p", tpm(25))];
    let (_, big) = limiter
        .admit(&checks, &NoSpend, estimate(4096, 0.0))
        .await
        .unwrap();
    assert!(
        limiter
            .admit(&checks, &NoSpend, estimate(1, 0.0))
            .await
            .is_err()
    );
    // It used 10: the debt goes, 10 of 25 stay taken.
    limiter.settle(&checks, &big, 10, 0.0).await;
    assert!(
        limiter
            .admit(&checks, &NoSpend, estimate(4096, 0.0))
            .await
            .is_err()
    );
    let (admitted, _) = limiter
        .admit(&checks, &NoSpend, estimate(15, 0.0))
        .await
        .unwrap();
    assert_eq!(admitted.tokens.unwrap().remaining, 0);
    // A minute later the bucket is full again.
    now.fetch_add(MIN_US, Ordering::SeqCst);
    assert!(
        limiter
            .admit(&checks, &NoSpend, estimate(4096, 0.0))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_request_without_usage_gives_its_reservation_back() {
    let (limiter, _) = clocked();
    let checks = [project(
        "p",
        LimitSet {
            tpm: Some(25),
            ..daily(0.015)
        },
    )];
    let spend = FixedSpend::new(0.0);
    for _ in 0..10 {
        let (_, reservation) = limiter
            .admit(&checks, &spend, estimate(20, 0.01))
            .await
            .unwrap();
        assert!(!reservation.is_empty());
        limiter.settle(&checks, &reservation, 0, 0.0).await;
    }
}

#[tokio::test]
async fn a_reservation_is_settled_in_the_period_it_was_made_in() {
    let (limiter, now) = clocked();
    let checks = [project("p", daily(1.0))];
    let spend = FixedSpend::new(0.0);
    // 2026-03-15T23:59:59Z: reserved $0.9 on the 15th.
    now.store(T0 + 12 * 3_600_000_000 - 1_000_000, Ordering::SeqCst);
    let (_, reservation) = limiter
        .admit(&checks, &spend, estimate(0, 0.9))
        .await
        .unwrap();
    now.fetch_add(2_000_000, Ordering::SeqCst);
    // On the 16th a call of $0.5 is admitted and in flight.
    let (_, today) = limiter
        .admit(&checks, &spend, estimate(0, 0.5))
        .await
        .unwrap();
    // The 15th's call cost $0.1: the 16th's counter keeps its $0.5, gains nothing back.
    limiter.settle(&checks, &reservation, 0, 0.1).await;
    let tight = [project("p", daily(0.5))];
    assert!(limiter.admit_plain(&tight, &spend).await.is_err());
    limiter.settle(&checks, &today, 0, 0.0).await;
    assert!(limiter.admit_plain(&tight, &spend).await.is_ok());
}

#[test]
fn messages() {
    let refused = |scope, limit| Refused {
        retry_after: Duration::from_secs(1),
        scope,
        limit,
    };
    let cases = [
        (
            Scope::Project,
            Limit::RequestsPerMinute(10),
            "project rate limit of 10 requests per minute reached",
        ),
        (
            Scope::Key,
            Limit::TokensPerMinute(1000),
            "key rate limit of 1000 tokens per minute reached",
        ),
        (
            Scope::Project,
            Limit::DailyBudgetUsd(5.0),
            "project daily budget of $5.00 reached",
        ),
        (
            Scope::Key,
            Limit::MonthlyBudgetUsd(100.0),
            "key monthly budget of $100.00 reached",
        ),
        (
            Scope::Key,
            Limit::DailyBudgetUsd(0.015),
            "key daily budget of $0.015 reached",
        ),
    ];
    for (scope, limit, text) in cases {
        assert_eq!(refused(scope, limit).to_string(), text);
    }
}

#[test]
fn reset_format_is_openai_s() {
    let ms = Duration::from_millis;
    let cases = [
        (ms(0), "0s"),
        (ms(120), "120ms"),
        (ms(12), "12ms"),
        (Duration::from_micros(1), "1ms"),
        (ms(1000), "1s"),
        (ms(6000), "6s"),
        (ms(1500), "1.5s"),
        (ms(8640), "8.64s"),
        (ms(90_000), "1m30s"),
        (ms(360_000), "6m0s"),
        (ms(3_600_000), "1h0m0s"),
        (ms(3_723_004), "1h2m3.004s"),
    ];
    for (d, text) in cases {
        assert_eq!(format_reset(d), text, "{d:?}");
    }
    let admitted = Admitted {
        requests: Some(Window {
            limit: 60,
            remaining: 59,
            reset: ms(1000),
        }),
        tokens: Some(Window {
            limit: 150_000,
            remaining: 149_984,
            reset: ms(360_000),
        }),
    };
    assert_eq!(
        admitted.headers(),
        vec![
            ("x-ratelimit-limit-requests", "60".to_owned()),
            ("x-ratelimit-remaining-requests", "59".to_owned()),
            ("x-ratelimit-reset-requests", "1s".to_owned()),
            ("x-ratelimit-limit-tokens", "150000".to_owned()),
            ("x-ratelimit-remaining-tokens", "149984".to_owned()),
            ("x-ratelimit-reset-tokens", "6m0s".to_owned()),
        ]
    );
}

#[test]
fn periods() {
    for days in [
        -1, 0, 59, 365, 10_957, 11_016, 20_527, 20_528, 47_541, 100_000,
    ] {
        let (y, m, d) = civil_from_days(days);
        assert_eq!(days_from_civil(y, m, d), days);
    }
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    let now_ms = T0 / 1000;
    let month = Period::Month.at(now_ms);
    assert_eq!(month.id, 2026 * 12 + 2);
    assert_eq!(month.start_ms, 1_772_323_200_000); // 2026-03-01
    assert_eq!(month.end_ms, 1_775_001_600_000); // 2026-04-01
    let december = Period::Month.at(1_796_083_200_000); // 2026-12-01
    assert_eq!(december.end_ms, 1_798_761_600_000); // 2027-01-01
    let day = Period::Day.at(now_ms);
    assert_eq!(
        (day.start_ms, day.end_ms),
        (1_773_532_800_000, 1_773_619_200_000)
    );
}

#[test]
fn invalid_redis_url_is_an_error() {
    assert!(Limiter::redis("not a url", "gateway:").is_err());
    assert!(Limiter::redis("redis://127.0.0.1:1/0", "gateway:").is_ok());
}

/// Local admit + settle cost (prints; asserts nothing about time).
#[tokio::test]
async fn local_cost() {
    let limiter = Limiter::local();
    let limits = LimitSet {
        rpm: Some(u32::MAX),
        tpm: Some(u64::MAX / 4),
        daily_budget_usd: Some(1e12),
        monthly_budget_usd: Some(1e12),
    };
    let checks = [project("p", limits), key("gw_k", limits)];
    let n = 200_000;
    let start = Instant::now();
    for _ in 0..n {
        limiter.admit_plain(&checks, &NoSpend).await.unwrap();
        limiter.settle_plain(&checks, 100, 0.001).await;
    }
    let per = start.elapsed().as_nanos() / n;
    println!("local admit+settle (project and key, all four limits): {per} ns");
    let start = Instant::now();
    for _ in 0..n {
        let (_, reservation) = limiter
            .admit(&checks, &NoSpend, estimate(4102, 0.0025))
            .await
            .unwrap();
        limiter.settle(&checks, &reservation, 100, 0.001).await;
    }
    let per = start.elapsed().as_nanos() / n;
    println!("local admit+settle with a reservation (all four limits): {per} ns");
    let checks = [
        project("p", rpm(u32::MAX)),
        key("gw_k", LimitSet::default()),
    ];
    let start = Instant::now();
    for _ in 0..n {
        limiter.admit_plain(&checks, &NoSpend).await.unwrap();
        limiter.settle_plain(&checks, 100, 0.001).await;
    }
    let per = start.elapsed().as_nanos() / n;
    println!("local admit+settle (a project rpm only): {per} ns");
}

// ---- Against the real Redis -------------------------------------------

mod redis_tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::watch;

    const REDIS: &str = "redis://127.0.0.1:6379/";

    /// A unique prefix for this test, or `None` (after a loud skip) when no
    /// Redis answers and CI is not set.
    async fn redis_prefix(test: &str) -> Option<String> {
        let reachable = async {
            let client = ::redis::Client::open(REDIS).ok()?;
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            ::redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .ok()
        };
        let up = tokio::time::timeout(Duration::from_secs(2), reachable)
            .await
            .ok()
            .flatten()
            .is_some();
        if !up {
            assert!(
                std::env::var_os("CI").is_none(),
                "no Redis at {REDIS} and CI is set"
            );
            eprintln!("SKIPPED: no Redis at {REDIS} ({test})");
            return None;
        }
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).unwrap();
        let random = u32::from_le_bytes(random);
        Some(format!(
            "gwtest:{}:{random:08x}:{test}:",
            std::process::id()
        ))
    }

    async fn conn() -> ::redis::aio::MultiplexedConnection {
        ::redis::Client::open(REDIS)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    async fn cleanup(prefix: &str) {
        let mut conn = conn().await;
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: i64 = ::redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }

    async fn get(key: &str) -> Option<String> {
        let mut conn = conn().await;
        ::redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap()
    }

    /// Today's spend on `stem`'s daily budget (`p:p` the project `p`, `k:gw_k` the key
    /// `gw_k`) as Redis holds it, if it holds any.
    async fn spent_today(prefix: &str, stem: &str) -> Option<f64> {
        let day = Period::Day.at(crate::clock::now_ms()).id;
        get(&format!("{prefix}bd:{stem}:d:{day}"))
            .await
            .map(|usd| usd.parse().unwrap())
    }

    fn backend(limiter: &Limiter) -> &super::super::redis::RedisBackend {
        limiter.inner.redis.as_ref().unwrap()
    }

    #[tokio::test]
    async fn two_replicas_share_one_rate_limit() {
        let Some(prefix) = redis_prefix("rpm").await else {
            return;
        };
        let a = Limiter::redis(REDIS, &prefix).unwrap();
        let b = Limiter::redis(REDIS, &prefix).unwrap();
        let checks = [project("p1", rpm(10))];
        let mut admitted = [0, 0];
        for i in 0..30 {
            let limiter = if i % 2 == 0 { &a } else { &b };
            if limiter.admit_plain(&checks, &NoSpend).await.is_ok() {
                admitted[i % 2] += 1;
            }
        }
        assert_eq!(admitted[0] + admitted[1], 10, "{admitted:?}");
        let refused = a.admit_plain(&checks, &NoSpend).await.unwrap_err();
        assert!(refused.retry_after >= Duration::from_secs(5), "{refused:?}");
        assert_eq!(
            refused.to_string(),
            "project rate limit of 10 requests per minute reached"
        );
        // The key expires once the bucket is full again (within a minute).
        let mut conn = conn().await;
        let ttl: i64 = ::redis::cmd("PTTL")
            .arg(format!("{prefix}rl:p:p1:r"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 0 && ttl <= 61_000, "{ttl}");
        assert_eq!(backend(&a).failure_counts(), (0, 0));
        cleanup(&prefix).await;
    }

    #[tokio::test]
    async fn multi_check_is_atomic_in_redis() {
        let Some(prefix) = redis_prefix("atomic").await else {
            return;
        };
        let limiter = Limiter::redis(REDIS, &prefix).unwrap();
        let limits = LimitSet {
            rpm: Some(10),
            tpm: Some(100_000),
            ..LimitSet::default()
        };
        let checks = [project("p", limits), key("gw_k", rpm(3))];
        assert_eq!(count_admitted(&limiter, &checks, 10).await, 3);
        let admitted = limiter
            .admit_plain(&[project("p", limits)], &NoSpend)
            .await
            .unwrap();
        assert_eq!(admitted.requests.unwrap().remaining, 6);
        assert_eq!(admitted.tokens.unwrap().remaining, 100_000);
        let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "key rate limit of 3 requests per minute reached"
        );
        cleanup(&prefix).await;
    }

    /// A Redis that lost its scripts (restarted, `SCRIPT FLUSH`) is handed
    /// them again by the call that finds them missing; and a settle, which
    /// is not handed the request rates, books each budget item's cost in the
    /// period its own reservation names.
    #[tokio::test]
    async fn forgotten_scripts_are_loaded_again_and_settles_skip_request_rates() {
        let Some(prefix) = redis_prefix("noscript").await else {
            return;
        };
        let limiter = Limiter::redis(REDIS, &prefix).unwrap();
        let all = LimitSet {
            rpm: Some(10),
            tpm: Some(100_000),
            daily_budget_usd: Some(1.0),
            monthly_budget_usd: None,
        };
        let checks = [project("p", all), key("gw_k", all)];
        let estimate = Estimate {
            tokens: 100,
            cost_usd: 0.1,
        };
        let flush = || async {
            let _: String = ::redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut conn().await)
                .await
                .unwrap();
        };
        flush().await;
        let (_, reservation) = limiter.admit(&checks, &NoSpend, estimate).await.unwrap();
        flush().await;
        limiter.settle(&checks, &reservation, 250, 0.25).await;
        for stem in ["p:p", "k:gw_k"] {
            let spent = spent_today(&prefix, stem)
                .await
                .expect("the counter exists");
            assert!((spent - 0.25).abs() < 1e-9, "{stem}: {spent}");
        }
        assert_eq!(backend(&limiter).failure_counts(), (0, 0));
        cleanup(&prefix).await;
    }

    #[tokio::test]
    async fn tokens_debt_in_redis() {
        let Some(prefix) = redis_prefix("tpm").await else {
            return;
        };
        let limiter = Limiter::redis(REDIS, &prefix).unwrap();
        let checks = [key("gw_k", tpm(1000))];
        limiter.admit_plain(&checks, &NoSpend).await.unwrap();
        limiter.settle_plain(&checks, 2500, 0.0).await;
        let refused = limiter.admit_plain(&checks, &NoSpend).await.unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(91));
        cleanup(&prefix).await;
    }

    #[tokio::test]
    async fn budget_is_shared_and_seeded() {
        let Some(prefix) = redis_prefix("budget").await else {
            return;
        };
        let a = Limiter::redis(REDIS, &prefix).unwrap();
        let b = Limiter::redis(REDIS, &prefix).unwrap();
        let checks = [project("p", daily(1.0))];
        let spend = FixedSpend::new(0.5);
        a.admit_plain(&checks, &spend).await.unwrap();
        assert_eq!(spend.calls.load(Ordering::SeqCst), 1);
        b.admit_plain(&checks, &spend).await.unwrap();
        assert_eq!(
            spend.calls.load(Ordering::SeqCst),
            1,
            "seeded once, in Redis"
        );
        a.settle_plain(&checks, 10, 0.25).await;
        b.admit_plain(&checks, &spend).await.unwrap();
        b.settle_plain(&checks, 10, 0.25).await;
        let refused = a.admit_plain(&checks, &spend).await.unwrap_err();
        assert_eq!(refused.to_string(), "project daily budget of $1.00 reached");
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let to_midnight = 86_400 - now_s % 86_400;
        assert!(
            refused.retry_after.as_secs().abs_diff(to_midnight) <= 2,
            "{refused:?}"
        );
        assert_eq!(spent_today(&prefix, "p:p").await.unwrap(), 1.0);
        cleanup(&prefix).await;
    }

    #[tokio::test]
    async fn reservations_hold_across_replicas() {
        let Some(prefix) = redis_prefix("reserve").await else {
            return;
        };
        let a = Limiter::redis(REDIS, &prefix).unwrap();
        let b = Limiter::redis(REDIS, &prefix).unwrap();
        let spend = FixedSpend::new(0.0);
        // 50 in flight over two replicas: a $0.015 budget at $0.01 a call, 25 tokens a minute
        // at 10 a call.
        for checks in [[key("gw_b", daily(0.015))], [key("gw_t", tpm(25))]] {
            // None settles before all are in (the script is atomic: at once or one after
            // another is the same to it).
            let mut admitted = in_flight(&a, &checks, &spend, 25, estimate(10, 0.01)).await;
            admitted.extend(in_flight(&b, &checks, &spend, 25, estimate(10, 0.01)).await);
            assert_eq!(admitted.len(), 2, "{checks:?}");
            assert!(admitted.iter().all(|r| r.in_redis));
            // One used what it reserved, one failed without usage: one more fits again.
            a.settle(&checks, &admitted[0], 10, 0.01).await;
            b.settle(&checks, &admitted[1], 0, 0.0).await;
            let again = in_flight(&a, &checks, &spend, 5, estimate(10, 0.01)).await;
            assert_eq!(again.len(), 1, "{checks:?}");
        }
        let stored = spent_today(&prefix, "k:gw_b").await.unwrap();
        assert!(
            (stored - 0.02).abs() < 1e-9,
            "$0.01 spent + $0.01 reserved: {stored}"
        );
        cleanup(&prefix).await;
    }

    /// The Lua periods agree with Rust's.
    #[tokio::test]
    async fn lua_periods_match() {
        let Some(_) = redis_prefix("periods").await else {
            return;
        };
        let script = ::redis::Script::new(&format!(
            "{}\nlocal id, s, e = period(ARGV[1], tonumber(ARGV[2]))\nreturn {{id, s, e}}",
            super::super::redis::TEST_HELPERS
        ));
        let mut conn = conn().await;
        for sec in [
            0i64,
            951_782_400,
            951_868_799,
            1_773_576_000,
            1_798_761_599,
            4_102_444_800,
        ] {
            for (kind, period) in [("d", Period::Day), ("m", Period::Month)] {
                let got: Vec<i64> = script
                    .arg(kind)
                    .arg(sec)
                    .invoke_async(&mut conn)
                    .await
                    .unwrap();
                let want = period.at(sec * 1000);
                assert_eq!(
                    got,
                    vec![want.id, want.start_ms, want.end_ms],
                    "{kind} {sec}"
                );
            }
        }
    }

    #[tokio::test]
    async fn unreachable_redis_fails_open_and_counts_locally() {
        let limiter = Limiter::redis("redis://127.0.0.1:1/", "gwtest:down:").unwrap();
        let checks = [project("p", rpm(10))];
        let start = Instant::now();
        let admitted = count_admitted(&limiter, &checks, 100).await;
        let took = start.elapsed();
        println!("100 admits with Redis unreachable: {took:?}");
        assert_eq!(admitted, 10);
        let (failures, outages) = backend(&limiter).failure_counts();
        assert_eq!(outages, 1, "one warning per outage");
        assert!(
            failures >= 1 && failures <= 2 + took.as_secs(),
            "{failures}"
        );
        assert!(redis_failures() >= 1);
    }

    /// A TCP proxy to Redis that can be cut and restored.
    struct Proxy {
        port: u16,
        up: watch::Sender<bool>,
    }

    impl Proxy {
        async fn start() -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let (up, _) = watch::channel(true);
            let state = up.subscribe();
            tokio::spawn(async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        return;
                    };
                    let mut state = state.clone();
                    if !*state.borrow() {
                        let _ = client.shutdown().await;
                        continue;
                    }
                    tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect("127.0.0.1:6379").await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = state.wait_for(|up| !*up) => {}
                        }
                    });
                }
            });
            Proxy { port, up }
        }

        fn url(&self) -> String {
            format!("redis://127.0.0.1:{}/", self.port)
        }

        fn set(&self, up: bool) {
            self.up.send_replace(up);
        }
    }

    #[tokio::test]
    async fn outage_then_resync() {
        let Some(prefix) = redis_prefix("resync").await else {
            return;
        };
        let proxy = Proxy::start().await;
        let limiter = Limiter::redis(&proxy.url(), &prefix).unwrap();
        let direct = Limiter::redis(REDIS, &prefix).unwrap();
        let checks = [project("p", daily(1.0))];
        let spend = FixedSpend::new(0.0);
        limiter.admit_plain(&checks, &spend).await.unwrap();
        limiter.settle_plain(&checks, 10, 0.3).await;

        proxy.set(false);
        // Redis unreachable: decided in process, seeded from the database
        // (which has the 0.3 by then).
        let db = FixedSpend::new(0.3);
        limiter.admit_plain(&checks, &db).await.unwrap();
        limiter.settle_plain(&checks, 10, 0.4).await;
        assert_eq!(backend(&limiter).failure_counts().1, 1);

        proxy.set(true);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        limiter.admit_plain(&checks, &spend).await.unwrap();
        let stored = spent_today(&prefix, "p:p").await.unwrap();
        assert!((stored - 0.7).abs() < 1e-9, "{stored}");
        // Another replica sees the outage's spend.
        let tight = [project("p", daily(0.7))];
        assert!(direct.admit_plain(&tight, &spend).await.is_err());
        cleanup(&prefix).await;
    }

    /// Requests admitted by whichever of `limiters` comes next, `n` tries.
    async fn admitted_round(limiters: &[&Limiter], checks: &[Check<'_>], n: usize) -> usize {
        let mut admitted = 0;
        for i in 0..n {
            let limiter = limiters[i % limiters.len()];
            if limiter.admit_plain(checks, &NoSpend).await.is_ok() {
                admitted += 1;
            }
        }
        admitted
    }

    /// What a bucket of `rpm` refills while `elapsed` passes, rounded up.
    fn refilled(rpm: u32, elapsed: Duration) -> usize {
        (f64::from(rpm) * elapsed.as_secs_f64() / 60.0).ceil() as usize
    }

    /// Leased replicas never admit beyond a shared limit, need a Redis call per block rather
    /// than per request, and give back what they did not use: with the replica that had no
    /// lease, the three admit the whole limit (and what refilled meanwhile), not one more.
    #[tokio::test]
    async fn leases_hold_a_shared_rate_limit_in_total() {
        let Some(prefix) = redis_prefix("lease-rpm").await else {
            return;
        };
        let a = Limiter::redis_leased(REDIS, &prefix).unwrap();
        let b = Limiter::redis_leased(REDIS, &prefix).unwrap();
        let exact = Limiter::redis(REDIS, &prefix).unwrap();
        let checks = [project("p", rpm(1000)), key("gw_k", rpm(2000))];
        let start = Instant::now();
        let first = admitted_round(&[&a, &b], &checks, 900).await;
        assert_eq!(first, 900);
        let calls = backend(&a).calls() + backend(&b).calls();
        // Blocks of 1% of the tighter limit, 10 requests, on two replicas that take turns.
        assert!(
            calls <= 900 / 5,
            "{calls} script calls for {first} requests"
        );
        println!("{first} admitted with {calls} script calls");
        let leased = first + admitted_round(&[&a, &b], &checks, 600).await;
        // The other replicas' leases: at most 1% of the limit each, unused.
        assert!(leased + 10 >= 1000, "{leased}");
        a.release().await;
        b.release().await;
        let rest = count_admitted(&exact, &checks, 100).await;
        let allowed = 1000 + refilled(1000, start.elapsed());
        assert!(leased + rest >= 1000, "{leased} + {rest}");
        assert!(leased + rest <= allowed, "{leased} + {rest} > {allowed}");
        assert_eq!(backend(&a).failure_counts(), (0, 0));
        cleanup(&prefix).await;
    }

    /// Budgets under leases: never beyond the budget by more than one request's estimate, the
    /// spend Redis holds is never less than what the calls cost (a call that costs more than
    /// its lease holds is charged at once), and once the leases are given back it is exactly
    /// what they cost.
    #[tokio::test]
    async fn leased_budgets_hold_what_calls_cost() {
        let Some(prefix) = redis_prefix("lease-budget").await else {
            return;
        };
        let a = Limiter::redis_leased(REDIS, &prefix).unwrap();
        let b = Limiter::redis_leased(REDIS, &prefix).unwrap();
        let exact = Limiter::redis(REDIS, &prefix).unwrap();
        let limits = LimitSet {
            tpm: Some(10_000_000),
            daily_budget_usd: Some(1.0),
            monthly_budget_usd: Some(5.0),
            ..LimitSet::default()
        };
        let checks = [project("p", limits)];
        let spend = FixedSpend::new(0.0);
        let stored = || async { spent_today(&prefix, "p:p").await.unwrap_or(0.0) };
        let mut spent = 0.0;
        let mut admitted = 0;
        for i in 0..400 {
            let limiter = if i % 2 == 0 { &a } else { &b };
            let Ok((_, reservation)) = limiter.admit(&checks, &spend, estimate(100, 0.01)).await
            else {
                continue;
            };
            admitted += 1;
            // Every fifth call costs three times its estimate, every seventh fails unused.
            let (tokens, cost) = match i % 35 {
                n if n % 5 == 0 => (300, 0.03),
                n if n % 7 == 0 => (0, 0.0),
                _ => (100, 0.01),
            };
            limiter.settle(&checks, &reservation, tokens, cost).await;
            spent += cost;
            let held = stored().await;
            assert!(
                held + 1e-9 >= spent,
                "call {i}: Redis holds {held}, spent {spent}"
            );
        }
        assert!(spent <= 1.0 + 0.03 + 1e-9, "{spent} over the budget");
        assert!(
            spent >= 1.0 - 0.02 - 1e-9,
            "{spent}: the leases kept too much back"
        );
        assert!(admitted > 50, "{admitted}");
        let calls = backend(&a).calls() + backend(&b).calls();
        println!("{admitted} admitted of 400 with {calls} script calls, ${spent:.2} spent");
        a.release().await;
        b.release().await;
        let held = stored().await;
        assert!(
            (held - spent).abs() < 1e-6,
            "Redis holds {held}, spent {spent}"
        );
        assert!(
            exact
                .admit(&checks, &spend, estimate(1, 0.0))
                .await
                .is_err()
        );
        assert_eq!(
            spend.calls.load(Ordering::SeqCst),
            2,
            "seeded once a period"
        );
        cleanup(&prefix).await;
    }

    /// Every kind of limit on a project and its key, far above what is used: after the first
    /// request (a seed, then the blocks) and its settle (what its own reservation left unused
    /// goes back), a hundred requests and their settles need no Redis call.
    #[tokio::test]
    async fn leases_need_no_redis_call_while_they_last() {
        let Some(prefix) = redis_prefix("lease-calls").await else {
            return;
        };
        let limiter = Limiter::redis_leased(REDIS, &prefix).unwrap();
        let limits = LimitSet {
            rpm: Some(1_000_000_000),
            tpm: Some(1_000_000_000_000),
            daily_budget_usd: Some(1e6),
            monthly_budget_usd: Some(1e6),
        };
        let checks = [project("p", limits), key("gw_k", limits)];
        let mut calls = Vec::new();
        for _ in 0..101 {
            let (_, reservation) = limiter
                .admit(&checks, &NoSpend, estimate(300, 0.002))
                .await
                .unwrap();
            limiter.settle(&checks, &reservation, 100, 0.001).await;
            calls.push(backend(&limiter).calls());
        }
        assert_eq!(
            calls[0], 3,
            "seed, admit with blocks, the first settle's excess back"
        );
        // None, unless the loop outlived a lease's second on a slow machine (then one refill
        // and its settle's excess); without leases, two a request.
        assert!(calls[100] - calls[0] <= 3, "{calls:?}");
        cleanup(&prefix).await;
    }

    /// A lease's debt (a call that cost more than its block had left) settled while Redis is
    /// down is not lost: it reaches Redis's budget counter once Redis is back, and the
    /// requests meanwhile are decided in process.
    #[tokio::test]
    async fn a_leases_debt_during_an_outage_reaches_redis_when_it_is_back() {
        let Some(prefix) = redis_prefix("lease-outage").await else {
            return;
        };
        let proxy = Proxy::start().await;
        let limiter = Limiter::redis_leased(&proxy.url(), &prefix).unwrap();
        let checks = [project("p", daily(10.0))];
        let spend = FixedSpend::new(0.0);
        // The first request takes a block of $0.10 beyond its $0.01; its settle gives back
        // the unused part of its own reservation, and the second is admitted from the block.
        let (_, first) = limiter
            .admit(&checks, &spend, estimate(1, 0.01))
            .await
            .unwrap();
        limiter.settle(&checks, &first, 1, 0.01).await;
        let (_, second) = limiter
            .admit(&checks, &spend, estimate(1, 0.01))
            .await
            .unwrap();
        proxy.set(false);
        // $0.50 against a block of $0.09 left after its reservation: a debt of $0.41.
        limiter.settle(&checks, &second, 1, 0.5).await;
        assert!(limiter.admit_plain(&checks, &spend).await.is_ok());
        proxy.set(true);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        limiter.admit_plain(&checks, &spend).await.unwrap();
        limiter.release().await;
        let stored = spent_today(&prefix, "p:p").await.unwrap();
        assert!(
            (stored - 0.51).abs() < 1e-9,
            "$0.01 + $0.50 spent: {stored}"
        );
        cleanup(&prefix).await;
    }

    /// Redis admit + settle round trip (prints; asserts nothing about time).
    #[tokio::test]
    async fn redis_cost() {
        let Some(prefix) = redis_prefix("cost").await else {
            return;
        };
        let limiter = Limiter::redis(REDIS, &prefix).unwrap();
        let limits = LimitSet {
            rpm: Some(u32::MAX),
            tpm: Some(1 << 40),
            daily_budget_usd: Some(1e12),
            monthly_budget_usd: Some(1e12),
        };
        let checks = [project("p", limits), key("gw_k", limits)];
        limiter.admit_plain(&checks, &NoSpend).await.unwrap();
        let n = 2000u32;
        let start = Instant::now();
        for _ in 0..n {
            limiter.admit_plain(&checks, &NoSpend).await.unwrap();
        }
        let admit = start.elapsed() / n;
        let start = Instant::now();
        for _ in 0..n {
            limiter.settle_plain(&checks, 100, 0.001).await;
        }
        let settle = start.elapsed() / n;
        println!("redis (project and key, all four limits): admit {admit:?}, settle {settle:?}");
        cleanup(&prefix).await;
    }
}
