//! Failed sign-ins per client address: the admin console's `POST /ui/login` and the admin
//! API's bearer token. Each attempt takes one unit of its address's GCRA bucket before the
//! token is compared, and a right token gives it back, so only wrong tokens count: after
//! [`FAILURES_PER_MINUTE`] of them an address waits (one more each
//! `60 / FAILURES_PER_MINUTE` s) and its attempts are refused without comparing anything.
//!
//! In this process only (each replica counts its own), in memory bounded whoever knocks:
//! at most [`MAX_CLIENTS`] addresses are tracked, those whose bucket is full again are
//! forgotten first, and beyond that every new address shares one bucket. An IPv6 client is
//! counted by its /64, which one host usually owns whole.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::gcra::{self, Bucket};
use super::local::{Clock, system_clock};

/// Wrong tokens an address may send per minute (its first ones at once).
pub const FAILURES_PER_MINUTE: u64 = 10;
/// Addresses tracked at most (~100 bytes each).
pub const MAX_CLIENTS: usize = 4096;

/// Whom a bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4(u32),
    /// The address's first 64 bits.
    V6(u64),
    /// Every address that came while [`MAX_CLIENTS`] others were counted.
    Overflow,
}

impl Client {
    fn of(address: IpAddr) -> Client {
        // An IPv4 client of a dual-stack socket is seen as `::ffff:a.b.c.d`.
        match address.to_canonical() {
            IpAddr::V4(v4) => Client::V4(u32::from(v4)),
            IpAddr::V6(v6) => Client::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

/// The failed sign-ins of every client address.
pub struct SignInThrottle {
    state: Mutex<State>,
    clock: Clock,
}

struct State {
    buckets: HashMap<Client, Bucket>,
    /// When full buckets were last forgotten to make room: at most once a second, so that a
    /// crowd of addresses does not make every attempt walk them all.
    swept_at_us: i64,
}

/// An attempt to sign in, counted as failed unless [`Attempt::succeeded`] says otherwise.
#[must_use = "an attempt counts as failed unless it is told it succeeded"]
pub struct Attempt<'a> {
    throttle: &'a SignInThrottle,
    client: Client,
}

/// Too many failed sign-ins from this address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttled {
    /// Until the address may try again.
    pub retry_after_secs: u64,
}

impl Default for SignInThrottle {
    fn default() -> SignInThrottle {
        SignInThrottle::with_clock(system_clock())
    }
}

impl SignInThrottle {
    fn with_clock(clock: Clock) -> SignInThrottle {
        SignInThrottle {
            state: Mutex::new(State {
                buckets: HashMap::new(),
                swept_at_us: i64::MIN,
            }),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each statement leaves the state consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an attempt from `address` as failed, or refuses it (its token is then not to be
    /// compared at all).
    pub fn attempt(&self, address: IpAddr) -> Result<Attempt<'_>, Throttled> {
        let now_us = (self.clock)();
        let mut state = self.lock();
        let mut client = Client::of(address);
        if !state.buckets.contains_key(&client) && state.buckets.len() >= MAX_CLIENTS {
            if now_us.saturating_sub(state.swept_at_us) >= 1_000_000 {
                state.swept_at_us = now_us;
                state
                    .buckets
                    .retain(|_, bucket| !gcra::is_full(*bucket, now_us));
            }
            if state.buckets.len() >= MAX_CLIENTS {
                client = Client::Overflow;
            }
        }
        let buckets = &mut state.buckets;
        let limit = FAILURES_PER_MINUTE;
        let tat = gcra::current(buckets.get(&client).copied(), limit, now_us);
        match gcra::admit(limit, 1, tat, now_us) {
            Ok(pass) => {
                buckets.insert(
                    client,
                    Bucket {
                        limit,
                        tat: pass.tat,
                    },
                );
                Ok(Attempt {
                    throttle: self,
                    client,
                })
            }
            Err(wait_us) => Err(Throttled {
                retry_after_secs: u64::try_from(wait_us).unwrap_or(0).div_ceil(1_000_000),
            }),
        }
    }

    /// Addresses tracked now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().buckets.len()
    }
}

impl Attempt<'_> {
    /// The token was right: the attempt is not counted.
    pub fn succeeded(self) {
        let now_us = (self.throttle.clock)();
        let mut state = self.throttle.lock();
        if let Some(bucket) = state.buckets.get_mut(&self.client) {
            let tat = gcra::current(Some(*bucket), bucket.limit, now_us);
            bucket.tat = gcra::adjust(tat, bucket.limit, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    fn at(now_us: &Arc<AtomicI64>) -> SignInThrottle {
        let now = now_us.clone();
        SignInThrottle::with_clock(Arc::new(move || now.load(Ordering::SeqCst)))
    }

    fn v4(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(n))
    }

    /// Fails `n` attempts from `address`, each of which must be allowed.
    fn fail(throttle: &SignInThrottle, address: IpAddr, n: u64) {
        for i in 0..n {
            let attempt = throttle.attempt(address);
            assert!(attempt.is_ok(), "attempt {i} from {address}");
        }
    }

    #[test]
    fn ten_failures_then_one_each_6_seconds_and_right_tokens_do_not_count() {
        let now = Arc::new(AtomicI64::new(1_000_000_000));
        let throttle = at(&now);
        let client = v4(0x7f00_0001);
        // Right tokens, however many, leave the bucket full.
        for _ in 0..100 {
            throttle.attempt(client).expect("allowed").succeeded();
        }
        fail(&throttle, client, FAILURES_PER_MINUTE);
        let refused = throttle.attempt(client).err().expect("throttled");
        assert_eq!(refused.retry_after_secs, 6);
        // Another address is not held back by this one.
        fail(&throttle, v4(0x7f00_0002), 1);
        now.fetch_add(6_000_000, Ordering::SeqCst);
        fail(&throttle, client, 1);
        assert!(throttle.attempt(client).is_err());
        // A minute later, all ten again.
        now.fetch_add(60_000_000, Ordering::SeqCst);
        fail(&throttle, client, FAILURES_PER_MINUTE);
        assert!(throttle.attempt(client).is_err());
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_and_a_mapped_ipv4_as_itself() {
        let now = Arc::new(AtomicI64::new(0));
        let throttle = at(&now);
        let in_64 = |low: u64| {
            IpAddr::V6(Ipv6Addr::from(
                (0x2001_0db8_0000_0001u128 << 64) | u128::from(low),
            ))
        };
        for low in 0..FAILURES_PER_MINUTE {
            fail(&throttle, in_64(low), 1);
        }
        assert!(throttle.attempt(in_64(12345)).is_err());
        let next_64 = IpAddr::V6(Ipv6Addr::from(0x2001_0db8_0000_0002u128 << 64));
        fail(&throttle, next_64, 1);

        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        fail(&throttle, mapped, FAILURES_PER_MINUTE);
        assert!(throttle.attempt(v4(0x0a00_0001)).is_err());
    }

    /// An attacker with more addresses than are tracked grows nothing: the newest share one
    /// bucket, and addresses that stopped failing are forgotten to make room.
    #[test]
    fn memory_is_bounded_whatever_the_number_of_addresses() {
        let now = Arc::new(AtomicI64::new(0));
        let throttle = at(&now);
        for n in 0..(MAX_CLIENTS as u32) * 3 {
            let _ = throttle.attempt(v4(n));
            assert!(throttle.tracked() <= MAX_CLIENTS + 1);
        }
        assert_eq!(throttle.tracked(), MAX_CLIENTS + 1, "the overflow bucket");
        // The overflow bucket is shared, so it is exhausted by now.
        assert!(throttle.attempt(v4(u32::MAX)).is_err());
        // Once the tracked ones are full again, a new address gets its own bucket.
        now.fetch_add(60_000_000, Ordering::SeqCst);
        fail(&throttle, v4(u32::MAX), FAILURES_PER_MINUTE);
        assert!(throttle.tracked() <= 2, "{}", throttle.tracked());
    }
}
