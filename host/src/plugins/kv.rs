//! What plugins keep between requests (the `kv` import): a space of entries per route and
//! plugin, in this process's memory, each bounded by its route's `kv_max_entries` and
//! `kv_max_bytes` (over a bound the oldest entries go) and each entry by its time to live.
//!
//! The spaces outlive config reloads (a price edit does not make every route mint its tokens
//! again); a space whose route is gone stays until the process ends, holding at most its
//! bounds. Values are the plugins' secrets: nothing here logs or counts them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::redact::MintedByRoute;

/// How much one route's space may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvBounds {
    pub max_entries: usize,
    /// Keys and values together.
    pub max_bytes: usize,
}

impl Default for KvBounds {
    fn default() -> KvBounds {
        KvBounds {
            max_entries: 256,
            max_bytes: 1024 * 1024,
        }
    }
}

/// The spaces, by route and plugin.
type Spaces = HashMap<(Arc<str>, Arc<str>), Arc<Mutex<Space>>>;

/// Every route's space, shared by the serving threads, and the secrets each route's plugins
/// declared (`kv.secret`), which live as long.
#[derive(Default)]
pub struct Kv {
    spaces: Mutex<Spaces>,
    minted: MintedByRoute,
}

impl std::fmt::Debug for Kv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kv")
    }
}

impl Kv {
    /// What each route's plugins declared secret.
    pub fn minted(&self) -> &MintedByRoute {
        &self.minted
    }

    /// The space of `plugin` serving `route`, made on first use.
    pub fn space(&self, route: &Arc<str>, plugin: &Arc<str>) -> Arc<Mutex<Space>> {
        let mut spaces = self.spaces.lock().unwrap_or_else(PoisonError::into_inner);
        spaces
            .entry((route.clone(), plugin.clone()))
            .or_default()
            .clone()
    }
}

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    expires: Option<Instant>,
    /// When it was set, in the space's order: the smallest goes first.
    seq: u64,
}

/// One route's entries, oldest first in `order`.
#[derive(Debug, Default)]
pub struct Space {
    entries: HashMap<String, Entry>,
    order: BTreeMap<u64, String>,
    bytes: usize,
    next_seq: u64,
}

impl Space {
    pub fn get(&mut self, key: &str, now: Instant) -> Option<Vec<u8>> {
        let entry = self.entries.get(key)?;
        if entry.expires.is_some_and(|at| at <= now) {
            self.remove(key);
            return None;
        }
        Some(entry.value.clone())
    }

    /// Keeps `value` under `key` for `ttl` (`None`: until evicted). An entry larger than
    /// the bounds allow is not kept (and the key's previous value is gone).
    pub fn set(
        &mut self,
        key: String,
        value: Vec<u8>,
        ttl: Option<Duration>,
        now: Instant,
        bounds: KvBounds,
    ) {
        self.remove(&key);
        let size = key.len() + value.len();
        if size > bounds.max_bytes || bounds.max_entries == 0 {
            return;
        }
        self.drop_expired(now);
        while self.entries.len() + 1 > bounds.max_entries || self.bytes + size > bounds.max_bytes {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.forget(&oldest);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, key.clone());
        self.bytes += size;
        self.entries.insert(
            key,
            Entry {
                value,
                expires: ttl.and_then(|ttl| now.checked_add(ttl)),
                seq,
            },
        );
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.get(key) {
            self.order.remove(&entry.seq);
            self.forget(key);
        }
    }

    /// Takes `key`'s entry out of the map and the byte count (its `order` slot is the caller's).
    fn forget(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= key.len() + entry.value.len();
        }
    }

    /// Expired entries go before live ones are evicted. A space holds at most
    /// `max_entries`, so the scan is bounded; sets are rare (a token per hour).
    fn drop_expired(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.expires.is_some_and(|at| at <= now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in expired {
            self.remove(&key);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: KvBounds = KvBounds {
        max_entries: 3,
        max_bytes: 64,
    };

    #[test]
    fn routes_and_plugins_have_their_own_spaces() {
        let kv = Kv::default();
        let (a, b, p, q): (Arc<str>, Arc<str>, Arc<str>, Arc<str>) =
            ("a".into(), "b".into(), "p".into(), "q".into());
        let now = Instant::now();
        kv.space(&a, &p)
            .lock()
            .unwrap()
            .set("k".into(), b"v".to_vec(), None, now, BOUNDS);
        assert_eq!(
            kv.space(&a, &p).lock().unwrap().get("k", now),
            Some(b"v".to_vec())
        );
        assert_eq!(kv.space(&b, &p).lock().unwrap().get("k", now), None);
        assert_eq!(kv.space(&a, &q).lock().unwrap().get("k", now), None);
    }

    #[test]
    fn an_entry_expires_after_its_ttl() {
        let mut space = Space::default();
        let now = Instant::now();
        space.set(
            "k".into(),
            b"v".to_vec(),
            Some(Duration::from_secs(10)),
            now,
            BOUNDS,
        );
        assert!(space.get("k", now + Duration::from_secs(9)).is_some());
        assert_eq!(space.get("k", now + Duration::from_secs(10)), None);
        assert_eq!(space.len(), 0, "an expired entry is dropped when found");
        assert_eq!(space.bytes, 0);
    }

    #[test]
    fn over_the_entry_bound_the_oldest_go() {
        let mut space = Space::default();
        let now = Instant::now();
        for key in ["a", "b", "c", "d"] {
            space.set(key.into(), b"v".to_vec(), None, now, BOUNDS);
        }
        assert_eq!(space.get("a", now), None);
        for key in ["b", "c", "d"] {
            assert!(space.get(key, now).is_some(), "{key}");
        }
        // Setting again makes an entry the newest.
        space.set("b".into(), b"w".to_vec(), None, now, BOUNDS);
        space.set("e".into(), b"v".to_vec(), None, now, BOUNDS);
        assert_eq!(space.get("c", now), None);
        assert_eq!(space.get("b", now), Some(b"w".to_vec()));
    }

    #[test]
    fn over_the_byte_bound_the_oldest_go_and_a_too_large_entry_is_not_kept() {
        let mut space = Space::default();
        let now = Instant::now();
        space.set("a".into(), vec![0; 30], None, now, BOUNDS);
        space.set("b".into(), vec![0; 30], None, now, BOUNDS);
        assert_eq!(space.bytes, 62);
        space.set("c".into(), vec![0; 10], None, now, BOUNDS);
        assert_eq!(space.get("a", now), None);
        assert_eq!(space.bytes, 31 + 11);
        space.set("b".into(), vec![0; 64], None, now, BOUNDS);
        assert_eq!(space.get("b", now), None, "larger than the whole space");
        assert!(
            space.get("c", now).is_some(),
            "and nothing else was evicted for it"
        );
    }

    #[test]
    fn expired_entries_go_before_live_ones() {
        let mut space = Space::default();
        let now = Instant::now();
        space.set("old".into(), b"v".to_vec(), None, now, BOUNDS);
        space.set(
            "x".into(),
            b"v".to_vec(),
            Some(Duration::from_secs(1)),
            now,
            BOUNDS,
        );
        space.set(
            "y".into(),
            b"v".to_vec(),
            Some(Duration::from_secs(1)),
            now,
            BOUNDS,
        );
        let later = now + Duration::from_secs(2);
        space.set("new".into(), b"v".to_vec(), None, later, BOUNDS);
        assert!(space.get("old", later).is_some());
        assert!(space.get("new", later).is_some());
    }

    #[test]
    fn delete_removes() {
        let mut space = Space::default();
        let now = Instant::now();
        space.set("k".into(), b"v".to_vec(), None, now, BOUNDS);
        space.remove("k");
        assert_eq!(space.get("k", now), None);
        assert_eq!(space.bytes, 0);
        assert!(space.order.is_empty());
    }
}
