//! One Redis server, as the parts of the gateway that share state between replicas use it
//! (the limits' counters, the response cache's entries): each owns a [`RedisLink`] and keeps
//! its own fallback for when Redis does not answer.
//!
//! - One connection per worker thread (and runtime), made on first use there: a
//!   connection's driver task belongs to the runtime that made it, and every worker runs its
//!   own. Short timeouts (250 ms), so that an outage costs a request little.
//! - After a failure Redis is left alone for a second: during an outage one caller a second
//!   probes it, the others go straight to their fallback instead of each paying a timeout.
//!   One warning is logged per outage and one info line when Redis is back.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, RedisResult};

/// How long Redis may take to connect or answer before the caller falls back.
pub const TIMEOUT: Duration = Duration::from_millis(250);
/// The bound on a whole call (the connection's own timeouts apply per step).
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long after a failure Redis is left alone.
const BACKOFF_US: i64 = 1_000_000;

static FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many Redis calls have failed (timeouts, refused connections, errors) since the
/// process started, whoever made them.
pub fn redis_failures() -> u64 {
    FAILURES.load(Ordering::Relaxed)
}

thread_local! {
    /// This thread's connections, one per link and runtime.
    static CONNECTIONS: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
}

struct Cached {
    /// The link's liveness token: a dropped link's connections go.
    owner: Weak<()>,
    runtime: tokio::runtime::Id,
    conn: MultiplexedConnection,
}

/// One user's connection to Redis (see the module's description).
pub struct RedisLink {
    client: redis::Client,
    alive: Arc<()>,
    /// Who uses the link, and what it does while Redis is down, as its log lines say.
    user: &'static str,
    fallback: &'static str,
    started: Instant,
    /// µs since `started` before which Redis is not tried again.
    retry_at_us: AtomicI64,
    down: AtomicBool,
    /// This link's failed calls and outages (the global count is [`redis_failures`]).
    failures: AtomicU64,
    outages: AtomicU64,
}

impl RedisLink {
    /// A link to the server at `url` (checked, not connected to). `user` and `fallback` name,
    /// in the outage warning, whose calls failed and what happens instead ("limits",
    /// "counting in this process").
    pub fn new(url: &str, user: &'static str, fallback: &'static str) -> RedisResult<RedisLink> {
        Ok(RedisLink {
            client: redis::Client::open(url)?,
            alive: Arc::new(()),
            user,
            fallback,
            started: Instant::now(),
            retry_at_us: AtomicI64::new(0),
            down: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            outages: AtomicU64::new(0),
        })
    }

    fn mono_us(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// Whether Redis may be tried now (not within a second of a failure; during an
    /// outage, one caller a second: the one that moves the retry time on).
    pub fn available(&self) -> bool {
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
    pub async fn connection(&self) -> RedisResult<MultiplexedConnection> {
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

    /// A call's whole answer, connecting included, as `tokio::time::timeout(CALL_TIMEOUT, call)`
    /// gave it: a call over the time is a Redis error. Not an `async fn` taking the call: its
    /// future would hold the call's twice (the argument, then the awaited timeout), and the
    /// limits' calls are part of every request's future.
    pub fn timed<T>(answer: Result<RedisResult<T>, tokio::time::error::Elapsed>) -> RedisResult<T> {
        answer.unwrap_or_else(|_| {
            Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "redis call timed out",
            )))
        })
    }

    /// Counts a failed call, drops this thread's connection (the next try makes a new one)
    /// and leaves Redis alone for a while; the first failure of an outage is logged.
    pub fn failed(&self, e: &RedisError) {
        FAILURES.fetch_add(1, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
        CONNECTIONS.with(|cached| cached.borrow_mut().retain(|c| !self.owns(c)));
        self.retry_at_us
            .store(self.mono_us() + BACKOFF_US, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::Relaxed) {
            self.outages.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "{}: Redis unreachable ({e}): {} until it is back",
                self.user,
                self.fallback
            );
        }
    }

    /// Notes a call that Redis answered: true when it ends an outage (logged), so that the
    /// user can catch up on what it did meanwhile.
    pub fn answered(&self) -> bool {
        let recovered =
            self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed);
        if recovered {
            // The probe that found it back set the next try a second ahead: calls go to
            // Redis again from now, not after that second.
            self.retry_at_us.store(0, Ordering::Relaxed);
            tracing::info!("{}: Redis is back", self.user);
        }
        recovered
    }

    /// (failed calls, outages) of this link.
    pub fn failure_counts(&self) -> (u64, u64) {
        (
            self.failures.load(Ordering::Relaxed),
            self.outages.load(Ordering::Relaxed),
        )
    }
}
