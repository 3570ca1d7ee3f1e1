//! API keys verified recently, kept in memory so the request path does not
//! read the database on every request (a SQLite read transaction per request
//! was ~10% of a serving thread's CPU; BENCHMARKS.md).
//!
//! Revocation must still take effect on the very next request, also when it
//! is made by another process (`gateway key revoke`). Every key change made
//! through the store therefore writes 8 fresh random bytes, after the change
//! commits, into a stamp file beside the database (`DB-keys`); a lookup reads
//! the stamp first (one `pread`) and forgets every cached key when it changed.
//! A change made behind the store's back (SQL by hand) is seen when the entry
//! ages out, after [`MAX_AGE`].

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::KeyRecord;

pub(super) const MAX_AGE: Duration = Duration::from_secs(60);
/// Beyond this many keys the cache starts over rather than grow without bound.
const MAX_ENTRIES: usize = 10_000;

pub(super) struct KeyCache {
    /// None: the stamp file could not be opened; every lookup reads the database.
    stamp_file: Option<File>,
    cached: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    /// The stamp the entries were verified under.
    stamp: u64,
    entries: HashMap<[u8; 32], (KeyRecord, Instant)>,
}

impl KeyCache {
    /// The cache of the database at `db_path`; creates its stamp file if needed.
    pub(super) fn open(db_path: &Path) -> KeyCache {
        if db_path.as_os_str() == ":memory:" {
            // No other process can change its keys, and no file to stamp beside it.
            return KeyCache {
                stamp_file: None,
                cached: Mutex::new(Cached::default()),
            };
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
        KeyCache {
            stamp_file,
            cached: Mutex::new(Cached::default()),
        }
    }

    /// The key with this hash: from memory when verified under the current
    /// stamp, else from `fetch` (the database).
    pub(super) fn find<E>(
        &self,
        hash: &[u8; 32],
        fetch: impl FnOnce() -> Result<Option<KeyRecord>, E>,
    ) -> Result<Option<KeyRecord>, E> {
        // Read before the database, so a change racing the lookup is not cached.
        let Some(stamp) = self.stamp() else {
            return fetch();
        };
        if let Some(record) = self.get(hash, stamp) {
            return Ok(Some(record));
        }
        let found = fetch()?;
        if let Some(record) = &found {
            self.insert(hash, record, stamp);
        }
        Ok(found)
    }

    fn stamp(&self) -> Option<u64> {
        let mut bytes = [0u8; 8];
        self.stamp_file
            .as_ref()?
            .read_exact_at(&mut bytes, 0)
            .ok()
            .map(|()| u64::from_le_bytes(bytes))
    }

    fn get(&self, hash: &[u8; 32], stamp: u64) -> Option<KeyRecord> {
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

    fn insert(&self, hash: &[u8; 32], record: &KeyRecord, stamp: u64) {
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

    /// Tells every process caching keys of this database that they changed.
    pub(super) fn keys_changed(&self) -> std::io::Result<()> {
        self.lock().entries.clear();
        match &self.stamp_file {
            Some(file) => write_new_stamp(file),
            None => Ok(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn write_new_stamp(file: &File) -> std::io::Result<()> {
    let mut stamp = [0u8; 8];
    getrandom::fill(&mut stamp).map_err(|e| std::io::Error::other(e.to_string()))?;
    file.write_all_at(&stamp, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Fetched = Result<Option<KeyRecord>, ()>;

    fn found(project: &str) -> Fetched {
        Ok(Some(KeyRecord {
            project_id: project.into(),
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
        let (gateway, cli) = (KeyCache::open(&db), KeyCache::open(&db));
        assert_eq!(
            gateway
                .find(&[1; 32], || found("p"))
                .unwrap()
                .unwrap()
                .project_id,
            "p"
        );
        assert_eq!(
            gateway
                .find(&[1; 32], unexpected)
                .unwrap()
                .unwrap()
                .project_id,
            "p"
        );

        cli.keys_changed().unwrap();
        assert!(gateway.find(&[1; 32], missing).unwrap().is_none());
        assert!(gateway.find(&[1; 32], missing).unwrap().is_none());
    }

    #[test]
    fn an_answer_read_while_keys_changed_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        let (gateway, cli) = (KeyCache::open(&db), KeyCache::open(&db));
        let racing = gateway.find(&[1; 32], || {
            cli.keys_changed().unwrap();
            found("p")
        });
        assert!(racing.unwrap().is_some());
        assert!(gateway.find(&[1; 32], missing).unwrap().is_none());
    }

    #[test]
    fn unknown_keys_are_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KeyCache::open(&dir.path().join("g.db"));
        assert!(cache.find(&[1; 32], missing).unwrap().is_none());
        assert!(cache.find(&[1; 32], || found("p")).unwrap().is_some());
    }

    #[test]
    fn without_a_stamp_file_every_lookup_reads_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KeyCache::open(&dir.path().join("missing-dir/g.db"));
        assert!(cache.find(&[1; 32], || found("p")).unwrap().is_some());
        assert!(cache.find(&[1; 32], missing).unwrap().is_none());
        assert!(cache.keys_changed().is_ok());
    }
}
