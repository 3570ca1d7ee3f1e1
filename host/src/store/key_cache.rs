//! API keys verified recently, kept in memory so the request path does not
//! read the database on every request (a SQLite read transaction per request
//! was ~10% of a serving thread's CPU; BENCHMARKS.md). The admin console's
//! sessions are kept the same way, whether each was signed out or not, in a
//! cache of their own under the same stamp.
//!
//! Revocation must still take effect on the very next request, also when it
//! is made by another process (`gateway key revoke`) or another replica. The
//! cache keeps its entries under a *stamp* and forgets them all when the stamp
//! changes. Where the stamp comes from depends on the backend:
//!
//! - SQLite: every key change made through the store writes 8 fresh random
//!   bytes, after the change commits, into a stamp file beside the database
//!   (`DB-keys`); a lookup reads it first (one `pread`).
//! - PostgreSQL: the epoch of the backend's [`Changes`], advanced by every
//!   change notification. While the listener is not subscribed there is no
//!   stamp, and every lookup reads the database.
//!
//! A change made behind the store's back (SQL by hand) is seen when the entry
//! ages out, after [`MAX_AGE`].

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::KeyRecord;

pub(super) const MAX_AGE: Duration = Duration::from_secs(60);
/// While the database cannot be reached, a key verified this recently is
/// still served (see [`KeyCache::stale`]).
pub(super) const MAX_STALE: Duration = Duration::from_secs(15 * 60);
/// Beyond this many keys the cache starts over rather than grow without bound.
const MAX_ENTRIES: usize = 10_000;

/// What is known of each hash (a key's record; whether a session was signed out).
pub(super) struct KeyCache<V = KeyRecord> {
    source: Source,
    cached: Mutex<Cached<V>>,
}

enum Source {
    /// SQLite's stamp file. None: it could not be opened (or the database is
    /// in memory); every lookup reads the database, or nothing needs telling.
    StampFile(Option<File>),
    /// PostgreSQL's change notifications.
    Notified(Arc<Changes>),
}

struct Cached<V> {
    /// The stamp the entries were verified under.
    stamp: u64,
    entries: HashMap<[u8; 32], (V, Instant)>,
}

/// What the cache knows of a key.
// Moved once, straight to the caller: boxing the record would cost an
// allocation on every cache hit, the request path's common case.
#[allow(clippy::large_enum_variant)]
pub(super) enum Lookup<V = KeyRecord> {
    Hit(V),
    /// Read the database, then hand the answer to [`KeyCache::keep`] with this.
    Miss(Miss),
}

/// The stamp a lookup started under (None: do not cache its answer).
pub(super) struct Miss(Option<u64>);

impl<V: Clone> KeyCache<V> {
    /// The cache of the SQLite database at `db_path`; creates its stamp file if needed.
    pub(super) fn open(db_path: &Path) -> KeyCache<V> {
        if db_path.as_os_str() == ":memory:" {
            // No other process can change its keys, and no file to stamp beside it.
            return KeyCache::with_source(Source::StampFile(None));
        }
        let mut path = db_path.as_os_str().to_owned();
        path.push("-keys");
        let stamp_file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .and_then(|file| {
                if file.metadata()?.len() < 8 {
                    write_new_stamp(&file)?;
                }
                Ok(file)
            });
        let stamp_file = match stamp_file {
            Ok(file) => Some(file),
            Err(e) => {
                tracing::warn!(
                    "cannot use the key stamp file {}: {e}; every request reads its key from the database",
                    Path::new(&path).display()
                );
                None
            }
        };
        KeyCache::with_source(Source::StampFile(stamp_file))
    }

    /// A cache trusted only while `changes` says notifications are received.
    pub(super) fn notified(changes: Arc<Changes>) -> KeyCache<V> {
        KeyCache::with_source(Source::Notified(changes))
    }

    fn with_source(source: Source) -> KeyCache<V> {
        KeyCache {
            source,
            cached: Mutex::new(Cached {
                stamp: 0,
                entries: HashMap::new(),
            }),
        }
    }

    /// The key with this hash: from memory when verified under the current
    /// stamp, else from `fetch` (the database), which is not polled on a hit.
    pub(super) async fn find<E>(
        &self,
        hash: &[u8; 32],
        fetch: impl Future<Output = Result<Option<V>, E>>,
    ) -> Result<Option<V>, E> {
        let miss = match self.lookup(hash) {
            Lookup::Hit(record) => return Ok(Some(record)),
            Lookup::Miss(miss) => miss,
        };
        let found = fetch.await?;
        if let Some(record) = &found {
            self.keep(hash, record, miss);
        }
        Ok(found)
    }

    /// The first half of [`KeyCache::find`], for a caller that decides what to do
    /// between the two (PostgreSQL's key lookup: serve a stale key while the database is down).
    pub(super) fn lookup(&self, hash: &[u8; 32]) -> Lookup<V> {
        // Read before the database, so a change racing the lookup is not cached.
        let Some(stamp) = self.stamp() else {
            return Lookup::Miss(Miss(None));
        };
        match self.get(hash, stamp) {
            Some(record) => Lookup::Hit(record),
            None => Lookup::Miss(Miss(Some(stamp))),
        }
    }

    /// The second half: remembers what the database said after a [`Lookup::Miss`].
    pub(super) fn keep(&self, hash: &[u8; 32], record: &V, miss: Miss) {
        if let Miss(Some(stamp)) = miss {
            self.insert(hash, record, stamp);
        }
    }

    /// The key as last verified, however long ago within [`MAX_STALE`] and
    /// whatever changed since: only for when the database cannot be read.
    /// A gateway that cannot reach its database keeps serving the callers it
    /// knows (a key cannot be revoked in a database nobody can reach, short
    /// of a network partition between replicas), rather than failing them all.
    pub(super) fn stale(&self, hash: &[u8; 32]) -> Option<V> {
        let cached = self.lock();
        let (record, verified) = cached.entries.get(hash)?;
        (verified.elapsed() < MAX_STALE).then(|| record.clone())
    }

    fn stamp(&self) -> Option<u64> {
        match &self.source {
            Source::StampFile(file) => {
                let mut bytes = [0u8; 8];
                file.as_ref()?
                    .read_exact_at(&mut bytes, 0)
                    .ok()
                    .map(|()| u64::from_le_bytes(bytes))
            }
            Source::Notified(changes) => changes.epoch(),
        }
    }

    fn get(&self, hash: &[u8; 32], stamp: u64) -> Option<V> {
        let mut cached = self.lock();
        if cached.stamp != stamp {
            cached.entries.clear();
            cached.stamp = stamp;
            return None;
        }
        match cached.entries.get(hash) {
            Some((record, verified)) if verified.elapsed() < MAX_AGE => Some(record.clone()),
            _ => None,
        }
    }

    fn insert(&self, hash: &[u8; 32], record: &V, stamp: u64) {
        let mut cached = self.lock();
        if cached.stamp != stamp {
            // Keys changed since this lookup started: its answer may be stale.
            return;
        }
        if cached.entries.len() >= MAX_ENTRIES {
            cached.entries.clear();
        }
        cached
            .entries
            .insert(*hash, (record.clone(), Instant::now()));
    }

    /// Tells every process caching keys of this database that they changed
    /// (PostgreSQL: this process only; the others hear the change's NOTIFY).
    pub(super) fn keys_changed(&self) -> std::io::Result<()> {
        self.lock().entries.clear();
        match &self.source {
            Source::StampFile(Some(file)) => write_new_stamp(file),
            Source::StampFile(None) => Ok(()),
            Source::Notified(changes) => {
                changes.changed();
                Ok(())
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Cached<V>> {
        self.cached.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn write_new_stamp(file: &File) -> std::io::Result<()> {
    let mut stamp = [0u8; 8];
    getrandom::fill(&mut stamp).map_err(|e| std::io::Error::other(e.to_string()))?;
    file.write_all_at(&stamp, 0)
}

/// Whether cached state (keys now; limits later) can be trusted, and when it
/// last changed. Shared by every cache of one backend.
pub(crate) struct Changes {
    /// Advanced on every change notification, on the periodic full refresh,
    /// on every change made through this process, and on every (dis)connection
    /// of the listener.
    epoch: AtomicU64,
    /// Whether the listener is subscribed: when not, notifications may be
    /// missed and nothing cached may be used.
    connected: AtomicBool,
}

impl Changes {
    /// Not yet connected: caches read through until the listener is subscribed.
    pub(crate) fn new() -> Changes {
        Changes {
            epoch: AtomicU64::new(0),
            connected: AtomicBool::new(false),
        }
    }

    /// The epoch a cache may keep entries under, or None while changes may go unnoticed.
    pub(crate) fn epoch(&self) -> Option<u64> {
        if !self.connected.load(Ordering::SeqCst) {
            return None;
        }
        Some(self.epoch.load(Ordering::SeqCst))
    }

    /// Everything cached so far may be stale.
    pub(crate) fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn set_connected(&self, connected: bool) {
        // A new epoch either way: what was cached before a reconnection may
        // have missed notifications.
        self.changed();
        self.connected.store(connected, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Fetched = Result<Option<KeyRecord>, ()>;

    /// `cache.find` of one hash, with a `fetch` that answers at once: nothing here waits, so
    /// one poll ends it, without a runtime.
    fn find(cache: &KeyCache, fetch: impl FnOnce() -> Fetched) -> Fetched {
        let finding = std::pin::pin!(cache.find(&[1; 32], async { fetch() }));
        match finding.poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(found) => found,
            std::task::Poll::Pending => panic!("a lookup waited for nothing"),
        }
    }

    fn found(project: &str) -> Fetched {
        Ok(Some(KeyRecord {
            project_id: project.into(),
            prefix: "gw_0123456789ab".into(),
            limits: crate::limits::LimitSet::default(),
            project_limits: crate::limits::LimitSet {
                rpm: Some(60),
                ..Default::default()
            },
            scope: super::super::KeyScope {
                routes: vec!["openai".into()],
                models: Vec::new(),
                expires_at_ms: Some(1),
                tools: vec!["calc__*".into()],
            },
            project_guards: Arc::from(["pii".to_owned()]),
            project_tools: Arc::from(["calc__*".to_owned(), "github__search".to_owned()]),
        }))
    }

    fn missing() -> Fetched {
        Ok(None)
    }

    fn unexpected() -> Fetched {
        panic!("the database was read although the key is cached")
    }

    #[test]
    fn a_key_change_from_another_handle_empties_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        let (gateway, cli): (KeyCache, KeyCache) = (KeyCache::open(&db), KeyCache::open(&db));
        assert_eq!(
            find(&gateway, || found("p")).unwrap().unwrap().project_id,
            "p"
        );
        // Everything the database said is kept, not only whose key it is.
        assert_eq!(find(&gateway, unexpected).unwrap(), found("p").unwrap());

        cli.keys_changed().unwrap();
        assert!(find(&gateway, missing).unwrap().is_none());
        assert!(find(&gateway, missing).unwrap().is_none());
    }

    #[test]
    fn an_answer_read_while_keys_changed_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        let (gateway, cli): (KeyCache, KeyCache) = (KeyCache::open(&db), KeyCache::open(&db));
        let racing = find(&gateway, || {
            cli.keys_changed().unwrap();
            found("p")
        });
        assert!(racing.unwrap().is_some());
        assert!(find(&gateway, missing).unwrap().is_none());
    }

    #[test]
    fn unknown_keys_are_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KeyCache::open(&dir.path().join("g.db"));
        assert!(find(&cache, missing).unwrap().is_none());
        assert!(find(&cache, || found("p")).unwrap().is_some());
    }

    #[test]
    fn without_a_stamp_file_every_lookup_reads_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KeyCache::open(&dir.path().join("missing-dir/g.db"));
        assert!(find(&cache, || found("p")).unwrap().is_some());
        assert!(find(&cache, missing).unwrap().is_none());
        assert!(cache.keys_changed().is_ok());
    }

    fn connected() -> Arc<Changes> {
        let changes = Arc::new(Changes::new());
        changes.set_connected(true);
        changes
    }

    #[test]
    fn a_notification_empties_the_cache() {
        let changes = connected();
        let cache = KeyCache::notified(changes.clone());
        assert!(find(&cache, || found("p")).unwrap().is_some());
        assert!(find(&cache, unexpected).unwrap().is_some());

        changes.changed();
        assert!(find(&cache, missing).unwrap().is_none());
    }

    #[test]
    fn while_notifications_are_not_received_every_lookup_reads_the_database() {
        let changes = Arc::new(Changes::new());
        let cache = KeyCache::notified(changes.clone());
        assert!(find(&cache, || found("p")).unwrap().is_some());
        assert!(find(&cache, missing).unwrap().is_none());

        changes.set_connected(true);
        assert!(find(&cache, || found("p")).unwrap().is_some());
        assert!(find(&cache, unexpected).unwrap().is_some());

        // Dropped: what was cached may miss changes from now on.
        changes.set_connected(false);
        assert!(find(&cache, missing).unwrap().is_none());
        // Back: what was cached before may have missed some.
        assert!(find(&cache, || found("p")).unwrap().is_some());
        changes.set_connected(true);
        assert!(find(&cache, missing).unwrap().is_none());
    }

    #[test]
    fn an_answer_read_while_a_change_was_notified_is_not_kept() {
        let changes = connected();
        let cache = KeyCache::notified(changes.clone());
        let racing = find(&cache, || {
            changes.changed();
            found("p")
        });
        assert!(racing.unwrap().is_some());
        assert!(find(&cache, missing).unwrap().is_none());
    }

    #[test]
    fn an_answer_read_across_a_reconnection_is_not_kept() {
        let changes = connected();
        let cache = KeyCache::notified(changes.clone());
        let racing = find(&cache, || {
            changes.set_connected(false);
            changes.set_connected(true);
            found("p")
        });
        assert!(racing.unwrap().is_some());
        assert!(find(&cache, missing).unwrap().is_none());
    }

    #[test]
    fn a_change_made_here_empties_the_cache_at_once() {
        let cache = KeyCache::notified(connected());
        assert!(find(&cache, || found("p")).unwrap().is_some());
        cache.keys_changed().unwrap();
        assert!(find(&cache, missing).unwrap().is_none());
    }
}
