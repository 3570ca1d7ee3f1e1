//! The cache in this process: `moka`'s concurrent cache, bounded by the entries' sizes (it
//! evicts by TinyLFU when full) with each entry's own time to live.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::Expiry;
use moka::sync::Cache;

use super::{CacheKey, Entry};

#[derive(Clone)]
struct Stored {
    entry: Arc<Entry>,
    ttl: Duration,
    /// Its weight against `cache_max_bytes`.
    bytes: u32,
}

/// Each entry lives its route's `cache_ttl_secs` from when it was stored (again: a
/// refreshed entry starts over).
struct OwnTtl;

impl Expiry<CacheKey, Stored> for OwnTtl {
    fn expire_after_create(&self, _: &CacheKey, stored: &Stored, _: Instant) -> Option<Duration> {
        Some(stored.ttl)
    }
    fn expire_after_update(
        &self,
        _: &CacheKey,
        stored: &Stored,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(stored.ttl)
    }
}

pub(super) struct Memory {
    entries: Cache<CacheKey, Stored>,
}

impl Memory {
    pub fn new(max_bytes: u64) -> Memory {
        Memory {
            entries: Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, stored: &Stored| stored.bytes)
                .expire_after(OwnTtl)
                .build(),
        }
    }

    pub fn get(&self, key: &CacheKey) -> Option<Arc<Entry>> {
        self.entries.get(key).map(|stored| stored.entry)
    }

    /// Stores `entry` of `bytes` (its size as JSON); one larger than the whole cache is not
    /// kept.
    pub fn put(&self, key: CacheKey, entry: Arc<Entry>, bytes: usize, ttl: Duration) {
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.entries.insert(key, Stored { entry, ttl, bytes });
    }

    /// The entries' bytes, as the eviction counts them. Read by a scrape, not by requests:
    /// it first applies the writes moka has queued (its count lags them otherwise).
    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }
}
