//! The embedded SQLite backend.
//!
//! WAL mode lets the request path read (key lookups) while the invocation
//! writer commits batches on its own connection.

mod access;
mod batches;
mod files;
mod invocations;
mod keys;
pub(super) mod migrations;
mod responses;
mod rows;
mod sessions;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

use super::key_cache::KeyCache;
use super::{Migrated, StoreError};

pub(super) struct Sqlite {
    /// Key lookups, project/key administration and invocation reads.
    reader: Mutex<Connection>,
    /// Invocation batches only, so a large batch never delays a key lookup's lock.
    writer: Mutex<Connection>,
    /// Record retention's deletes, opened on first use: a batch of deletes holds
    /// neither the request path's nor the invocation writer's lock.
    pruner: Mutex<Option<Connection>>,
    /// Kept responses' writes, opened on first use: one that waits out another's write lock
    /// holds neither the key lookups' lock nor the invocation writer's.
    responses: Mutex<Option<Connection>>,
    /// Files' chunks, written and read on a connection of their own, opened on first use: an
    /// upload's writes and a download's reads (a megabyte each) hold no other lock.
    files: Mutex<Option<Connection>>,
    /// Batches and their lines, likewise: a batch's thousands of lines go in on it, and the
    /// runners' leases and answers, without holding the request path's lock.
    batches: Mutex<Option<Connection>>,
    path: PathBuf,
    keys: KeyCache,
    /// Whether each console session looked up was signed out, under the keys' stamp.
    sessions: KeyCache<bool>,
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // With WAL, NORMAL loses at most the last commits on power loss, never consistency.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn lock<T>(conn: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll back).
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The connection of a slot opened on first use (`pruner`, `responses`), opening it now if
/// it is not yet.
fn opened<'a>(
    slot: &'a mut Option<Connection>,
    path: &Path,
) -> Result<&'a mut Connection, StoreError> {
    match slot {
        Some(conn) => Ok(conn),
        empty => Ok(empty.insert(open_connection(path)?)),
    }
}

impl Sqlite {
    pub(super) fn open(path: &Path) -> Result<(Sqlite, Migrated), StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Directory(dir.display().to_string(), e))?;
        }
        let mut conn = open_connection(path)?;
        let migrated = migrations::migrate(&mut conn)?;
        let db = Sqlite {
            reader: Mutex::new(conn),
            writer: Mutex::new(open_connection(path)?),
            pruner: Mutex::new(None),
            responses: Mutex::new(None),
            files: Mutex::new(None),
            batches: Mutex::new(None),
            path: path.to_owned(),
            keys: KeyCache::open(path),
            sessions: KeyCache::open(path),
        };
        Ok((db, migrated))
    }

    /// The keys verified recently, which the facade answers from before reading the database.
    pub(super) fn key_cache(&self) -> &KeyCache {
        &self.keys
    }

    /// Whether each console session looked up was signed out, likewise.
    pub(super) fn session_cache(&self) -> &KeyCache<bool> {
        &self.sessions
    }

    /// After a key change commits: running gateways must not keep serving from their caches.
    fn keys_changed(&self) {
        if let Err(e) = self.keys.keys_changed() {
            tracing::error!(
                "the key change is stored, but running gateways were not told \
                 ({e}); they see it within {}s",
                super::key_cache::MAX_AGE.as_secs()
            );
        }
    }
}
